"""TML601: a call that turns a module's flag on only inside the caller's own flag off by default
(``flags._behind_flag``) does not turn it on by default:

    class Layer(nn.Module):
        def forward(self, x, return_attn=False):
            if return_attn:
                out, attn = self.attn(x, return_attn=True)   # only when the caller asks
                return out, attn
            out, _ = self.attn(x)
            return out

The attention's weights, returned only under ``return_attn``, are then not kept by default:
reported without a fix. Look-alikes stay quiet: the call made unconditionally, or under a test
that is not such a flag (``if self.training:``), or under the caller's flag on by default; and
a function whose every call turns the flag on (behind the callers' flags or not): whenever it
runs, its weights are returned.
"""

from __future__ import annotations

from attention_cases import found_sites

GUARDED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiHeadAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.drop = nn.Dropout(0.1)

    def forward(self, x, attn_mask=None, return_attn: bool = False):
        b, n, c = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn_scores = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        if attn_mask is not None:
            attn_scores = attn_scores.masked_fill(~attn_mask, float("-inf"))
        attn = self.drop(F.softmax(attn_scores, dim=-1))
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        if return_attn:
            return out, attn
        return out, None


class Layer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.gene_attn = MultiHeadAttention(dim, heads)

    def forward(self, x, mask=None, return_attn: bool = False):
        if return_attn:
            out, attn = self.gene_attn(x, attn_mask=mask, return_attn=True)
            return x + out, attn
        out, _ = self.gene_attn(x, attn_mask=mask)
        return x + out
'''


def test_a_flag_turned_on_only_behind_the_callers_own_flag_is_off():
    (site,) = found_sites(GUARDED)
    assert site.function.name.value == "forward" and not site.fixable


def test_look_alikes_stay_quiet():
    always = GUARDED.replace("        if return_attn:\n            out, attn = self.gene_attn(", "        if True:\n            out, attn = self.gene_attn(")
    training = GUARDED.replace("        if return_attn:\n            out, attn = self.gene_attn(", "        if self.training:\n            out, attn = self.gene_attn(")
    on_by_default = GUARDED.replace("def forward(self, x, mask=None, return_attn: bool = False):", "def forward(self, x, mask=None, return_attn: bool = True):")
    for source in (always, training, on_by_default):
        assert source != GUARDED and found_sites(source) == [], source


# explainable-attention's ``naive_flex_attention_with_scores``: a function that computes the
# weights to hand them out, run only by a wrapper that asks for them (under its own flag, off by
# default), passing its ``**kwargs`` on after the flag: whenever it runs, the weights are returned
ONLY_GATED = '''
import math

import torch


def naive_attention_with_scores(query, key, value, return_attention_scores: bool = False, **kwargs):
    scores = query @ key.transpose(-2, -1)
    scores *= kwargs.get("scale_factor", 1 / math.sqrt(query.shape[-1]))
    scores = torch.softmax(scores, -1)
    attention = torch.matmul(scores, value)
    if return_attention_scores:
        return attention, scores
    return attention


def attention_with_scores(query, key, value, *args, return_attention_scores: bool = False, **kwargs):
    if return_attention_scores and not kwargs.get("return_lse", False):
        return naive_attention_with_scores(query, key, value, return_attention_scores=True, **kwargs)
    return torch.nn.functional.scaled_dot_product_attention(query, key, value)
'''


def test_a_function_every_call_of_which_turns_the_flag_on_returns_its_weights():
    assert found_sites(ONLY_GATED) == []


def test_a_call_that_leaves_the_flag_off_makes_it_off_by_default_again():
    also_plain = ONLY_GATED + '''

def block(q, k, v):
    return naive_attention_with_scores(q, k, v)
'''
    (site,) = found_sites(also_plain)
    assert site.function.name.value == "naive_attention_with_scores" and not site.fixable


def test_a_splatted_kwargs_holds_no_position():
    """``f(q, k, v, flag=True, **kwargs)``: the ``**kwargs`` is not the fourth positional argument."""
    import libcst as cst

    from torchmemlint.analysis.factories import parameter
    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings

    module = cst.parse_module(ONLY_GATED)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    function = next(f for f in module.body if type(f) is cst.FunctionDef)
    passed = analysis.factories.passed(function, parameter(function, "return_attention_scores"))
    assert [module.code_for_node(value) for value, _ in passed] == ["True"]
