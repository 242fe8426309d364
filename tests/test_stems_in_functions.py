"""TML301 and TML101 ask the shared analysis once per file (``analysis/stems.py``,
``analysis/stateless.py``), from the index rather than in the traversal; names are still resolved
where the code stands. A class or a replacement written inside a function sees that function's
imports (``import torch.nn as nn`` in a factory), a lambda's or a function's parameter shadows
the module's name, and a class body does not. Look-alikes stay quiet: the pool kept, a stem
helper that replaces only ``conv1``, ``nn`` a parameter that is not torch's.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "class_in_a_factory": '''
        import torch


        def make():
            import torch.nn as nn
            import torchvision

            class UNetEncoder(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = torchvision.models.resnet34()
                    self.stem = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)  # expect: TML301
                    self.enc1 = self.encoder.layer1

                def forward(self, x):
                    return self.enc1(self.stem(x))

            class Kept(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.encoder = torchvision.models.resnet34()
                    self.stem = nn.Sequential(
                        self.encoder.conv1, self.encoder.bn1, self.encoder.relu, self.encoder.maxpool
                    )
                    self.enc1 = self.encoder.layer1

                def forward(self, x):
                    return self.enc1(self.stem(x))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.conv = nn.Conv2d(3, 64, 3, padding=1)
                    self.pool = nn.MaxPool2d(2)  # expect: TML101

                def forward(self, x):
                    return self.pool(self.conv(x))

            class Head(nn.Module):  # no forward: a module by its base, which the function imports
                def __init__(self):
                    super().__init__()
                    self.act = nn.GELU()  # expect: TML101

                def run(self, x):
                    return self.act(x)

            class Plain:  # not a module: quiet
                def __init__(self):
                    self.act = nn.GELU()

                def run(self, x):
                    return self.act(x)

            return UNetEncoder(), Kept(), Net(), Head(), Plain()
    ''',
    "replacements_in_functions": '''
        import torch
        import torchvision


        def adapt():
            import torch.nn as nn

            m = torchvision.models.resnet18()
            m.maxpool = nn.Identity()  # expect: TML301
            return m


        def stride_one(model):
            from torch import nn

            model.conv1 = nn.Conv2d(3, 64, 7, stride=1, padding=3, bias=False)  # expect: TML301
            model.maxpool = nn.Identity()  # expect: TML301
            return model


        def only_conv(model, nn):
            model.conv1 = nn.Conv2d(3, 64, 7, stride=1)  # `nn` is the caller's: not torch's
            return model


        def kept(nn=None):
            m = torchvision.models.resnet18()
            m.maxpool = nn.Identity()  # `nn` is a parameter here
            return m
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("stems_in_functions"), CASES, "TML101,TML301")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
