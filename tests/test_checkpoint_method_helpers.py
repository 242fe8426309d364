"""TML402 through a checkpoint helper that is a method of the class, on a closure the calling
method defines: the form of a robot-policy model (reduced and rewritten) whose
``def _apply_checkpoint(self, func, *args, **kwargs)`` hands ``func`` to torch's checkpoint
(non-reentrant) when gradient checkpointing is on in training and else calls it, and whose
``embed_suffix`` checkpoints ``def state_proj_func(state): return self.state_proj(state)``,
one ``nn.Linear``, through ``self._apply_checkpoint(state_proj_func, state)``.

Found: the helper on ``self`` (own method, inherited from a base class of this file or of
another file of the package, a ``@staticmethod``);
a closure of one layer defined in the calling method, passed to the helper or to torch's
checkpoint. Quiet look-alikes: a closure of two layers and an activation, a closure of two
statements, a helper method that only calls its function, a closure whose name is bound again,
a method that checkpoints a layer of its own (not what it is given).

Each case marks the rows that must be reported with ``# expect: TML402`` (``fix=safe``: the
fix must be offered as safe); every other row must stay quiet.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marked_cases import marked, marked_fixes
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text

POLICY = '''
import math

import torch
import torch.nn.functional as F
from torch import nn


class Policy(nn.Module):
    def __init__(self, state_dim, action_dim, width):
        super().__init__()
        self.state_proj = nn.Linear(state_dim, width)
        self.action_in_proj = nn.Linear(action_dim, width)
        self.action_time_mlp_in = nn.Linear(2 * width, width)
        self.action_time_mlp_out = nn.Linear(width, width)
        self.embed_tokens = nn.Embedding(1000, width)
        self.gradient_checkpointing_enabled = False

    def _apply_checkpoint(self, func, *args, **kwargs):
        """Helper method to apply gradient checkpointing if enabled."""
        if self.gradient_checkpointing_enabled and self.training:
            return torch.utils.checkpoint.checkpoint(
                func, *args, use_reentrant=False, preserve_rng_state=False, **kwargs
            )
        return func(*args, **kwargs)

    def _run(self, func, *args):
        return func(*args)

    def embed_suffix(self, state, noisy_actions, time_emb):
        if self.state_proj.weight.dtype == torch.float32:
            state = state.to(torch.float32)

        def state_proj_func(state):
            return self.state_proj(state)

        state_emb = self._apply_checkpoint(state_proj_func, state)  # expect: TML402 fix=safe

        def action_proj_func(noisy_actions):
            return self.action_in_proj(noisy_actions)

        action_emb = self._apply_checkpoint(action_proj_func, noisy_actions)  # expect: TML402 fix=safe
        action_time_emb = torch.cat([action_emb, time_emb.expand_as(action_emb)], dim=2)

        def mlp_func(action_time_emb):
            x = self.action_time_mlp_in(action_time_emb)
            x = F.silu(x)
            return self.action_time_mlp_out(x)

        action_time_emb = self._apply_checkpoint(mlp_func, action_time_emb)
        return state_emb, action_time_emb

    def embed_prefix(self, tokens):
        def lang_embed_func(tokens):
            emb = self.embed_tokens(tokens)
            return emb * math.sqrt(emb.shape[-1])

        return self._apply_checkpoint(lang_embed_func, tokens)

    def unchecked(self, state):
        def state_proj_func(state):
            return self.state_proj(state)

        return self._run(state_proj_func, state)

    def rebound(self, state, other):
        def state_proj_func(state):
            return self.state_proj(state)

        if other is not None:
            state_proj_func = other
        return self._apply_checkpoint(state_proj_func, state)

    def direct(self, state):
        def state_proj_func(state):
            return self.state_proj(state)

        return torch.utils.checkpoint.checkpoint(state_proj_func, state, use_reentrant=False)  # expect: TML402 fix=safe
'''

INHERITED = '''
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Base(nn.Module):
    def maybe_checkpoint(self, fn, *args):
        if self.training:
            return checkpoint(fn, *args, use_reentrant=False)
        return fn(*args)

    @staticmethod
    def ckpt(fn, *args):
        return checkpoint(fn, *args, use_reentrant=False)

    def own(self, x):
        return checkpoint(self.block, x, use_reentrant=False)


class Head(Base):
    def __init__(self, d):
        super().__init__()
        self.out = nn.Linear(d, d)
        self.block = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, d))

    def forward(self, x):
        def out_func(h):
            return self.out(h)

        y = self.maybe_checkpoint(out_func, x)  # expect: TML402
        y = self.ckpt(self.out, y)  # expect: TML402
        y = self.own(self.out)
        return self.maybe_checkpoint(self.block, y)
'''

CASES = {"policy": POLICY, "inherited": INHERITED}


def _findings(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=("TML402",)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    found = {(finding.location.row, finding.code) for finding in _findings(CASES[name])}
    assert found == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_applicability(name):
    expected = marked_fixes(CASES[name])
    by_row = {finding.location.row: finding for finding in _findings(CASES[name])}
    for row, applicability in expected.items():
        fix = by_row[row].fix
        assert fix is not None and fix.applicability.value == applicability, row


def test_the_fix_calls_the_closure_without_the_helper():
    source = textwrap.dedent(POLICY)
    fixed = fix_text(source, lambda text: lint_source(text, "case.py", Settings(select=("TML402",))), False).text
    assert "state_emb = state_proj_func(state)" in fixed
    assert "action_emb = self._apply_checkpoint(action_proj_func" not in fixed
    assert "return state_proj_func(state)" in fixed  # `direct`: torch's checkpoint unwrapped
    assert "self._apply_checkpoint(mlp_func, action_time_emb)" in fixed  # two layers: kept
    assert lint_source(fixed, "case.py", Settings(select=("TML402",))) == []


BASE_FILE = '''
import torch
from torch import nn


class PolicyBase(nn.Module):
    def _apply_checkpoint(self, func, *args, **kwargs):
        if self.training:
            return torch.utils.checkpoint.checkpoint(func, *args, use_reentrant=False, **kwargs)
        return func(*args, **kwargs)

    def _apply_plain(self, func, *args):
        return func(*args)
'''

HEAD_FILE = '''
from torch import nn

from .base import PolicyBase


class Head(PolicyBase):
    def __init__(self, d):
        super().__init__()
        self.out = nn.Linear(d, d)

    def forward(self, x):
        def out_func(h):
            return self.out(h)

        y = self._apply_checkpoint(out_func, x)  # expect: TML402
        return self._apply_plain(out_func, y)
'''


@pytest.mark.slow  # starts the CLI
def test_a_helper_method_of_a_base_class_in_another_file(tmp_path):
    package = tmp_path / "policies"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(textwrap.dedent(BASE_FILE))
    (package / "head.py").write_text(textwrap.dedent(HEAD_FILE))
    command = [sys.executable, "-m", "torchmemlint", "check", str(package), "--no-cache", "--isolated",
               "--exit-zero", "--select", "TML402", "--output-format", "json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found = {(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in json.loads(result.stdout)}
    assert found == {("head.py", row, code) for row, code in marked(HEAD_FILE)}
