"""TML601 where the weights are multiplied with the values in either arm of an ``if`` (a
precision switch: ``if use_bf16: out = einsum(attn, v.float())`` / ``else: out = einsum(attn,
v)``; the eighteenth held-out set's grouped-query attention): the two products never run
together, so neither is an escape of the weights for the other. One finding, at the first arm's
product, without a fix (the fix writes one arm).

Look-alikes stay quiet: the other arm returns the weights, stores them, or multiplies them with
something over the query axis (not the values over the keys); an ``if`` without ``else`` whose
body multiplies the weights a second time runs both products together.
"""

from __future__ import annotations

import pytest

from attention_cases import found_sites, run_cli

GROUPED = '''
import torch
from torch import nn
from einops import einsum


class Attention(nn.Module):
    def __init__(self, dim, heads=8, groups=2, dim_head=64):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.to_qkv = nn.Linear(dim, dim_head * (heads * groups + 2), bias=False)
        self.to_out = nn.Linear(dim_head * heads * groups, dim)

    def forward(self, q, k, v, use_bf16=False):
        if use_bf16:
            sim = einsum(q.float(), k.float(), 'b g h i d, b h j d -> b g h i j')
        else:
            sim = einsum(q, k, 'b g h i d, b h j d -> b g h i j')
        sim = sim * self.scale
        attn = sim.softmax(dim=-1)
        if use_bf16:
            out = einsum(attn, v.float(), 'b g h i j, b h j d -> b g h i d')
            out = out.to(torch.bfloat16)
        else:
            out = einsum(attn, v, 'b g h i j, b h j d -> b g h i d')
        return out
'''

MATMUL = '''
import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def __init__(self, dim, heads=8):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.upcast = False

    def forward(self, q, k, v):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = F.softmax(scores, dim=-1)
        if q.dtype == torch.float16:
            context = torch.matmul(weights.float(), v.float()).to(v.dtype)
        else:
            context = weights @ v
        return context
'''

# the weights handed out in the other arm, or not weighing v over the keys
QUIET = {
    "returned": MATMUL.replace(
        "            context = torch.matmul(weights.float(), v.float()).to(v.dtype)\n",
        "            return weights\n",
    ),
    "stored": MATMUL.replace(
        "            context = torch.matmul(weights.float(), v.float()).to(v.dtype)\n",
        "            self.last = weights\n            context = weights @ v\n",
    ),
    "over the queries": MATMUL.replace(
        "torch.matmul(weights.float(), v.float())",
        "torch.matmul(weights.transpose(-2, -1), q)",
    ),
    "both run": MATMUL.replace(
        "        else:\n            context = weights @ v\n",
        "        context = weights @ v\n",
    ).replace(
        "context = torch.matmul(weights.float(), v.float()).to(v.dtype)",
        "self.extra = torch.matmul(weights.float(), v.float())",
    ),
}


@pytest.mark.parametrize("source", [GROUPED, MATMUL], ids=["einsum arms", "matmul arms"])
def test_a_product_in_each_arm_is_one_attention_without_a_fix(source):
    (site,) = found_sites(source)
    assert not site.fixable, site.reason


def test_the_reason_names_the_two_arms_when_it_is_the_only_one():
    source = MATMUL.replace("torch.matmul(weights.float(), v.float()).to(v.dtype)", "torch.matmul(weights, v)")
    assert source != MATMUL
    (site,) = found_sites(source)
    assert "two arms" in site.reason, site.reason


@pytest.mark.parametrize("name", sorted(QUIET))
def test_weights_handed_out_or_used_otherwise_in_the_other_arm_stay_quiet(name):
    source = QUIET[name]
    assert source != MATMUL
    assert found_sites(source) == []


@pytest.mark.slow
def test_the_cli_reports_it_once_at_the_first_arm_and_fix_leaves_it(tmp_path):
    path = tmp_path / "grouped.py"
    path.write_text(GROUPED)
    result = run_cli("--no-cache", "--select", "TML601", "--fix", "--unsafe-fixes", "--output-format", "concise", str(path))
    assert path.read_text() == GROUPED
    rows = [line.split(":")[1] for line in result.stdout.splitlines() if "TML601" in line]
    first = GROUPED.splitlines().index("            out = einsum(attn, v.float(), 'b g h i j, b h j d -> b g h i d')") + 1
    assert rows == [str(first)], result.stdout
