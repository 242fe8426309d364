"""TML401 on ``functools.partial(checkpoint, fn)``: a function with the checkpointed callable
bound, whose every call runs ``checkpoint(fn, *args)`` with the partial's keywords
(memory-efficient-attention-pytorch's module-level ``checkpointed_summarize_qkv_chunk =
partial(checkpoint, summarize_qkv_chunk)``, chosen by a conditional and called once per chunk
pair). Read as that checkpoint call, written at the partial; the fix adds
``use_reentrant=False`` to it. Look-alikes stay quiet: the keyword given (also ``True``, a
choice), a partial of torch's checkpoint with only keywords (a checkpointing function, read
where it is called), a partial of another function, ``checkpoint_sequential``'s partial,
a partial built under ``torch.no_grad()``.

Each row that must be reported ends with ``# expect: CODE``; every other row must stay quiet
for the four codes."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked, marked_fixes
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

CODES = ("TML401", "TML402", "TML403", "TML404")

CASES = {
    "module_level": '''
import torch
from functools import partial
from torch.utils.checkpoint import checkpoint


def summarize_chunk(q, k, v):
    weight = torch.einsum("b h i d, b h j d -> b h i j", q, k)
    weight_max = weight.amax(dim=-1, keepdim=True).detach()
    exp_weight = (weight - weight_max).exp()
    return exp_weight.sum(dim=-1), torch.einsum("b h i j, b h j d -> b h i d", exp_weight, v)


checkpointed_summarize_chunk = partial(checkpoint, summarize_chunk)  # expect: TML401 fix=unsafe
kept = partial(checkpoint, summarize_chunk, use_reentrant=False)
chosen = partial(checkpoint, summarize_chunk, use_reentrant=True)
plain = partial(checkpoint, use_reentrant=False)
other = partial(torch.einsum, "b h i d, b h j d -> b h i j")


def attention(q, k, v, bucket=512):
    summarize = checkpointed_summarize_chunk if q.requires_grad else summarize_chunk
    out = []
    for q_chunk in q.split(bucket, dim=-2):
        for k_chunk, v_chunk in zip(k.split(bucket, dim=-2), v.split(bucket, dim=-2)):
            out.append(summarize(q_chunk, k_chunk, v_chunk))
            out.append(kept(q_chunk, k_chunk, v_chunk))
            out.append(chosen(q_chunk, k_chunk, v_chunk))
            out.append(plain(summarize_chunk, q_chunk, k_chunk, v_chunk))
    return out
''',
    "in_a_method": '''
import functools

import torch
import torch.utils.checkpoint
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential


class Stack(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim)) for _ in range(depth)])
        self.grad_checkpointing = True

    def forward(self, x):
        for block in self.blocks:
            run = functools.partial(torch.utils.checkpoint.checkpoint, block) if self.grad_checkpointing else block  # expect: TML401 fix=unsafe
            x = run(x)
        segments = functools.partial(checkpoint_sequential, self.blocks, 2)
        with torch.no_grad():
            frozen = functools.partial(torch.utils.checkpoint.checkpoint, self.blocks[0])
            frozen(x)
        return segments(x)
''',
}


def _lint(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=CODES))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    assert {(f.location.row, f.code) for f in _lint(CASES[name])} == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_fix_goes_into_the_partial(name):
    expected = marked_fixes(CASES[name])
    findings = _lint(CASES[name])
    assert {f.location.row: (f.fix.applicability.value if f.fix else None) for f in findings} == expected
    for finding in findings:
        (edit,) = finding.fix.edits
        assert "use_reentrant=False" in edit.content
