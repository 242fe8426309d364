"""TML601 where the scores are filled with a moderate negative number, or read only for their
size:

- ``dots.masked_fill_(torch.eye(t, dtype=torch.bool), -100)`` (a local attention that keeps
  each step from attending to itself) gives those places almost no weight, not none: still
  eager attention keeping its weights, reported without a fix (SDPA's boolean mask would give
  them none at all). A fill with 0 or more masks nothing and stays quiet, as before, unless
  it guards the rows a masking fill left with no key (then reported without a fix); a fill at
  or below -1e4 is a mask the fix writes.
- ``torch.ones_like(scores[0, :, :])`` (a causal mask built to the scores' size) and the other
  ``*_like`` factories read their first argument's size, dtype and device only
  (``analysis/sizes.py``): no read of the scores that SDPA would have to make.
"""

from __future__ import annotations

from attention_cases import found_sites, run_cli

LOCAL = '''
import math

import torch
import torch.nn as nn


class LocalAttention(nn.Module):
    def __init__(self, channels, heads=4):
        super().__init__()
        self.heads = heads
        self.query = nn.Conv1d(channels, channels, 1)
        self.key = nn.Conv1d(channels, channels, 1)
        self.content = nn.Conv1d(channels, channels, 1)

    def forward(self, x):
        b, c, t = x.shape
        queries = self.query(x).view(b, self.heads, -1, t)
        keys = self.key(x).view(b, self.heads, -1, t)
        dots = torch.einsum("bhct,bhcs->bhts", keys, queries) / math.sqrt(c // self.heads)
        dots.masked_fill_(torch.eye(t, device=dots.device, dtype=torch.bool), -100)
        weights = torch.softmax(dots, dim=2)
        content = self.content(x).view(b, self.heads, -1, t)
        out = torch.einsum("bhts,bhct->bhcs", weights, content)
        return x + out.reshape(b, -1, t)
'''

SIZED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class HeadsOnBatch(nn.Module):
    def __init__(self, width, heads, causal=True):
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.q, self.k, self.v = nn.Linear(width, width), nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, x):
        q = torch.cat(torch.chunk(self.q(x), self.heads, dim=2), dim=0)
        k = torch.cat(torch.chunk(self.k(x), self.heads, dim=2), dim=0)
        v = torch.cat(torch.chunk(self.v(x), self.heads, dim=2), dim=0)
        scores = torch.bmm(q, k.permute(0, 2, 1)) / (k.size(-1) ** 0.5)
        if self.causal:
            tril = torch.tril(torch.ones_like(scores[0, :, :]))
            keep = tril.unsqueeze(0).repeat(scores.size(0), 1, 1)
            scores = scores.masked_fill(keep == 0, float("-inf"))
        weights = F.softmax(scores, dim=-1)
        out = torch.bmm(weights, v)
        return torch.cat(torch.chunk(out, self.heads, dim=0), dim=2)
'''


def test_a_moderate_fill_is_reported_without_a_fix():
    (site,) = found_sites(LOCAL)
    assert site.reason.startswith("the scores are filled with -100, not a large negative number"), site.reason
    assert found_sites(LOCAL.replace("-100)", "-1e9)"))[0].reason != site.reason  # a mask


def test_fills_that_mask_nothing_stay_quiet():
    for fill in ("0", "0.0", "1e4"):
        assert found_sites(LOCAL.replace("-100)", fill + ")")) == [], fill


def test_a_mask_built_to_the_scores_size_is_no_read():
    (site,) = found_sites(SIZED)
    for kind in ("zeros_like", "empty_like"):
        assert len(found_sites(SIZED.replace("torch.ones_like(scores[0, :, :])", "1 - torch.%s(scores[0, :, :])" % kind))) == 1, kind


def test_a_scores_read_that_is_not_a_size_stays_quiet():
    source = SIZED.replace("torch.ones_like(scores[0, :, :])", "scores[0, :, :].detach() > 0")
    assert found_sites(source) == []


ZEROED_ROWS = '''
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.wq, self.wk, self.wv = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, values, mask):
        b, s, d = values.shape
        shape = (b, s, self.heads, self.head_dim)
        query = self.wq(values).view(shape).permute(0, 2, 1, 3)
        key = self.wk(values).view(shape).permute(0, 2, 1, 3)
        value = self.wv(values).view(shape).permute(0, 2, 1, 3)
        scores = torch.matmul(query, key.transpose(-1, -2)) * self.head_dim ** -0.5
        valid = mask.unsqueeze(1)
        scores = scores.masked_fill(~valid, torch.finfo(scores.dtype).min)
        attention = torch.softmax(scores, dim=-1)
        attention = torch.where(valid.any(-1, keepdim=True), attention, torch.zeros_like(attention))
        return torch.matmul(attention, value).permute(0, 2, 1, 3).reshape(b, s, d)
