"""TML601 on forms that eager attention takes in public code the project had not seen (mined from
GitHub repositories, reduced), modelled as computations of the value graph:

- ``torch.einsum(spec, [a, b])``: the operands as one list (or tuple), as torch also takes them
  (the einsum tutorial form ``einsum("nqhd,nkhd->nhqk", [queries, keys])``);
- ``torch.mm(a, b)`` / ``a.mm(b)``: the product of two matrices (2-D: reported without a fix);
  so is the tutorial's layout (``"nqhd,nkhd->nhqk"``: the heads after the positions in q).

Look-alikes stay quiet: the weights returned, a softmax over the queries, a classifier's logits
(a tensor times a weight matrix) contracted with a matrix.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

ROOT = Path(__file__).resolve().parent.parent

FIXED = '''
import torch
import torch.nn as nn


class ListedEinsum(nn.Module):
    def __init__(self, d_model, d_key):
        super().__init__()
        self.d_key = d_key
        self.query = nn.Linear(d_model, d_key, bias=False)
        self.key = nn.Linear(d_model, d_key, bias=False)
        self.value = nn.Linear(d_model, d_key, bias=False)

    def forward(self, x):
        queries, keys, values = self.query(x), self.key(x), self.value(x)
        score = torch.einsum("bqd, bkd->bqk", [queries, keys])
        attention = torch.softmax(score / (self.d_key ** 0.5), dim=2)
        return torch.einsum("bqk, bkd->bqd", [attention, values])


def heads_in_a_tuple(q, k, v):
    energy = torch.einsum("bhqd,bhkd->bhqk", (q, k))
    attention = torch.softmax(energy / 8.0, dim=3)
    return torch.einsum("bhqk,bhkd->bhqd", (attention, v))
'''

UNFIXED = '''
import torch
import torch.nn.functional as F


def matrices(Q, K, V):
    ch, seq, dim = Q.size()
    score = torch.mm(Q, K.transpose(-2, -1))
    score = score / (dim ** 0.5)
    att = F.softmax(score, dim=-1)
    return torch.mm(att, V)


def matrix_methods(q, k, v):
    return (q.mm(k.t()) * 0.125).softmax(1).mm(v)


def tutorial_layout(values, keys, queries, mask):
    energy = torch.einsum("nqhd,nkhd->nhqk", [queries, keys])
    energy = energy.masked_fill(mask == 0, float("-1e20"))
    attention = torch.softmax(energy / (256 ** (1 / 2)), dim=3)
    return torch.einsum("nhql,nlhd->nqhd", [attention, values])
'''

QUIET = '''
import torch
import torch.nn.functional as F


def listed_weights_returned(q, k, v):
    attention = torch.softmax(torch.einsum("bqd,bkd->bqk", [q, k]), dim=-1)
    return torch.einsum("bqk,bkd->bqd", [attention, v]), attention


def listed_over_the_queries(q, k, v):
    attention = torch.softmax(torch.einsum("bqd,bkd->bqk", [q, k]), dim=1)
    return torch.einsum("bqk,bkd->bqd", [attention, v])


def matrices_over_the_queries(q, k, v):
    att = F.softmax(torch.mm(q, k.t()), dim=0)
    return torch.mm(att, v)


def classifier_times_a_matrix(x, w, v):
    return F.softmax(x.mm(w), dim=1).mm(v)
'''


def found_sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return AttentionSites(FileAnalysis(module, bindings, text=module.code)).sites()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--no-cache", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def test_einsum_operands_in_a_list_are_a_contraction_of_both():
    sites = found_sites(FIXED)
    assert [(s.function.name.value, s.query, s.key, s.value, s.scale, s.reason, s.rank) for s in sites] == [
        ("forward", "queries", "keys", "values", "1.0 / self.d_key ** 0.5", "", 3),
        ("heads_in_a_tuple", "q", "k", "v", "1.0 / 8.0", "", 4),
    ]


def test_matrix_products_and_the_tutorial_layout_are_reported_without_a_fix():
    matrices, methods, tutorial = found_sites(UNFIXED)
    assert [s.function.name.value for s in (matrices, methods, tutorial)] == ["matrices", "matrix_methods", "tutorial_layout"]
    assert all(s.rank == 2 and s.reason.startswith("the tensors are 2-D") for s in (matrices, methods))
    assert tutorial.reason == "the einsum's batch axes differ between q, k and v; SDPA's must match"


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


@pytest.mark.slow
def test_the_fixed_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_mined.py", tmp_path / "mined.py"
    eager_path.write_text(FIXED)
    copy.write_text(FIXED)
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert "Fixed 2 findings" in result.stdout, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 2 and "einsum" not in fixed_source
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    close = dict(atol=1e-5, rtol=1e-4)
    layer = eager.ListedEinsum(16, 8).eval()
    twin = fixed.ListedEinsum(16, 8).eval()
    twin.load_state_dict(layer.state_dict())
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(layer(x), twin(x), **close)
    inputs = [torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)]  # (b, h, l, d)
    results = []
    for module in (eager, fixed):
        leaves = [t.clone().requires_grad_() for t in inputs]
        out = module.heads_in_a_tuple(*leaves)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), [t.grad for t in leaves]))
    torch.testing.assert_close(results[0][0], results[1][0], **close)
    for before, after in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(before, after, **close)
