"""TML601 on forms the fourteenth held-out set showed it missed, modelled as computations:

- an einsum spec one of several texts: an f-string one of whose parts an ``if`` picks between
  constants (``layout = "b n e" if k.dim() == 3 else "b h n e"``), or the whole spec so chosen,
  is a contraction when every text contracts the same labels into the same output
  (``einsum.py``: modelled by the fullest text); reported without a fix (the layouts differ).
- a flag read through a helper that returns the caller's value or a fallback (lucidrains'
  ``default(val, d)``): the helper runs in the value graph; an ``if`` between a parameter
  defaulting to ``None`` and a flag off by default is off by default (``flags.py``); the calls of
  a module's ``forward`` are those made through the attributes holding its instances
  (``forward_calls.py``); a flag passed down a chain of constructors (``Attend(sdpa=fused)`` in
  ``Layer.__init__(self, fused=False)``, built in ``Stack``) is off while no caller turns it on.
- a weight transform between the softmax and the product with v: a scale by a tensor (a
  learned per-head gate) or a module of unknown shape-keeping kind: eager attention without a fix.
- keys made by ``view(1, n, h, d).repeat(b, 1, 1, 1)`` (``repeat``/``expand``: one size per axis)
  and ``repeat_interleave(k, r, dim=1)`` keep a known rank (``ranks.py``), ``.to(dtype)`` keeps
  the layout (``similarity.py``); heads moved to the batch axis by ``torch.cat(torch.split(q, d,
  dim=-1), dim=0)`` keep the tensor's layout and rank; a ``del`` of the weights is no read, but
  the fix (which removes the statement binding them) is not offered then.

Look-alikes stay quiet: the weights returned after the gate; an SDPA path on by default; a
caller that turns the flag on (a constructor argument ``fused=True``, a forward call
``sdpa=True``); a module instance held where its calls cannot be read; a softmax over the
queries; linear attention; an einsum whose texts contract different labels.
"""

from __future__ import annotations

import json

import pytest

from attention_cases import found_sites, run_cli

