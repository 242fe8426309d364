"""TML601 where the keys (or the queries) go through pointwise functions before the scores:
AutoBERT's searched attentions build ``matmul(q, -F.logsigmoid(-k).transpose(-1, -2))``,
``torch.sigmoid(k)``, ``k.abs()`` keys, and may use the queries as the values. A pointwise step
keeps the tensor's axes (``compound.UNARY``; unary minus), so the
contraction is still q·k over the features, and SDPA takes the transformed keys as they are: the
fix passes them (numerics checked below).

Quiet: linear attention with pointwise feature maps and a softmax over the features
(``k.softmax(dim=-2)``, then ``kᵀ @ v``: the weights are features × features), and a sigmoid gate
in place of the softmax."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict

import pytest
import torch

from attention_cases import fixed_modules
from marked_cases import Found, lint_cases, marked

CASES: Dict[str, str] = {
    "pointwise_keys": '''
        import math

        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class SearchedAttention(nn.Module):
            def __init__(self, dim=32, heads=4):
                super().__init__()
                self.heads, self.head_dim = heads, dim // heads
                self.query = nn.Linear(dim, dim)
                self.key = nn.Linear(dim, dim)
                self.value = nn.Linear(dim, dim)
                self.dropout = nn.Dropout(0.0)

            def split(self, x):
                x = x.view(*x.size()[:-1], self.heads, self.head_dim)
                return x.permute(0, 2, 1, 3)

            def forward(self, hidden_states, attention_mask):
                q = self.split(self.query(hidden_states))
                k = self.split(self.key(hidden_states))
                v = self.split(self.value(hidden_states))
                scores = torch.matmul(q, -F.logsigmoid(-k).transpose(-1, -2))
                scores = scores / math.sqrt(self.head_dim)
                scores = scores + attention_mask
                probs = nn.Softmax(dim=-1)(scores)
                probs = self.dropout(probs)
                out = torch.matmul(probs, v)  # expect: TML601 fix=unsafe
                out = out.permute(0, 2, 1, 3).contiguous()
                return out.view(*out.size()[:-2], self.heads * self.head_dim)


        def sigmoid_keys(q, k, v):
            w = torch.softmax(q @ torch.sigmoid(k).transpose(-1, -2) * q.shape[-1] ** -0.5, dim=-1)
            return w @ v  # expect: TML601


        def abs_keys_query_values(q, k):
            w = (q @ k.abs().transpose(-2, -1)).softmax(dim=-1)
            return w @ q  # expect: TML601
    ''',
    "look_alikes": '''
        import torch
        import torch.nn.functional as F


        def efficient_attention(q, k, v):
            q = F.elu(q) + 1
            k = (F.elu(k) + 1).softmax(dim=-2)
            context = k.transpose(-2, -1) @ v
            return q.softmax(dim=-1) @ context


        def sigmoid_gate(q, k, v):
            w = torch.sigmoid(q @ torch.sigmoid(k).transpose(-1, -2))
            return w @ v
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("attention_pointwise_keys"), CASES, "TML601")


@pytest.mark.slow  # starts the CLI
@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.slow  # starts the CLI
def test_the_fix_gives_the_same_outputs_and_gradients(tmp_path: Path):
    eager, fixed = fixed_modules(tmp_path, textwrap.dedent(CASES["pointwise_keys"]), "pointwise", 3)
    torch.manual_seed(0)
    a, b = eager.SearchedAttention(), fixed.SearchedAttention()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 5, 32)
    mask = torch.zeros(2, 1, 1, 5)
    mask[1, ..., -2:] = -10000.0
    out_a, out_b = a(x, mask), b(x, mask)
    torch.testing.assert_close(out_b, out_a, atol=1e-6, rtol=1e-5)
    weights = torch.linspace(-1, 1, out_a.numel()).reshape(out_a.shape)
    (out_a * weights).sum().backward()
    (out_b * weights).sum().backward()
    for p_a, p_b in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p_b.grad, p_a.grad, atol=1e-6, rtol=1e-5)
