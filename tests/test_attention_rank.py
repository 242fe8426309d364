"""TML601: the rank of q, k and v where the value graph shows it (``analysis/ranks.py``), for
attention written with ``@``/``matmul``: a 3-D form gets ``.unsqueeze(1)``/``.squeeze(1)``
(one head, as ``bmm``/``einsum`` do), a 5-D form a finding without a fix, a 4-D form and an
unknown rank today's fix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

ROOT = Path(__file__).resolve().parent.parent

FORMS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange


class ConvFlat(nn.Module):
    """A conv feature map split into q, k, v and flattened to (B, C, N): one head."""

    def __init__(self, dim, key_dim):
        super().__init__()
        self.key_dim = key_dim
        self.scale = key_dim ** -0.5
        self.qkv = nn.Conv2d(dim, 2 * key_dim + dim, 1)

    def forward(self, x):
        B, C, H, W = x.shape
        qkv = self.qkv(x)
        q, k, v = qkv.view(B, -1, H, W).split([self.key_dim, self.key_dim, C], dim=1)
        q, k, v = q.flatten(2), k.flatten(2), v.flatten(2)
        attn = (q.transpose(-2, -1) @ k) * self.scale
        attn = attn.softmax(dim=-1)
        x = v @ attn.transpose(-2, -1)
        return x.reshape(B, C, H, W)


def tokens(x, y):
    """(B, N, C) tensors named by unpacking their shape, matmul spelled as a call."""
    B, N, C = x.shape
    q = rearrange(y, "b c h w -> b (h w) c")
    dots = torch.matmul(x, q.transpose(-1, -2)) * C ** -0.5
    w = F.softmax(dots, dim=-1)
    return torch.matmul(w, x)


class Windowed(nn.Module):
    """Windows kept as their own axis: (B, windows, heads, N, d) tensors."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        B, W, N, C = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q = q.reshape(B, W, N, self.heads, -1).transpose(2, 3)
        k = k.reshape(B, W, N, self.heads, -1).transpose(2, 3)
        v = v.reshape(B, W, N, self.heads, -1).transpose(2, 3)
        attn = (q @ k.transpose(-2, -1)) * 0.125
        attn = attn.softmax(dim=-1)
        return (attn @ v).transpose(2, 3).reshape(B, W, N, C)


