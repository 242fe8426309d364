"""TML601 where the scores come from different computations in the branches of an ``if``
(cosine attention with a learned temperature in one arm, scaled dot products in the other)
or pass through a reshape in one arm (a mask added per window through ``view``s): the value
graph joins the arms' axes position by position, so the softmax's axis is still the keys' axis
of each arm's contraction. SDPA cannot run either as written: a finding without a fix. The
look-alikes read the weights elsewhere (returned, stored, logged), take the softmax over the
queries, or never contract the weights with v: they stay quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import libcst as cst
import pytest

from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

HEADER = """
import math
import logging

import torch
import torch.nn as nn
import torch.nn.functional as F

log = logging.getLogger(__name__)
"""

COSINE_OR_DOT = HEADER + """
class DualAttention(nn.Module):
    def __init__(self, dim, heads, cosine=False):
        super().__init__()
        self.heads = heads
        self.cosine = cosine
        self.qkv = nn.Linear(dim, 3 * dim)
        self.tau = nn.Parameter(torch.zeros(heads, 1, 1))
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        if self.cosine:
            sim = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
            sim = sim * self.tau.clamp(max=math.log(50.0)).exp()
        else:
            sim = torch.matmul(q * (c // self.heads) ** -0.5, k.transpose(-1, -2))
        probs = self.drop(sim.softmax(dim=-1))
        return (probs @ v).transpose(1, 2).reshape(b, n, c)
"""

WINDOW_MASK = HEADER + """
def window_attention(tokens, to_qkv, bias_table, heads, window_mask=None):
    windows, size, width = tokens.shape
    qkv = to_qkv(tokens).reshape(windows, size, 3, heads, width // heads)
    qkv = qkv.permute(2, 0, 3, 1, 4)
    query, key, value = qkv[0], qkv[1], qkv[2]
    logits = query.matmul(key.transpose(-2, -1)) / math.sqrt(width // heads)
    logits = logits + bias_table
    if window_mask is not None:
        groups = window_mask.shape[0]
        logits = logits.view(windows // groups, groups, heads, size, size)
        logits = logits + window_mask[None, :, None]
        logits = logits.view(-1, heads, size, size)
    weights = F.softmax(logits, dim=-1)
    weights = F.dropout(weights, p=0.1, training=True)
    return weights.matmul(value).transpose(1, 2).reshape(windows, size, width)
"""


def sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    return AttentionSites(analysis).sites()


def reasons(source: str):
    return [site.reason for site in sites(source)]


def test_scores_from_two_computations_in_an_if_are_a_site_without_a_fix():
    assert reasons(COSINE_OR_DOT) == ["the scores come from different computations in the branches of an `if`"]


def test_a_mask_added_through_views_in_one_arm_is_a_site_without_a_fix():
    (reason,) = reasons(WINDOW_MASK)
    assert reason.startswith("the scores are reshaped (`logits.view(")


def test_both_at_once_in_a_helper_with_method_matmuls():
    source = HEADER + textwrap.dedent("""
    def attend(q, k, v, scale, mask=None, temperature=None):
        if temperature is not None:
            s = F.normalize(q, dim=-1).matmul(F.normalize(k, dim=-1).mT) * temperature
        else:
            s = (q * scale).matmul(k.mT)
        if mask is not None:
            s = s.unflatten(0, (-1, mask.shape[0])) + mask.unsqueeze(1)
            s = s.flatten(0, 1)
        return torch.softmax(s, -1).matmul(v)
    """)
    (site,) = sites(source)
    assert not site.fixable


QUIET = {
    "weights returned": ("probs = self.drop(sim.softmax(dim=-1))\n        return (probs @ v).transpose(1, 2).reshape(b, n, c)",
                         "probs = self.drop(sim.softmax(dim=-1))\n        return (probs @ v).transpose(1, 2).reshape(b, n, c), probs"),
    "weights stored": ("probs = self.drop(sim.softmax(dim=-1))\n",
                       "probs = self.drop(sim.softmax(dim=-1))\n        self.last_weights = probs\n"),
    "weights logged": ("probs = self.drop(sim.softmax(dim=-1))\n",
                       "probs = self.drop(sim.softmax(dim=-1))\n        log.debug('attention %s', probs.max())\n"),
    "scores read by a computation": ("probs = self.drop(sim.softmax(dim=-1))\n",
                                     "probs = self.drop(sim.softmax(dim=-1))\n        self.scores = sim.amax(-2)\n"),
    "softmax over the queries": ("sim.softmax(dim=-1)", "sim.softmax(dim=-2)"),
    "weights not contracted with v": ("return (probs @ v).transpose(1, 2).reshape(b, n, c)",
                                      "return (probs.sum(-1, keepdim=True) * v).transpose(1, 2).reshape(b, n, c)"),
}


@pytest.mark.parametrize("name", sorted(QUIET))
def test_look_alikes_of_the_branch_form_stay_quiet(name):
    old, new = QUIET[name]
    assert old in COSINE_OR_DOT
    assert sites(COSINE_OR_DOT.replace(old, new)) == []


def test_scores_kept_as_they_are_are_reported_without_a_fix():
    """``self.scores = sim``: the weights are not kept, SDPA can replace the softmax and the
    product with v (the scores computed for that reader alone); the fix would delete them."""
    (site,) = sites(COSINE_OR_DOT.replace("probs = self.drop(sim.softmax(dim=-1))\n",
                                          "probs = self.drop(sim.softmax(dim=-1))\n        self.scores = sim\n"))
    assert site.reason.startswith("the scores before the softmax are also returned or kept")


def test_window_mask_look_alikes_stay_quiet():
    returned = WINDOW_MASK.replace(
        "return weights.matmul(value).transpose(1, 2).reshape(windows, size, width)",
        "return weights.matmul(value).transpose(1, 2).reshape(windows, size, width), weights")
    over_queries = WINDOW_MASK.replace("F.softmax(logits, dim=-1)", "F.softmax(logits, dim=-2)")
    assert returned != WINDOW_MASK and over_queries != WINDOW_MASK
    assert sites(returned) == [] and sites(over_queries) == []


@pytest.mark.slow
def test_cli_reports_them_without_a_fix(tmp_path):
    path = tmp_path / "branches.py"
    path.write_text(COSINE_OR_DOT + WINDOW_MASK.replace(HEADER, ""))
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--select", "TML601", "--no-cache",
         "--output-format", "json", str(path)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)
    lines = path.read_text().splitlines()
    assert [lines[f["location"]["row"] - 1].strip() for f in found] == [
        "return (probs @ v).transpose(1, 2).reshape(b, n, c)",
        "return weights.matmul(value).transpose(1, 2).reshape(windows, size, width)",
    ]
    assert all(f["fix"] is None for f in found)


def quiet(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    attention = AttentionSites(FileAnalysis(module, bindings, text=module.code))
    assert attention.sites() == []
    return [(function.name.value, why) for function, _, why in attention.quiet]


def test_what_is_left_alone_by_design_says_why():
    returned = COSINE_OR_DOT.replace(
        "return (probs @ v).transpose(1, 2).reshape(b, n, c)",
        "return (probs @ v).transpose(1, 2).reshape(b, n, c), probs")
    assert [(name, why.split(" (")[0]) for name, why in quiet(returned)] == [
        ("forward", "the scores or weights are also read elsewhere")]
    fused = HEADER + textwrap.dedent("""
    class Fused(nn.Module):
        def forward(self, q, k, v):
            if self.fast:
                out = F.scaled_dot_product_attention(q, k, v)
            else:
                out = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1) @ v
            return out
    """)
    assert quiet(fused) == [("forward", "the eager arm of an `if` whose other arm calls F.scaled_dot_product_attention")]
    # Not an attention at all: nothing to explain.
    assert quiet(HEADER + "def f(x, w):\n    return (x @ w).softmax(-1)\n") == []


SIZE_CHECKED = HEADER + """
class EagerAttention(nn.Module):
    def forward(self, query_states, key_states, value_states, attention_mask, bsz, q_len, kv_seq_len):
        attn_weights = torch.matmul(query_states, key_states.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if attn_weights.size() != (bsz, self.num_heads, q_len, kv_seq_len):
            raise ValueError(
                f"Attention weights should be of size {(bsz, self.num_heads, q_len, kv_seq_len)}, but is"
                f" {attn_weights.size()}"
            )
        if attention_mask is not None:
            attn_weights = attn_weights + attention_mask
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value_states)
        if attn_output.size() != (bsz, self.num_heads, q_len, self.head_dim):
            raise ValueError(f"`attn_output` should be of size {self.head_dim}, but is {attn_output.size()}")
        return attn_output
"""


def test_sizes_read_by_a_raise_message_are_no_read_of_the_scores():
    """HF's eager attention checks the scores' size and raises with ``f"... {w.size()}"``: the
    message reads sizes, as the ``if``'s test does (``meta``), not the scores' values."""
    (site,) = sites(SIZE_CHECKED)
    assert "attn_weights" in cst.Module([]).code_for_node(site.product)


def test_a_raise_message_formatting_the_scores_values_still_reads_them():
    source = SIZE_CHECKED.replace('f" {attn_weights.size()}"', 'f" {attn_weights.amax()}"')
    assert source != SIZE_CHECKED
    assert sites(source) == []
