"""TML402-TML404 through torch's ``apply_activation_checkpointing(model,
checkpoint_wrapper_fn=..., check_fn=...)``: every submodule ``check_fn`` accepts is wrapped by
the wrapper function, so the classes it selects are the checkpointed segments and the keywords
of a ``partial(checkpoint_wrapper, ...)`` are the ones torch's checkpoint gets. The forms of
FSDP training scripts (reduced and rewritten): the wrapper partial and the ``check_fn`` lambda
bound to names of the module or of the function, a ``def check_fn``, ``isinstance`` with a
tuple, ``type(m) in (...)``. Quiet look-alikes: a ``check_fn`` that selects blocks, or
anything but a class test (a size condition, ``lambda m: True``), the RNG state kept, a
project's own function of that name.

Each case marks the rows that must be reported with ``# expect: TML40x`` (``fix=...``: the
fix's applicability); every other row must stay quiet.
"""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked, marked_fixes
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text

HEADER = '''
import functools
from functools import partial

import torch
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl,
    apply_activation_checkpointing,
    checkpoint_wrapper,
)


class Block(nn.Module):
    def __init__(self, d, p=0.1):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, 4, batch_first=True)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)
        self.drop = nn.Dropout(p)

    def forward(self, x):
        x = x + self.attn(x, x, x)[0]
        return x + self.drop(self.fc2(torch.relu(self.fc1(x))))


class ConvBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))
'''

TUTORIAL = HEADER + '''

non_reentrant_wrapper = partial(
    checkpoint_wrapper,
    checkpoint_impl=CheckpointImpl.NO_REENTRANT,
    preserve_rng_state=False,  # expect: TML404 fix=unsafe
)
kept_rng_wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
check_fn = lambda submodule: isinstance(submodule, Block)


def apply_fsdp_checkpointing(model):
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=non_reentrant_wrapper, check_fn=check_fn)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=kept_rng_wrapper, check_fn=check_fn)


def apply_conv_checkpointing(model):
    def selects(module):
        return type(module) in (ConvBlock,)

    apply_activation_checkpointing(
        model,
        checkpoint_wrapper_fn=kept_rng_wrapper,
        check_fn=selects,  # expect: TML403
    )
'''

SINGLE = HEADER + '''

def wrap_linears(model, big):
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear))  # expect: TML402
    apply_activation_checkpointing(  # expect: TML402
        model,
        checkpoint_wrapper_fn=functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT),
        check_fn=lambda m: isinstance(m, (nn.Linear, nn.LayerNorm)) or type(m) is nn.GELU,
    )
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, (nn.Linear, Block)))
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear) and m.in_features > big)
    apply_activation_checkpointing(model, check_fn=lambda m: True)
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
'''

OWN = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


def apply_activation_checkpointing(model, check_fn):
    for name, child in model.named_children():
        if check_fn(child):
            setattr(model, name, child)


def wrap(model):
    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, nn.Linear))
'''

CASES = {"tutorial": TUTORIAL, "single": SINGLE, "own": OWN}
SELECT = ("TML401", "TML402", "TML403", "TML404")


def _lint(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=SELECT))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    found = {(finding.location.row, finding.code) for finding in _lint(CASES[name])}
    assert found == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_applicability(name):
    expected = marked_fixes(CASES[name])
    found = {finding.location.row: (finding.fix.applicability.value if finding.fix else None) for finding in _lint(CASES[name])}
    assert {row: found.get(row) for row in expected} == expected


def test_the_fix_removes_the_keyword_from_the_wrapper_partial():
    source = textwrap.dedent(TUTORIAL)
    fixed = fix_text(source, lambda text: lint_source(text, "case.py", Settings(select=("TML404",))), True).text
    assert "preserve_rng_state" not in fixed
    assert "partial(\n    checkpoint_wrapper,\n    checkpoint_impl=CheckpointImpl.NO_REENTRANT," in fixed
    assert lint_source(fixed, "case.py", Settings(select=("TML404",))) == []


def test_the_reentrant_wrapper_is_named_in_the_message():
    messages = [f.message for f in _lint(SINGLE) if f.code == "TML402"]
    assert "`Linear`" in messages[0] and "reentrant" not in messages[0]
    assert "`Linear or LayerNorm or GELU`" in messages[1] and "the reentrant variant recomputes" in messages[1]
