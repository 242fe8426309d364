"""TML601 on forms a fifth held-out set showed it missed, modelled as computations:

- a number times the scores, the number on the left (``torch.softmax(scale * scores, -1)`` with
  ``scale = 1.0 / math.sqrt(E)``): what ``math`` functions and ``float``/``int``/``len`` return
  is a Python number, and so is arithmetic on numbers, so the product is a scale of the scores
  (before, ``math.sqrt(E)`` counted as a tensor and the scores' axes were lost);
- the scores before the softmax returned with the output (``return out, state, dot_prod``; q
  scaled in place, ``q.div_(scale).bmm(k.transpose(1, 2))``) or stored on ``self``: the
  weights are not kept, so SDPA can replace the softmax and the product; reported without a
  fix (the fix would delete the scores that reader takes);
- an einsum whose keys and values have no batch axis (``"blhe,she->bhls"``: a cross-attention to
  prototypes shared by the batch): attention by its subscripts, reported without a fix (SDPA
  takes k and v with q's batch axis);

Look-alikes stay quiet: the weights returned or stored on ``self`` (also only under an ``if``),
the scores read by another computation (``table[dot_prod.argmax(-1)]``, an ``assert`` of their
values; one of their shape, ``assert mask.shape == dot_prod.shape``, reads no value),
a softmax over the queries, a classification head times a matrix, whatever side the number is.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

from attention_cases import found_sites, run_cli

ROOT = Path(__file__).resolve().parent.parent

FIXED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeftScale(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        B, L, _ = x.shape
        q, k, v = self.qkv(x).view(B, L, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        E = q.shape[-1]
        scale = 1.0 / math.sqrt(E)
        scores = torch.einsum("bhle,bhse->bhls", q, k)
        A = self.dropout(torch.softmax(scale * scores, dim=-1))
        out = torch.einsum("bhls,bhse->bhle", A, v)
        return out.transpose(1, 2).reshape(B, L, -1)


class LeftScaleMatmul(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        attn = (float(c // self.heads) ** -0.5 * 2 / 2) * (q @ k.transpose(-2, -1))
        attn = attn.softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(b, n, c)
'''

UNFIXED = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Prototypes(nn.Module):
    def __init__(self, width, heads, keys, source):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, keys * heads)
        self.key = nn.Linear(source, keys * heads)
        self.value = nn.Linear(source, keys * heads)
        self.dropout = nn.Dropout(0.1)

    def forward(self, target, source, value):
        B, L, _ = target.shape
        S, _ = source.shape
        H = self.heads
        target = self.query(target).view(B, L, H, -1)
        source = self.key(source).view(S, H, -1)
        value = self.value(value).view(S, H, -1)
        return self.attend(target, source, value).reshape(B, L, -1)

    def attend(self, target, source, value):
        B, L, H, E = target.shape
        scale = 1.0 / math.sqrt(E)
        scores = torch.einsum("blhe,she->bhls", target, source)
        A = self.dropout(torch.softmax(scale * scores, dim=-1))
        return torch.einsum("bhls,she->blhe", A, value)


class ScoresReturned(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.n_heads = heads
        self.attn_dropout = nn.Dropout(p=0.1)
        self.q_lin = nn.Linear(dim, dim)
        self.k_lin = nn.Linear(dim, dim)
        self.v_lin = nn.Linear(dim, dim)

    def forward(self, query, mask):
        batch_size, query_len, dim = query.size()
        n_heads = self.n_heads
        dim_per_head = dim // n_heads
        scale = math.sqrt(dim_per_head)

        def prepare_head(tensor):
            bsz, seq_len, _ = tensor.size()
            tensor = tensor.view(batch_size, tensor.size(1), n_heads, dim_per_head)
            return tensor.transpose(1, 2).contiguous().view(batch_size * n_heads, seq_len, dim_per_head)

        q = prepare_head(self.q_lin(query))
        k = prepare_head(self.k_lin(query))
        v = prepare_head(self.v_lin(query))
        full_key_len = k.size(1)
        dot_prod = q.div_(scale).bmm(k.transpose(1, 2))
        attn_mask = (mask == 0).view(batch_size, 1, -1, full_key_len).repeat(1, n_heads, 1, 1).view(batch_size * n_heads, query_len, full_key_len)
        assert attn_mask.shape == dot_prod.shape
        dot_prod.masked_fill_(attn_mask, -1e20)
        attn_weights = F.softmax(dot_prod, dim=-1, dtype=torch.float).type_as(query)
        attn_weights = self.attn_dropout(attn_weights)
        attentioned = attn_weights.bmm(v)
        attentioned = attentioned.view(batch_size, n_heads, query_len, dim_per_head).transpose(1, 2).reshape(batch_size, query_len, dim)
        return attentioned, {"prev_key": k}, dot_prod


class ScoresKept(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.qkv = nn.Linear(width, 3 * width)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        self.last_logits = logits.detach()
        return F.softmax(logits, dim=-1) @ v
'''

QUIET = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import einsum, rearrange


class WeightsKeptUnderAnIf(nn.Module):
    def __init__(self, width, heads, keep_attn=True):
        super().__init__()
        self.n_heads = heads
        self.scale = (width // heads) ** -0.5
        self.keep_attn = keep_attn
        self.to_qkv = nn.Linear(width, 3 * width, bias=False)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        h = self.n_heads
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=h) for t in (q, k, v))
        sim = einsum(q, k, "b h i d, b h j d -> b h i j") * self.scale
        attn = sim.softmax(dim=-1)
        attn = self.dropout(attn)
        if self.keep_attn:
            self.attn_weights = attn
        out = einsum(attn, v, "b h i j, b h j d -> b h i d")
        return rearrange(out, "b h n d -> b n (h d)", h=h)


class PrototypeWeightsReturned(nn.Module):
    def forward(self, target, source, value):
        B, L, H, E = target.shape
        scores = torch.einsum("blhe,she->bhls", target, source)
        A = torch.softmax(1.0 / math.sqrt(E) * scores, dim=-1)
        return torch.einsum("bhls,she->blhe", A, value), A


class ScaledWeightsReturned(nn.Module):
    def forward(self, q, k, v):
        d_head = k.shape[-1]
        logits = q @ k.transpose(1, 2) / math.sqrt(d_head)
        probs = F.softmax(logits, dim=-1)
        return probs @ v, {"attention_logits": logits, "attention_probs": probs}


class ScoresIndexKept(nn.Module):
    def forward(self, q, k, v, table):
        dot_prod = q.div_(math.sqrt(q.shape[-1])).bmm(k.transpose(1, 2))
        attn = F.softmax(dot_prod, dim=-1).bmm(v)
        return attn, table[dot_prod.argmax(-1)]


class ScoresChecked(nn.Module):
    def forward(self, q, k, v):
        dot_prod = q @ k.transpose(-2, -1)
        assert torch.isfinite(dot_prod).all(), dot_prod
        return dot_prod.softmax(-1) @ v, dot_prod


class OverTheQueries(nn.Module):
    def forward(self, q, k, v):
        E = q.shape[-1]
        scores = torch.einsum("bhle,bhse->bhls", q, k)
        A = torch.softmax(1.0 / math.sqrt(E) * scores, dim=-2)
        return torch.einsum("bhls,bhse->bhle", A, v)


class Head(nn.Module):
    def __init__(self, width, classes):
        super().__init__()
        self.w = nn.Parameter(torch.randn(width, classes))

    def forward(self, x, v):
        temperature = math.sqrt(x.shape[-1])
        return F.softmax(1.0 / temperature * (x @ self.w), -1) @ v
'''




def test_a_number_on_the_left_scales_the_scores():
    sites = found_sites(FIXED)
    assert [(s.function.name.value, s.query, s.key, s.value, s.scale, s.reason) for s in sites] == [
        ("forward", "q", "k", "v", "scale", ""),
        ("forward", "q", "k", "v", "float(c // self.heads) ** -0.5 * 2 / 2", ""),
    ]
    assert [s.rank for s in sites] == [4, 4]


def test_keys_without_a_batch_axis_and_returned_scores_are_reported_without_a_fix():
    prototypes, returned, kept = found_sites(UNFIXED)
    assert prototypes.function.name.value == "attend" and prototypes.scale == "scale"
    assert prototypes.reason.startswith("q has a batch axis that k has not (`b`")
    assert returned.reason.startswith("the scores before the softmax are also returned or kept")
    assert kept.reason.startswith("the scores before the softmax are also returned or kept")


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


def test_a_heads_only_multi_query_form_keeps_its_own_reason():
    (site,) = found_sites(
        """
        import torch

        def forward(q, k, v):
            w = torch.einsum("bhid,bjd->bhij", q, k).softmax(-1)
            return torch.einsum("bhij,bjd->bhid", w, v)
        """
    )
    assert "multi-query attention" in site.reason and "batch axis" not in site.reason


@pytest.mark.slow
def test_the_cli_reports_the_unfixed_forms_and_not_the_look_alikes(tmp_path):
    path = tmp_path / "unfixed.py"
    path.write_text(UNFIXED + QUIET)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(path)).stdout)
    assert [f["fix"] for f in listed] == [None, None, None], listed
    assert "batch axis" in listed[0]["message"] and all("scores before the softmax" in f["message"] for f in listed[1:])


@pytest.mark.slow
def test_the_fixed_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / "eager_held_out5.py", tmp_path / "held_out5.py"
    eager_path.write_text(FIXED)
    copy.write_text(FIXED)
    listed = json.loads(run_cli("--select", "TML601", "--output-format", "json", str(copy)).stdout)
    assert len(listed) == 2 and all(f["fix"] is not None for f in listed), listed
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 2 and "softmax(" not in fixed_source
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    close = dict(atol=1e-5, rtol=1e-4)
    torch.manual_seed(0)
    for name, make, inputs in (
        ("LeftScale", lambda m: m(16, 2), (torch.randn(2, 6, 16),)),
        ("LeftScaleMatmul", lambda m: m(16, 4), (torch.randn(2, 5, 16),)),
    ):
        a, b = make(getattr(eager, name)).eval(), make(getattr(fixed, name)).eval()
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            leaves = [t.clone().requires_grad_() for t in inputs]
            out = module(*leaves)
            out.backward(torch.ones_like(out))
            grads = [t.grad for t in leaves] + [p.grad for p in module.parameters()]
            results.append((out.detach(), grads))
        torch.testing.assert_close(results[0][0], results[1][0], **close, msg=name)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close, msg=name)


@pytest.mark.parametrize("factor", ["1.0 / math.sqrt(E)", "float(E) ** -0.5", "E ** -0.5 * 2", "1 / len(q)", "(E + 1) / 2", "x.shape[-1] * 0.5"])
def test_a_number_made_of_sizes_and_math_is_no_tensor(factor):
    """Whatever side it is on, a number times the scores is a scale of the scores (their axes
    kept); a tensor on the left stays the tensor (``gate * s`` scales ``gate``'s axes)."""
    module = cst.parse_module(textwrap.dedent(
        """
        import math
        import torch

        def forward(q, k, x, gate):
            B, L, H, E = q.shape
            s = torch.einsum("bhle,bhse->bhls", q, k)
            scaled = %s * s
            gated = gate.exp() * s
            return scaled, gated
        """ % factor
    ))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    (function, _), = [f for f in analysis.value_graphs.functions() if f[0].name.value == "forward"]
    values = analysis.values(function)
    scores = next(v for v in values.values if v.op == "contract")
    scaled = next(v for v in values.values if "scaled" in v.info.get("names", ()))
    gated = next(v for v in values.values if "gated" in v.info.get("names", ()))
    assert scaled.op == "scale" and scaled.inputs[0] is scores and scaled.axes == scores.axes
    assert gated.inputs[0] is not scores
