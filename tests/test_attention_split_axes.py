"""TML601 through an ``einops.rearrange`` that splits an axis of the scores and another that
merges the parts back (Swin's window attention with a shifted-window mask: ``sim =
rearrange(sim, '(b nw) nh n1 n2 -> b nw nh n1 n2', nw=...)``, ``sim = sim + mask``, ``sim =
rearrange(sim, 'b nw nh n1 n2 -> (b nw) nh n1 n2')``; measured misses on a held-out set). The
value graph gives a split axis's parts their own identity (``axes.PartAxis``) and all of them
merged back, in order, the axis they came from; so the masked scores keep the query and key
axes and the join of the two arms of ``if mask is not None`` keeps them too. Reported without
a fix (the scores are reshaped before the softmax).

Also reported: the windows merged back in the other order (``(nw b)``: only the batch axis is
then unknown). Quiet: the keys split and merged back in another order (the weights no longer
line up with ``v``)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes, fix_at

pytestmark = pytest.mark.slow  # starts the CLI


def window_attention(split: str, merge: str, mark: str) -> str:
    return '''
    import torch
    import torch.nn as nn
    from einops import rearrange
    from torch import einsum


    class WindowAttention(nn.Module):
        def __init__(self, dim, window_size, num_heads, attn_drop=0.0):
            super().__init__()
            self.num_heads = num_heads
            self.ws = window_size
            self.scale = (dim // num_heads) ** -0.5
            self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
            self.bias = nn.Parameter(torch.zeros(num_heads, window_size * window_size, window_size * window_size))
            self.drop = nn.Dropout(attn_drop)
            self.to_out = nn.Linear(dim, dim)

        def forward(self, x, mask=None):
            q, k, v = self.to_qkv(x).chunk(3, dim=-1)
            q, k, v = map(lambda t: rearrange(t, "b n (nh d) -> b nh n d", nh=self.num_heads), (q, k, v))
            q = q * self.scale
            sim = einsum("b h i d, b h j d -> b h i j", q, k)
            sim = sim + self.bias.unsqueeze(0)
            if mask is not None:
                sim = rearrange(sim, "SPLIT", nw=mask.shape[0])
                mask = rearrange(mask, "nw ws1 ws2 -> 1 nw 1 ws1 ws2")
                sim = sim + mask
                sim = rearrange(sim, "MERGE")
            attn = sim.softmax(dim=-1)
            attn = self.drop(attn)
            out = einsum("b h i j, b h j d -> b h i d", attn, v)MARK
            out = rearrange(out, "b nh n d -> b n (nh d)")
            return self.to_out(out)
    '''.replace("SPLIT", split).replace("MERGE", merge).replace("MARK", mark)


CASES: Dict[str, str] = {
    "swin_window_mask": window_attention(
        "(b nw) nh n1 n2 -> b nw nh n1 n2", "b nw nh n1 n2 -> (b nw) nh n1 n2", "  # expect: TML601 fix=none"
    ),
    # the windows merged in the other order: still the same keys, only the batch axis unknown
    "windows_merged_the_other_way": window_attention(
        "(b nw) nh n1 n2 -> b nw nh n1 n2", "b nw nh n1 n2 -> (nw b) nh n1 n2", "  # expect: TML601 fix=none"
    ),
    # look-alike: the keys permuted
    "keys_merged_in_another_order": window_attention(
        "b nh n1 (x y) -> b nh n1 x y", "b nh n1 x y -> b nh n1 (y x)", ""
    ),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("split_axes"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", ["swin_window_mask", "windows_merged_the_other_way"])
def test_reported_without_a_fix(findings, name):
    assert all(fix_at(findings[name], row) == fix for row, fix in marked_fixes(CASES[name]).items())
