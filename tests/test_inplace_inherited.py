"""TML201 on a layer the class inherits: ``self.norm1`` that the class never assigns, built by
the ``__init__`` of its one base class, in the same file or in another file of the project
(``class ScaleDetector(DetectorModule)`` running ``F.leaky_relu(self.norm1(self.conv1(x)))``,
``norm1`` an ``InstanceNorm2d`` of ``DetectorModule``): the layer is what it is there, through
any number of such bases.

Look-alikes stay quiet: a class that assigns the attribute itself (``self.norm1 =
nn.Sigmoid()``, whose backward needs its output), an inherited layer whose output backward
needs (a ``Sigmoid``), a class with two bases (which one builds the attribute is not followed),
and a base the project does not define.
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
}


def test_inherited_layers_are_what_the_base_builds(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