'''


def test_weights_zeroed_where_no_key_is_valid():
    """``torch.where(valid.any(-1, keepdim=True), w, torch.zeros_like(w))`` (rows with no valid
    key get no weight, where SDPA would give NaN): reported without a fix."""
    (site,) = found_sites(ZEROED_ROWS)
    assert site.reason.startswith("the weights are filled (`torch.where("), site.reason
    scores_zeroed = ZEROED_ROWS.replace(
        "        scores = scores.masked_fill(~valid, torch.finfo(scores.dtype).min)\n",
        "        scores = torch.where(valid, scores, torch.zeros_like(scores))\n",
    )
    assert found_sites(scores_zeroed) == []  # a fill with 0 masks nothing


BOUND_EINSUM = '''
from functools import partial

import torch
import torch.nn as nn


class SpectralConv1d(nn.Module):
    def __init__(self, width, modes):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width, modes, dtype=torch.cfloat))

    def forward(self, x):
        op = partial(torch.einsum, "bix,iox->box")
        return op(x[..., 0], self.weight[..., 0]) - op(x[..., 1], self.weight[..., 1])


def gate(x):
    return x.softmax(dim=-1)
'''


def test_an_einsum_whose_spec_a_partial_binds_is_read_without_error(tmp_path):
    """``op = partial(torch.einsum, "bix,iox->box")`` ... ``op(x, w)``: the call's own arguments
    are the operands only (the spec is the partial's): no contraction read, and no internal error
    (the rule was skipped for the file with an ``IndexError`` before)."""
    assert found_sites(BOUND_EINSUM) == []
    path = tmp_path / "fno.py"
    path.write_text(BOUND_EINSUM)
    result = run_cli("--no-cache", "--select", "TML601", str(path))
    assert result.returncode == 0 and "internal error" not in result.stdout + result.stderr, result.stdout + result.stderr


GUARDED = '''
import math

import torch
from torch import nn


def _guarded_softmax(scores, allow):
    neg = torch.finfo(scores.dtype).min
    scores = scores.masked_fill(~allow, neg)
    has_any = allow.any(dim=-1, keepdim=True)
    scores = torch.where(has_any, scores, torch.zeros_like(scores))
    attn = torch.softmax(scores, dim=-1)
    return attn * has_any.to(attn.dtype)


class MultiheadAttention(nn.Module):
    def __init__(self, C, H, init_std=0.02):
        super().__init__()
        self.H = H
        self.WQ = nn.Parameter(torch.randn(C, C) * init_std)
        self.WK = nn.Parameter(torch.randn(C, C) * init_std)
        self.WV = nn.Parameter(torch.randn(C, C) * init_std)

    def forward(self, q_in, kv_in, key_mask=None):
        B, nq, C = q_in.shape
        nk = kv_in.shape[1]
        H, dh = self.H, C // self.H
        q = (q_in @ self.WQ).view(B, nq, H, dh)
        k = (kv_in @ self.WK).view(B, nk, H, dh)
        v = (kv_in @ self.WV).view(B, nk, H, dh)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dh)
        if key_mask is not None:
            allow = key_mask[:, None, None, :].expand(B, H, nq, nk)
            attn = _guarded_softmax(scores, allow)
        else:
            attn = torch.softmax(scores, dim=-1)
        return torch.einsum("bhqk,bkhd->bqhd", attn, v).reshape(B, nq, C)
'''


def test_a_zero_fill_guarding_masked_rows_is_attention_still():
    """``torch.where(has_any, s, zeros_like(s))`` after ``s.masked_fill(~allow, min)`` (rows with no
    allowed key made uniform, then zeroed after the softmax: physis's ``_guarded_softmax``) guards
    a mask: the attention is reported, without a fix; the same zero fill alone masks nothing."""
    (site,) = found_sites(GUARDED)
    assert site.reason, site.reason  # (no fix: SDPA has no such step)
    unmasked = GUARDED.replace("    scores = scores.masked_fill(~allow, neg)\n", "")
    assert found_sites(unmasked) == []
