"""TML601 where the scores are scaled or masked by arithmetic written as a call: ``torch.div(s,
d)``, ``s.mul(c)``, ``torch.add(s, mask)``, ``s.sub(mask)``, ``s.sub_(mask)``, and Megatron's
``torch.mul(s, ltor_mask) - 10000.0 * (1.0 - ltor_mask)`` in a helper method called with keyword
arguments (ruDOLPH, CogView). The value graph reads each call as the operator it spells
(``analysis/arithmetic_calls.py``): the same finding, and the same fix, as ``s / d``,
``s * c``, ``s + mask``, ``s - mask`` (numerically checked against the eager module, outputs
and gradients).

Not read so: ``torch.add(s, m, alpha=2)`` (``s + 2 m``), ``torch.div(s, d,
rounding_mode="floor")`` and their in-place forms (``s.add_(m, alpha=2)`` was read as ``s += m``
before, and the fix took ``m`` for the mask); ``torch.sub(mask, s)`` (``mask - s``) is reported without a fix, never
as an added mask. Weights that the module returns stay quiet, as with the operators.
"""

from __future__ import annotations

import pytest
import torch

from attention_cases import fixed_modules, found_sites

MODULE = '''
import math

import torch
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.drop = nn.Dropout(0.0)

    def forward(self, x, mask):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        s = torch.matmul(q, k.transpose(-1, -2))
        s = STEP
        p = torch.softmax(s, dim=-1)
        p = self.drop(p)
        return torch.matmul(p, v).transpose(1, 2).reshape(b, n, c)
'''

# each call, and the operator form whose finding and fix it must have
EXACT = [
    ("torch.div(s, math.sqrt(c // self.heads))", "s / math.sqrt(c // self.heads)"),
    ("s.div(math.sqrt(c // self.heads))", "s / math.sqrt(c // self.heads)"),
    ("torch.true_divide(s, 4.0)", "s / 4.0"),
    ("torch.mul(s, 0.25)", "s * 0.25"),
    ("s.mul(0.25)", "s * 0.25"),
    ("torch.multiply(input=s, other=0.25)", "s * 0.25"),
    ("torch.add(s, mask)", "s + mask"),
    ("s.add(mask)", "s + mask"),
    ("torch.sub(s, mask)", "s - mask"),
    ("s.subtract(other=mask)", "s - mask"),
]


def _source(step: str) -> str:
    return MODULE.replace("STEP", step)


@pytest.mark.parametrize("call, operator", EXACT)
def test_a_call_is_read_as_its_operator(call, operator):
    (site,) = found_sites(_source(call))
    (reference,) = found_sites(_source(operator))
    assert (site.reason, site.mask, site.scale) == (reference.reason, reference.mask, reference.scale) and site.reason == ""


def test_an_in_place_subtraction_is_a_mask():
    source = _source("s").replace("        s = s\n", "        s.sub_(mask)\n")
    (site,) = found_sites(source)
    assert site.reason == "" and site.mask == "-mask"


@pytest.mark.parametrize("call", ["torch.div(s, 4.0)", "s.mul(0.25)", "torch.add(s, mask)", "s.sub(mask)"])
def test_the_fix_of_a_call_form_is_exact(tmp_path, call):
    source = _source(call)
    eager, fixed = fixed_modules(tmp_path, source, "calls", 1)
    torch.manual_seed(0)
    a, b = eager.Attention(16, 4), fixed.Attention(16, 4)
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 8, 16, requires_grad=True)
    y = x.detach().clone().requires_grad_(True)
    mask = torch.randn(2, 1, 8, 8)
    out_a, out_b = a(x, mask), b(y, mask)
    torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-4)
    out_a.sum().backward()
    out_b.sum().backward()
    torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-4)


MEGATRON = '''
import math

import torch
import torch.nn as nn


class SelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.head_size = width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.attention_dropout = nn.Dropout(0.1)

    def _transpose_for_scores(self, tensor):
        shape = tensor.size()[:-1] + (self.heads, self.head_size)
        return tensor.view(*shape).permute(0, 2, 1, 3)

    def _calculate_attention_scores(self, query_layer, key_layer, ltor_mask):
        key_t = key_layer.transpose(-1, -2)
        attention_scores = torch.matmul(query_layer, key_t) / math.sqrt(self.head_size)
        ltor_mask = ltor_mask[:, :, -attention_scores.shape[-2]:]
        return torch.mul(attention_scores, ltor_mask) - 10000.0 * (1.0 - ltor_mask)

    def forward(self, hidden_states, ltor_mask):
        q, k, v = self.qkv(hidden_states).chunk(3, dim=-1)
        query_layer = self._transpose_for_scores(q)
        key_layer = self._transpose_for_scores(k)
        value_layer = self._transpose_for_scores(v)
        attention_scores = self._calculate_attention_scores(
            query_layer=query_layer, key_layer=key_layer, ltor_mask=ltor_mask
        )
        attention_probs = torch.nn.Softmax(dim=-1)(attention_scores)
        attention_probs = self.attention_dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer)
        return context_layer.permute(0, 2, 1, 3).flatten(2)
'''


def test_the_megatron_ltor_mask_in_a_helper():
    (site,) = found_sites(MEGATRON)
    assert site.reason  # (a multiplicative mask: no SDPA argument expresses it, so no fix)
    (same,) = found_sites(MEGATRON.replace("torch.mul(attention_scores, ltor_mask)", "attention_scores * ltor_mask"))
    assert same.reason == site.reason


def test_calls_that_are_not_the_plain_operator_are_not_read_as_one():
    assert found_sites(_source("torch.add(s, mask, alpha=2)")) == []
    assert found_sites(_source('torch.div(s, 4.0, rounding_mode="floor")')) == []
    (site,) = found_sites(_source("torch.sub(mask, s)"))  # ``mask - s``: not an added mask
    assert site.reason and site.mask is None
    for in_place in ("s.add_(mask, alpha=2.0)", 's.div_(4.0, rounding_mode="floor")'):  # no fix as ``s += mask``, ``s /= 4.0``
        source = _source("s").replace("        s = s\n", "        %s\n" % in_place)
        assert all(site.reason for site in found_sites(source)), in_place


def test_weights_the_module_returns_stay_quiet():
    source = _source("torch.div(s, 4.0)").replace(
        "        return torch.matmul(p, v).transpose(1, 2).reshape(b, n, c)",
        "        return torch.matmul(p, v).transpose(1, 2).reshape(b, n, c), p",
    )
    assert found_sites(source) == []
