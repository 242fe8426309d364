"""TML601 where the scores feed ``torch.zeros_like`` (and the other ``*_like`` constructors):
a fresh tensor of their layout, which reads none of their values, so the scores are not read
elsewhere and the eager attention stays reported. The form of an LLM library's override of its
base class's SDPA method (reduced and rewritten): the bias is the causal mask, the caller's mask
or ``torch.zeros_like(attn_weights)``, added to the scores in place. Quiet look-alikes: the
scores read for their values (``torch.clone``, a function of unknown kind), returned."""

from __future__ import annotations

import textwrap

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

BLOCK = '''
import math

import torch
import torch.nn as nn


class LlamaBlock(nn.Module):
    def _scaled_dot_product_attention(self, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False):
        attn_weights = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if is_causal:
            attn_bias = causal_bias(k.shape[-2], q.device)
        elif attn_mask is not None:
            attn_bias = attn_mask.to(q.dtype)
        else:
            attn_bias = {reader}(attn_weights)
        attn_weights += attn_bias
        attn_weights = nn.functional.softmax(attn_weights, dim=-1).to(q.dtype)
        attn_weights = nn.functional.dropout(attn_weights, p=dropout_p)
        return torch.matmul(attn_weights, v)
'''


def _rows(source: str):
    return [f.location.row for f in lint_source(textwrap.dedent(source), "case.py", Settings(select=("TML601",)))]


@pytest.mark.parametrize("reader", ["torch.zeros_like", "torch.ones_like", "torch.empty_like"])
def test_a_fresh_tensor_of_the_scores_layout_reads_none_of_them(reader):
    source = BLOCK.format(reader=reader)
    row = next(at for at, line in enumerate(textwrap.dedent(source).splitlines(), 1) if "return torch.matmul" in line)
    assert _rows(source) == [row]


@pytest.mark.parametrize("reader", ["torch.clone", "causal_bias", "torch.tanh"])
def test_a_read_of_the_scores_values_keeps_it_quiet(reader):
    assert _rows(BLOCK.format(reader=reader)) == []
