"""TML601 on forms the sixteenth held-out set showed it missed, modelled as computations:

- a softmax held in an attribute as a function (``attribute_calls.py``): Mega's ``self.attn_fn =
  partial(F.softmax, dim=-1) if not laplacian_attn_fn else LaplacianAttnFn()``, called
  ``self.attn_fn(sim)``: the join of the softmax (the partial's preset ``dim`` first) and a
  module of unknown kind, eager attention without a fix (the other arm is not a softmax); a
  plain ``partial(F.softmax, dim=-1)`` attribute, a local partial and a torch function held
  in an attribute are the softmax itself, with a fix;
- one similarity matrix read by two softmaxes, ``sim.softmax(dim=-1)`` contracted with the
  context's values over ``j`` and ``sim.softmax(dim=-2)`` with the sequence's over ``i``
  (bidirectional cross attention): each is attention of its own, keeping its own weights, and
  the other softmax is not the scores escaping; no fix, since the fix would remove the scores
  the other reads;
- weights returned only under ``if return_attn:`` with ``return_attn=False`` and no call of the
  file passing it (``flag_returns.py``), the module called in a loop over the ``ModuleList`` it
  was put in (``looped_instances.py``): reported without a fix.

Look-alikes stay quiet: a partial of another function; the Laplacian arm only; the softmax arm
only behind a flag off by default; a partial softmax over the query axis; weights returned by
default (``return_attn=True``) or by a caller of the file; the list also indexed; a softmax over
the query axis contracted over the key axis.
"""

from __future__ import annotations

import pytest

from attention_cases import found_sites, run_cli

MEGA = '''
import math
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn, einsum


class LaplacianAttnFn(nn.Module):
    def forward(self, x):
        mu = math.sqrt(0.5)
        std = math.sqrt((4 * math.pi) ** -1)
        return (1 + torch.special.erf((x - mu) / (std * math.sqrt(2)))) * 0.5


class OffsetScale(nn.Module):
    def __init__(self, dim, heads=1):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(heads, dim))
        self.beta = nn.Parameter(torch.zeros(heads, dim))

    def forward(self, x):
        out = einsum("... d, h d -> ... h d", x, self.gamma) + self.beta
        return out.unbind(dim=-2)


class SingleHeadedAttention(nn.Module):
    def __init__(self, *, dim, dim_qk, dim_value, causal=False, laplacian_attn_fn=False):
        super().__init__()
        self.causal = causal
        self.laplacian_attn_fn = laplacian_attn_fn
        self.attn_fn = partial(F.softmax, dim=-1) if not laplacian_attn_fn else LaplacianAttnFn()
        self.to_qk = nn.Sequential(nn.Linear(dim, dim_qk), nn.SiLU())
        self.offsetscale = OffsetScale(dim_qk, heads=2)
        self.to_v = nn.Sequential(nn.Linear(dim, dim_value), nn.SiLU())

    def forward(self, x, v_input=None):
        seq_len, dim, device = *x.shape[-2:], x.device
        v_input = x if v_input is None else v_input
        qk, v = self.to_qk(x), self.to_v(v_input)
        q, k = self.offsetscale(qk)
        scale = (seq_len ** -1) if self.laplacian_attn_fn else (dim ** -0.5)
        sim = einsum("b i d, b j d -> b i j", q, k) * scale
        if self.causal:
            causal_mask = torch.ones((seq_len, seq_len), device=device, dtype=torch.bool).triu(1)
        if self.causal and not self.laplacian_attn_fn:
            sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
        attn = self.attn_fn(sim)
        if self.causal and self.laplacian_attn_fn:
            attn = attn.masked_fill(causal_mask, 0.)
        return einsum("b i j, b j d -> b i d", attn, v)
'''

MEGA_ROW = "        attn = self.attn_fn(sim)"

# the softmax arm behind a flag off by default; a partial of another function; the Laplacian arm only
MEGA_QUIET = [
    MEGA.replace("partial(F.softmax, dim=-1) if not laplacian_attn_fn else LaplacianAttnFn()",
                 "partial(F.softmax, dim=-1) if softmax_attn else LaplacianAttnFn()").replace(
                 "causal=False, laplacian_attn_fn=False):", "causal=False, laplacian_attn_fn=False, softmax_attn=False):"),
    MEGA.replace("partial(F.softmax, dim=-1) if", "partial(F.normalize, dim=-1) if"),
    MEGA.replace("partial(F.softmax, dim=-1) if not laplacian_attn_fn else LaplacianAttnFn()", "LaplacianAttnFn()"),
    MEGA.replace("partial(F.softmax, dim=-1) if", "partial(F.softmax, dim=1) if"),  # over the queries of b i j
]

