"""TML601 where the scores are filled from a number the module keeps as a buffer: GPT-2's
``w = torch.where(mask.bool(), w, self.masked_bias.to(w.dtype))`` with
``self.register_buffer("masked_bias", torch.tensor(-1e4))`` in ``__init__`` and nothing else
assigning it. The buffer is that number (``analysis/compound.py``: ``_buffered``), so the
``where`` is a mask fill and the softmax keeps its axes: reported in the single-function form
with an exact fix (SDPA's boolean mask is the condition; numerically checked), and in the
GPT-2 form whose keys the caller lays out (``self.split_heads(key, k=True)``), without a fix.

Look-alikes stay quiet: a buffer holding 0 (no mask), a buffer that is also
assigned elsewhere in the class, a buffer made from a tensor rather than a number.
"""

from __future__ import annotations

import torch

from attention_cases import fixed_modules, found_sites

SINGLE = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context))
        self.register_buffer("masked_bias", torch.tensor(-1e4))

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(c // self.heads)
        causal = self.bias[:, :, :n, :n].bool()
        w = torch.where(causal, w, self.masked_bias.to(w.dtype))
        w = F.softmax(w, dim=-1)
        return torch.matmul(w, v).transpose(1, 2).reshape(b, n, c)

'''

GPT2 = '''
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, width, heads, context):
        super().__init__()
        self.n_head = heads
        self.register_buffer("bias", torch.tril(torch.ones(context, context)).view(1, 1, context, context))
        self.register_buffer("masked_bias", torch.tensor(-1e4))
        self.c_attn = nn.Linear(width, 3 * width)
        self.split_size = width
        self.attn_dropout = nn.Dropout(0.1)

    def _attn(self, q, k, v, attention_mask=None):
        w = torch.matmul(q, k)
        w = w / (float(v.size(-1)) ** 0.5)
        nd, ns = w.size(-2), w.size(-1)
        mask = self.bias[:, :, ns - nd : ns, :ns]
        w = torch.where(mask.bool(), w, self.masked_bias.to(w.dtype))
        if attention_mask is not None:
            w = w + attention_mask
        w = nn.Softmax(dim=-1)(w)
        w = self.attn_dropout(w)
        return [torch.matmul(w, v)]

    def split_heads(self, x, k=False):
        new_x_shape = x.size()[:-1] + (self.n_head, x.size(-1) // self.n_head)
        x = x.view(*new_x_shape)
        if k:
            return x.permute(0, 2, 3, 1)
        else:
            return x.permute(0, 2, 1, 3)

    def forward(self, x, attention_mask=None):
        query, key, value = self.c_attn(x).split(self.split_size, dim=2)
        query = self.split_heads(query)
        key = self.split_heads(key, k=True)
        value = self.split_heads(value)
        return self._attn(query, key, value, attention_mask)[0]
'''


def test_a_fill_from_a_number_buffer_is_a_mask(tmp_path):
    (site,) = found_sites(SINGLE)
    assert site.reason == "" and site.mask == "causal"
    eager, fixed = fixed_modules(tmp_path, SINGLE, "buffered", 1)
    torch.manual_seed(0)
    a, b = eager.CausalSelfAttention(16, 4, 8), fixed.CausalSelfAttention(16, 4, 8)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 8, 16, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    out_a, out_b = a(x), b(y)
    torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-4)
    out_a.sum().backward()
    out_b.sum().backward()
    torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-4)


def test_the_gpt2_form():
    (site,) = found_sites(GPT2)
    assert "laid out alike only where `forward` calls `_attn`" in site.reason


def test_look_alikes_stay_quiet():
    for old, new in (
        ("torch.tensor(-1e4)", "torch.tensor(0.0)"),
        ("self.attn_dropout = nn.Dropout(0.1)", "self.attn_dropout = nn.Dropout(0.1)\n        self.masked_bias = torch.zeros(())"),
        ('self.register_buffer("masked_bias", torch.tensor(-1e4))', 'self.register_buffer("masked_bias", torch.full((1,), -1e4))'),
    ):
        assert old in GPT2
        assert found_sites(GPT2.replace(old, new)) == [], new
