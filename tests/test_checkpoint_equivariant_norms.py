"""TML403 on the batch norms of e2cnn/escnn (equivariant networks; mmrotate's ReResNet):
``build_enn_norm_layer(c, postfix)`` returns ``('bn1', enn.InnerBatchNorm(in_type))``, added
with ``add_module`` and read through a property, and ``forward`` checkpoints an inner function
that runs it: ``InnerBatchNorm`` (and ``IIDBatchNorm1d/2d/3d``) keep running statistics as a
torch BatchNorm does, updated again by the recomputation. Look-alikes stay quiet:
``track_running_stats=False``, e2cnn's activation, a class of the file that happens to be
called ``InnerBatchNorm``.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

SOURCE = '''
import torch.nn as nn
import torch.utils.checkpoint as cp
{import_line}


def build_enn_divide_feature(planes):
    return planes


def build_enn_norm_layer(num_features, postfix=''):
    in_type = build_enn_divide_feature(num_features)
    return 'bn' + str(postfix), {norm}


class BasicBlock(nn.Module):
    def __init__(self, planes, with_cp=True):
        super().__init__()
        self.with_cp = with_cp
        self.norm1_name, norm1 = build_enn_norm_layer(planes, postfix=1)
        self.conv1 = nn.Conv2d(planes, planes, 3, padding=1)
        self.add_module(self.norm1_name, norm1)
        self.relu = enn.ReLU(planes, inplace=True)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.relu(self.norm1(self.conv1(x)))

        if self.with_cp:
            return cp.checkpoint(_inner_forward, x, use_reentrant=False){mark}
        return _inner_forward(x)
'''
LOCAL = '''

class InnerBatchNorm(nn.Module):
    def __init__(self, in_type):
        super().__init__()
        self.norm = nn.LayerNorm(in_type)

    def forward(self, x):
        return self.norm(x)
'''
MARK = "  # expect: TML403"

CASES = {
    "e2cnn": ("import e2cnn.nn as enn", "enn.InnerBatchNorm(in_type)", MARK),
    "escnn_iid": ("from escnn import nn as enn", "enn.IIDBatchNorm2d(in_type)", MARK),
    "no_running_stats": ("import e2cnn.nn as enn", "enn.InnerBatchNorm(in_type, track_running_stats=False)", ""),
    "activation": ("import e2cnn.nn as enn", "enn.ReLU(in_type)", ""),
    "local_class": ("import e2cnn.nn as enn", "InnerBatchNorm(in_type)", ""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_equivariant_batch_norm_in_a_checkpointed_block(name):
    import_line, norm, mark = CASES[name]
    source = textwrap.dedent(SOURCE.format(import_line=import_line, norm=norm, mark=mark))
    if name == "local_class":
        source += textwrap.dedent(LOCAL)
    found = {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=("TML403",)))}
    assert found == marked(source)