HELD = '''
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F


class PartialAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.attn_fn = partial(F.softmax, dim=-1)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        sim = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_fn(sim)
        out = attn @ v
        return out.transpose(1, 2).reshape(b, n, c)


class LocalPartialAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        normalise = partial(torch.softmax, dim=-1)
        sim = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        attn = normalise(sim)
        out = attn @ v
        return out.transpose(1, 2).reshape(b, n, c)


class HeldFunctionAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.normalise = F.softmax

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        sim = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        attn = self.normalise(sim, dim=-1)
        out = attn @ v
        return out.transpose(1, 2).reshape(b, n, c)
'''

BIDIRECTIONAL = '''
import torch
from torch import nn, einsum
from torch.nn import Module, ModuleList

from einops import rearrange


def exists(val):
    return val is not None


def default(val, d):
    return val if exists(val) else d


class BidirectionalCrossAttention(nn.Module):
    def __init__(self, *, dim, heads=8, dim_head=64, context_dim=None, dropout=0., talking_heads=False):
        super().__init__()
        context_dim = default(context_dim, dim)
        self.heads = heads
        self.scale = dim_head ** -0.5
        inner_dim = dim_head * heads
        self.dropout = nn.Dropout(dropout)
        self.context_dropout = nn.Dropout(dropout)
        self.to_qk = nn.Linear(dim, inner_dim, bias=False)
        self.context_to_qk = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(dim, inner_dim, bias=False)
        self.context_to_v = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_out = nn.Linear(inner_dim, dim)
        self.context_to_out = nn.Linear(inner_dim, context_dim)
        self.talking_heads = nn.Conv2d(heads, heads, 1, bias=False) if talking_heads else nn.Identity()
        self.context_talking_heads = nn.Conv2d(heads, heads, 1, bias=False) if talking_heads else nn.Identity()

    def forward(self, x, context, mask=None, context_mask=None, return_attn=False, rel_pos_bias=None):
        b, i, j, h, device = x.shape[0], x.shape[-2], context.shape[-2], self.heads, x.device
        qk, v = self.to_qk(x), self.to_v(x)
        context_qk, context_v = self.context_to_qk(context), self.context_to_v(context)
        qk, context_qk, v, context_v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=h), (qk, context_qk, v, context_v))
        sim = einsum("b h i d, b h j d -> b h i j", qk, context_qk) * self.scale
        if exists(rel_pos_bias):
            sim = sim + rel_pos_bias
        if exists(mask) or exists(context_mask):
            mask = default(mask, torch.ones((b, i), device=device, dtype=torch.bool))
            context_mask = default(context_mask, torch.ones((b, j), device=device, dtype=torch.bool))
            attn_mask = rearrange(mask, "b i -> b 1 i 1") * rearrange(context_mask, "b j -> b 1 1 j")
            sim = sim.masked_fill(~attn_mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        context_attn = sim.softmax(dim=-2)
        attn = self.dropout(attn)
        context_attn = self.context_dropout(context_attn)
        attn = self.talking_heads(attn)
        context_attn = self.context_talking_heads(context_attn)
        out = einsum("b h i j, b h j d -> b h i d", attn, context_v)
        context_out = einsum("b h j i, b h j d -> b h i d", context_attn, v)
        out, context_out = map(lambda t: rearrange(t, "b h n d -> b n (h d)"), (out, context_out))
        out = self.to_out(out)
        context_out = self.context_to_out(context_out)
        if return_attn:
            return out, context_out, attn, context_attn
        return out, context_out


def FeedForward(dim, mult=4):
    return nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * mult), nn.GELU(), nn.Linear(dim * mult, dim))


class BidirectionalCrossAttentionTransformer(Module):
    def __init__(self, *, dim, depth, context_dim=None, **attn_kwargs):
        super().__init__()
        context_dim = default(context_dim, dim)
        self.layers = ModuleList()
        for _ in range(depth):
            attn = BidirectionalCrossAttention(dim=dim, context_dim=context_dim, **attn_kwargs)
            ff = FeedForward(dim)
            context_ff = FeedForward(context_dim)
            self.layers.append(ModuleList([attn, ff, context_ff]))

    def forward(self, x, context, mask=None, context_mask=None):
        for attn, ff, context_ff in self.layers:
            x_out, context_out = attn(x, context, mask=mask, context_mask=context_mask)
            x = x + x_out
            context = context + context_out
            x = ff(x) + x
            context = context_ff(context) + context
        return x, context
'''

LOOP_CALL = "            x_out, context_out = attn(x, context, mask=mask, context_mask=context_mask)"

BIDIRECTIONAL_QUIET = {
    "returned-by-default": BIDIRECTIONAL.replace("return_attn=False, rel_pos_bias=None", "return_attn=True, rel_pos_bias=None"),
    "a-caller-returns-them": BIDIRECTIONAL.replace(LOOP_CALL, LOOP_CALL.replace("x_out, context_out = attn(", "x_out, context_out, *_ = attn(").replace(
        "context_mask=context_mask)", "context_mask=context_mask, return_attn=True)")),
    "the-list-also-indexed": BIDIRECTIONAL.replace("        return x, context", "        return x, context, self.layers[0][0](x, context, return_attn=True)"),
    "always-returned": BIDIRECTIONAL.replace("        if return_attn:\n            return out, context_out, attn, context_attn\n", "        return out, context_out, attn, context_attn\n"),
    "query-axis-softmax": BIDIRECTIONAL.replace(
        'einsum("b h j i, b h j d -> b h i d", context_attn, v)', 'einsum("b h i j, b h j d -> b h i d", context_attn, context_v)'),
}


