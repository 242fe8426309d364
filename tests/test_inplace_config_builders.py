"""TML201 for activations OpenMMLab's ``build_activation_layer(cfg)`` builds from a config dict
(mmdet3d's Cylinder3D blocks: ``act_cfg=dict(type='LeakyReLU')`` as a parameter default, then
``self.act = build_activation_layer(act_cfg)``): the layer the config's ``type`` names, with
the dict's other keys as its keywords; a literal dict, ``{'type': ...}``, or a parameter whose
default is one (what every call of the class in the file passes, else the default). Reported
without a fix (the builder takes no ``inplace``; the config is the caller's). Look-alikes stay
quiet: ``inplace=True`` in the config, a caller that passes another type, a config type the
rule does not flag (``ReLU``), a config that is not literal, a local function of that name.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

CASES = {
    "defaults": '''
import torch.nn as nn
from mmcv.cnn import build_activation_layer, build_norm_layer
from mmengine.model import BaseModule


class ResBlock(BaseModule):
    def __init__(self, cin, cout, norm_cfg, act_cfg=dict(type='LeakyReLU'), inplace_cfg={'type': 'LeakyReLU', 'inplace': True}):
        super().__init__()
        self.conv0 = nn.Conv3d(cin, cout, 3, padding=1, bias=False)
        self.act0 = build_activation_layer(act_cfg)  # expect: TML201 fix=none
        self.bn0 = build_norm_layer(norm_cfg, cout)[1]
        self.conv1 = nn.Conv3d(cout, cout, 3, padding=1, bias=False)
        self.act1 = build_activation_layer(inplace_cfg)
        self.act2 = build_activation_layer(dict(type='ELU', alpha=1.0))  # expect: TML201 fix=none
        self.act3 = build_activation_layer(dict(type='ReLU'))

    def forward(self, x):
        res = self.bn0(self.act0(self.conv0(x)))
        res = self.act1(self.conv1(res))
        res = self.act2(self.conv1(res))
        return self.act3(self.conv1(res))


class Backbone(BaseModule):
    def __init__(self, c, norm_cfg=dict(type='BN1d')):
        super().__init__()
        self.block = ResBlock(c, c, norm_cfg=norm_cfg)
''',
    "callers": '''
import torch.nn as nn
from mmcv.cnn import build_activation_layer


class Block(nn.Module):
    def __init__(self, c, act_cfg=dict(type='LeakyReLU', negative_slope=0.1)):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = build_activation_layer(act_cfg)

    def forward(self, x):
        return self.act(self.conv(x))


class Net(nn.Module):
    def __init__(self, c, act_cfg):
        super().__init__()
        self.a = Block(c)
        self.b = Block(c, act_cfg=dict(type='Sigmoid'))
        self.c = Block(c, act_cfg=act_cfg)
''',
    "same_everywhere": '''
import torch.nn as nn
from mmcv.cnn.bricks import build_activation_layer


class Block(nn.Module):
    def __init__(self, c, act_cfg=dict(type='LeakyReLU', negative_slope=0.1)):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = build_activation_layer(act_cfg)  # expect: TML201 fix=none

    def forward(self, x):
        return self.act(self.conv(x))


class Net(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = Block(c)
        self.b = Block(c, act_cfg=dict(type='LeakyReLU', negative_slope=0.1))
''',
    "local_function": '''
import torch.nn as nn


def build_activation_layer(cfg):
    return nn.Sigmoid()


class Block(nn.Module):
    def __init__(self, c, act_cfg=dict(type='LeakyReLU')):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.act = build_activation_layer(act_cfg)

    def forward(self, x):
        return self.act(self.conv(x))
''',
}


def _lint(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=("TML201",)))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    findings = _lint(CASES[name])
    assert {(f.location.row, f.code) for f in findings} == marked(CASES[name])
    assert all(f.fix is None for f in findings)
