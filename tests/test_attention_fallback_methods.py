"""TML601 on an eager attention written as a method of its own, run only as the fallback of an
SDPA switch (the twentieth held-out set: seed-vc's ``eq_scaled_dot_product_attention`` under
``if self.use_sdpa: ... else:``, chatterbox's ``AttentionQKV.scaled_dot_product_attention``
under ``if self.flash:``): where every call of the method in the file is the eager arm of an
``if`` whose other arm calls ``F.scaled_dot_product_attention`` on a path that runs by default,
the method is left alone, as the same code written inline in that arm is.

Look-alikes stay reported: the method also called outside the switch, and a switch off by
default that nothing turns on.
"""

from __future__ import annotations

import pytest

from attention_cases import found_sites

SWITCHED = '''
import math

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads=8, use_sdpa=True):
        super().__init__()
        self.heads = heads
        self.use_sdpa = use_sdpa
        self.qkv = nn.Linear(dim, dim * 3)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        b, n, _ = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.use_sdpa:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            y = self.eager_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, n, -1))

    def eager_attention(self, query, key, value, attn_mask=None):
        scale = 1 / math.sqrt(query.size(-1))
        weight = query @ key.transpose(-2, -1) * scale
        if attn_mask is not None:
            weight = weight + attn_mask
        weight = torch.softmax(weight, dim=-1)
        return weight @ value


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attention = Attention(dim, use_sdpa=True)

    def forward(self, x):
        return x + self.attention(x)
'''

REPORTED = {
    "also called outside the switch": SWITCHED.replace(
        "        return self.out(y.transpose(1, 2).reshape(b, n, -1))\n",
        "        return self.out(y.transpose(1, 2).reshape(b, n, -1))\n\n"
        "    def forward_eager(self, q, k, v):\n"
        "        return self.eager_attention(q, k, v)\n",
    ),
    "switch off by default": SWITCHED.replace("use_sdpa=True):", "use_sdpa=False):").replace(
        "Attention(dim, use_sdpa=True)", "Attention(dim)"
    ),
}


def test_an_eager_method_run_only_as_the_sdpa_switch_fallback_is_left_alone():
    assert found_sites(SWITCHED) == []


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_method_run_otherwise_is_reported(name):
    source = REPORTED[name]
    assert source != SWITCHED
    (site,) = found_sites(source)
    assert site.product is not None
