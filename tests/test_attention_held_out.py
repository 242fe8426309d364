"""TML601 on forms a fourth held-out set showed it missed, modelled as computations:

- a key reshaped by ``view(shape)`` where ``shape`` is a local tuple (its rank is the tuple's
  length), transposed by positive dims (``k.transpose(2, 3)``);
- a softmax module built and run at once (``nn.Softmax(dim=-1)(s)``, ``Softmax(3)(s)``);
- q and k both made by layers of the module, k laid out (B, N, h, L) where it was made, so
  ``torch.matmul(q, k)`` needs no transpose; a positional softmax dim (``F.softmax(s, 3)``) on
  scores whose rank the code shows;
- a relative-position helper that writes a slice of the scores back in place, under an ``if``
  (reported without a fix: SDPA takes an additive mask, not a write);
- a mask fill and an additive mask on the same scores (reported without a fix).

Look-alikes stay quiet: weights returned, a softmax over the queries, a weight matrix that is
no projection, a helper that also stores the scores, and the keys laid out the same way but one
query (``q.view(B, heads, 1, size)``: B·h·1·L weights, ``analysis/axis_kinds.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest


from attention_cases import found_sites, run_cli

ROOT = Path(__file__).resolve().parent.parent

FIXED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Softmax


class InlineSoftmax(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads, self.size = heads, width // heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)
        self.dropout = nn.Dropout(0.1)

    def split(self, x):
        shape = x.size()[:-1] + (self.heads, self.size)
        x = x.view(*shape)
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden, attention_mask):
        q = self.split(self.query(hidden))
        k = self.split(self.key(hidden))
        v = self.split(self.value(hidden))
        scores = torch.matmul(q, k.transpose(-1, -2))
        scores = scores / math.sqrt(self.size)
        scores = scores + attention_mask
        probs = nn.Softmax(dim=-1)(scores)
        probs = self.dropout(probs)
        out = torch.matmul(probs, v)
        return out.permute(0, 2, 1, 3).flatten(2)


class InlineImportedSoftmax(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = Softmax(3)(q @ k.transpose(-2, -1) * 0.5)
        return (attn @ v).transpose(1, 2).reshape(b, n, c)


class KeyLaidOut(nn.Module):
    def __init__(self, width, heads, size):
        super().__init__()
        self.WQ = nn.Conv2d(width, heads * size, 1)
        self.WK = nn.Conv2d(width, heads * size, 1)
        self.WV = nn.Conv2d(width, heads * size, 1)
        self.drop = nn.Dropout(0.1)
        self.heads, self.size = heads, size

    def forward(self, x, y, mask=None):
        heads, size = self.heads, self.size
        B, H, L, _ = y.shape
        q, k, v = self.WQ(x), self.WK(y), self.WV(y)
        q = q.view(B, heads, size, -1).transpose(2, 3)
        k = k.view(B, heads, size, L)
        v = v.view(B, heads, size, L).permute(0, 1, 3, 2)
        pre_a = torch.matmul(q, k) / math.sqrt(size)
        if mask is not None:
            pre_a = pre_a.masked_fill(mask[:, None, None, :], -float('inf'))
        alphas = self.drop(F.softmax(pre_a, 3))
        return torch.matmul(alphas, v).view(B, -1, 1, 1)


class ShapeInALocal(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self._heads = heads
        self._k = nn.Linear(width, width)
        self._q = nn.Linear(width, width)
        self._v = nn.Linear(width, width)
        self._attn_dropout = nn.Dropout(0.1)
        self.register_buffer("_mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x):
        batch, length, _ = x.shape
        shape = (batch, length, self._heads, -1)
        k = self._k(x).view(shape).transpose(1, 2)
        q = self._q(x).view(shape).transpose(1, 2)
        v = self._v(x).view(shape).transpose(1, 2)
        qkT = torch.matmul(q, k.transpose(2, 3))
        attention = qkT / math.sqrt(k.shape[-1])
        attention = attention.masked_fill(self._mask[..., :length, :length] == 0, -10000)
        attention = F.softmax(attention, dim=-1)
        attention = self._attn_dropout(attention)
        output = torch.matmul(attention, v)
        return output.transpose(1, 2).reshape(batch, length, -1)
'''

UNFIXED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def add_rel_pos(attn, q, table):
    b, h, n, _ = q.shape
    attn_map = attn[:, :, 1:, 1:]
    attn_map += torch.einsum("bhid,jd->bhij", q[:, :, 1:], table)
    attn[:, :, 1:, 1:] = attn_map
    return attn


class RelativePositions(nn.Module):
    def __init__(self, width, heads, positions, rel_pos=True):
        super().__init__()
        self.heads, self.rel_pos, self.scale = heads, rel_pos, (width // heads) ** -0.5
        self.qkv = nn.Linear(width, 3 * width)
        self.table = nn.Parameter(torch.randn(positions, width // heads))

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = (q * self.scale) @ k.transpose(-2, -1)
        if self.rel_pos:
            attn = add_rel_pos(attn, q, self.table)
        attn = attn.softmax(dim=-1)
        x = attn @ v
        x = x + q
        return x.transpose(1, 2).reshape(b, n, c)


class TwoMasks(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self._heads = heads
        self._k = nn.Linear(width, width)
        self._q = nn.Linear(width, width)
        self._v = nn.Linear(width, width)
        self._attn_dropout = nn.Dropout(0.1)
        self.register_buffer("_mask", torch.tril(torch.ones(context, context)).view(1, 1, context, context))

    def forward(self, x, attention_mask):
        batch, length, _ = x.shape
        shape = [batch, length, self._heads, -1]
        k = self._k(x).reshape(shape).transpose(1, 2)
        q = self._q(x).reshape(shape).transpose(1, 2)
        v = self._v(x).reshape(shape).transpose(1, 2)
        attention = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(k.shape[-1])
        attention = attention.masked_fill(self._mask[..., :length, :length] == 0, -10000)
        attention = attention + attention_mask.view(batch, 1, 1, length) * -10000
        attention = F.softmax(attention, dim=-1)
        attention = self._attn_dropout(attention)
        return torch.matmul(attention, v)
'''

QUIET = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def add_rel_pos(attn, q, table, maps):
    attn_map = attn[:, :, 1:, 1:]
    attn_map += torch.einsum("bhid,jd->bhij", q[:, :, 1:], table)
    attn[:, :, 1:, 1:] = attn_map
    maps.append(attn)
    return attn


class KeyLaidOutOneQuery(nn.Module):
    def __init__(self, width, heads, size):
        super().__init__()
        self.WQ = nn.Conv2d(width, heads * size, 1)
        self.WK = nn.Conv2d(width, heads * size, 1)
        self.WV = nn.Conv2d(width, heads * size, 1)
        self.drop = nn.Dropout(0.1)
        self.heads, self.size = heads, size

    def forward(self, x, y, mask=None):
        heads, size = self.heads, self.size
        B, H, L, _ = y.shape
        q, k, v = self.WQ(x), self.WK(y), self.WV(y)
        q = q.view(B, heads, 1, size)
        k = k.view(B, heads, size, L)
        v = v.view(B, heads, size, L).permute(0, 1, 3, 2)
        alphas = self.drop(F.softmax(torch.matmul(q, k) / math.sqrt(size), 3))  # one query: B·h·1·L weights
        return torch.matmul(alphas, v).view(B, -1, 1, 1)

class InlineWeightsReturned(nn.Module):
    def forward(self, q, k, v):
        w = nn.Softmax(dim=-1)(q @ k.transpose(-2, -1))
        return w @ v, w


class InlineOverTheQueries(nn.Module):
    def forward(self, q, k, v):
        w = nn.Softmax(dim=-2)(torch.matmul(q, k.transpose(-1, -2)))
        return torch.matmul(w, v)


class KeyLaidOutOverTheQueries(nn.Module):
    def __init__(self, width, heads, size):
        super().__init__()
        self.WQ = nn.Conv2d(width, heads * size, 1)
        self.WK = nn.Conv2d(width, heads * size, 1)
        self.WV = nn.Conv2d(width, heads * size, 1)
        self.heads, self.size = heads, size

    def forward(self, x, y):
        B, H, L, _ = y.shape
        q = self.WQ(x).view(B, self.heads, 1, self.size)
        k = self.WK(y).view(B, self.heads, self.size, L)
        v = self.WV(y).view(B, self.heads, self.size, L).permute(0, 1, 3, 2)
        return torch.matmul(F.softmax(torch.matmul(q, k), 2), v)


class WeightMatrix(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.proj = nn.Linear(width, width)
        self.w = nn.Parameter(torch.randn(width, width))

    def forward(self, x, v):
        return F.softmax(self.proj(x) @ self.w, dim=-1) @ v


class HelperKeepsTheScores(nn.Module):
    def __init__(self, table):
        super().__init__()
        self.table = table
        self.maps = []

    def forward(self, q, k, v):
        attn = q @ k.transpose(-2, -1)
        attn = add_rel_pos(attn, q, self.table, self.maps)
        return attn.softmax(dim=-1) @ v
'''




def test_the_held_out_forms_are_fixable():
    sites = {site.function.name.value + ":" + str(i): site for i, site in enumerate(found_sites(FIXED))}
    assert [(s.query, s.key, s.value, s.scale, s.mask, s.reason) for s in sites.values()] == [
        ("q", "k", "v", "1.0 / math.sqrt(self.size)", "attention_mask", ""),
        ("q", "k", "v", "0.5", None, ""),
        ("q", "k.transpose(-2, -1)", "v", "1.0 / math.sqrt(size)", "(~mask[:, None, None, :]) if mask is not None else None", ""),
        ("q", "k", "v", "1.0 / math.sqrt(k.shape[-1])", "self._mask[..., :length, :length] != 0", ""),
    ]
    assert all(s.rank == 4 for s in sites.values())


def test_a_written_slice_and_two_masks_are_reported_without_a_fix():
    helper, two = found_sites(UNFIXED)
    assert helper.reason == "the scores pass through `add_rel_pos`, which SDPA cannot run"
    assert two.reason == "more than one mask is applied to the scores"


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


@pytest.mark.slow
def test_the_fixed_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_held_out.py", tmp_path / "held_out.py"
    eager_path.write_text(FIXED)
    copy.write_text(FIXED)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(copy)).stdout)
    assert len(listed) == 4 and all(f["fix"] is not None for f in listed), listed
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 4 and not any(call in fixed_source for call in ("softmax(", "Softmax(dim", "Softmax(3)"))
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    close = dict(atol=1e-5, rtol=1e-4)
    torch.manual_seed(0)
    padding = torch.zeros(2, 1, 1, 6)
    padding[1, ..., 4:] = -10000.0
    for name, make, inputs in (
        ("InlineSoftmax", lambda m: m(16, 2), (torch.randn(2, 6, 16), padding)),
        ("InlineImportedSoftmax", lambda m: m(16, 4), (torch.randn(2, 5, 16),)),
        ("KeyLaidOut", lambda m: m(8, 2, 4), (torch.randn(2, 8, 3, 1), torch.randn(2, 8, 7, 1))),
        ("KeyLaidOut", lambda m: m(8, 2, 4), (torch.randn(2, 8, 3, 1), torch.randn(2, 8, 7, 1), torch.tensor([[False] * 5 + [True] * 2] * 2))),
        ("ShapeInALocal", lambda m: m(16, 2, 9), (torch.randn(2, 7, 16),)),
    ):
        a, b = make(getattr(eager, name)).eval(), make(getattr(fixed, name)).eval()
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            leaves = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
            out = module(*leaves)
            out.backward(torch.ones_like(out))
            grads = [t.grad for t in leaves if t.is_floating_point()] + [p.grad for p in module.parameters()]
            results.append((out.detach(), grads))
        torch.testing.assert_close(results[0][0], results[1][0], **close, msg=name)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close, msg=name)


@pytest.mark.slow
def test_the_cli_reports_the_unfixed_forms_and_not_the_look_alikes(tmp_path):
    path = tmp_path / "unfixed.py"
    path.write_text(UNFIXED + QUIET.replace("import math\n\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n", "").replace("add_rel_pos(", "add_rel_pos_kept("))
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(path)).stdout)
    assert [f["fix"] for f in listed] == [None, None]
    assert "add_rel_pos" in listed[0]["message"] and "more than one mask" in listed[1]["message"]


SPELLINGS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import Softmax


def attend(q, k, v, b, t, h):
    shape = LAYOUT
    q, k, v = q.METHOD(shape).transpose(1, 2), k.METHOD(shape).transpose(1, 2), v.METHOD(shape).transpose(1, 2)
    w = SOFTMAX(torch.matmul(q, k.transpose(2, 3)))
    return torch.matmul(w, v)
'''


@pytest.mark.parametrize("softmax, found", [
    ("nn.Softmax(dim=-1)", True),
    ("torch.nn.Softmax(-1)", True),
    ("Softmax(dim=3)", True),
    ("nn.Softmax(3)", True),
    ("F.softmax", False),  # no dim: not known to be the key axis
    ("nn.Softmax(dim=2)", False),  # the queries
    ("nn.Softmax(1)", False),  # the heads
])
@pytest.mark.parametrize("shape, reshape", [
    ("(b, t, h, -1)", "view"),
    ("[b, t, h, -1]", "reshape"),
])
def test_inline_softmax_spellings_on_scores_of_a_shape_held_in_a_local(softmax, found, shape, reshape):
    source = SPELLINGS.replace("LAYOUT", shape).replace("METHOD", reshape).replace("SOFTMAX", softmax)
    sites = found_sites(source)
    assert [(s.key, s.rank, s.reason) for s in sites] == ([("k", 4, "")] if found else [])


def test_a_shape_with_a_star_shows_no_rank():
    source = SPELLINGS.replace("LAYOUT", "(*q.shape[:2], h, -1)").replace("METHOD", "view").replace("SOFTMAX", "nn.Softmax(dim=-1)")
    assert found_sites(source) == []  # k.transpose(2, 3) of a tensor whose rank is not shown: not taken for kᵀ


def test_a_slice_written_in_the_function_itself_is_reported_without_a_fix():
    source = """
    import torch


    def attend(q, k, v):
        s = q @ k.transpose(-2, -1)
        s[..., 0] = s[..., 0] * 2.0
        return torch.softmax(s, dim=-1) @ v
    """
    (site,) = found_sites(source)
    assert site.reason == "a slice of the scores or the weights is overwritten in place; SDPA takes an additive mask, not a write"
    assert found_sites(source.replace("s[..., 0] = s[..., 0] * 2.0", "kept = s.clone()\n        kept[..., 0] = s[..., 0] * 2.0\n        log(kept)")) == []
