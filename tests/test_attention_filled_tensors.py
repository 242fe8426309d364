"""TML601 where the scores are masked with ``torch.where`` against a tensor that holds one number
everywhere: ``torch.full_like(s, -inf)``, ``s.new_full(s.shape, -inf)``, ``torch.full(shape,
-1e9)``, ``torch.tensor(-1e9, device=d)``, ``s.new_tensor(-1e4)``, ``torch.ones_like(s) * -1e9``.
Each is that number (``analysis/compound.py``: ``_filled``), so the ``where`` is a mask fill, and
``s.new_full(...)`` reads only the dtype and device of ``s``, not its values (``values.py``:
``NEW_TENSORS``), so it does not count as another reader of the scores.

The graph attention form (a layer over the batch's samples, 2-D per head, scores weighted by an
adjacency matrix and ``nan_to_num`` after the softmax) is reported without a fix; the plain form
with a fix whose output and gradients match the eager module.

Look-alikes stay quiet: a fill with a tensor of random numbers, with a tensor of several numbers,
with one positive number (no mask), with another tensor of scores.
"""

from __future__ import annotations

import pytest
import torch

from attention_cases import fixed_modules, found_sites

GRAPH = '''
import numpy as np
import torch
import torch.nn as nn


class GraphAttention(nn.Module):
    def __init__(self, hidden, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.per_head = hidden // n_heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.softmax = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x, graph):
        Q, K, V = self.dropout(self.q(x)), self.dropout(self.k(x)), self.dropout(self.v(x))
        heads = []
        for j in range(self.n_heads):
            part = slice(j * self.per_head, (j + 1) * self.per_head)
            scores = (Q[:, part] @ torch.transpose(K[:, part], 0, 1)) / np.sqrt(self.per_head)
            scores = torch.where(graph > 0, scores * graph, FILL)
            attn = self.softmax(scores)
            attn = torch.nan_to_num(attn, nan=0.0)
            heads.append(self.dropout(attn) @ V[:, part])
        return x + torch.cat(heads, dim=1)
'''

PLAIN = '''
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x, keep):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        scores = q @ k.transpose(-2, -1) / math.sqrt(c // self.heads)
        scores = torch.where(keep, scores, FILL)
        weights = scores.softmax(dim=-1)
        return (weights @ v).transpose(1, 2).reshape(b, n, c)
'''

FILLS = (
    'torch.full_like(scores, float("-inf"))',
    'scores.new_full(scores.shape, float("-inf"))',
    "torch.full(scores.shape, -1e9)",
    "torch.tensor(-1e9, device=scores.device)",
    "scores.new_tensor(-1e4)",
    "torch.ones_like(scores) * -1e9",
    "torch.tensor(float('-inf')).to(scores.dtype)",
)


@pytest.mark.parametrize("fill", FILLS)
def test_graph_attention_masked_with_a_filled_tensor(fill):
    (site,) = found_sites(GRAPH.replace("FILL", fill))
    assert "nan_to_num" in site.reason


@pytest.mark.parametrize("fill", FILLS[:2])
def test_the_fix_is_exact(tmp_path, fill):
    source = PLAIN.replace("FILL", fill)
    (site,) = found_sites(source)
    assert site.reason == "" and site.mask == "keep"
    eager, fixed = fixed_modules(tmp_path, source, "filled", 1)
    torch.manual_seed(0)
    a, b = eager.Attention(16, 4), fixed.Attention(16, 4)
    b.load_state_dict(a.state_dict())
    keep = torch.rand(2, 4, 8, 8) > 0.3
    keep[..., 0] = True  # (every query keeps a key: no row of -inf only)
    x = torch.randn(2, 8, 16, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    out_a, out_b = a(x, keep), b(y, keep)
    torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-4)
    out_a.sum().backward()
    out_b.sum().backward()
    torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("fill", (
    "torch.randn_like(scores)",
    "torch.tensor([-1e9, 0.0])",
    "torch.full_like(scores, 0.5)",
    "torch.zeros_like(scores)",
    "scores.new_zeros(scores.shape)",
    "scores.flip(-1)",
))
def test_look_alikes_stay_quiet(fill):
    assert found_sites(PLAIN.replace("FILL", fill)) == []
    assert found_sites(GRAPH.replace("FILL", fill)) == []
