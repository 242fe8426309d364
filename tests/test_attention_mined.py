"""TML601 on forms that eager attention takes in public code the project had not seen (mined from
GitHub repositories, reduced), modelled as computations of the value graph:

- ``torch.einsum(spec, [a, b])``: the operands as one list (or tuple), as torch also takes them
  (the einsum tutorial form ``einsum("nqhd,nkhd->nhqk", [queries, keys])``);
- ``torch.mm(a, b)`` / ``a.mm(b)``: the product of two matrices (2-D: reported without a fix);
  so is the tutorial's layout (``"nqhd,nkhd->nhqk"``: the heads after the positions in q);
- a softmax written out, an exponential divided by its own sum over the keys (``e / e.sum(-1,
  keepdim=True)``, ``w = w / torch.sum(w, axis=-1, keepdims=True)``), inline (fixed) or in a
  same-file ``softmax`` helper, as course assignments write it (reported without a fix: the
  fix rewrites one function); the file need not say "softmax" (``may_hold_softmax``);
- a decoder step's dot attention through ``squeeze``/``unsqueeze`` (Luong's "general" score:
  ``bmm(h_src, q.unsqueeze(-1)).squeeze(-1)``, then ``bmm(w.unsqueeze(1), h_src)``): the axes
  they keep are the same ones (reported without a fix: the weights are reshaped);
- scores computed by the caller and passed to a same-file method that applies the softmax and
  the product with v (speech toolkits' ``forward_attention(v, scores, mask)``), which slices the
  mask by the scores' size (``mask[:, :, :, :scores.size(-1)]``: a read of its size only) and
  rebinds ``scores`` under an ``if``: reported without a fix at each call that passes scores
  (each call keeps its own weights; ``tests/test_attention_held_out13.py``);
- a mask subtracted from the scores (``dot - 1e6 * (1 - mask[:, None, None, :])``, ``s -= bias``:
  SDPA's additive mask, negated) and a number added or subtracted (the softmax is the same) are
  fixed; scores subtracted from another value (``1.0 - s``) are reported without a fix;
- a softmax helper imported from another file of the project (``from .utils.tensors import
  softmax``, a ``softmax(x, *, dim)`` that calls ``x.softmax`` or one written out), run in its
  own file with the caller's values (``analysis/foreign.py``): reported without a fix; the
  result cache keys the finding by the imported file (``project_facts``).

Look-alikes stay quiet: the weights returned, a softmax over the queries, a classifier's logits
(a tensor times a weight matrix) contracted with a matrix; an exponential divided by another
tensor's sum, by a sum that drops the axis or over the queries, kept elsewhere, and scores
normalised without an exponential; a decoder step's weights returned, an additive (Bahdanau)
score; the weights kept by the helper on ``self``; the scores used as an index; an imported
helper's softmax over the queries, an imported helper that is no softmax, weights returned.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import libcst as cst
import pytest

from torchmemlint.analysis.names import Bindings

from attention_cases import found_sites, run_cli as shared_run_cli

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

WRITTEN = '''
import math

import torch


def inline_written(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
    w = e / e.sum(dim=-1, keepdim=True)
    return w @ v


def inline_augmented(q, k, v):
    s = torch.matmul(q, k.transpose(-1, -2))
    w = (s - torch.amax(s, -1, keepdim=True)).exp()
    w = w / torch.sum(w, axis=-1, keepdims=True)
    return torch.matmul(w, v)
'''

STEP = '''
import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, hidden_size):
        super().__init__()
        self.linear = nn.Linear(hidden_size, hidden_size, bias=False)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, h_src, h_t_tgt, mask=None):
        query = self.linear(h_t_tgt.squeeze(1)).unsqueeze(-1)
        weight = torch.bmm(h_src, query).squeeze(-1)
        if mask is not None:
            weight.masked_fill_(mask, -float("inf"))
        weight = self.softmax(weight)
        return torch.bmm(weight.unsqueeze(1), h_src)


def dot_step(decoder_hidden, encoder_outputs):
    energies = torch.bmm(encoder_outputs, decoder_hidden.unsqueeze(2)).squeeze(2)
    weights = torch.softmax(energies, dim=1).unsqueeze(1)
    return weights.bmm(encoder_outputs).squeeze(1)
'''

SUBTRACTED = '''
import math

import torch
import torch.nn as nn


class SoftmaxAttention(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.head_dim = head_dim

    def forward(self, Q, K, V, mask):
        dot = torch.matmul(Q, torch.transpose(K, -2, -1))
        dot = dot / math.sqrt(self.head_dim)
        dot = dot - 1e6 * (1 - mask[:, None, None, :])
        attn = nn.functional.softmax(dot, dim=-1)
        return torch.matmul(attn, V)


def shifted(q, k, v):
    s = q @ k.transpose(-2, -1) * 0.125
    s = s - 3.0
    return s.softmax(-1) @ v


def bias_subtracted(q, k, v, bias):
    s = q @ k.transpose(-2, -1)
    s -= bias
    return s.softmax(-1) @ v


def negated(q, k, v):
    s = q @ k.transpose(-2, -1)
    return (1.0 - s).softmax(-1) @ v
'''

CALLER = '''
import math

import torch
from torch import nn


class MultiHeadedAttention(nn.Module):
    def __init__(self, n_head, n_feat, dropout_rate):
        super().__init__()
        self.d_k = n_feat // n_head
        self.h = n_head
        self.linear_q = nn.Linear(n_feat, n_feat)
        self.linear_k = nn.Linear(n_feat, n_feat)
        self.linear_v = nn.Linear(n_feat, n_feat)
        self.linear_out = nn.Linear(n_feat, n_feat)
        self.dropout = nn.Dropout(p=dropout_rate)

    def forward_qkv(self, query, key, value):
        n_batch = query.size(0)
        q = self.linear_q(query).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)
        k = self.linear_k(key).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)
        v = self.linear_v(value).view(n_batch, -1, self.h, self.d_k).transpose(1, 2)
        return q, k, v

    def forward_attention(self, value, scores, mask):
        n_batch = value.size(0)
        if mask.size(2) > 0:
            mask = mask.unsqueeze(1).eq(0)
            mask = mask[:, :, :, :scores.size(-1)]
            scores = scores.masked_fill(mask, -float("inf"))
            attn = torch.softmax(scores, dim=-1).masked_fill(mask, 0.0)
        else:
            attn = torch.softmax(scores, dim=-1)
        x = torch.matmul(self.dropout(attn), value)
        return self.linear_out(x.transpose(1, 2).contiguous().view(n_batch, -1, self.h * self.d_k))

    def forward(self, query, key, value, mask):
        q, k, v = self.forward_qkv(query, key, value)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        return self.forward_attention(v, scores, mask)

    def forward_twice(self, query, key, value, mask):
        q, k, v = self.forward_qkv(query, key, value)
        first = self.forward_attention(v, torch.matmul(q, k.transpose(-2, -1)), mask)
        return first + self.forward_attention(v, torch.matmul(k, q.transpose(-2, -1)), mask)
'''

HELPER = '''
import math

import einops
import torch


def softmax(x, dim):
    y = (x - x.max(dim=dim, keepdim=True).values).exp()
    return y / y.sum(dim=dim, keepdim=True)


def scaled_dot_product_attention(q, k, v, mask):
    qk = einops.einsum(q, k, "... s d, ... t d -> ... s t") / math.sqrt(k.shape[-1])
    qk = qk.masked_fill(~mask, float("-inf"))
    return einops.einsum(softmax(qk, dim=-1), v, "... s t, ... t d -> ... s d")


def normalise(x, dim=-1):
    x_max = torch.max(x, dim=dim, keepdim=True).values
    exp_x = torch.exp(x - x_max)
    return exp_x / torch.sum(exp_x, dim=dim, keepdim=True)


def attention(Q, K, V):
    QK = Q.matmul(K.transpose(-2, -1)) / (Q.shape[-1] ** 0.5)
    return normalise(QK).matmul(V)
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


def written_over_the_queries(q, k, v):
    e = (q @ k.transpose(-2, -1)).exp()
    return e / e.sum(dim=-2, keepdim=True) @ v


def another_tensors_sum(q, k, v, other):
    e = (q @ k.transpose(-2, -1)).exp()
    return (e / other.exp().sum(dim=-1, keepdim=True)) @ v


def sum_not_kept(q, k, v):
    e = (q @ k.transpose(-2, -1)).exp()
    return (e / e.sum(dim=-1)) @ v


def exponential_kept(q, k, v, log):
    e = (q @ k.transpose(-2, -1)).exp()
    log.append(e)
    return (e / e.sum(dim=-1, keepdim=True)) @ v


def normalised_without_an_exponential(q, k, v):
    s = (q @ k.transpose(-2, -1)).relu()
    return (s / s.sum(dim=-1, keepdim=True)) @ v


def step_weights_returned(decoder_hidden, encoder_outputs):
    energies = torch.bmm(encoder_outputs, decoder_hidden.unsqueeze(2)).squeeze(2)
    weights = torch.softmax(energies, dim=1)
    return weights.unsqueeze(1).bmm(encoder_outputs).squeeze(1), weights


def step_over_the_batch(decoder_hidden, encoder_outputs):
    energies = torch.bmm(encoder_outputs, decoder_hidden.unsqueeze(2)).squeeze(2)
    weights = torch.softmax(energies, dim=0).unsqueeze(1)
    return weights.bmm(encoder_outputs).squeeze(1)


class KeepsTheWeights(torch.nn.Module):
    def forward_attention(self, value, scores):
        self.attn = torch.softmax(scores, dim=-1)
        return torch.matmul(self.attn, value)

    def forward(self, q, k, v):
        return self.forward_attention(v, torch.matmul(q, k.transpose(-2, -1)))


def scores_as_an_index(q, k, v, table):
    s = q @ k.transpose(-2, -1)
    kept = table[s > 0]
    return s.softmax(-1) @ v, kept


def additive_step(hidden, encoder_outputs, attn, v):
    energy = torch.tanh(attn(torch.cat((hidden.unsqueeze(1).expand_as(encoder_outputs), encoder_outputs), dim=2)))
    weights = torch.softmax(energy.matmul(v), dim=1)
    return torch.bmm(weights.unsqueeze(1), encoder_outputs).squeeze(1)
'''


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return shared_run_cli("--no-cache", *args)


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


def test_a_softmax_written_out_is_a_softmax_over_the_axis_it_sums():
    inline, augmented = found_sites(WRITTEN)
    assert [(s.query, s.key, s.value, s.scale, s.reason) for s in (inline, augmented)] == [
        ("q", "k", "v", "1.0 / math.sqrt(q.shape[-1])", ""),
        ("q", "k", "v", None, ""),
    ]
    helper, method = found_sites(HELPER)
    assert (helper.function.name.value, method.function.name.value) == ("scaled_dot_product_attention", "attention")
    assert helper.reason == method.reason.replace("normalise", "softmax") == (
        "the softmax is computed in `softmax`, another function; the fix rewrites one function"
    )


def test_a_decoder_step_through_squeeze_and_unsqueeze_is_reported_without_a_fix():
    module, step = found_sites(STEP)
    assert (module.function.name.value, step.function.name.value) == ("forward", "dot_step")
    assert module.reason == "the weights are reshaped (`weight.unsqueeze(1)`) before the product with v"
    assert step.reason.startswith("the weights are reshaped (`torch.softmax(energies, dim=1).unsqueeze(1)`)")


@pytest.mark.parametrize("line, kept", [
    ("s.unsqueeze(1).squeeze(1)", (0, 1, 2)),
    ("s.unsqueeze(-1).squeeze(-1)", (0, 1, 2)),
    ("s.unsqueeze(0)", (None, 0, 1, 2)),
    ("s.unsqueeze(-2)", (0, 1, None, 2)),
    ("s.unsqueeze(dim=3)", (0, 1, 2, None)),
    ("s.unsqueeze(1).squeeze(dim=2)", (0, None, 2)),
])
def test_unsqueeze_and_squeeze_keep_the_other_axes(line, kept):
    from torchmemlint.analysis.file import FileAnalysis as Analysis

    module = cst.parse_module("import torch\n\n\ndef f(q, k):\n    s = torch.einsum('bid,bjd->bij', q, k)\n    return %s\n" % line)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = Analysis(module, bindings, text=module.code)
    (function, _), = analysis.value_graphs.functions()
    (value,) = analysis.values(function).returns
    scores = value
    while scores.op != "contract":
        scores = scores.inputs[0]
    assert value.rank == len(kept)
    assert tuple(None if axis not in scores.axes else scores.axes.index(axis) for axis in value.axes) == kept


def test_scores_passed_to_the_method_that_applies_softmax_and_product_are_a_site_at_each_call():
    sites = found_sites(CALLER)  # each call weighs other scores: its own B·H·L·S weights, reported where they are passed
    assert [(s.function.name.value, s.at.func.attr.value, s.product.func.attr.value) for s in sites] == [
        ("forward", "forward_attention", "matmul"), ("forward_twice", "forward_attention", "matmul"), ("forward_twice", "forward_attention", "matmul"),
    ]
    assert sites[1].at is not sites[2].at
    assert all(s.reason == "the softmax is computed in `forward_attention`, another function; the fix rewrites one function" for s in sites)


def test_a_subtracted_mask_is_an_additive_one_and_a_number_changes_no_softmax():
    forward, shifted, subtracted, negated = found_sites(SUBTRACTED)
    assert [(s.key, s.mask, s.scale, s.reason) for s in (forward, shifted, subtracted)] == [
        ("K", "-(1e6 * (1 - mask[:, None, None, :]))", "1.0 / math.sqrt(self.head_dim)", ""),
        ("k", None, "0.125", ""),
        ("k", "-bias", None, ""),
    ]
    assert negated.reason == "the scores are subtracted from another value"


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


def test_a_file_that_never_says_softmax_is_linted_for_one_written_out():
    from torchmemlint.rules.attention import EagerAttention

    assert "softmax" not in WRITTEN.lower()
    assert EagerAttention.may_apply(WRITTEN) and not EagerAttention.may_apply(WRITTEN.replace("sum", "mean"))


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


TENSORS = '''
from torch import Tensor


def softmax(x: Tensor, *, dim: int) -> Tensor:
    return x.softmax(dim, dtype=x.dtype)


def normalise(x, dim=-1):
    y = (x - x.max(dim=dim, keepdim=True).values).exp()
    return y / y.sum(dim=dim, keepdim=True)


def gate(x, dim=-1):
    return x.sigmoid()
'''

IMPORTING = '''
import torch

from .utils.tensors import gate, normalise, softmax


def chunked_attention(q, k, v, chunks):
    out = torch.empty_like(q)
    for i in range(0, len(k), chunks):
        s = slice(i, min(i + chunks, len(k)))
        attn = softmax(q[s] @ k[s].transpose(-2, -1), dim=-1)
        out[s] = attn @ v[s]
    return out


def written_elsewhere(q, k, v):
    return normalise(q @ k.transpose(-2, -1) * 0.125) @ v


def over_the_queries(q, k, v):
    return softmax(q @ k.transpose(-2, -1), dim=-2) @ v


def gated(q, k, v):
    return gate(q @ k.transpose(-2, -1)) @ v


def weights_returned(q, k, v):
    w = softmax(q @ k.transpose(-2, -1), dim=-1)
    return w @ v, w
'''


def test_a_softmax_imported_from_another_file_of_the_project_is_run_there(tmp_path):
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_paths, project_key

    package = tmp_path / "pkg"
    (package / "utils").mkdir(parents=True)
    for init in (package / "__init__.py", package / "utils" / "__init__.py"):
        init.write_text("")
    helpers, attention = package / "utils" / "tensors.py", package / "attention.py"
    helpers.write_text(TENSORS)
    attention.write_text(IMPORTING)
    (result,) = lint_paths([str(attention)], Settings(select=("TML601",)), jobs=1)
    rows = {finding.location.row: finding.message for finding in result.findings}
    lines = IMPORTING.splitlines()
    assert sorted(lines[row - 1].strip() for row in rows) == ["out[s] = attn @ v[s]", "return normalise(q @ k.transpose(-2, -1) * 0.125) @ v"]
    assert all("another function; the fix rewrites one function" in message for message in rows.values())
    key = project_key(str(attention), frozenset({"TML601"}))
    helpers.write_text(TENSORS.replace("x.softmax(dim, dtype=x.dtype)", "x.sigmoid()"))
    assert project_key(str(attention), frozenset({"TML601"})) != key  # the cache keys the finding by the helper's file


@pytest.mark.slow
def test_the_subtracted_masks_fixed_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_subtracted.py", tmp_path / "subtracted.py"
    eager_path.write_text(SUBTRACTED)
    copy.write_text(SUBTRACTED)
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert "(3 fixed, 1 remaining)" in result.stdout, result.stdout + result.stderr
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    close = dict(atol=1e-5, rtol=1e-4)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    mask = (torch.rand(2, 7) > 0.3).float()
    mask[:, 0] = 1.0  # every row attends to one key at least
    cases = [
        (lambda m: m.SoftmaxAttention(8).eval(), (q, k, v, mask)),
        (lambda m: m.shifted, (q, k, v)),
        (lambda m: m.bias_subtracted, (q, k, v, torch.randn(5, 7))),
    ]
    for make, inputs in cases:
        results = []
        for module in (eager, fixed):
            leaves = [t.clone().requires_grad_() for t in inputs[:3]]
            out = make(module)(*leaves, *inputs[3:])
            out.backward(torch.ones_like(out))
            results.append((out.detach(), [t.grad for t in leaves]))
        torch.testing.assert_close(results[0][0], results[1][0], **close)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close)


@pytest.mark.slow
def test_the_softmax_written_out_fixed_computes_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_written.py", tmp_path / "written.py"
    eager_path.write_text(WRITTEN)
    copy.write_text(WRITTEN)
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert "Fixed 2 findings" in result.stdout, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 2 and ".exp" not in fixed_source and "sum" not in fixed_source
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    close = dict(atol=1e-5, rtol=1e-4)
    inputs = [torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)]
    for name in ("inline_written", "inline_augmented"):
        results = []
        for module in (eager, fixed):
            leaves = [t.clone().requires_grad_() for t in inputs]
            out = getattr(module, name)(*leaves)
            out.backward(torch.ones_like(out))
            results.append((out.detach(), [t.grad for t in leaves]))
        torch.testing.assert_close(results[0][0], results[1][0], **close, msg=name)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close, msg=name)


@pytest.mark.parametrize(
    "text, passes",
    [
        ("e = s.exp()\nw = e / e.sum(-1, keepdim=True)\n", True),
        ("e = torch.exp(s)\nw = e / torch.sum(e, dim=-1, keepdim=True)\n", True),
        ("w = F.softmax(s, dim=-1)\n", True),
        ("x = y.expand(2, 3)\nprint(summary)\n", False),  # words that hold exp / sum are not them
        ("expected = x.cumsum(0)\nexp_avg = 0\n", False),
        ("e = s.exp()\n", False),  # an exp without a sum is no softmax
    ],
)
def test_the_softmax_gate_reads_exp_and_sum_as_whole_words(text, passes):
    from torchmemlint.analysis.attention import may_hold_softmax

    assert may_hold_softmax(text) is passes
