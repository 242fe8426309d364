"""TML601 where the product with the values is written twice, in a ``try`` and in its
``except`` (YOLOv7's Swin heads: ``try: x = (attn @ v)...`` / ``except: x = (attn.half() @
v)...``): the handler's product runs only when the body's raised, so the weights are not read
elsewhere; one finding, at the ``try``'s product, without a fix (the fix would write one of
the two).

Look-alikes stay quiet: the weights also multiplied after the ``try`` statement (both run),
and a ``try`` whose ``finally`` reads the weights.
"""

from __future__ import annotations

import libcst as cst

from attention_cases import found_sites

TWINS = '''
import torch.nn as nn


class WindowAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(0.1)
        self.softmax = nn.Softmax(dim=-1)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = self.softmax(attn)
        attn = self.attn_drop(attn)
        try:
            x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        except:
            x = (attn.half() @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)
'''

BOTH_RUN = TWINS.replace(
    "        return self.proj(x)\n",
    "        y = (attn @ v).transpose(1, 2).reshape(B_, N, C)\n        return self.proj(x) + y\n",
)

FINALLY = TWINS.replace(
    "        return self.proj(x)\n",
    "        return self.proj(x)\n",
).replace(
    "            x = (attn.half() @ v).transpose(1, 2).reshape(B_, N, C)\n",
    "            x = (attn.half() @ v).transpose(1, 2).reshape(B_, N, C)\n        finally:\n            self.kept = attn\n",
)


def test_a_try_and_its_except_are_one_attention():
    (site,) = found_sites(TWINS)
    assert "a `try` and its `except`" in site.reason
    assert cst.Module([]).code_for_node(site.product) == "(attn @ v)"  # the try's, not the except's


def test_products_that_both_run_or_a_kept_weight_stay_quiet():
    assert BOTH_RUN != TWINS and FINALLY != TWINS
    assert found_sites(BOTH_RUN) == []
    assert found_sites(FINALLY) == []
