"""TML601 on forms the thirteenth held-out set showed it missed, modelled as computations:

- ``torch.where(c, s, v)`` with ``v`` a large negative number keeps the scores where ``c`` holds
  and fills the rest: the ``fill`` of ``s.masked_fill(~c, v)`` (``compound.py``), so SDPA's
  boolean mask is ``c`` itself; ``torch.where(c, v, s)`` fills where ``c`` holds (mask ``~c``),
  and ``s.where(c, v)`` is the first form. Before, the call was opaque and the softmax's axis lost.
- a same-file helper method whose one ``return`` says its rank (``return x.reshape(b * h, n, d)``)
  gives its result that rank (``ranks.py``): ``k.transpose(1, 2)`` of that result is a swap of
  its last two axes, so ``q @ k.transpose(1, 2)`` is q against k, laid out alike.
- ``self.attend(v, scores, mask)`` defined in a base class of the same file runs in the
  subclass's value graph as the subclass's own method would (``FileValues.method(inherited=True)``);
  a helper that weighs the scores its callers compute is a site in each caller, reported at the
  call (``AttentionSite.anchor``): each caller's attention keeps its own weights.

- a helper ``_attend(q, k, v)`` whose keys its caller lays out (``self.heads(key, keys=True)``:
  ``(b, h, d, s)``) is read in the caller's value graph: a function that calls a same-file helper
  mentioning a contraction is asked too; the helper's ``if keys:`` runs only the arm its flag
  selects (``values.py``), and the keys' layout is followed through the helper's result and an
  ``if``/``torch.cat`` of cached keys (``similarity.py``). Reported at the product in the helper,
  without a fix (the softmax is in another function). A scale by a slice of a tensor
  (``s * b - 1e4 * (1 - b)`` of a causal buffer) is a tensor, never SDPA's scale.

Look-alikes stay quiet: a fill with 0 (no mask), ``torch.where`` between two tensors, the
weights returned by the base's helper, a softmax over the queries; a caller that passes a
weight matrix as the helper's keys, a caller whose keys are laid out as its queries (``q @ k``
of two (…, n, d) tensors is no attention), the helper's weights returned.
"""

from __future__ import annotations

import json

import pytest

from attention_cases import fixed_modules, found_sites, run_cli

WHERE = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

NEG = -1.0e9


class Windowed(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x, allowed):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        logits = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        logits = torch.where(allowed, logits, NEG)
        return (F.softmax(logits, dim=-1) @ v).transpose(1, 2).reshape(b, n, c)


class Blocked(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x, blocked):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        energy = torch.matmul(q, k.transpose(-1, -2)) * 0.25
        energy = torch.where(blocked, float("-inf"), energy)
        attn = energy.softmax(-1)
        return torch.matmul(attn, v).transpose(1, 2).reshape(b, n, c)


class MethodWhere(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x, keep):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        sim = (q @ k.transpose(-2, -1)).where(keep, -torch.finfo(q.dtype).max)
        return (sim.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c)
'''

WHERE_QUIET = '''
import torch
import torch.nn.functional as F


def zero_filled(q, k, v, keep):
    s = torch.where(keep, q @ k.transpose(-2, -1), 0.0)
    return F.softmax(s, dim=-1) @ v


def between_two_tensors(q, k, v, keep, other):
    s = torch.where(keep, q @ k.transpose(-2, -1), other)
    return F.softmax(s, dim=-1) @ v


def over_the_queries(q, k, v, keep):
    s = torch.where(keep, q @ k.transpose(-2, -1), -1e9)
    return F.softmax(s, dim=-2) @ v
'''

RANKED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class TokenAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k, self.to_v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)

    def _heads(self, t):
        b, n, d = t.shape
        return t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, n, d // self.heads)

    def forward(self, x):
        b, n, d = x.shape
        q, k = self._heads(self.to_q(x)), self._heads(self.to_k(x))
        weights = torch.softmax(q @ k.transpose(1, 2) * (self.heads / d) ** 0.5, dim=-1)
        out = weights @ self._heads(self.to_v(x))
        return out.reshape(b, self.heads, n, -1).transpose(1, 2).reshape(b, n, d)
'''

