"""TML401 and ``checkpoint_sequential`` with one segment: torch checkpoints all segments but the
last, so one segment runs without any checkpoint and ``use_reentrant`` changes nothing
(alphafold3's ``checkpoint_sequential(self.layers, 1, inp)``). Two segments are reported."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest

STACK = textwrap.dedent(
    """\
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint_sequential


    class Stack(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))

        def forward(self, x):
            a = checkpoint_sequential(self.layers, 1, x)
            b = checkpoint_sequential(self.layers, segments=1, input=x)
            return checkpoint_sequential(self.layers, 2, a + b)  # row 13
    """
)


def test_one_segment_is_not_reported(tmp_path):
    (tmp_path / "stack.py").write_text(STACK)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML401", "stack.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    rows = [int(line.split(":")[1]) for line in result.stdout.splitlines() if "TML401" in line]
    assert rows == [13], result.stdout + result.stderr


@pytest.mark.parametrize("segments, forwards", [(1, 1), (2, 2)])
def test_one_segment_recomputes_nothing(segments, forwards):
    """The first layer runs once per step with one segment (no checkpoint), twice with two."""
    torch = pytest.importorskip("torch")
    from torch.utils.checkpoint import checkpoint_sequential

    layers = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    runs = []
    layers[0].register_forward_hook(lambda *_: runs.append(1))
    x = torch.randn(2, 4, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        checkpoint_sequential(layers, segments, x).sum().backward()
    assert len(runs) == forwards
