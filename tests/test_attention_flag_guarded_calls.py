"""TML601: a call that turns a module's flag on only inside the caller's own flag off by default
(``flags._behind_flag``) does not turn it on by default:

    class Layer(nn.Module):
        def forward(self, x, return_attn=False):
            if return_attn:
                out, attn = self.attn(x, return_attn=True)   # only when the caller asks
                return out, attn
            out, _ = self.attn(x)
            return out

The attention's weights, returned only under ``return_attn``, are then not kept by default:
reported without a fix. Look-alikes stay quiet: the call made unconditionally, or under a test
that is not such a flag (``if self.training:``), or under the caller's flag on by default.
"""

from __future__ import annotations

from attention_cases import found_sites

GUARDED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, attn_mask=None, return_attn: bool = False):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn_scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        if attn_mask is not None:
            attn_scores = attn_scores.masked_fill(~attn_mask, float("-inf"))
        attn = self.drop(F.softmax(attn_scores, dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        if return_attn:
            return out, attn
        return out, None


class Layer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.gene_attn = MultiHeadAttention(dim, heads)

    def forward(self, x, mask=None, return_attn: bool = False):
        if return_attn:
            out, attn = self.gene_attn(x, attn_mask=mask, return_attn=True)
            return x + out, attn
        out, _ = self.gene_attn(x, attn_mask=mask)
        return x + out
'''


def test_a_flag_turned_on_only_behind_the_callers_own_flag_is_off():
    (site,) = found_sites(GUARDED)
    assert site.function.name.value == "forward" and not site.fixable


def test_look_alikes_stay_quiet():
    always = GUARDED.replace("        if return_attn:\n            out, attn = self.gene_attn(", "        if True:\n            out, attn = self.gene_attn(")
    training = GUARDED.replace("        if return_attn:\n            out, attn = self.gene_attn(", "        if self.training:\n            out, attn = self.gene_attn(")
    on_by_default = GUARDED.replace("def forward(self, x, mask=None, return_attn: bool = False):", "def forward(self, x, mask=None, return_attn: bool = True):")
    for source in (always, training, on_by_default):
        assert source != GUARDED and found_sites(source) == [], source
