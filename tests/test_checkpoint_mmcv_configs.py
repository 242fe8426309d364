"""TML403 on OpenMMLab backbones whose norm config is copied before it is used: the form of
pose-estimation ResNet/ShuffleNetV2 blocks (reduced and rewritten) that guard their mutable
default with ``norm_cfg = copy.deepcopy(norm_cfg)`` and then build the norm layers with mmcv's
``build_norm_layer(norm_cfg, c, postfix=1)`` (registered by ``self.add_module(self.norm1_name,
norm1)``, read through ``@property def norm1``) or ``ConvModule(..., norm_cfg=norm_cfg)``, and
run them in a checkpointed ``_inner_forward``. mmcv is never imported: its builders are known
from its documentation (``analysis/checkpoints.py``), a ``type`` of ``BN`` builds BatchNorm.

Found: the copied parameter whose default is ``dict(type='BN')`` (``copy.deepcopy``, ``from
copy import deepcopy``, ``import copy as cp_``, ``cfg.copy()``, ``dict(cfg, ...)``), read
directly, through ``self.norm_cfg``, or in a subclass through the base's ``__init__``; a key
other than ``type`` set on the copy. Quiet look-alikes: a copied default of ``dict(type='GN')``,
``ConvModule(..., norm_cfg=None)`` and ``norm_cfg=dict(type='GN')`` passed explicitly, a
parameter rebound to something other than its copy, a copy whose ``type`` the body sets
(``cfg['type'] = ...``) or may set (``cfg.update(other)``), and a block that the file builds
with ``norm_cfg=dict(type='GN')``.

Each case marks the rows that must be reported with ``# expect: TML403``; every other row must
stay quiet.
"""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

RESNET = '''
import copy

import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import build_conv_layer, build_norm_layer


class BasicBlock(nn.Module):
    def __init__(self, in_channels, out_channels, with_cp=False, conv_cfg=None, norm_cfg=dict(type='BN')):
        # Protect mutable default arguments
        norm_cfg = copy.deepcopy(norm_cfg)
        super().__init__()
        self.with_cp = with_cp
        self.norm_cfg = norm_cfg
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, out_channels, postfix=1)
        self.conv1 = build_conv_layer(conv_cfg, in_channels, out_channels, 3, padding=1, bias=False)
        self.add_module(self.norm1_name, norm1)
        self.relu = nn.ReLU(inplace=True)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            out = self.conv1(x)
            out = self.norm1(out)
            return out + x

        if self.with_cp and x.requires_grad:
            out = cp.checkpoint(_inner_forward, x)  # expect: TML403
        else:
            out = _inner_forward(x)
        return self.relu(out)


class Bottleneck(nn.Module):
    def __init__(self, in_channels, out_channels, with_cp=False, norm_cfg=dict(type='SyncBN', requires_grad=True)):
        norm_cfg = norm_cfg.copy()
        norm_cfg.setdefault('eps', 1e-5)
        super().__init__()
        self.with_cp = with_cp
        self.norm_cfg = norm_cfg
        self.conv1 = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.norm3_name, norm3 = build_norm_layer(self.norm_cfg, out_channels, postfix=3)
        self.add_module(self.norm3_name, norm3)

    @property
    def norm3(self):
        return getattr(self, self.norm3_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm3(self.conv1(x))

        if self.with_cp and x.requires_grad:
            return cp.checkpoint(_inner_forward, x)  # expect: TML403
        return _inner_forward(x)


class WideBlock(BasicBlock):
    def forward(self, x):
        def _inner_forward(x):
            return self.norm1(self.conv1(x))

        return cp.checkpoint(_inner_forward, x)  # expect: TML403


class GroupNormBlock(nn.Module):
    def __init__(self, channels, with_cp=False, norm_cfg=dict(type='GN', num_groups=32)):
        norm_cfg = copy.deepcopy(norm_cfg)
        super().__init__()
        self.with_cp = with_cp
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, channels, postfix=1)
        self.add_module(self.norm1_name, norm1)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm1(x)

        return cp.checkpoint(_inner_forward, x)


class RetypedBlock(nn.Module):
    def __init__(self, channels, norm_cfg=dict(type='BN')):
        norm_cfg = copy.deepcopy(norm_cfg)
        norm_cfg['type'] = 'LN'
        super().__init__()
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, channels, postfix=1)
        self.add_module(self.norm1_name, norm1)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm1(x)

        return cp.checkpoint(_inner_forward, x)


class UpdatedBlock(nn.Module):
    def __init__(self, channels, overrides, norm_cfg=dict(type='BN')):
        norm_cfg = copy.deepcopy(norm_cfg)
        norm_cfg.update(overrides)
        super().__init__()
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, channels, postfix=1)
        self.add_module(self.norm1_name, norm1)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm1(x)

        return cp.checkpoint(_inner_forward, x)


class ReplacedBlock(nn.Module):
    def __init__(self, channels, layer_cfg, norm_cfg=dict(type='BN')):
        norm_cfg = copy.deepcopy(layer_cfg)
        super().__init__()
        self.norm1_name, norm1 = build_norm_layer(norm_cfg, channels, postfix=1)
        self.add_module(self.norm1_name, norm1)

    @property
    def norm1(self):
        return getattr(self, self.norm1_name)

    def forward(self, x):
        def _inner_forward(x):
            return self.norm1(x)

        return cp.checkpoint(_inner_forward, x)
'''

