"""A project subclass of one torch layer whose own ``forward`` runs its base's once
(``return super().forward(x)``), around masking, views and elementwise work: sequence_models'
``MaskedInstanceNorm2d(nn.InstanceNorm2d)`` (``super().forward(x)`` or a ``torch.cat`` of
per-sample norms) and ``MaskedConv1d(nn.Conv1d)`` (``x * mask``, then
``super().forward(x.transpose(1, 2)).transpose(1, 2)``).

TML201: an out-of-place activation on such a norm's output (called with a keyword argument,
``self.norm(h, input_mask=mask)``) follows a fresh tensor. TML402: checkpointing one such
convolution, of this file or of another file of the package, checkpoints one cheap layer.
Look-alikes stay quiet: a subclass of an activation, a subclass of a project class whose
forward contracts, a subclass that runs its base twice, that builds another module, or that
contracts in its own forward.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_paths, lint_source

NORMS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class MaskedInstanceNorm2d(nn.InstanceNorm2d):
    def __init__(self, n_dims, affine=True, eps=1e-6):
        super().__init__(n_dims, affine=affine, eps=eps)

    def forward(self, x, input_mask=None):
        if input_mask is None:
            return super().forward(x)
        normed = []
        for sample, mask in zip(x, input_mask):
            normed.append(F.pad(super().forward(sample[None]), (0, 1)))
        return torch.cat(normed, dim=0)


class Gate(nn.Sigmoid):
    def forward(self, x):
        return super().forward(x)


class Projection(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        return x @ self.weight


class Scaled(Projection):
    def forward(self, x):
        return super().forward(x)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.norm1 = MaskedInstanceNorm2d(c)
        self.gate = Gate()
        self.proj = Scaled(c)

    def forward(self, x, input_mask=None):
        h = F.elu(self.norm1(self.conv1(x), input_mask=input_mask))  # expect: TML201
        g = F.elu(self.gate(h))
        p = F.elu(self.proj(g))
        return p
'''

CONVS = '''
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
{import_line}


class TwiceConv1d(nn.Conv1d):
    def forward(self, x):
        return super().forward(super().forward(x))


class GatedConv1d(nn.Conv1d):
    def __init__(self, i, o, k):
        super().__init__(i, o, k)
        self.gate = nn.Linear(o, o)

    def forward(self, x):
        return self.gate(super().forward(x))


class MixedConv1d(nn.Conv1d):
    def forward(self, x, w):
        return super().forward(x) @ w


class Head(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.p = MaskedConv1d(d, 256, 1)
        self.q = MaskedConv1d(d, 256, 1)
        self.twice = TwiceConv1d(d, d, 1)
        self.gated = GatedConv1d(d, d, 1)
        self.mixed = MixedConv1d(d, d, 1)

    def forward(self, e, w):
        p = checkpoint(self.p, e, use_reentrant=False)  # expect: TML402
        q = checkpoint(self.q, e, use_reentrant=False)  # expect: TML402
        t = checkpoint(self.twice, e, use_reentrant=False)
        g = checkpoint(self.gated, e, use_reentrant=False)
        m = checkpoint(self.mixed, e, w, use_reentrant=False)
        return p @ q.transpose(1, 2) + t + g + m
'''

MASKED_CONV = '''
import torch.nn as nn


class MaskedConv1d(nn.Conv1d):
    def __init__(self, in_channels, out_channels, kernel_size, dilation=1):
        padding = dilation * (kernel_size - 1) // 2
        super().__init__(in_channels, out_channels, kernel_size, dilation=dilation, padding=padding)

    def forward(self, x, input_mask=None):
        if input_mask is not None:
            x = x * input_mask
        return super().forward(x.transpose(1, 2)).transpose(1, 2)
'''


def _found(source: str, select: str):
    return {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=(select,)))}


def test_an_activation_after_a_norm_subclass_called_with_a_keyword():
    source = textwrap.dedent(NORMS)
    assert _found(source, "TML201") == marked(source)


def test_checkpointing_a_conv_subclass_of_this_file():
    source = textwrap.dedent(CONVS.format(import_line="")) + textwrap.dedent(MASKED_CONV).replace("import torch.nn as nn\n", "")
    assert _found(source, "TML402") == marked(source)


@pytest.mark.parametrize("import_line", [
    "from models.convolutional import MaskedConv1d", "from .convolutional import MaskedConv1d",
])
def test_checkpointing_a_conv_subclass_of_another_file(tmp_path, import_line):
    package = tmp_path / "models"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "convolutional.py").write_text(textwrap.dedent(MASKED_CONV))
    source = textwrap.dedent(CONVS.format(import_line=import_line))
    path = package / "structure.py"
    path.write_text(source)
    (result,) = lint_paths([str(path)], Settings(select=("TML402",)), jobs=1)
    assert {(f.location.row, f.code) for f in result.findings} == marked(source)
