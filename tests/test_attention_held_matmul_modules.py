"""TML601 where the contractions are modules of the file held as attributes, whose constructor
flags decide what their ``forward`` does and whose input is a list: torch-dag's
``self.attention_matmul = TfMatmulModule(transpose=True, normalize=True)`` called as
``self.attention_matmul([x_q, x_k])`` (``forward`` unpacks ``x, y = x``, permutes ``y`` when
``self.transpose``, scales when ``self.normalize``), then an ``nn.Softmax`` attribute, dropout
and ``self.final_matmul([qk, x_v])`` (``transpose=False``). The value graph runs each held
forward (also with one argument) knowing the flags its constructor set
(``attribute_calls.constructor_flags``), and a list handed only to the helper that makes the
product is not another reader of the weights (``attention._Question._into_product_helper``).
Reported without a fix: SDPA cannot run the modules.

Quiet: the weights also returned, the weights also kept in a list of the module, and a held
module built with ``transpose=False`` for the scores (``q @ k`` over the wrong axes: no key
axis for the softmax).
"""

from __future__ import annotations

import pytest

from marked_cases import fix_at, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEADER = '''
from typing import List

import torch


class TfMatmulModule(torch.nn.Module):
    def __init__(self, transpose: bool, normalize: bool = True):
        super().__init__()
        self.transpose = transpose
        self.normalize = normalize

    def forward(self, x: List[torch.Tensor]) -> torch.Tensor:
        x, y = x
        dim = x.shape[-1]
        if self.transpose:
            y = torch.permute(y, (0, 2, 1))
        output = torch.matmul(x, y)
        if self.normalize:
            output /= torch.sqrt(torch.tensor(dim).to(torch.float32))
        return output


class PairMatmul(torch.nn.Module):
    def __init__(self, transpose=False):
        super().__init__()
        self.transpose = transpose

    def forward(self, x, y):
        if not self.transpose:
            return x @ y
        return x @ y.permute(0, 2, 1)


class Heads(torch.nn.Module):
    def __init__(self, dim, num_heads, scores_transposed=True):
        super().__init__()
        self.num_heads = num_heads
        self.q = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.k = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.v = torch.nn.ModuleList([torch.nn.Linear(dim, dim // num_heads) for _ in range(num_heads)])
        self.attention_matmul = TfMatmulModule(transpose=TRANSPOSED, normalize=True)
        self.final_matmul = TfMatmulModule(transpose=False, normalize=False)
        self.pair_scores = PairMatmul(transpose=True)
        self.pair_values = PairMatmul()
        self.softmax = torch.nn.Softmax(dim=-1)
        self.attn_drop = torch.nn.Dropout(0.1)
        self.kept = []
'''

LISTED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        carriers = []
        for k in range(self.num_heads):
            x_q, x_k, x_v = self.q[k](x), self.k[k](x), self.v[k](x)
            qk = self.attention_matmul([x_q, x_k])  # expect: TML601
            qk = self.softmax(qk)
            qk = self.attn_drop(qk)
            qkv = self.final_matmul([qk, x_v])
            carriers.append(qkv)
        return torch.cat(carriers, dim=-1)
'''

PAIRED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.pair_scores(x_q, x_k))
        return self.pair_values(self.attn_drop(qk), x_v)  # expect: TML601
'''

RETURNED = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.attention_matmul([x_q, x_k]))
        return self.final_matmul([qk, x_v]), qk
'''

KEPT = HEADER.replace("TRANSPOSED", "True") + '''
    def forward(self, x):
        x_q, x_k, x_v = self.q[0](x), self.k[0](x), self.v[0](x)
        qk = self.softmax(self.attention_matmul([x_q, x_k]))
        pair = [qk, x_v]
        self.kept.append(pair)
        return self.final_matmul(pair)
'''

UNTRANSPOSED = LISTED.replace("TRANSPOSED", "False").replace("  # expect: TML601", "").replace(
    "self.attention_matmul = TfMatmulModule(transpose=True", "self.attention_matmul = TfMatmulModule(transpose=False"
)

CASES = {"listed": LISTED, "paired": PAIRED, "returned": RETURNED, "kept": KEPT, "untransposed": UNTRANSPOSED}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("held_matmuls"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name]), findings[name]


@pytest.mark.parametrize("name", ["listed", "paired"])
def test_reported_without_a_fix(findings, name):
    (row, _), = findings[name]
    assert fix_at(findings[name], row) is None