RANKED_QUIET = '''
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.to_q, self.to_k = nn.Linear(width, width), nn.Linear(width, width)

    def _heads(self, t):
        b, n, d = t.shape
        return t.reshape(b, n, self.heads, d // self.heads).transpose(1, 2).reshape(b * self.heads, n, d // self.heads)

    def forward(self, x, table):
        q = self._heads(self.to_q(x))
        k = self._heads(self.to_k(x))
        mixed = torch.softmax(q @ k.transpose(0, 1), dim=-1)
        return mixed @ table, mixed
'''

INHERITED = '''
import torch
import torch.nn as nn


class Heads(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)
        self.drop = nn.Dropout(0.1)

    def weigh(self, v, scores, mask):
        if mask is not None:
            scores = scores.masked_fill(mask, -1e4)
        probs = self.drop(scores.softmax(dim=-1))
        return torch.matmul(probs, v)

    def split(self, x):
        b, n, d = x.shape
        return x.view(b, n, self.heads, -1).transpose(1, 2)

    def forward(self, x, mask=None):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        return self.weigh(v, torch.matmul(q, k.transpose(-2, -1)) * 0.125, mask)


class BiasedHeads(Heads):
    def forward(self, x, bias, mask=None):
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        logits = (torch.matmul(q, k.transpose(-2, -1)) + bias) * 0.125
        return self.weigh(v, logits, mask)
'''

INHERITED_QUIET = '''
import torch
import torch.nn as nn


class Keeper(nn.Module):
    def weigh(self, v, scores):
        probs = scores.softmax(dim=-1)
        return torch.matmul(probs, v), probs

    def split(self, x):
        b, n, d = x.shape
        return x.view(b, n, 4, -1).transpose(1, 2)


class KeepsWeights(Keeper):
    def forward(self, q, k, v):
        q, k, v = self.split(q), self.split(k), self.split(v)
        return self.weigh(v, torch.matmul(q, k.transpose(-2, -1)))


class OverQueries(Keeper):
    def forward(self, q, k, v):
        q, k, v = self.split(q), self.split(k), self.split(v)
        return torch.matmul(torch.matmul(q, k.transpose(-2, -1)).softmax(dim=-2), v)
'''


def test_where_fills_are_masks():
    sites = found_sites(WHERE)
    assert [(s.query, s.key, s.value, s.scale, s.mask, s.reason) for s in sites] == [
        ("q", "k", "v", "1.0 / math.sqrt(c // self.heads)", "allowed", ""),
        ("q", "k", "v", "0.25", "~blocked", ""),
        ("q", "k", "v", None, "keep", ""),
    ]


def test_where_look_alikes_stay_quiet():
    assert found_sites(WHERE_QUIET) == []


def test_a_helper_method_that_says_its_rank():
    (site,) = found_sites(RANKED)
    assert (site.query, site.key, site.value, site.rank, site.reason) == (
        "q", "k", "self._heads(self.to_v(x))", 3, ""
    )
    assert found_sites(RANKED_QUIET) == []


def test_a_base_class_helper_is_a_site_in_each_caller():
    sites = found_sites(INHERITED)
    assert [(s.function.name.value, type(s.at).__name__) for s in sites] == [("forward", "Call"), ("forward", "Call")]
    assert sites[0].has_dropout  # (the subclass's ``self.drop`` is set by the base's ``__init__``: a module of unknown kind there)
    assert all("the softmax is computed in `weigh`, another function" in s.reason for s in sites)
    assert found_sites(INHERITED_QUIET) == []


def test_the_cli_reports_each_caller_at_its_call(tmp_path):
    path = tmp_path / "inherited.py"
    path.write_text(INHERITED)
    listed = json.loads(run_cli("--no-cache", "--select", "TML601", "--output-format", "json", str(path)).stdout)
    assert [(f["location"]["row"], f["fix"]) for f in listed] == [(25, None), (32, None)], listed