def _row(source, line):
    return source.splitlines().index(line) + 1


def test_a_softmax_held_as_a_partial_chosen_by_a_constructor_flag_is_reported_without_a_fix():
    (site,) = found_sites(MEGA)
    assert not site.fixable and "holds the softmax or another function" in site.reason, site.reason
    assert "self.attn_fn" in site.reason


@pytest.mark.parametrize("source", MEGA_QUIET, ids=["softmax-off-by-default", "partial-of-normalize", "laplacian-only", "query-axis"])
def test_a_partial_of_something_else_or_a_softmax_off_by_default_stays_quiet(source):
    assert source != MEGA
    assert found_sites(source) == []


def test_a_partial_or_a_function_held_in_an_attribute_or_a_local_is_the_softmax():
    sites = found_sites(HELD)
    assert len(sites) == 3, [s.reason for s in sites]
    assert all(s.fixable for s in sites), [s.reason for s in sites]
    assert [s.scale for s in sites][0] == "self.scale"


def test_two_softmaxes_of_one_similarity_matrix_are_each_attention_without_a_fix():
    sites = found_sites(BIDIRECTIONAL)
    assert len(sites) == 2, [s.reason for s in sites]
    assert all(not s.fixable for s in sites)
    assert all("talking_heads" in s.reason for s in sites), [s.reason for s in sites]  # a module of unknown kind on the weights


def test_the_talking_heads_turned_on_are_reported_too():
    source = BIDIRECTIONAL.replace("talking_heads=False):", "talking_heads=True):")
    assert source != BIDIRECTIONAL
    assert len(found_sites(source)) == 2


@pytest.mark.parametrize("name", sorted(BIDIRECTIONAL_QUIET))
def test_weights_returned_by_default_or_a_softmax_over_the_queries_stay_quiet(name):
    source = BIDIRECTIONAL_QUIET[name]
    assert source != BIDIRECTIONAL
    assert found_sites(source) == []


def test_the_reasons_name_the_flag_and_the_other_softmax():
    source = BIDIRECTIONAL.replace("        attn = self.talking_heads(attn)\n", "").replace(
        "        context_attn = self.context_talking_heads(context_attn)\n", "")
    reasons = [s.reason for s in found_sites(source)]
    assert len(reasons) == 2
    assert all("`return_attn` is set" in r or "another softmax" in r for r in reasons), reasons


@pytest.mark.slow
def test_the_cli_reports_both_directions_and_the_held_softmax(tmp_path):
    (tmp_path / "bidirectional.py").write_text(BIDIRECTIONAL)
    (tmp_path / "mega.py").write_text(MEGA)
    result = run_cli("--no-cache", "--select", "TML601", "--output-format", "concise", "--exit-zero", str(tmp_path))
    rows = sorted((line.split(":")[0].rsplit("/", 1)[-1], int(line.split(":")[1])) for line in result.stdout.splitlines() if "TML601" in line)
    assert rows == sorted([
        ("bidirectional.py", _row(BIDIRECTIONAL, '        out = einsum("b h i j, b h j d -> b h i d", attn, context_v)')),
        ("bidirectional.py", _row(BIDIRECTIONAL, '        context_out = einsum("b h j i, b h j d -> b h i d", context_attn, v)')),
        ("mega.py", _row(MEGA, '        return einsum("b i j, b j d -> b i d", attn, v)')),
    ]), result.stdout + result.stderr


@pytest.mark.slow
def test_the_fixed_held_partial_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_held_out16.py", tmp_path / "held_out16.py"
    eager_path.write_text(HELD)
    copy.write_text(HELD)
    result = run_cli("--no-cache", "--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_text = copy.read_text()
    assert "attn_fn(sim)" not in fixed_text and "normalise(sim" not in fixed_text, fixed_text
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    for name in ("PartialAttention", "LocalPartialAttention", "HeldFunctionAttention"):
        torch.manual_seed(0)
        a, b = getattr(eager, name)(16, 4).eval(), getattr(fixed, name)(16, 4).eval()
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            x = torch.randn(2, 6, 16, requires_grad=True)
            with torch.no_grad():
                x.copy_(torch.arange(2 * 6 * 16, dtype=torch.float32).reshape(2, 6, 16).sin())
            out = module(x)
            out.backward(torch.ones_like(out))
            results.append((out.detach(), [x.grad] + [p.grad for p in module.parameters()]))
        close = dict(atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(results[0][0], results[1][0], **close)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close)
