"""TML201 on forms a fourteenth held-out set showed it missed, modelled as general constructs.

A layer the class inherits: ``self.norm1`` that the class never assigns, built by
the ``__init__`` of its one base class, in the same file or in another file of the project
(``class ScaleDetector(DetectorModule)`` running ``F.leaky_relu(self.norm1(self.conv1(x)))``,
``norm1`` an ``InstanceNorm2d`` of ``DetectorModule``): the layer is what it is there, through
any number of such bases.

Look-alikes stay quiet: a class that assigns the attribute itself (``self.norm1 =
nn.Sigmoid()``, whose backward needs its output), an inherited layer whose output backward
needs (a ``Sigmoid``), a class with two bases (which one builds the attribute is not followed),
and a base the project does not define.

A wrapper alias bound more than once in ``__init__`` (``norm_f = weight_norm if ... else
spectral_norm``, then again under ``if hasattr(cfg, ...)``): every binding is a wrapper, which
returns the module it is given, so ``norm_f(nn.Conv2d(...))`` is the convolution whichever
binding holds. Look-alikes: a binding to something else, and the alias as ``__init__``'s
parameter (a caller may pass anything).

A Sequential filled by ``add_module`` where a module between the layer and the activation is
added under an ``if`` (``if bn: seq.add_module("bn", nn.BatchNorm2d(c))``): the activation runs
on either, so it is reported when both allow it. Look-alikes: one of the two keeps its output
(a ``Sigmoid`` under the ``if``), and every module before it added under an ``if``.

A Sequential of a list made by concatenating lists (``model = down + [submodule] + up``, the
lists built per arm of an ``if``; TML203): an in-place activation first in ``down`` is first in
the Sequential, so ``torch.cat([x, self.model(x)], 1)`` reads the activated ``x``. Look-alikes:
a list another name shares (``model = down``, which later ``down.append`` would change too) and
an activation that is not first.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "__init__": "",
    "detector_base": '''
        import torch.nn as nn


        class DetectorModule(nn.Module):
            def __init__(self, k):
                super().__init__()
                self.conv1 = nn.Conv2d(1, 16, k)
                self.norm1 = nn.InstanceNorm2d(16, affine=True)
                self.conv2 = nn.Conv2d(16, 16, k)
                self.gate = nn.Sigmoid()
    ''',
    "detectors": '''
        import torch.nn as nn
        import torch.nn.functional as F

        from .detector_base import DetectorModule


        class ScaleDetector(DetectorModule):
            def forward(self, image):
                features = F.leaky_relu(self.norm1(self.conv1(image)), 0.2)  # expect: TML201
                gated = F.elu(self.gate(self.conv2(features)))
                return features.sum() + gated


        class DeeperDetector(ScaleDetector):
            def forward(self, image):
                return F.leaky_relu(self.norm1(self.conv1(image)))  # expect: TML201


        class Relabelled(DetectorModule):
            def __init__(self, k):
                super().__init__(k)
                self.norm1 = nn.Sigmoid()

            def forward(self, image):
                return F.leaky_relu(self.norm1(self.conv1(image)), 0.2)


        class Mixed(DetectorModule, nn.Sequential):
            def forward(self, image):
                return F.leaky_relu(self.norm1(self.conv1(image)))
    ''',
    "same_file": '''
        import torch.nn as nn
        import torch.nn.functional as F
        from somewhere import ForeignBase


        class Trunk(nn.Module):
            def __init__(self):
                super().__init__()
                self.proj = nn.Linear(8, 8)
                self.norm = nn.LayerNorm(8)


        class Head(Trunk):
            def forward(self, x):
                h = self.norm(self.proj(x))
                return F.elu(h)  # expect: TML201


        class Borrowed(ForeignBase):
            def forward(self, x):
                return F.elu(self.norm(self.proj(x)))
    ''',
    "rebound_wrapper": '''
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.utils import spectral_norm, weight_norm


        class ResolutionCritic(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                norm_f = weight_norm if not cfg.spectral else spectral_norm
                if hasattr(cfg, "critic_spectral"):
                    norm_f = spectral_norm if cfg.critic_spectral else weight_norm
                self.convs = nn.ModuleList([norm_f(nn.Conv2d(1, 8, 3)), norm_f(nn.Conv2d(8, 8, 3))])

            def forward(self, x):
                features = []
                for layer in self.convs:
                    x = layer(x)
                    x = F.leaky_relu(x, 0.1)  # expect: TML201
                    features.append(x)
                return x, features


        class SometimesShared(nn.Module):
            def __init__(self, cfg, shared):
                super().__init__()
                norm_f = weight_norm
                if cfg.share:
                    norm_f = shared
                self.convs = nn.ModuleList([norm_f(nn.Conv2d(1, 8, 3))])

            def forward(self, x):
                for layer in self.convs:
                    x = F.leaky_relu(layer(x), 0.1)
                return x


        class Passed(nn.Module):
            def __init__(self, norm_f=weight_norm):
                super().__init__()
                if norm_f is None:
                    norm_f = weight_norm
                self.convs = nn.ModuleList([norm_f(nn.Conv2d(1, 8, 3))])

            def forward(self, x):
                for layer in self.convs:
                    x = F.leaky_relu(layer(x), 0.1)
                return x
    ''',
    "conditional_add_module": '''
        import torch.nn as nn


        def build(defs, channels=3):
            blocks = nn.ModuleList()
            for i, d in enumerate(defs):
                seq = nn.Sequential()
                if d["kind"] == "conv":
                    bn = int(d["bn"])
                    seq.add_module(f"conv{i}", nn.Conv2d(channels, d["out"], 3, bias=not bn))
                    if bn:
                        seq.add_module(f"bn{i}", nn.BatchNorm2d(d["out"]))
                    if d["act"] == "leaky":
                        seq.add_module(f"leaky{i}", nn.LeakyReLU(0.1))  # expect: TML201
                    elif d["act"] == "gate":
                        seq.add_module(f"gate{i}", nn.Sigmoid())
                    channels = d["out"]
                blocks.append(seq)
            return blocks


        def gated(defs, channels=3):
            blocks = nn.ModuleList()
            for i, d in enumerate(defs):
                seq = nn.Sequential()
                seq.add_module(f"conv{i}", nn.Conv2d(channels, channels, 3))
                if d["gate"]:
                    seq.add_module(f"gate{i}", nn.Sigmoid())
                seq.add_module(f"elu{i}", nn.ELU())
                blocks.append(seq)
            return blocks


        def optional_only(defs, channels=3):
            seq = nn.Sequential()
            for i, d in enumerate(defs):
                if d["conv"]:
                    seq.add_module(f"conv{i}", nn.Conv2d(channels, channels, 3))
                seq.add_module(f"elu{i}", nn.ELU())
            return seq
    ''',
    "concatenated_lists": '''
        import torch
        import torch.nn as nn


        class SkipBlock(nn.Module):
            def __init__(self, outer, inner, submodule=None, innermost=False):
                super().__init__()
                downrelu = nn.LeakyReLU(0.2, True)
                downconv = nn.Conv2d(outer, inner, 4, 2, 1)
                uprelu = nn.ReLU(True)
                if innermost:
                    down = [downrelu, downconv]
                    up = [uprelu, nn.ConvTranspose2d(inner, outer, 4, 2, 1)]
                    layers = down + up
                else:
                    down = [downrelu, downconv]
                    up = [uprelu, nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1)]
                    layers = down + [submodule] + up
                self.model = nn.Sequential(*layers)

            def forward(self, x):
                return torch.cat([x, self.model(x)], 1)  # expect: TML203


        class Shared(nn.Module):
            def __init__(self, c):
                super().__init__()
                down = [nn.LeakyReLU(0.2, True), nn.Conv2d(c, c, 3)]
                layers = down
                self.model = nn.Sequential(*layers)

            def forward(self, x):
                return torch.cat([x, self.model(x)], 1)


        class NotFirst(nn.Module):
            def __init__(self, c):
                super().__init__()
                down = [nn.Conv2d(c, c, 3), nn.LeakyReLU(0.2, True)]
                layers = down + [nn.Conv2d(c, c, 3)]
                self.model = nn.Sequential(*layers)

            def forward(self, x):
                return torch.cat([x, self.model(x)], 1)
    ''',
}


def test_inherited_layers_are_what_the_base_builds(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201,TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
