"""TML201 on the features of sparse tensors (mmdet3d's Cylinder3D blocks, spconv code):
``out = self.conv(x)`` with ``self.conv`` a sparse convolution of mmcv.ops or spconv, then
``out.features = self.act(out.features)``: the activation runs on the convolution's output,
which nothing else reads, as the assignment replaces it. A field a function assigns is read as
a variable of its own (``analysis/fields.py``): a second read of ``out.features`` before the
assignment is the same tensor read again, and a read of ``out`` itself (returned, passed on)
reads the features it holds. Look-alikes stay quiet: the features read again, ``out``
returned with the original features, the features of ``forward``'s input, of a module that is
no sparse convolution.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

HEADER = '''
import torch
import torch.nn as nn
{import_line}


class Block(nn.Module):
    def __init__(self, cin, cout, key):
        super().__init__()
        self.conv0 = SubMConv3d(cin, cout, kernel_size=(1, 3, 3), padding=1, bias=False, indice_key=key)
        self.act0 = nn.LeakyReLU(0.1)  # expect: TML201
        self.bn0 = nn.BatchNorm1d(cout)
        self.conv1 = SparseConv3d(cout, cout, 3, stride=2, padding=1, bias=False, indice_key=key)
        self.act1 = nn.LeakyReLU(0.1)
        self.act2 = nn.LeakyReLU(0.1)
        self.act3 = nn.LeakyReLU(0.1)
        self.act4 = nn.LeakyReLU(0.1)
        self.mlp = Projection(cout)

    def forward(self, x):
        shortcut = self.conv0(x)
        shortcut.features = self.act0(shortcut.features)
        shortcut.features = self.bn0(shortcut.features)

        res = self.conv1(shortcut)
        y = self.act1(res.features)
        res.features = y + res.features

        out = self.conv1(res)
        z = self.act2(out.features)

        x.features = self.act3(x.features)

        other = self.mlp(x)
        other.features = self.act4(other.features)
        return out, z, other


class Projection(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.linear = nn.Linear(c, c)

    def forward(self, x):
        return x
'''


@pytest.mark.parametrize("import_line", [
    "from mmcv.ops import SparseConv3d, SubMConv3d",
    "from spconv.pytorch import SparseConv3d, SubMConv3d",
])
def test_an_activation_on_a_sparse_convolutions_features(import_line):
    source = textwrap.dedent(HEADER.format(import_line=import_line))
    found = {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=("TML201",)))}
    assert found == marked(source)
