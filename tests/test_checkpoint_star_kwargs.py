"""TML401 on ``checkpoint(fn, x, **kwargs)``: the keywords splatted are the checkpointed
callable's, not checkpoint's, when the same function also calls that very callable with the
same ``**kwargs`` (flash-attention's ``MHA.forward``: ``self.inner_attn(qkv, **kwargs)`` in one
arm, ``torch.utils.checkpoint.checkpoint(self.inner_attn, qkv, **kwargs)`` in the other). Then
the call runs torch's reentrant variant and is reported; the fix adds ``use_reentrant=False``
after the ``**kwargs`` (valid Python, and the keyword reaches checkpoint, not the callable).

Look-alikes stay quiet: ``**kwargs`` passed only to checkpoint (they may carry
``use_reentrant``), passed to another callable, HF's ``partial(checkpoint,
**gradient_checkpointing_kwargs)``, a ``**`` of something other than a name.

Each row that must be reported ends with ``# expect: CODE``; every other row must stay quiet."""

from __future__ import annotations

import textwrap

import pytest
import torch

from marked_cases import fix_at, lint_in_process, marked, marked_fixes
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text

CODES = ("TML401", "TML402", "TML403", "TML404")

CASES = {
    "both_arms": '''
import torch
import torch.nn as nn
import torch.utils.checkpoint


class Inner(nn.Module):
    def forward(self, qkv, scale=1.0, key_padding_mask=None):
        q, k, v = qkv.unbind(1)
        return torch.softmax(q @ k.transpose(-2, -1) * scale, dim=-1) @ v


class MHA(nn.Module):
    def __init__(self, checkpointing=False):
        super().__init__()
        self.inner_attn = Inner()
        self.qkv = nn.Linear(8, 24)
        self.checkpointing = checkpointing

    def forward(self, x, scale=1.0, **kwargs):
        qkv = self.qkv(x).view(x.shape[0], 3, x.shape[1], 8)
        kwargs = {"scale": scale, **kwargs}
        if not self.checkpointing:
            context = self.inner_attn(qkv, **kwargs)
        else:
            context = torch.utils.checkpoint.checkpoint(self.inner_attn, qkv, **kwargs)  # expect: TML401 fix=unsafe
        return context
''',
    "method_arms_multiline": '''
from torch.utils.checkpoint import checkpoint


class Cross:
    def forward(self, q, kv, **kwargs):
        if self.checkpointing:
            return checkpoint(  # expect: TML401 fix=unsafe
                self.inner_cross_attn, q, kv, **kwargs
            )
        return self.inner_cross_attn(q, kv, **kwargs)
''',
    "look_alikes": '''
from functools import partial

import torch
from torch.utils.checkpoint import checkpoint


class OnlyCheckpoint:
    def forward(self, x, **ckpt_kwargs):
        return checkpoint(self.block, x, **ckpt_kwargs)


class AnotherCallable:
    def forward(self, x, **kwargs):
        y = self.other(x, **kwargs)
        return checkpoint(self.block, y, **kwargs)


class TwoDicts:
    def forward(self, x, options, **kwargs):
        y = self.block(x, **kwargs)
        return checkpoint(self.block, y, **kwargs, **options)


class NotAName:
    def forward(self, x):
        y = self.block(x, **self.options)
        return checkpoint(self.block, y, **self.config())


class Hf:
    def gradient_checkpointing_enable(self, gradient_checkpointing_kwargs):
        self._gradient_checkpointing_func = partial(checkpoint, **gradient_checkpointing_kwargs)
''',
}


def _lint(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=CODES))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows_and_fixes(name):
    found = lint_in_process(CASES[name], CODES)
    assert set(found) == marked(CASES[name])
    assert {row: fix_at(found, row) for row in marked_fixes(CASES[name])} == marked_fixes(CASES[name])


def test_the_fixed_call_runs_non_reentrant_with_the_callables_keywords():
    source = textwrap.dedent(CASES["both_arms"])
    fixed = fix_text(source, _lint, unsafe_fixes=True).text
    assert "checkpoint(self.inner_attn, qkv, **kwargs, use_reentrant=False)" in fixed
    assert not _lint(fixed)
    namespace: dict = {}
    exec(compile(fixed, "case.py", "exec"), namespace)
    torch.manual_seed(0)
    plain = namespace["MHA"](checkpointing=False)
    checkpointed = namespace["MHA"](checkpointing=True)
    checkpointed.load_state_dict(plain.state_dict())
    x = torch.randn(2, 5, 8)
    outputs, grads = [], []
    for model in (plain, checkpointed):
        out = model(x, scale=0.5)
        out.sum().backward()
        outputs.append(out.detach())
        grads.append(model.qkv.weight.grad.clone())
    assert torch.equal(outputs[0], outputs[1])
    assert torch.allclose(grads[0], grads[1])
