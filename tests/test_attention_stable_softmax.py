"""TML601 with a softmax written out with an epsilon in its sum, the "stable softmax" real code
writes (lumenspark's ``exp(x - max) / (sum + 1e-6)``, in a helper method or inline): still a
softmax over the key axis, so still eager attention, reported without a fix (SDPA's softmax adds
nothing to its sum, so its result would differ). Look-alikes stay quiet: a sum plus 1 (an extra
zero logit, not a softmax), an epsilon subtracted, an epsilon added twice.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``
(``fix=none``: a finding without a fix)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = '''
    import math
    import torch
    from torch import nn


    class SelfAttention(nn.Module):
        def __init__(self, dim, heads=4):
            super().__init__()
            self.h = heads
            self.qkv = nn.Linear(dim, dim * 3)
            self.drop = nn.Dropout(0.1)
            self.out = nn.Linear(dim, dim)
'''


def _case(softmax: str, mark: str) -> str:
    return HEAD + '''
        def forward(self, x, mask=None):
            b, n, d = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // self.h)
            if mask is not None:
                scores = scores.masked_fill(mask == 0, float("-inf"))
    ''' + softmax + '''
            weights = self.drop(weights)
            out = torch.matmul(weights, v)%s
            return self.out(out.transpose(1, 2).reshape(b, n, d))
    ''' % mark


CASES: Dict[str, str] = {
    "helper_method": HEAD + '''
        def stable_softmax(self, x, dim=-1):
            x_max = torch.max(x, dim=dim, keepdim=True)[0]
            e = torch.exp(x - x_max)
            return e / (torch.sum(e, dim=dim, keepdim=True) + 1e-6)

        def forward(self, x):
            b, n, d = x.shape
            q, k, v = self.qkv(x).view(b, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d // self.h)
            weights = self.stable_softmax(scores)
            weights = self.drop(weights)
            out = torch.matmul(weights, v)  # expect: TML601 fix=none
            return self.out(out.transpose(1, 2).reshape(b, n, d))
    ''',
    "inline": _case('''
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            weights = e / (e.sum(-1, keepdim=True) + 1e-9)
    ''', "  # expect: TML601 fix=none"),
    "inline_no_epsilon": _case('''
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            weights = e / e.sum(-1, keepdim=True)
    ''', "  # expect: TML601"),
    "plus_one": _case('''
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            weights = e / (e.sum(-1, keepdim=True) + 1)
    ''', ""),
    "epsilon_subtracted": _case('''
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            weights = e / (e.sum(-1, keepdim=True) - 1e-6)
    ''', ""),
    "epsilon_twice": _case('''
            e = (scores - scores.amax(-1, keepdim=True)).exp()
            weights = e / (e.sum(-1, keepdim=True) + 1e-6 + 1e-6)
    ''', ""),
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("stable_softmax"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_the_marked_ones(found, name):
    for row, expected in marked_fixes(CASES[name]).items():
        assert fix_at(found[name], row) == expected, (name, row)
