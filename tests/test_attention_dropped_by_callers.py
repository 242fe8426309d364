"""TML601 where a helper returns the weights with the output (the Annotated Transformer's
``return torch.matmul(p_attn, value), p_attn``) and every call of it in the file drops them:
``x, _ = attention(q, k, v)``, ``attention(q, k, v)[0]``, or through an attribute holding it
(``self.attention = attention``; ``x, scores = self.attention(...)`` with ``scores`` unread). The weights are not kept: reported,
without a fix (the fix would change what the helper returns; ``flag_returns.dropped_by_callers``).

Look-alikes stay quiet: a caller that keeps the weights (``x, self.attn = attention(...)``, the
original), one caller that keeps them among several that drop them, an attribute holding the function
that is also handed on or read from another object, or that also holds something else.
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


def test_weights_dropped_where_an_attribute_holds_the_function():
    # ``self.self_attention = self_attention`` in the constructor, called through the attribute
    held = ANNOTATED.replace(
        "        self.linears = nn.ModuleList(", "        self.attention = attention\n        self.linears = nn.ModuleList("
    ).replace("x, _ = attention(", "x, scores = self.attention(")
    (site,) = found_sites(held)
    assert site.reason == "the weights are also returned, to callers that drop them; the fix would change what the function returns"


def test_an_attribute_holding_the_function_that_is_handed_on_stays_quiet():
    held = ANNOTATED.replace(
        "        self.linears = nn.ModuleList(", "        self.attention = attention\n        self.linears = nn.ModuleList("
    ).replace("x, _ = attention(", "x, _ = self.attention(")
    assert len(found_sites(held)) == 1
    assert found_sites(held + "\n\ndef attend_with(block, q, k, v):\n    return probe(block.attention, q, k, v)\n") == []  # handed on from another object
    assert found_sites(held.replace("        x = x.transpose(1, 2)", "        self.hook(self.attention)\n        x = x.transpose(1, 2)")) == []
    assert found_sites(held.replace("x, _ = self.attention(", "x, self.kept = self.attention(")) == []
    rebound = held.replace("        self.d_k, self.h = d_model // h, h", "        self.d_k, self.h = d_model // h, h\n        self.attention = None")
    assert found_sites(rebound) == []  # (the attribute also holds something else)


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


# HTSAT's Swin layers (CLAP): the window attention's forward returns its weights, the block
# hands them up, the layer keeps them only in evaluation (`if not self.training:`) and returns
# the last one, and the model drops it: in training nothing keeps them
SWIN = '''
import torch
import torch.nn as nn


class WindowAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = self.softmax((q * self.scale) @ k.transpose(-2, -1))
        x = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return x, attn


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.attn = WindowAttention(dim, heads)

    def forward(self, x):
        y, attn = self.attn(x)
        return x + y, attn


class Layer(nn.Module):
    def __init__(self, dim, heads, depth):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(depth)])

    def forward(self, x):
        attns = []
        for blk in self.blocks:
            x, attn = blk(x)
            if not self.training:
                attns.append(attn.unsqueeze(0))
        if not self.training:
            attn = torch.cat(attns, dim=0).mean(dim=0)
        return x, attn


class HTSAT(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(2):
            layer = Layer(dim, heads, 2)
            self.layers.append(layer)

    def forward(self, x):
        for layer in self.layers:
            x, attn = layer(x)
        return x
'''


def test_weights_handed_up_through_modules_and_dropped():
    (site,) = found_sites(SWIN)
    assert site.reason == "the weights are also returned, to callers that drop them; the fix would change what the function returns"


def test_weights_handed_up_and_kept_stay_quiet():
    returned = SWIN.replace("            x, attn = layer(x)\n        return x\n", "            x, attn = layer(x)\n        return x, attn\n")
    assert found_sites(returned) == []  # the model returns them to callers the file does not show
    stored = SWIN.replace("        y, attn = self.attn(x)\n", "        y, attn = self.attn(x)\n        self.last = attn\n")
    assert found_sites(stored) == []
    in_training = SWIN.replace("            if not self.training:\n                attns.append", "            if self.training:\n                attns.append")
    assert found_sites(in_training) == []


def test_a_class_naming_itself_only_in_super_is_still_known():
    # `super(WindowAttention, self).__init__()` builds nothing: the calls are still the file's
    old_style = SWIN.replace("super().__init__()", "super(WindowAttention, self).__init__()", 1)
    (site,) = found_sites(old_style)
    assert site.reason == "the weights are also returned, to callers that drop them; the fix would change what the function returns"