CHOSEN = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class SharedOrPerHead(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.drop = nn.Dropout(p)

    def forward(self, queries, keys, values):
        layout = "b n e" if keys.dim() == 3 else "b h n e"
        logits = torch.einsum(f"b h m e, {layout} -> b h m n", queries, keys) / math.sqrt(queries.shape[-1])
        weights = self.drop(logits.softmax(dim=-1))
        return torch.einsum(f"b h m n, {layout} -> b h m e", weights, values)


class WholeSpec(nn.Module):
    def forward(self, q, k, v, shared=False):
        spec = "bhid,bjd->bhij" if shared else "bhid,bhjd->bhij"
        attn = F.softmax(torch.einsum(spec, q, k) * 0.125, dim=-1)
        return torch.einsum("bhij,bhjd->bhid", attn, v)
'''

CHOSEN_QUIET = '''
import torch


def differs(q, k, v, transpose):
    spec = "bid,bjd->bij" if transpose else "bid,bid->bi"
    a = torch.einsum(spec, q, k).softmax(-1)
    return torch.einsum("bij,bjd->bid", a, v)
'''

FLAGS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def fallback(value, otherwise):
    return otherwise if value is None else value


class Core(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, sdpa=None):
        sdpa = fallback(sdpa, self.sdpa)
        if sdpa:
            return F.scaled_dot_product_attention(q, k, v)
        w = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)
        return w @ v


class Layer(nn.Module):
    def __init__(self, dim, heads, fused=False):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.core = Core(sdpa=fused)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        return self.core(q, k, v).transpose(1, 2).reshape(b, n, c)


class Stack(nn.Module):
    def __init__(self, dim, depth, fused_attention=False):
        super().__init__()
        self.layers = nn.ModuleList([Layer(dim, 4, fused=fused_attention) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = x + layer(x)
        return x
'''

WEIGHTS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from quantisers import build_quantiser


class GatedPrompt(nn.Module):
    def __init__(self, dim, heads, length):
        super().__init__()
        self.heads = heads
        self.prompt = nn.Parameter(torch.randn(length, dim))
        self.to_kv = nn.Linear(dim, 2 * dim)
        self.gate = nn.Parameter(torch.zeros(1, heads, 1, 1))

    def forward(self, query_states):
        b, h = query_states.shape[0], self.heads
        head = query_states.shape[-1]
        keys, values = self.to_kv(self.prompt).chunk(2, dim=-1)
        keys = keys.view(1, -1, h, head).repeat(b, 1, 1, 1).transpose(1, 2)
        values = values.view(1, -1, h, head).repeat(b, 1, 1, 1).transpose(1, 2)
        scores = torch.matmul(query_states, keys.transpose(2, 3).to(query_states.dtype)) / math.sqrt(head)
        scores = torch.softmax(scores, dim=-1) * self.gate.tanh()
        return torch.matmul(scores, values)


class GroupedPrompt(nn.Module):
    def __init__(self, dim, groups, repeats):
        super().__init__()
        self.groups, self.repeats = groups, repeats
        self.to_kv = nn.Linear(dim, 2 * dim // repeats)
        self.gate = nn.Parameter(torch.zeros(1))

    def forward(self, q, prompt):
        b, d = q.shape[0], q.shape[-1]
        k, v = self.to_kv(prompt).chunk(2, dim=-1)
        k = k.view(1, -1, self.groups, d).expand(b, -1, -1, -1).permute(0, 2, 1, 3)
        v = v.view(1, -1, self.groups, d).expand(b, -1, -1, -1).permute(0, 2, 1, 3)
        k = k.repeat_interleave(self.repeats, dim=1)
        v = torch.repeat_interleave(v, self.repeats, dim=1)
        s = q @ k.transpose(2, 3) / d ** 0.5
        a = s.softmax(-1) * self.gate
        return a @ v


class Quantised(nn.Module):
    def __init__(self, dim, heads, levels):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.drop = nn.Dropout(0.1)
        self.round_probs = build_quantiser(levels)

    def forward(self, x, bias=None, head_mask=None):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads)
        if bias is not None:
            s = s + bias
        p = self.round_probs(self.drop(F.softmax(s, dim=-1)))
        if head_mask is not None:
            p = p * head_mask
        return (p @ v).transpose(1, 2).reshape(b, n, c)
'''

HEADS_TO_BATCH = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class NodeAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.fc_q = nn.Linear(width, width)
        self.fc_k = nn.Linear(width, width)
        self.fc_v = nn.Linear(width, width)

    def forward(self, x):
        B, T, N, C = x.shape
        size = C // self.heads
        q = torch.cat(self.fc_q(x).reshape(B, T, N, C).chunk(self.heads, dim=-1), dim=0)
        k = torch.cat(torch.split(self.fc_k(x).reshape(B, T, N, C), size, dim=-1), dim=0)
        v = torch.cat(torch.split(self.fc_v(x).reshape(B, T, N, C), size, dim=-1), dim=0)
        s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(size)
        a = F.softmax(s, dim=-1)
        out = torch.matmul(a, v)
        return torch.cat(torch.split(out, B, dim=0), dim=-1)
'''

DELETED = HEADS_TO_BATCH.replace(
    "        return torch.cat(torch.split(out, B, dim=0), dim=-1)",
    "        out = torch.cat(torch.split(out, B, dim=0), dim=-1)\n        del q, k, v, a\n        return out",
).replace("class NodeAttention", "class Freed")

QUIET = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def fallback(value, otherwise):
    return otherwise if value is None else value


class GateReturned(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(1, heads, 1, 1))

    def forward(self, q, k, v):
        p = self.gate * torch.softmax(q @ k.transpose(-2, -1) / 8.0, dim=-1)
        return p @ v, p


class OnByDefault(nn.Module):
    def __init__(self, sdpa=True):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, sdpa=None):
        sdpa = fallback(sdpa, self.sdpa)
        if sdpa:
            return F.scaled_dot_product_attention(q, k, v)
        return (q @ k.transpose(-2, -1) * 0.125).softmax(dim=-1) @ v


class TurnedOnByCaller(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, sdpa=None):
        sdpa = fallback(sdpa, self.sdpa)
        if sdpa:
            return F.scaled_dot_product_attention(q, k, v)
        return (q @ k.transpose(-2, -1) * 0.125).softmax(dim=-1) @ v


