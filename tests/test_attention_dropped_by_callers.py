"""TML601 where a helper returns the weights with the output (the Annotated Transformer's
``return torch.matmul(p_attn, value), p_attn``) and every call of it in the file drops them:
``x, _ = attention(q, k, v)``, ``attention(q, k, v)[0]``. The weights are not kept: reported,
without a fix (the fix would change what the helper returns; ``flag_returns.dropped_by_callers``).

Look-alikes stay quiet: a caller that keeps the weights (``x, self.attn = attention(...)``, the
original), one caller that keeps them among several that drop them.
"""

from __future__ import annotations

from attention_cases import found_sites

ANNOTATED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def attention(query, key, value, mask=None):
    d_k = query.size(-1)
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = F.softmax(scores, dim=-1)
    return torch.matmul(p_attn, value), p_attn


class MultiHeadedAttention(nn.Module):
    def __init__(self, h, d_model):
        super().__init__()
        self.d_k, self.h = d_model // h, h
        self.linears = nn.ModuleList([nn.Linear(d_model, d_model) for _ in range(4)])

    def forward(self, query, key, value, mask=None):
        b = query.size(0)
        query, key, value = [
            lin(x).view(b, -1, self.h, self.d_k).transpose(1, 2) for lin, x in zip(self.linears, (query, key, value))
        ]
        x, _ = attention(query, key, value, mask=mask)
        x = x.transpose(1, 2).contiguous().view(b, -1, self.h * self.d_k)
        return self.linears[-1](x)
'''


def test_weights_every_caller_drops():
    for call in ("x, _ = attention(query, key, value, mask=mask)", "x = attention(query, key, value, mask=mask)[0]"):
        source = ANNOTATED.replace("x, _ = attention(query, key, value, mask=mask)", call)
        (site,) = found_sites(source)
        assert site.reason == "the weights are also returned, to callers that drop them; the fix would change what the function returns", call


def test_a_caller_that_keeps_them_stays_quiet():
    kept = ANNOTATED.replace("x, _ = attention(", "x, self.attn = attention(")
    assert found_sites(kept) == []
    another = ANNOTATED + '''

def probe(q, k, v):
    return attention(q, k, v)
'''
    assert found_sites(another) == []


METHOD = '''
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.qkv = nn.Linear(d_model, 3 * d_model)

    def _attn(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.d_k ** -0.5
        weights = scores.softmax(dim=-1)
        return torch.matmul(weights, v), weights

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.h, self.d_k).permute(2, 0, 3, 1, 4)
        out, _ = self._attn(q, k, v)
        return out.transpose(1, 2).reshape(b, n, c)
'''


def test_a_method_every_call_of_which_drops_the_weights():
    (site,) = found_sites(METHOD)
    assert site.reason == "the weights are also returned, to callers that drop them; the fix would change what the function returns"


def test_a_method_whose_weights_another_object_may_keep_stays_quiet():
    elsewhere = METHOD + '''

def probe(block, q, k, v):
    return block._attn(q, k, v)
'''
    assert found_sites(elsewhere) == []
