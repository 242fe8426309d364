"""TML601 through a layer of the file called with flags: ``self.dropout(weights, force_mc=mc)``
where ``self.dropout`` holds the file's ``MCDropout`` (``forward(self, x, force_mc: bool =
False)``: a Monte-Carlo dropout). A keyword that the layer's ``forward`` takes with a literal
default other than None is a flag, never a second tensor: the call keeps its input's axes as the
same call without the flag does, and the eager attention around it is reported (without a fix:
SDPA does not take the file's dropout).

The held layer given a keyword whose default is None (a mask: a second tensor) is no flag: its
``forward`` is run with the mask (``attribute_calls._held_module_call``), and ``x * mask`` keeps
the weights' axes, as the same product written inline does: reported, without a fix. The
weights stored beside the product stay quiet (they escape: the user wants them).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "flag_keyword": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class MCDropout(nn.Module):
            def __init__(self, p: float):
                super().__init__()
                self.p = p

            def forward(self, x: torch.Tensor, force_mc: bool = False) -> torch.Tensor:
                return F.dropout(x, p=self.p, training=self.training or force_mc)


        class CrossAttention(nn.Module):
            def __init__(self, d_model: int, n_heads: int, dropout: float):
                super().__init__()
                self.n_heads, self.head_dim = n_heads, d_model // n_heads
                self.scale = self.head_dim ** -0.5
                self.q_proj = nn.Linear(d_model, d_model)
                self.kv_proj = nn.Linear(d_model, 2 * d_model)
                self.dropout = MCDropout(dropout)

            def _split(self, x):
                b, n, _ = x.shape
                return x.view(b, n, self.n_heads, self.head_dim).transpose(1, 2)

            def forward(self, query, key_value, mc_dropout: bool = False):
                q = self._split(self.q_proj(query))
                k, v = (self._split(t) for t in self.kv_proj(key_value).chunk(2, dim=-1))
                scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
                weights = torch.softmax(scores, dim=-1)
                weights = self.dropout(weights, force_mc=mc_dropout)
                return torch.matmul(weights, v)  # expect: TML601 fix=none
    ''',
    "mask_keyword": '''
        import torch
        import torch.nn as nn


        class Masked(nn.Module):
            def forward(self, x, mask=None):
                return x if mask is None else x * mask


        class CrossAttention(nn.Module):
            def __init__(self, d_model: int):
                super().__init__()
                self.q_proj = nn.Linear(d_model, d_model)
                self.k_proj = nn.Linear(d_model, d_model)
                self.v_proj = nn.Linear(d_model, d_model)
                self.masked = Masked()

            def forward(self, query, key_value, mask):
                q, k, v = self.q_proj(query), self.k_proj(key_value), self.v_proj(key_value)
                weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)), dim=-1)
                weights = self.masked(weights, mask=mask)
                return torch.matmul(weights, v)  # expect: TML601 fix=none
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("flag_keywords"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    assert findings[name] == {key: None for key in findings[name]}  # (no fix: the file's dropout)