@pytest.mark.slow
def test_the_fixed_where_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    eager, fixed = fixed_modules(tmp_path, WHERE + RANKED.split("\n", 7)[7], "where", 4)
    torch.manual_seed(0)
    x = torch.randn(2, 5, 16)
    keep = torch.rand(2, 1, 5, 5) > 0.3
    keep[..., 0] = True  # every query attends somewhere
    for name, inputs in (("Windowed", (x, keep)), ("Blocked", (x, ~keep)), ("MethodWhere", (x, keep)), ("TokenAttention", (x,))):
        a, b = getattr(eager, name)(16, 4).eval(), getattr(fixed, name)(16, 4).eval()
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            leaf = x.clone().requires_grad_()
            out = module(leaf, *inputs[1:])
            out.backward(torch.ones_like(out))
            results.append((out.detach(), leaf.grad))
        torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-4, msg=name)
        torch.testing.assert_close(results[0][1], results[1][1], atol=1e-5, rtol=1e-4, msg=name)


LAID_OUT = '''
import torch
import torch.nn as nn


class CausalBlock(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.register_buffer("causal", torch.tril(torch.ones(context, context)).view(1, 1, context, context))
        self.n = heads
        self.proj = nn.Linear(width, 3 * width)

    def _attend(self, query, key_t, value):
        energy = torch.matmul(query, key_t)
        n, m = energy.size(-2), energy.size(-1)
        allowed = self.causal[:, :, m - n:m, :m]
        energy = energy * allowed - 1e4 * (1 - allowed)
        return torch.matmul(nn.Softmax(dim=-1)(energy), value)

    def heads(self, x, keys=False):
        x = x.view(*x.size()[:-1], self.n, x.size(-1) // self.n)
        if keys:
            return x.permute(0, 2, 3, 1)
        return x.permute(0, 2, 1, 3)

    def forward(self, x, cache=None):
        query, key, value = self.proj(x).chunk(3, dim=-1)
        query, key, value = self.heads(query), self.heads(key, keys=True), self.heads(value)
        if cache is not None:
            key = torch.cat((cache[0].transpose(-2, -1), key), dim=-1)
            value = torch.cat((cache[1], value), dim=-2)
        out = self._attend(query, key, value)
        return out.permute(0, 2, 1, 3).flatten(2), torch.stack((key.transpose(-2, -1), value))
'''

LAID_OUT_QUIET = '''
import torch
import torch.nn as nn


class Prototypes(nn.Module):
    def __init__(self, width, count):
        super().__init__()
        self.table = nn.Parameter(torch.randn(width, count))

    def _mix(self, x, table, v):
        return torch.matmul(torch.matmul(x, table).softmax(dim=-1), v)

    def forward(self, x, v):
        return self._mix(x, self.table, v)


class SameLayout(nn.Module):
    # (not projections of the module's layers: two of those are q and k in any layout,
    # analysis/similarity.py; here both operands are the input, its features last)
    def __init__(self, width):
        super().__init__()
        self.scale = width ** -0.5

    def _mix(self, x, y, v):
        return torch.matmul(torch.matmul(x, y).softmax(dim=-1), v)

    def forward(self, x, v):
        return self._mix(x.unsqueeze(1), (x * self.scale).unsqueeze(1), v)


class ReturnsWeights(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.q, self.k = nn.Linear(width, width), nn.Linear(width, width)

    def _attend(self, q, k_t, v):
        w = torch.matmul(q, k_t).softmax(dim=-1)
        return torch.matmul(w, v), w

    def forward(self, x, v):
        return self._attend(self.q(x).unsqueeze(1), self.k(x).unsqueeze(1).transpose(-2, -1), v)
'''


def test_keys_laid_out_by_the_caller():
    (site,) = found_sites(LAID_OUT)
    assert (site.function.name.value, site.product.func.attr.value, site.anchor) == ("forward", "matmul", None)
    assert site.reason == "q and k are known to be laid out alike only where `forward` calls `_attend`; the fix rewrites one function"
    assert found_sites(LAID_OUT_QUIET) == []


def test_a_scale_by_a_slice_is_a_tensor():
    source = LAID_OUT.replace("def _attend(self, query, key_t, value):", "def _attend(self, query, key, value):").replace(
        "torch.matmul(query, key_t)", "torch.matmul(query, key.transpose(-1, -2))").replace("keys=True", "keys=False")
    (site,) = found_sites(source)
    assert site.function.name.value == "_attend" and site.reason == "the scores are multiplied by a tensor"
