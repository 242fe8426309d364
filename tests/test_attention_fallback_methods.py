"""TML601 on an eager attention written as a method of its own, run only as the fallback of an
SDPA switch (the twentieth held-out set: seed-vc's ``eq_scaled_dot_product_attention`` under
``if self.use_sdpa: ... else:``, chatterbox's ``AttentionQKV.scaled_dot_product_attention``
under ``if self.flash:``): where every call of the method in the file is the eager arm of an
``if`` whose other arm calls ``F.scaled_dot_product_attention`` on a path that runs by default,
the method is left alone, as the same code written inline in that arm is.

Look-alikes stay reported: the method also called outside the switch, a switch off by
default that nothing turns on, and a switch on by default that a construction of the file turns
off (fish-speech's ``TransformerBlock(override_config, use_sdpa=False)`` for its fast layers,
passed down to the attention: those instances train on the eager path), also written inline.
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

# the eager arm written inline, the method gone
INLINE = (
    SWITCHED[:SWITCHED.index("    def eager_attention")].rstrip() + "\n\n\n" + SWITCHED[SWITCHED.index("class Block"):]
).replace(
    "            y = self.eager_attention(q, k, v, attn_mask=mask)\n",
    "            w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)), dim=-1)\n            y = w @ v\n",
)

LAYER = '''

class Layer(nn.Module):
    def __init__(self, dim, use_sdpa=True):
        super().__init__()
        self.attention = Attention(dim, use_sdpa=use_sdpa)

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
    "turned off by a construction": SWITCHED.replace(
        "        self.attention = Attention(dim, use_sdpa=True)\n",
        "        self.attention = Attention(dim, use_sdpa=True)\n        self.fast = Layer(dim, use_sdpa=False)\n",
    ) + LAYER,
    "turned off, inline": INLINE.replace(
        "        self.attention = Attention(dim, use_sdpa=True)\n",
        "        self.attention = Attention(dim, use_sdpa=True)\n        self.fast = Layer(dim, use_sdpa=False)\n",
    ) + LAYER,
}


@pytest.mark.parametrize("source", [SWITCHED, INLINE], ids=["method", "inline"])
def test_an_eager_attention_run_only_as_the_sdpa_switch_fallback_is_left_alone(source):
    assert found_sites(source) == []


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_the_method_run_otherwise_is_reported(name):
    source = REPORTED[name]
    assert source != SWITCHED
    (site,) = found_sites(source)
    assert site.product is not None


# Both arms in helper methods, the eager one reshaping its output three times before it is
# returned (world-machine's ``_fast_attention`` / ``_manual_attention`` under ``if self.fast:``)
BOTH_IN_METHODS = '''
import torch
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, n_head, fast=True):
        super().__init__()
        self.n_head, self.head_dim, self.embed_dim = n_head, embed_dim // n_head, embed_dim
        self.dk_root = self.head_dim ** 0.5
        self.fast = fast
        self.w0 = nn.Parameter(torch.randn(embed_dim, embed_dim))

    def forward(self, Q, K, V):
        if self.fast:
            E = self._fast_attention(Q, K, V)
        else:
            E = self._manual_attention(Q, K, V)
        return E @ self.w0.T

    def _fast_attention(self, Q, K, V):
        b, n, c = Q.shape
        Q = Q.view(b, -1, self.n_head, self.head_dim).transpose(1, 2)
        K = K.view(b, -1, self.n_head, self.head_dim).transpose(1, 2)
        V = V.view(b, -1, self.n_head, self.head_dim).transpose(1, 2)
        E = torch.nn.functional.scaled_dot_product_attention(Q, K, V, scale=1 / self.dk_root)
        return E.transpose(1, 2).reshape(b, n, c)

    def _manual_attention(self, Q, K, V):
        b, n, c = Q.shape
        Q = Q.view(b, n, self.n_head, self.head_dim).transpose(1, 2)
        K = K.view(b, n, self.n_head, self.head_dim).transpose(1, 2)
        V = V.view(b, n, self.n_head, self.head_dim).transpose(1, 2)
        scores = Q @ K.transpose(-2, -1)
        scores /= self.dk_root
        probs = torch.softmax(scores, dim=-1)
        E = probs @ V
        E = E.reshape(b, self.n_head, n, self.head_dim)
        E = E.transpose(-3, -2)
        E = E.reshape(b, n, self.embed_dim)
        return E
'''


def test_both_arms_in_methods_the_eager_one_reshaped_before_it_is_returned():
    assert found_sites(BOTH_IN_METHODS) == []
    off = BOTH_IN_METHODS.replace("fast=True", "fast=False")
    assert len(found_sites(off)) == 1  # (the eager arm is the default one)
