"""TML601 on more forms of the same computation (the value graph: ``analysis/compound.py``,
``analysis/attention.py``), through the CLI: the scores' maximum subtracted before the softmax
(``amax``, ``max(...).values``, ``max(...)[0]``, ``logsumexp``; a no-op for the softmax),
einsums over ``...`` on 5-D tensors, ``torch.baddbmm`` scores (``beta=0``: the input ignored;
also per batch slice in a loop), channel-first 3-D scores (``matmul(q.permute(0, 2, 1), k)``,
softmax over ``dim=2``); the fixed ones compute what the eager code did (outputs and gradients,
CPU). Multi-query attention (k and v without the heads axis of q), a mask on 3-D scores and a
bias added by baddbmm are reported without a fix; weights or maxima that escape, a maximum over
another axis, linear attention, a softmax over the queries and weights contracted over the
queries stay quiet."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

FORMS = '''\
import torch
import torch.nn.functional as F
from einops import einsum as einops_einsum, rearrange
from torch import einsum


def stabilised_amax(q, k, v):
    sim = einsum("b h i d, b h j d -> b h i j", q, k) * 0.3
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    attn = sim.softmax(dim=-1)
    return einsum("b h i j, b h j d -> b h i d", attn, v)


def stabilised_max_values(q, k, v):
    s = q @ k.transpose(-2, -1) / 4.0
    s = s - s.max(dim=-1, keepdim=True).values
    return F.softmax(s, dim=-1) @ v


def stabilised_max_index_masked(q, k, v):
    n = q.shape[-2]
    causal = torch.ones(n, n, dtype=torch.bool).triu(1)
    s = torch.matmul(q, k.transpose(-1, -2))
    s = s.masked_fill(causal, -torch.finfo(s.dtype).max)
    top = torch.max(s, -1, keepdim=True)[0]
    s = s - top
    w = torch.softmax(s, -1)
    return torch.matmul(w, v)


def stabilised_logsumexp(q, k, v):
    s = einops_einsum(q, k, "b h i d, b h j d -> b h i j")
    s = s - torch.logsumexp(s, dim=-1, keepdim=True)
    return einops_einsum(s.softmax(-1), v, "b h i j, b h j d -> b h i d")


def stabilised_in_place(q, k, v):
    s = torch.einsum("bhid,bhjd->bhij", q, k)
    s -= torch.amax(s, dim=-1, keepdim=True).detach()
    return torch.einsum("bhij,bhjd->bhid", s.softmax(-1), v)


def perceiver(q, k, v):
    q = q * 0.125
    sim = einsum("... i d, ... j d  -> ... i j", q, k)
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    attn = sim.softmax(dim=-1)
    return einsum("... i j, ... j d -> ... i d", attn, v)


def baddbmm_scores(query, key, value, scale):
    attention_scores = torch.baddbmm(
        torch.empty(query.shape[0], query.shape[1], key.shape[1], dtype=query.dtype, device=query.device),
        query,
        key.transpose(-1, -2),
        beta=0,
        alpha=scale,
    )
    attention_probs = attention_scores.softmax(dim=-1)
    return torch.bmm(attention_probs, value)


def baddbmm_sliced(query, key, value, slice_size):
    hidden_states = torch.zeros(query.shape[0], query.shape[1], value.shape[-1], dtype=query.dtype)
    for i in range(query.shape[0] // slice_size):
        start_idx = i * slice_size
        end_idx = (i + 1) * slice_size
        attn_slice = torch.baddbmm(
            torch.empty(slice_size, query.shape[1], key.shape[1], dtype=query.dtype),
            query[start_idx:end_idx],
            key[start_idx:end_idx].transpose(-1, -2),
            beta=0,
            alpha=0.5,
        )
        attn_slice = attn_slice.softmax(dim=-1)
        attn_slice = torch.bmm(attn_slice, value[start_idx:end_idx])
        hidden_states[start_idx:end_idx] = attn_slice
    return hidden_states


def channel_first(query, key, value, scale):
    logits = torch.matmul(query.permute(0, 2, 1), key) * scale
    weights = F.softmax(logits, dim=2)
    glimpse = torch.matmul(weights, value.transpose(1, 2))
    return glimpse.permute(0, 2, 1).contiguous()


def channel_first_operators(query, key, value):
    logits = torch.bmm(query.transpose(1, 2), key) / 3.0
    weights = logits.softmax(-1)
    return weights @ value.permute(0, 2, 1)


def multi_query(q, k, v):
    n = q.shape[-2]
    causal_mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    sim = einsum("b h i d, b j d -> b h i j", q, k)
    sim = sim.masked_fill(causal_mask, -torch.finfo(sim.dtype).max)
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    attn = sim.softmax(dim=-1)
    return einsum("b h i j, b j d -> b h i d", attn, v)


def multi_query_einops(q, k, v):
    sim = einops_einsum(q, k, "b h i d, b j d -> b h i j") * 0.5
    attn = F.softmax(sim, dim=-1)
    return einops_einsum(attn, v, "b h i j, b j d -> b h i d")


def perceiver_five_d(x, latents, to_q, to_kv):
    q = to_q(latents)
    k, v = to_kv(torch.cat((x, latents), dim=-2)).chunk(2, dim=-1)
    q = rearrange(q, "b t n (h d) -> b h t n d", h=4)
    k = rearrange(k, "b t n (h d) -> b h t n d", h=4)
    v = rearrange(v, "b t n (h d) -> b h t n d", h=4)
    sim = einsum("... i d, ... j d -> ... i j", q * 0.125, k)
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    return einsum("... i j, ... j d -> ... i d", sim.softmax(dim=-1), v)


def multi_query_compact(q, k, v):
    sim = torch.einsum("bhid,bjd->bhij", q * 0.5, k)
    return torch.einsum("bhij,bjd->bhid", sim.softmax(dim=-1), v)


def channel_first_masked(query, key, value, mask=None):
    n, seq_len = mask.size()
    logits = torch.matmul(query.permute(0, 2, 1), key) * 0.5
    if mask is not None:
        mask = mask.view(n, 1, seq_len)
        logits = logits.masked_fill(mask, float("-inf"))
    weights = F.softmax(logits, dim=2)
    return torch.matmul(weights, value.transpose(1, 2))


def baddbmm_bias(query, key, value, bias):
    scores = torch.baddbmm(bias, query, key.transpose(1, 2), alpha=0.5)
    return torch.bmm(scores.softmax(-1), value)

'''

FIXED = ("stabilised_amax", "stabilised_max_values", "stabilised_max_index_masked", "stabilised_logsumexp", "stabilised_in_place",
         "perceiver", "baddbmm_scores", "baddbmm_sliced", "channel_first", "channel_first_operators")
UNFIXED = {
    "multi_query": "multi-query attention",
    "multi_query_compact": "multi-query attention",
    "multi_query_einops": "multi-query attention",
    "perceiver_five_d": "the tensors are 5-D",
    "channel_first_masked": "3-D tensors with a mask",
    "baddbmm_bias": "3-D tensors with a mask",
}

QUIET = '''\
import torch
from torch import einsum


def weights_returned(q, k, v):
    sim = einsum("b h i d, b h j d -> b h i j", q, k)
    sim = sim - sim.amax(dim=-1, keepdim=True).detach()
    attn = sim.softmax(dim=-1)
    return einsum("b h i j, b h j d -> b h i d", attn, v), attn


def maximum_kept(q, k, v, log):
    sim = q @ k.transpose(-2, -1)
    top = sim.amax(dim=-1, keepdim=True)
    log.append(top)
    return (sim - top).softmax(-1) @ v


def multi_query_weights_stored(self, q, k, v):
    sim = einsum("b h i d, b j d -> b h i j", q, k)
    attn = sim.softmax(dim=-1)
    self.attention_map = attn
    return einsum("b h i j, b j d -> b h i d", attn, v)


def linear_attention(q, k, v):
    q = q.softmax(dim=-1)
    k = k.softmax(dim=-2)
    context = einsum("b h n d, b h n e -> b h d e", k, v)
    return einsum("b h n d, b h d e -> b h n e", q, context)


def softmax_over_the_queries(q, k, v):
    sim = einsum("... i d, ... j d -> ... i j", q, k)
    sim = sim - sim.amax(dim=-2, keepdim=True).detach()
    attn = sim.softmax(dim=-2)
    return einsum("... i j, ... j d -> ... i d", attn, v)


def contracted_over_the_queries(q, k, v):
    sim = einsum("b h i d, b h j d -> b h i j", q, k)
    attn = sim.softmax(dim=-1)
    return einsum("b h i j, b h i d -> b h j d", attn, v)


def baddbmm_weights_returned(query, key, value):
    scores = torch.baddbmm(torch.empty(1), query, key.transpose(-1, -2), beta=0, alpha=0.5)
    probs = scores.softmax(dim=-1)
    return torch.bmm(probs, value), probs


def max_over_the_queries(q, k, v):
    s = q @ k.transpose(-2, -1)
    s = s - s.amax(dim=-2, keepdim=True)
    return s.softmax(-1) @ v


def channel_first_over_the_queries(query, key, value):
    logits = torch.matmul(query.permute(0, 2, 1), key)
    weights = torch.softmax(logits, dim=1)
    return torch.matmul(weights, value.transpose(1, 2))
'''


def _lint(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601",
         *extra, str(path)],
        capture_output=True, text=True, timeout=300,
    )


def _by_function(source: str, found):
    """{function name: finding} for the findings of ``found`` (one per function)."""
    spans = [(node.lineno, node.end_lineno, node.name) for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)]
    named = {}
    for item in found:
        row = item["location"]["row"]
        (name,) = [n for start, end, n in spans if start <= row <= end]
        assert name not in named, name
        named[name] = item
    return named


@pytest.mark.slow
def test_more_forms_are_reported_and_the_fixed_ones_compute_the_same(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    from torchmemlint.dynamic.target import load_module

    eager_path = tmp_path / "eager_forms.py"
    eager_path.write_text(FORMS)
    copy = tmp_path / "more_forms.py"
    copy.write_text(FORMS)
    result = _lint(copy, "--output-format", "json")
    named = _by_function(FORMS, json.loads(result.stdout))
    assert sorted(named) == sorted((*FIXED, *UNFIXED)), sorted(named)
    for name in FIXED:
        assert named[name]["fix"] is not None, (name, named[name]["message"])
    for name, why in UNFIXED.items():
        assert named[name]["fix"] is None, name
        assert "(no automatic fix: " in named[name]["message"] and why in named[name]["message"], (name, named[name]["message"])
    result = _lint(copy, "--fix", "--unsafe-fixes")
    assert "(%d fixed, %d remaining)" % (len(FIXED), len(UNFIXED)) in result.stdout, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("F.scaled_dot_product_attention(") == len(FIXED)
    assert fixed_source.count(".amax(") == 2 and "torch.amax(" not in fixed_source and "torch.logsumexp(" not in fixed_source  # the subtractions fixed went
    assert fixed_source.count("baddbmm(") == 1  # only the biased one stays
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    shapes = {
        "stabilised_amax": [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)],
        "stabilised_max_values": [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 4)],
        "stabilised_max_index_masked": [(2, 3, 6, 8), (2, 3, 6, 8), (2, 3, 6, 8)],
        "stabilised_logsumexp": [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)],
        "stabilised_in_place": [(2, 3, 5, 8), (2, 3, 7, 8), (2, 3, 7, 8)],
        "perceiver": [(2, 3, 4, 5, 8), (2, 3, 4, 7, 8), (2, 3, 4, 7, 8)],  # 5-D: (b, h, t, n, d)
        "baddbmm_scores": [(6, 5, 8), (6, 7, 8), (6, 7, 4)],
        "baddbmm_sliced": [(6, 5, 8), (6, 7, 8), (6, 7, 4)],
        "channel_first": [(2, 8, 5), (2, 8, 7), (2, 4, 7)],  # channel-first (b, c, n)
        "channel_first_operators": [(2, 8, 5), (2, 8, 7), (2, 4, 7)],
    }
    extra = {"baddbmm_scores": (0.35,), "baddbmm_sliced": (2,), "channel_first": (0.35,)}
    close = dict(atol=1e-5, rtol=1e-4)
    for name in FIXED:
        inputs = [torch.randn(*shape) for shape in shapes[name]]
        results = []
        for module in (eager, fixed):
            leaves = [t.clone().requires_grad_() for t in inputs]
            out = getattr(module, name)(*leaves, *extra.get(name, ()))
            out.backward(torch.ones_like(out))
            results.append((out.detach(), [t.grad for t in leaves]))
        torch.testing.assert_close(results[0][0], results[1][0], **close, msg=name)
        for before, after in zip(results[0][1], results[1][1]):
            torch.testing.assert_close(before, after, **close, msg=name)


@pytest.mark.slow
def test_weights_that_escape_and_look_alikes_stay_quiet(tmp_path):
    path = tmp_path / "quiet.py"
    path.write_text(QUIET)
    result = _lint(path, "--output-format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def _returned_value(source: str):
    """The value the only function of ``source`` returns, in its value graph."""
    import textwrap

    import libcst as cst

    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings

    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    (function, _), = analysis.value_graphs.functions()
    (value,) = analysis.values(function).returns
    return value


@pytest.mark.parametrize("call, ops", [
    ("torch.baddbmm(torch.empty(1), q, k, beta=0, alpha=s)", ["scale", "contract"]),  # the input ignored
    ("torch.baddbmm(bias, q, k, alpha=s)", ["add", "scale", "contract"]),  # beta=1: the input added
    ("torch.baddbmm(bias, q, k, beta=1.0)", ["add", "contract"]),
    ("bias.baddbmm(q, k, beta=0, alpha=1)", ["contract"]),
    ("torch.baddbmm(bias, q, k, beta=0.5)", ["call"]),  # another beta: not followed
])
def test_baddbmm_is_a_contraction_scaled_and_added(call, ops):
    value = _returned_value("import torch\n\n\ndef f(q, k, bias, s):\n    return %s\n" % call)
    found = []
    while value.op in ("add", "scale", "contract", "call"):
        found.append(value.op)
        if value.op in ("contract", "call"):
            break
        value = value.inputs[0]
    assert found == ops
    if ops[-1] == "contract":
        assert value.info["specs"][2][-2:] == ("i", "j") and value.rank == 3


@pytest.mark.parametrize("call, dim, keepdim", [
    ("x.amax(dim=-1, keepdim=True)", -1, True),
    ("torch.amax(x, -1, True)", -1, True),
    ("x.max(-2, keepdim=True)", -2, True),
    ("torch.logsumexp(x, dim=-1)", -1, False),
    ("x.max()", None, None),  # no axis: not a reduction over one
    ("torch.max(x, y)", None, None),  # elementwise
])
def test_reductions_over_one_axis(call, dim, keepdim):
    value = _returned_value(
        "import torch\n\n\ndef f(y):\n    x = torch.einsum('b i d, b j d -> b i j', y, y)\n    return %s\n" % call
    )
    if dim is None:
        assert value.op != "reduce"
        return
    assert value.op == "reduce" and value.info["keepdim"] is keepdim
    assert value.info["axis"] is value.inputs[0].axis(dim) is not None


@pytest.mark.slow
def test_the_kernel_model_the_multi_query_message_states():
    """What the multi-query finding says of CUDA's kernels is the repository's model of torch's
    choice (``torchmemlint/dynamic/emulate.py``, from ``sdp_utils.cpp``): k and v with fewer
    heads run the memory-efficient kernel in no case, the flash kernel only with
    ``enable_gqa=True`` in fp16/bf16 without a mask."""
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.emulate import EFFICIENT, FLASH, MATH, choose_attention_kernel

    def kernel(dtype, heads, gqa, mask=None):
        q = torch.empty(2, 4, 5, 8, dtype=dtype, device="meta")
        k = torch.empty(2, heads, 6, 8, dtype=dtype, device="meta")
        return choose_attention_kernel(q, k, k, mask, gqa)

    mask = torch.empty(5, 6, dtype=torch.bool, device="meta")
    assert kernel(torch.float32, 4, False) == EFFICIENT  # as many heads: fused
    assert kernel(torch.float32, 4, False, mask) == EFFICIENT
    assert kernel(torch.float32, 1, False) == MATH
    assert kernel(torch.float32, 1, True) == MATH
    assert kernel(torch.bfloat16, 1, True) == FLASH
    assert kernel(torch.bfloat16, 1, True, mask) == MATH
