"""TML601 whatever the layout the keys are made in, and through helpers (``analysis/values.py``,
``analysis/attention.py``): ``k`` permuted to (b, h, d, s) when it is projected and used in
``q @ k`` with no transpose; a channel-first key (B, C, N) used as it is; scores and softmax
in one function, the product with ``v`` in another. Look-alikes stay quiet: the weights
returned, stored, or the softmax over the query axis; linear attention."""

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


class PermutedKey(nn.Module):
    """k projected straight to (b, h, d, s): q @ k needs no transpose."""

    def __init__(self, d_model, n_heads=2):
        super().__init__()
        self.n_heads = n_heads
        self.scale = d_model ** -0.5
        self.key = nn.Linear(d_model, d_model, bias=False)
        self.value = nn.Linear(d_model, d_model, bias=False)
        self.query = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x):
        batch_size, seq_len, _ = x.shape
        k = self.key(x).reshape(batch_size, seq_len, self.n_heads, -1).permute(0, 2, 3, 1)
        v = self.value(x).reshape(batch_size, seq_len, self.n_heads, -1).transpose(1, 2)
        q = self.query(x).reshape(batch_size, seq_len, self.n_heads, -1).transpose(1, 2)
        attn = torch.matmul(q, k) * self.scale
        attn = nn.functional.softmax(attn, dim=-1)
        out = torch.matmul(attn, v)
        return out.transpose(1, 2).reshape(batch_size, seq_len, -1)


class ChannelFirst(nn.Module):
    """A conv map flattened to (B, C, N); the key used channel-first, the query permuted."""

    def __init__(self, channels, matmul_norm=True):
        super().__init__()
        self.channels = channels
        self.matmul_norm = matmul_norm
        self.query_project = nn.Conv2d(channels, channels, 1)
        self.key_project = nn.Conv2d(channels, channels, 1)
        self.value_project = nn.Conv2d(channels, channels, 1)

    def forward(self, query_feats, key_feats):
        batch_size = query_feats.size(0)
        query = self.query_project(query_feats)
        query = query.reshape(*query.shape[:2], -1)
        query = query.permute(0, 2, 1).contiguous()
        key = self.key_project(key_feats)
        value = self.value_project(key_feats)
        key = key.reshape(*key.shape[:2], -1)
        value = value.reshape(*value.shape[:2], -1)
        value = value.permute(0, 2, 1).contiguous()
        sim_map = torch.matmul(query, key)
        if self.matmul_norm:
            sim_map = (self.channels ** -.5) * sim_map
        sim_map = F.softmax(sim_map, dim=-1)
        context = torch.matmul(sim_map, value)
        context = context.permute(0, 2, 1).contiguous()
        return context.reshape(batch_size, -1, *query_feats.shape[2:])


class SplitPermuted(nn.Module):
    """q, k, v split from one projection, k permuted to (B, h, d, N), a learned bias added
    after the scale."""

    def __init__(self, dim, key_dim=4, num_heads=2, n=6):
        super().__init__()
        self.num_heads, self.key_dim, self.scale = num_heads, key_dim, key_dim ** -0.5
        self.qkv = nn.Linear(dim, num_heads * 3 * key_dim)
        self.attention_biases = nn.Parameter(torch.randn(num_heads, n, n))

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).view(B, N, self.num_heads, -1).split([self.key_dim, self.key_dim, self.key_dim], dim=3)
        q = q.permute(0, 2, 1, 3)
        k = k.permute(0, 2, 3, 1)
        v = v.permute(0, 2, 1, 3)
        attn = q @ k * self.scale + self.attention_biases
        attn = attn.softmax(dim=-1)
        x = (attn @ v).transpose(1, 2).reshape(B, N, -1)
        return x


class FlatBCN(nn.Module):
    """(B, C, N) maps; the weights on the right of v: v @ attn.permute(0, 2, 1)."""

    def __init__(self, c):
        super().__init__()
        self.q = nn.Conv1d(c, c, 1)
        self.k = nn.Conv1d(c, c, 1)
        self.v = nn.Conv1d(c, c, 1)

    def forward(self, x):
        q = self.q(x).permute(0, 2, 1)
        attn = torch.bmm(q, self.k(x))
        attn = attn.softmax(dim=-1)
        return torch.bmm(self.v(x), attn.permute(0, 2, 1))
'''

HELPERS = '''
import torch


def scaled_query_key_softmax(q, k, att_mask):
    from xformers.ops import masked_matmul
    q = q / (k.size(-1)) ** 0.5
    att = masked_matmul(q, k.transpose(-2, -1), att_mask)
    att = torch.nn.functional.softmax(att, -1)
    return att


def scaled_dot_product_attention(q, k, v, att_mask, dropout):
    att = scaled_query_key_softmax(q, k, att_mask=att_mask)
    att = dropout(att)
    y = att @ v
    return y


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)

    def weights(self, q, k):
        return (q @ k.permute(0, 1, 3, 2) * q.shape[-1] ** -0.5).softmax(dim=-1)

    def forward(self, q, k, v):
        w = self.weights(q, k)
        return self.drop(w) @ v