SHUFFLENET = '''
import copy as cp_
from copy import deepcopy

import torch
import torch.nn as nn
import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule


class InvertedResidual(nn.Module):
    def __init__(self, in_channels, out_channels, with_cp=False, conv_cfg=None,
                 norm_cfg=dict(type='BN'), act_cfg=dict(type='ReLU')):
        norm_cfg = deepcopy(norm_cfg)
        act_cfg = deepcopy(act_cfg)
        super().__init__()
        self.with_cp = with_cp
        branch_features = out_channels // 2
        self.branch2 = nn.Sequential(
            ConvModule(in_channels, branch_features, kernel_size=1, conv_cfg=conv_cfg,
                       norm_cfg=norm_cfg, act_cfg=act_cfg),
            ConvModule(branch_features, branch_features, kernel_size=3, padding=1,
                       groups=branch_features, conv_cfg=conv_cfg, norm_cfg=norm_cfg, act_cfg=None),
        )

    def forward(self, x):
        def _inner_forward(x):
            x1, x2 = x.chunk(2, dim=1)
            return torch.cat((x1, self.branch2(x2)), dim=1)

        if self.with_cp and x.requires_grad:
            out = cp.checkpoint(_inner_forward, x)  # expect: TML403
        else:
            out = _inner_forward(x)
        return out


class AliasedCopy(nn.Module):
    def __init__(self, channels, norm_cfg=dict(type='BN1d')):
        norm_cfg = cp_.deepcopy(norm_cfg)
        super().__init__()
        self.proj = ConvModule(channels, channels, 1, norm_cfg=dict(norm_cfg, momentum=0.01))

    def forward(self, x):
        def _inner_forward(x):
            return self.proj(x)

        return cp.checkpoint(_inner_forward, x)  # expect: TML403


class PlainConv(nn.Module):
    def __init__(self, channels, norm_cfg=dict(type='BN')):
        norm_cfg = deepcopy(norm_cfg)
        super().__init__()
        self.conv = ConvModule(channels, channels, 3, padding=1, norm_cfg=None)
        self.gn = ConvModule(channels, channels, 1, norm_cfg=dict(type='GN', num_groups=8))

    def forward(self, x):
        def _inner_forward(x):
            return self.gn(self.conv(x))

        return cp.checkpoint(_inner_forward, x)


class GroupNormChoice(nn.Module):
    def __init__(self, channels, norm_cfg=dict(type='BN')):
        norm_cfg = deepcopy(norm_cfg)
        super().__init__()
        self.conv = ConvModule(channels, channels, 3, padding=1, norm_cfg=norm_cfg)

    def forward(self, x):
        def _inner_forward(x):
            return self.conv(x)

        return cp.checkpoint(_inner_forward, x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = GroupNormChoice(64, norm_cfg=dict(type='GN', num_groups=32))
'''

CASES = {"resnet": RESNET, "shufflenet": SHUFFLENET}


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    source = textwrap.dedent(CASES[name])
    found = {(finding.location.row, finding.code) for finding in lint_source(source, "case.py", Settings(select=("TML403",)))}
    assert found == marked(source)


def test_the_message_names_the_configured_batch_norm():
    source = textwrap.dedent(RESNET)
    (first, *_) = lint_source(source, "case.py", Settings(select=("TML403",)))
    assert "build_norm_layer(type='BN')" in first.message
