"""TML201 and an in-place change after an ``if``: an activation run in one arm whose result a
later ``+=`` may change (through the join of the arms) keeps its out-of-place form; in place,
its kept result would be changed and backward raises (a skip block whose options decide both).
The CLI's ``--fix`` on such a file leaves every option combination training, gradients equal."""

from __future__ import annotations

import itertools
import textwrap

import pytest
from project_cli import load_module, rule_rows, rule_run

SKIP_BLOCK = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class SkipBlockUp(nn.Module):
        def __init__(self, in_ch, out_ch, upsample=False, skip_connections=True):
            super().__init__()
            self.upsample = upsample
            self.skip_connections = skip_connections
            self.in_ch, self.out_ch = in_ch, out_ch
            self.convo1 = nn.ConvTranspose2d(in_ch, out_ch, 3, padding=1)
            self.convo2 = nn.ConvTranspose2d(in_ch, out_ch, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(out_ch)
            self.bn2 = nn.BatchNorm2d(out_ch)
            if upsample:
                self.upsampler = nn.ConvTranspose2d(in_ch, out_ch, 1, stride=2, dilation=2, output_padding=1)

        def forward(self, x):
            identity = x
            out = self.convo1(x)
            out = self.bn1(out)
            out = torch.nn.functional.relu(out)
            if self.in_ch == self.out_ch:
                out = self.convo2(out)
                out = self.bn2(out)
                out = torch.nn.functional.leaky_relu(out, negative_slope=0.2)  # row 26: += may change it
            if self.upsample:
                out = self.upsampler(out)
                out = torch.nn.functional.leaky_relu(out, negative_slope=0.2)  # row 29: += may change it
                identity = self.upsampler(identity)
                identity = torch.nn.functional.leaky_relu(identity, negative_slope=0.2)  # row 31: only read
            if self.skip_connections:
                if self.in_ch == self.out_ch:
                    out += identity
                else:
                    out += identity[:, self.out_ch:, :, :]
                out = torch.nn.functional.leaky_relu(out, negative_slope=0.2)  # row 37: after the +=
            return out


    class Gated(nn.Module):
        def __init__(self, c, gate=True):
            super().__init__()
            self.gate = gate
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            out = self.bn(self.conv(x))
            if self.gate:
                out = torch.nn.functional.elu(out)  # row 51: read out of place after the join
            if self.gate:
                out = out + x
            return out
    """
)


def test_a_change_in_place_after_the_join_keeps_the_activation_out_of_place(tmp_path):
    (tmp_path / "blocks.py").write_text(SKIP_BLOCK)
    result = rule_run("TML201", "blocks.py", cwd=tmp_path)
    assert rule_rows(result.stdout, "TML201") == [31, 37, 51], result.stdout + result.stderr



def _step(module, upsample: bool, skip: bool):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    block = module.SkipBlockUp(4, 4, upsample=upsample, skip_connections=skip)
    x = torch.randn(2, 4, 8, 8, requires_grad=True)
    block(x).square().sum().backward()
    return x.grad


def test_the_fixed_file_trains_under_every_option_and_the_reported_rows_alone_are_safe(tmp_path):
    torch = pytest.importorskip("torch")
    (tmp_path / "blocks.py").write_text(SKIP_BLOCK)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    (fixed / "blocks.py").write_text(SKIP_BLOCK)
    result = rule_run("TML201", "--fix", "blocks.py", cwd=fixed)
    assert result.returncode in (0, 1), result.stderr
    assert (fixed / "blocks.py").read_text() != SKIP_BLOCK  # (rows 31 and 37: safe fixes)
    original, changed = load_module(tmp_path / "blocks.py", "blocks_original"), load_module(fixed / "blocks.py", "blocks_fixed")
    for upsample, skip in itertools.product((False, True), repeat=2):  # (as many channels out as in)
        assert torch.equal(_step(original, upsample, skip), _step(changed, upsample, skip))
    # the row the rule leaves alone, made in place by hand: the += after it breaks backward
    by_hand = SKIP_BLOCK.replace("negative_slope=0.2)  # row 26", "negative_slope=0.2, inplace=True)  # row 26")
    (tmp_path / "by_hand.py").write_text(by_hand)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        _step(load_module(tmp_path / "by_hand.py", "blocks_by_hand"), False, True)
