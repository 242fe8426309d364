"""TML601 where a statement calls a method of the scores and drops its result (TTS-GAN's
``energy.mask_fill(~mask, fill_value)``, a misspelt ``masked_fill`` whose result nothing takes):
a method without the trailing ``_`` of an in-place one changes nothing, so the scores are not
read elsewhere (``analysis/unread.py``: ``_discarded``). Reported without a fix: the statement
stays, and the fix would leave it reading a name it removes.

Look-alikes stay quiet: a method that acts on the scores all the same (``register_hook``,
``retain_grad``), and a dropped call that is not a method of the scores (``log(energy)``).
"""

from __future__ import annotations

from attention_cases import found_sites

DROPPED = '''
import torch
import torch.nn.functional as F
from einops import rearrange
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, emb_size, num_heads, dropout):
        super().__init__()
        self.num_heads = num_heads
        self.emb_size = emb_size
        self.keys = nn.Linear(emb_size, emb_size)
        self.queries = nn.Linear(emb_size, emb_size)
        self.values = nn.Linear(emb_size, emb_size)
        self.att_drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        queries = rearrange(self.queries(x), "b n (h d) -> b h n d", h=self.num_heads)
        keys = rearrange(self.keys(x), "b n (h d) -> b h n d", h=self.num_heads)
        values = rearrange(self.values(x), "b n (h d) -> b h n d", h=self.num_heads)
        energy = torch.einsum('bhqd, bhkd -> bhqk', queries, keys)
        if mask is not None:
            energy.mask_fill(~mask, torch.finfo(torch.float32).min)
        att = F.softmax(energy / self.emb_size ** 0.5, dim=-1)
        att = self.att_drop(att)
        out = torch.einsum('bhal, bhlv -> bhav ', att, values)
        return rearrange(out, "b h n d -> b n (h d)")
'''


def _variant(statement: str) -> str:
    return DROPPED.replace("energy.mask_fill(~mask, torch.finfo(torch.float32).min)", statement)


def test_a_dropped_method_result_is_no_read():
    (site,) = found_sites(DROPPED)
    assert site.reason  # the statement stays: no fix


def test_look_alikes_stay_quiet():
    for statement in ("energy.register_hook(print)", "energy.retain_grad()", "log(energy)"):
        assert found_sites(_variant(statement)) == [], statement
