"""TML601 where the scores are also read in another arm of an ``if`` than the softmax and the
product with v: ``if self.use_global: s2 = torch.cat((s, q @ g.transpose(-2, -1)), -1)`` ...
``else: w = softmax(s)`` ... ``w @ v`` (Earthformer's cuboid attention). That read never runs
with this attention, so its weights are not kept there; reported without a fix (the fix would
remove the scores the other arm reads; ``analysis/attention.py``: ``_apart``).

Look-alikes stay quiet: the weights also returned in the same arm as the softmax, the scores
read after the ``if`` (on both arms' ways).
"""

from __future__ import annotations

from attention_cases import found_sites

ARMS = '''
import torch
import torch.nn as nn


class CuboidAttention(nn.Module):
    def __init__(self, dim, heads, use_global=False):
        super().__init__()
        self.heads = heads
        self.use_global = use_global
        self.qkv = nn.Linear(dim, 3 * dim)
        self.scale = (dim // heads) ** -0.5

    def forward(self, x, g):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q * self.scale) @ k.transpose(-2, -1)
        if self.use_global:
            joint = torch.cat((scores, q @ g.transpose(-2, -1)), dim=-1)
            out = joint.softmax(dim=-1) @ torch.cat((v, g), dim=2)
        else:
            weights = scores.softmax(dim=-1)
            out = weights @ v
        return out.transpose(1, 2).reshape(B, N, C)
'''


def test_a_read_in_the_other_arm():
    sites = found_sites(ARMS)
    local = [s for s in sites if getattr(getattr(s.product, "left", None), "value", "") == "weights"]
    assert len(local) == 1, sites
    assert local[0].reason.startswith("the scores are also read in another arm of an `if`"), local[0].reason


def test_reads_that_run_with_it_stay_quiet():
    returned = ARMS.replace("            out = weights @ v\n", "            out = weights @ v\n            return out, weights\n")
    after = ARMS.replace("        return out.transpose(1, 2).reshape(B, N, C)", "        return out.transpose(1, 2).reshape(B, N, C), scores.amax(-1)")
    for source in (returned, after):
        assert not any(getattr(getattr(s.product, "left", None), "value", "") == "weights" for s in found_sites(source))
