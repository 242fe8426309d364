"""TML601 in a file with a star import (``from typing import *``, ``from torch.nn import *``):
the names the file binds itself in its functions (``q``, ``k``, ``wei``, ``self``) are its own,
not the star module's (``Bindings.keep_locals_from_star``). Measured miss on a held-out set:
atai's nanoGPT ``Head`` (``wei = q @ k.transpose(-2, -1) * C**-0.5``, softmax, dropout,
``wei @ v``) went unreported because its file starts ``from typing import *``, which made
``k.transpose`` read as ``typing.k.transpose``. A name the star module does give stays its
(``softmax`` from ``from torch import *``)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "typing_star": '''
        from typing import *
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, n_embd, head_size, dropout):
                super().__init__()
                self.key = nn.Linear(n_embd, head_size, bias=False)
                self.query = nn.Linear(n_embd, head_size, bias=False)
                self.value = nn.Linear(n_embd, head_size, bias=False)
                self.dropout = nn.Dropout(dropout)

            def forward(self, x):
                B, T, C = x.shape
                k = self.key(x)
                q = self.query(x)
                wei = q @ k.transpose(-2, -1) * C ** (-0.5)
                wei = F.softmax(wei, dim=-1)
                wei = self.dropout(wei)
                v = self.value(x)
                out = wei @ v  # expect: TML601
                return out
    ''',
    "torch_nn_star": '''
        from torch.nn import *
        import torch


        class Attention(Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = Linear(dim, 3 * dim)
                self.attend = Softmax(dim=-1)

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                scores = torch.matmul(q, k.transpose(-1, -2)) / q.shape[-1] ** 0.5
                return torch.matmul(self.attend(scores), v)  # expect: TML601
    ''',
    "torch_star_softmax": '''
        from torch import *
        import torch.nn as nn


        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.q = nn.Linear(dim, dim)
                self.k = nn.Linear(dim, dim)
                self.v = nn.Linear(dim, dim)

            def forward(self, x):
                q, k, v = self.q(x), self.k(x), self.v(x)
                return softmax(q @ k.transpose(-2, -1), dim=-1) @ v  # expect: TML601
    ''',
    # a look-alike: the weights are returned, as the user wants them
    "typing_star_weights_returned": '''
        from typing import *
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.key = nn.Linear(dim, dim)
                self.query = nn.Linear(dim, dim)
                self.value = nn.Linear(dim, dim)

            def forward(self, x) -> Tuple[object, object]:
                wei = F.softmax(self.query(x) @ self.key(x).transpose(-2, -1), dim=-1)
                return wei @ self.value(x), wei
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("attention_star"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
