"""TML601 with a softmax written without ``dim`` (code of torch 0.3 and earlier, still run
today with a warning): torch picks the axis from the input's rank (``_get_softmax_dim``: 1 for
2-D and 4-D input, 0 for 1-D and 3-D), and so does the value graph
(``axes.implicit_softmax_dim``). 2-D scores (``torch.mm(q, k.t())``) are softmaxed over their
key axis: an attention, reported. 3-D scores (``bmm``) are softmaxed over the batch and 4-D ones
over the heads: no attention of the kind SDPA computes, quiet; so is a rank the graph does not
know."""

from __future__ import annotations

import textwrap
from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "two_d_scores": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class TokenPool(nn.Module):
            def __init__(self, d):
                super(TokenPool, self).__init__()
                self.q = nn.Linear(d, d)
                self.k = nn.Linear(d, d)

            def forward(self, x):
                q, k = self.q(x), self.k(x)
                scores = torch.mm(q, k.t())
                attn = F.softmax(scores)
                return torch.mm(attn, x)  # expect: TML601
    ''',
    "two_d_scores_module_softmax": '''
        import torch
        import torch.nn as nn


        class TokenPool(nn.Module):
            def __init__(self, d):
                super(TokenPool, self).__init__()
                self.q = nn.Linear(d, d)
                self.softmax = nn.Softmax()

            def forward(self, x):
                scores = torch.mm(self.q(x), x.t())
                return torch.mm(self.softmax(scores), x)  # expect: TML601
    ''',
    "quiet_three_d_scores_over_the_batch": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Batched(nn.Module):
            def __init__(self, d):
                super(Batched, self).__init__()
                self.q = nn.Linear(d, d)

            def forward(self, x):
                scores = torch.bmm(self.q(x), x.transpose(1, 2))
                attn = F.softmax(scores)
                return torch.bmm(attn, x)
    ''',
    "quiet_four_d_scores_over_the_heads": '''
        import torch.nn as nn


        class Heads(nn.Module):
            def __init__(self, d):
                super(Heads, self).__init__()
                self.q = nn.Linear(d, d)
                self.softmax = nn.Softmax()

            def forward(self, x):
                q = self.q(x).view(2, 3, 4, 5)
                scores = q @ q.transpose(-1, -2)
                return self.softmax(scores) @ q
    ''',
    "quiet_rank_unknown": '''
        import torch.nn.functional as F


        def attend(q, k, v):
            return F.softmax(q @ k.transpose(-2, -1)) @ v
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("implicit_dim"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_torch_picks_the_axes_the_graph_assumes():
    """The legacy choice the graph copies, checked against torch itself where it is installed."""
    torch = pytest.importorskip("torch")
    import warnings

    from torchmemlint.analysis.axes import implicit_softmax_dim

    for rank in (1, 2, 3, 4):
        x = torch.randn(*([3] * rank))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            implicit = torch.nn.functional.softmax(x)
        expected = next(d for d in range(rank) if torch.equal(implicit, torch.softmax(x, dim=d)))
        assert implicit_softmax_dim(rank) == expected
