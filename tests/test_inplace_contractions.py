"""TML201 on an activation run on a contraction's result: ``torch.einsum`` (AutoInt's attention
output, reshaped), ``einops.einsum``, ``torch.tensordot``, ``baddbmm``/``addmm`` and the
``mm``/``bmm`` methods make a fresh tensor whose backward reads only the operands, so the
activation may overwrite it, as it may a Linear's output. Look-alikes stay quiet: an operand
(forward's own argument, which the caller may read again), a result also read by a residual,
and a softmax's output (its backward reads it)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "contractions": '''
        import einops
        import torch
        import torch.nn.functional as F
        from torch import nn


        class AttnInteraction(nn.Module):
            def __init__(self, d, use_residual=True):
                super().__init__()
                self.layer_norm = nn.LayerNorm(d)
                self.use_residual = use_residual

            def forward(self, alpha, vals, rsdl):
                n, f = vals.shape[:2]
                out = torch.einsum("rfdh,rfoh->rfoh", alpha, vals)
                out = out.reshape((n, f, -1))
                if self.use_residual:
                    out = out + rsdl
                out = F.leaky_relu(out)  # expect: TML201
                return self.layer_norm(out)


        class Pair(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.a = nn.Linear(d, d)
                self.b = nn.Linear(d, d)
                self.act = nn.ELU()  # expect: TML201
                self.out = nn.Linear(d, d)

            def forward(self, x):
                h = einops.einsum(self.a(x), self.b(x), "b i d, b j d -> b i j")
                h = self.act(h)
                t = torch.tensordot(self.a(x), self.b.weight, dims=([-1], [0]))
                t = F.elu(t)  # expect: TML201
                m = self.a(x).bmm(self.b(x).transpose(1, 2))
                m = F.leaky_relu(m, 0.1)  # expect: TML201
                return self.out(h) + self.out(t) + self.out(m)  # (a sum alone would keep nothing of m)


        class LookAlikes(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.out = nn.Linear(d, d)

            def forward(self, q, k, v):
                s = torch.einsum("bid,bjd->bij", q, k)
                r = F.leaky_relu(s)
                kept = r + s  # (the scores are read again)
                w = torch.softmax(torch.einsum("bid,bjd->bij", q, k), dim=-1)
                w = F.elu(w)  # (the softmax's backward reads its output)
                return self.out(kept @ v + w @ v), F.elu(q)  # (q is the caller's)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_contractions"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