class HelperDrops(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = torch.nn.Dropout(0.1)
        self.scale = 0.125

    def _attn_weights(self, q, k):
        w = (q @ k.transpose(-2, -1)) * self.scale
        return self.drop(w.softmax(-1))

    def forward(self, q, k, v):
        return self._attn_weights(q, k) @ v
'''

QUIET = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


def weights_of(q, k):
    return F.softmax(torch.matmul(q, k), dim=-1)


class ReturnsWeights(nn.Module):
    def forward(self, q, k, v):
        w = weights_of(q, k.permute(0, 1, 3, 2))
        return w @ v, w


class HelperWeightsLogged(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.1)

    def weights(self, q, k):
        return (q @ k.permute(0, 1, 3, 2)).softmax(dim=-1)

    def forward(self, q, k, v):
        w = self.weights(q, k)
        self.attention_map = w.detach()
        return self.drop(w) @ v


class StoresWeights(nn.Module):
    def forward(self, query, key, value):
        sim_map = torch.matmul(query.permute(0, 2, 1).contiguous(), key)
        sim_map = F.softmax(sim_map, dim=-1)
        self.last_map = sim_map
        return torch.matmul(sim_map, value.permute(0, 2, 1))


def over_the_queries(x, wq, wk, wv, b, s, h):
    k = (x @ wk).reshape(b, s, h, -1).permute(0, 2, 3, 1)
    q = (x @ wq).reshape(b, s, h, -1).transpose(1, 2)
    v = (x @ wv).reshape(b, s, h, -1).transpose(1, 2)
    attn = torch.matmul(q, k).softmax(dim=-2)
    return torch.matmul(attn, v)


def linear_attention(q, k, v):
    q = q.softmax(dim=-1)
    k = k.softmax(dim=-2)
    context = torch.matmul(k.permute(0, 1, 3, 2), v)
    return torch.matmul(q, context)


def projection(x, w, v):
    return F.softmax(torch.matmul(x, w), dim=-1) @ v
'''


def found_sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return AttentionSites(FileAnalysis(module, bindings)).sites()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_a_key_made_in_any_layout_is_recognised_and_fixable():
    permuted, channel_first, split, flat = found_sites(FORMS)  # in the order of the file
    assert (permuted.query, permuted.key, permuted.value, permuted.scale, permuted.rank, permuted.reason) == (
        "q", "k.transpose(-2, -1)", "v", "self.scale", 4, "",
    )
    assert (channel_first.query, channel_first.key, channel_first.value, channel_first.scale, channel_first.rank, channel_first.reason) == (
        "query", "key.transpose(-2, -1)", "value", "(self.channels ** -.5) if self.matmul_norm else 1.0", None, "",
    )  # reshape(*shape[:2], -1): the rank is not shown
    assert (split.query, split.key, split.value, split.scale, split.mask, split.rank, split.reason) == (
        "q", "k.transpose(-2, -1)", "v", "self.scale", "self.attention_biases", 4, "",
    )
    assert (flat.query, flat.key, flat.value, flat.rank, flat.transposed, flat.reason) == (
        "q", "self.k(x).transpose(-2, -1)", "self.v(x).transpose(-2, -1)", 3, True, "",
    )


def test_a_tensor_added_before_the_scale_is_no_sdpa_mask():
    source = FORMS.replace("attn = torch.matmul(q, k) * self.scale", "attn = (torch.matmul(q, k) + x[:, None]) * self.scale")
    (site, *_) = [s for s in found_sites(source) if s.query is None or s.query == "q"]
    assert "scaled after a tensor is added" in site.reason and not site.fixable


def test_a_scale_before_masks_chosen_by_an_if_is_not_taken_for_one_after_them():
    source = """
    import torch

    def attend(query, key, value, attn_mask):
        attn_weight = torch.matmul(query, key.transpose(-2, -1)) * 0.125
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                attn_weight = attn_weight.masked_fill(~attn_mask, float("-inf"))
            else:
                attn_weight = attn_weight + attn_mask
        attn_weight = torch.nn.functional.softmax(attn_weight, dim=-1)
        return torch.matmul(attn_weight, value)
    """
    (site,) = found_sites(source)
    assert site.reason == "the scores come from different computations in the branches of an `if`"


def test_scores_and_softmax_in_a_helper_are_reported_without_a_fix():
    sites = found_sites(HELPERS)
    reasons = sorted((site.function.name.value, site.reason) for site in sites)
    assert reasons == [
        ("forward", "the softmax is computed in `_attn_weights`, another function; the fix rewrites one function"),
        ("forward", "the softmax is computed in `weights`, another function; the fix rewrites one function"),
        ("scaled_dot_product_attention", "the softmax is computed in `scaled_query_key_softmax`, another function; the fix rewrites one function"),
    ]


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


@pytest.mark.slow
def test_the_fixed_layouts_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_layouts.py", tmp_path / "layouts.py"
    eager_path.write_text(FORMS)
    copy.write_text(FORMS)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(copy)).stdout)
    assert len(listed) == 4 and all(f["fix"] is not None for f in listed), listed
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 4 and "softmax" not in fixed_source
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    close = dict(atol=1e-5, rtol=1e-4)
    torch.manual_seed(0)
    for name, make, inputs in (
        ("PermutedKey", lambda m: m(16, 2), (torch.randn(2, 7, 16),)),
        ("ChannelFirst", lambda m: m(8), (torch.randn(2, 8, 5, 6), torch.randn(2, 8, 3, 4))),
        ("ChannelFirst", lambda m: m(8, matmul_norm=False), (torch.randn(2, 8, 5, 6), torch.randn(2, 8, 3, 4))),
        ("FlatBCN", lambda m: m(8), (torch.randn(2, 8, 9),)),
        ("SplitPermuted", lambda m: m(8), (torch.randn(2, 6, 8),)),
    ):
        a, b = make(getattr(eager, name)).eval(), make(getattr(fixed, name)).eval()
        b.load_state_dict(a.state_dict())
        torch.testing.assert_close(a(*inputs), b(*inputs), **close)


@pytest.mark.slow
def test_the_cli_reports_the_helper_form_without_a_fix(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(HELPERS)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(path)).stdout)
    assert [(f["location"]["row"], f["fix"]) for f in listed] == [(16, None), (30, None), (44, None)]
    assert all("another function" in f["message"] for f in listed)