class Heads(nn.Module):
    """The common 4-D form: view(B, heads, N, d)."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q = self.q(x).view(B, N, self.heads, -1).transpose(1, 2)
        k = self.k(x).view(B, N, self.heads, -1).transpose(1, 2)
        v = self.v(x).view(B, N, self.heads, -1).transpose(1, 2)
        attn = (q @ k.transpose(-2, -1)) * 0.125
        attn = attn.softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, N, C)


def unknown(q, k, v, proj):
    """A look-alike whose rank the code does not show: q's shape is unpacked with a star,
    k comes from an unknown callable."""
    B, *rest = q.shape
    k = proj(k)
    attn = (q @ k.transpose(-2, -1)) * 0.125
    attn = attn.softmax(dim=-1)
    return attn @ v
'''


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def found_sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return AttentionSites(FileAnalysis(module, bindings)).sites()


def test_the_rank_of_q_k_v_comes_from_the_value_graph():
    ranks = [(site.function.name.value, site.rank, site.reason) for site in found_sites(FORMS)]
    assert ranks == [
        ("forward", 3, ""),  # flatten(2) of the conv map
        ("tokens", 3, ""),  # B, N, C = x.shape; rearrange to "b (h w) c"
        ("forward", 5, "the tensors are 5-D; CUDA's fused kernels take 4-D (batch, heads, L, E)"),
        ("forward", 4, ""),
        ("unknown", None, ""),
    ]


@pytest.mark.parametrize("line, expected", [
    ("q = x.view(B, N, C)", 3),
    ("q = x.reshape((B, N, h, d))", 4),
    ("q = x.flatten(1, 2)", None),  # x's rank is not known: flatten(s, e) needs it
    ("q = x.view(B, N, C, 1).flatten(1, 2)", 3),
    ("q = x.view(B, N, C).unsqueeze(1)", 4),
    ("q = x.view(B, 1, N, C).squeeze(1)", 3),
    ("q = x.view(B, N, C).squeeze()", None),
    ("q = rearrange(x, 'b n (h d) -> b h n d', h=h)", 4),
    ("q = rearrange(x, '... n d -> ... d n')", None),
    ("q = F.conv2d(x, w)", 4),
    ("q = x.view(shape)", None),
    ("q, k = x.reshape(B, N, 2, h, d).permute(2, 0, 3, 1, 4).unbind(0)", 4),  # timm's qkv.unbind(0)
    ("q = x.reshape(B, N, 3, h, d).permute(2, 0, 3, 1, 4)[0]", 4),
    ("q = x.view(B, N, C)[:, 0]", 2),  # an integer index drops its axis, a slice keeps one
    ("q = x.view(B, N, h, d)[..., :8]", 4),
    ("q = x.view(B, N, C)[:, None]", 4),
    ("q = x.view(B, N, C)[w]", None),  # a tensor index
    ("q = torch.cat((x.view(B, h, N, d), w), dim=-1)", 4),  # the rank the parts share
    ("q = torch.stack([x.view(B, N, C), w])", 4),
    ("q = torch.cat([*w, x.view(B, N, C)])", None),  # starred parts: not listed
    # each part made by a generator, a comprehension or map(lambda ...) over the parts
    ("q, k = (t.reshape(B, W, N, h, d).transpose(2, 3) for t in x.chunk(2, dim=-1))", 5),
    ("q, k = [t.view(B, N, h, d).transpose(1, 2) for t in x.chunk(2, dim=-1)]", 4),
    ("q, k = map(lambda t: rearrange(t, 'b n (h d) -> b h n d', h=h), x.chunk(2, dim=-1))", 4),
    ("q, k = map(lambda t: rearrange(t, 'b w n (h d) -> b w h n d', h=h), x.chunk(2, dim=-1))", 5),
    ("q, k = (t.transpose(1, 2) for t in x.chunk(2, dim=-1))", None),  # the parts' rank: unknown
    ("q, k = map(lambda t: t.softmax(-1), x.chunk(2, dim=-1))", None),
])
def test_each_rank_rule(line, expected):
    source = """
    import torch
    import torch.nn.functional as F
    from einops import rearrange

    def f(x, w, shape, B, N, C, h, d):
        %s
        attn = (q @ q.transpose(-2, -1)) * 0.125
        attn = attn.softmax(dim=-1)
        return attn @ q
    """ % line
    (site,) = found_sites(source)
    assert site.rank == expected


@pytest.mark.slow
def test_a_3d_matmul_form_is_fixed_with_one_head_and_computes_what_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    source = FORMS.replace("from einops import rearrange\n", "").replace(
        '    q = rearrange(y, "b c h w -> b (h w) c")\n', "    q = y.flatten(2).transpose(1, 2)\n"
    )
    eager_path, copy = tmp_path / "eager_rank.py", tmp_path / "rank.py"
    eager_path.write_text(source)
    copy.write_text(source)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(copy)).stdout)
    assert len(listed) == 5
    windowed = [f for f in listed if f["fix"] is None]
    assert len(windowed) == 1 and "the tensors are 5-D" in windowed[0]["message"]
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 1, result.stdout + result.stderr  # the 5-D one stays
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 4
    conv = fixed_source.split("class ConvFlat")[1].split("def tokens")[0]
    assert "unsqueeze(1)" in conv and ".squeeze(1)" in conv
    heads = fixed_source.split("class Heads")[1].split("def unknown")[0]
    assert "F.scaled_dot_product_attention(q, k, v, scale=0.125)" in heads  # 4-D: unchanged
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    close = dict(atol=1e-5, rtol=1e-4)
    torch.manual_seed(0)
    x = torch.randn(2, 8, 5, 6)
    a, b = eager.ConvFlat(8, 4).eval(), fixed.ConvFlat(8, 4).eval()
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(x), b(x), **close)
    tokens, image = torch.randn(2, 30, 8), torch.randn(2, 8, 5, 6)
    torch.testing.assert_close(eager.tokens(tokens, image), fixed.tokens(tokens, image), **close)
    x = torch.randn(2, 10, 16)
    a, b = eager.Heads(16, 2).eval(), fixed.Heads(16, 2).eval()
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(x), b(x), **close)


ROTARY = """
import math

import torch
import torch.nn as nn


def rotate(q, k, cos, sin):
    return q * cos + q.flip(-1) * sin, k * cos + k.flip(-1) * sin


def repeat_kv(hidden_states, n_rep):
    batch, heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, heads * n_rep, slen, head_dim)


class Attention(nn.Module):
    def forward(self, hidden_states, cos, sin, past_key_value=None):
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, self.num_kv, self.head_dim).transpose(1, 2)
        q_rot, q_pass = q[..., : self.rot], q[..., self.rot :]
        k_rot, k_pass = k[..., : self.rot], k[..., self.rot :]
        q, k = rotate(q_rot, k_rot, cos, sin)
        q = torch.cat((q, q_pass), dim=-1)
        k = torch.cat((k, k_pass), dim=-1)
        if past_key_value is not None:
            k = torch.cat((past_key_value[0], k), dim=2)
            v = torch.cat((past_key_value[1], v), dim=2)
        k = repeat_kv(k, self.groups)
        v = repeat_kv(v, self.groups)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim)
        w = nn.functional.softmax(w, dim=-1)
        return torch.matmul(w, v)
"""


def test_the_rank_follows_rotary_slices_a_helpers_tuple_cat_and_a_helper_with_two_returns():
    """A stablelm-style attention: q and k sliced for a partial rotary embedding, rotated by
    a same-file helper returning both, concatenated back, the cache concatenated under an
    `if`, and k, v repeated by a helper with two returns (4-D either way): `k.transpose(2, 3)`
    is kᵀ."""
    (site,) = found_sites(ROTARY)
    assert site.rank == 4


def test_a_helper_whose_returns_differ_in_rank_shows_none():
    source = ROTARY.replace(
        "return hidden_states.reshape(batch, heads * n_rep, slen, head_dim)",
        "return hidden_states.reshape(batch, heads * n_rep * slen, head_dim)")
    assert source != ROTARY
    assert found_sites(source) == []  # k.transpose(2, 3) of a tensor whose rank is not shown