class Caller(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = TurnedOnByCaller()

    def forward(self, q, k, v):
        return self.inner(q, k, v, sdpa=True)


class BuiltOn(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v):
        if self.sdpa:
            return F.scaled_dot_product_attention(q, k, v)
        return (q @ k.transpose(-2, -1) * 0.125).softmax(dim=-1) @ v


class Builder(nn.Module):
    def __init__(self, fused=False):
        super().__init__()
        self.attend = BuiltOn(sdpa=fused)


def build():
    return Builder(fused=True)


class HeldInAList(nn.Module):
    def __init__(self, sdpa=False):
        super().__init__()
        self.sdpa = sdpa

    def forward(self, q, k, v, sdpa=None):
        sdpa = fallback(sdpa, self.sdpa)
        if sdpa:
            return F.scaled_dot_product_attention(q, k, v)
        return (q @ k.transpose(-2, -1) * 0.125).softmax(dim=-1) @ v


class Lister(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([HeldInAList() for _ in range(2)])


class OverQueries(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(1, heads, 1, 1))

    def forward(self, q, k, v):
        p = self.gate * torch.softmax(q @ k.transpose(-2, -1), dim=-2)
        return p @ v


class Linear(nn.Module):
    def forward(self, x):
        B, T, N, C = x.shape
        q = torch.cat(x.reshape(B, T, N, C).chunk(4, dim=-1), dim=0).softmax(dim=-1)
        k = torch.cat(x.reshape(B, T, N, C).chunk(4, dim=-1), dim=0).softmax(dim=-2)
        context = torch.matmul(k.transpose(2, 3), x)
        return torch.matmul(q, context)
'''


def _only(source):
    return found_sites(source)


def test_an_einsum_spec_chosen_at_run_time_is_a_contraction_reported_without_a_fix():
    sites = _only(CHOSEN)
    assert len(sites) == 2, [s.reason for s in sites]
    assert all("chosen at run time" in s.reason for s in sites), [s.reason for s in sites]
    assert "b h m e, b n e -> b h m n" in sites[0].reason and "bhid,bhjd->bhij" in sites[1].reason


def test_texts_that_contract_other_labels_are_no_contraction():
    assert _only(CHOSEN_QUIET) == []


def test_a_flag_read_through_a_fallback_helper_and_passed_down_constructors_is_off():
    sites = _only(FLAGS)
    assert len(sites) == 1 and sites[0].function.name.value == "forward", [s.reason for s in sites]
    assert sites[0].fixable, sites[0].reason


@pytest.mark.parametrize("turn_on", [
    ("class Stack(nn.Module):", "def make():\n    return Stack(8, 2, fused_attention=True)\n\n\nclass Stack(nn.Module):"),
    ("self.core(q, k, v)", "self.core(q, k, v, sdpa=True)"),
    ("self.core(q, k, v)", "self.core(q, k, v, True)"),
    ("self.core = Core(sdpa=fused)", "self.core = Core(sdpa=fused)\n        self.spare = Core()\n        cores = [Core()]"),
    ("def __init__(self, dim, heads, fused=False):", "def __init__(self, dim, heads, fused=None):"),
])
def test_a_caller_that_may_turn_the_flag_on_keeps_the_fallback_quiet(turn_on):
    old, new = turn_on
    assert old in FLAGS
    assert _only(FLAGS.replace(old, new, 1)) == []  # (an instance held in a list: its calls are not read)


def test_a_weight_transform_between_the_softmax_and_v_is_reported_without_a_fix():
    sites = _only(WEIGHTS)
    assert [s.function.name.value for s in sites] == ["forward"] * 3, [s.reason for s in sites]
    gated, grouped, quantised = sites
    assert "weights are scaled" in gated.reason and "self.gate.tanh()" in gated.reason
    assert "weights are scaled" in grouped.reason
    assert not quantised.fixable, quantised.reason
    alone = _only(WEIGHTS.replace("        if head_mask is not None:\n            p = p * head_mask\n", ""))
    assert "self.round_probs" in alone[2].reason, alone[2].reason


def test_heads_moved_to_the_batch_axis_keep_q_and_k_laid_out_alike():
    (site,) = _only(HEADS_TO_BATCH)
    assert site.fixable and site.rank == 4, site.reason
    (freed,) = _only(DELETED)
    assert "`del`" in freed.reason and not freed.fixable


def test_look_alikes_stay_quiet():
    assert _only(QUIET) == []


@pytest.mark.slow
def test_the_fixed_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    source = FLAGS + HEADS_TO_BATCH.split("\n\n\n", 1)[1]
    eager_path, copy = tmp_path / "eager_held_out14.py", tmp_path / "held_out14.py"
    eager_path.write_text(source)
    copy.write_text(source)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(copy)).stdout)
    assert len(listed) == 2 and all(f["fix"] is not None for f in listed), listed
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert "softmax(" not in fixed_source
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    close = dict(atol=1e-5, rtol=1e-4)
    torch.manual_seed(0)
    for name, make, inputs in (
        ("Stack", lambda m: m(16, 2), (torch.randn(2, 6, 16),)),
        ("NodeAttention", lambda m: m(16, 4), (torch.randn(2, 3, 5, 16),)),
    ):
        a, b = make(getattr(eager, name)).eval(), make(getattr(fixed, name)).eval()
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            leaves = [t.clone().requires_grad_() for t in inputs]
            out = module(*leaves)
            out.backward(torch.ones_like(out))
            grads = [t.grad for t in leaves] + [p.grad for p in module.parameters()]
            results.append((out.detach(), grads))
        torch.testing.assert_close(results[0][0], results[1][0], **close, msg=name)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close, msg=name)


@pytest.mark.slow
def test_the_cli_reports_the_unfixed_forms_and_not_the_look_alikes(tmp_path):
    path = tmp_path / "unfixed.py"
    path.write_text(CHOSEN + WEIGHTS.split("\n\n\n", 1)[1] + QUIET.split("\n\n\n", 1)[1])
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(path)).stdout)
    assert len(listed) == 5 and all(f["fix"] is None for f in listed), listed
