"""TML301 on a ResNet whose constructor is stored on ``self`` and built later: picked from a dict
of constructors (``self.base_model = {"resnet18": resnet18, ...}[name]``, the constructors
imported inside ``__init__``, other encoders of the project beside them), a single constructor
stored as an attribute, built in the same method, in another method, or in a subclass from
what the base class stored; then its ``conv1`` made stride 1 or its ``maxpool`` a no-op under
``if cifar:``. Look-alikes stay quiet: the pool kept (only ``fc`` replaced), a stride-2 ``conv1``,
a dict that also holds a torchvision model that is not a ResNet, a constructor passed in by the
caller, a dict of non-ResNet models.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # solo-learn's form: the dict stored in the base class, the encoders built from it in two classes
    "dict_on_self": '''
        import torch.nn as nn
        import pytorch_lightning as pl

        from .backbones import vit_small, vit_tiny


        class BaseMethod(pl.LightningModule):
            def __init__(self, encoder, cifar=False, **kwargs):
                super().__init__()
                from torchvision.models import resnet18, resnet50

                self.base_model = {
                    "resnet18": resnet18,
                    "resnet50": resnet50,
                    "vit_tiny": vit_tiny,
                    "vit_small": vit_small,
                }[encoder]
                self.encoder_name = encoder
                self.encoder = self.base_model(**kwargs)
                if "resnet" in self.encoder_name:
                    self.encoder.fc = nn.Identity()
                    if cifar:
                        self.encoder.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=2, bias=False)  # expect: TML301
                        self.encoder.maxpool = nn.Identity()  # expect: TML301


        class BaseMomentumMethod(BaseMethod):
            def __init__(self, cifar=False, **kwargs):
                super().__init__(cifar=cifar, **kwargs)
                self.momentum_encoder = self.base_model()
                if cifar:
                    self.momentum_encoder.maxpool = nn.Identity()  # expect: TML301
    ''',
    # built in another method than the one that stored the constructor
    "built_elsewhere": '''
        import torch.nn as nn
        import torchvision


        class Encoder(nn.Module):
            def __init__(self, arch="r18", small_images=True):
                super().__init__()
                self.ctor = {"r18": torchvision.models.resnet18, "r34": torchvision.models.resnet34}[arch]
                self.single = torchvision.models.resnet50
                self.small_images = small_images
                self.build()

            def build(self):
                self.backbone = self.ctor(weights=None)
                if self.small_images:
                    self.backbone.maxpool = nn.Sequential()  # expect: TML301
                self.other = self.single()
                self.other.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # expect: TML301
    ''',
    "look_alikes": '''
        import torch.nn as nn
        import torchvision
        from torchvision.models import densenet121, resnet18, vgg16


        class KeepsPool(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.base_model = {"resnet18": resnet18}[name]
                self.encoder = self.base_model()
                self.encoder.fc = nn.Identity()  # the stem is left alone
                self.encoder.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)


        class NotOnlyResNets(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.base_model = {"resnet18": resnet18, "vgg16": vgg16}[name]
                self.encoder = self.base_model()
                self.encoder.maxpool = nn.Identity()  # vgg16 is no ResNet: which one runs is not known


        class NoResNet(nn.Module):
            def __init__(self, name):
                super().__init__()
                self.base_model = {"vgg16": vgg16, "densenet121": densenet121}[name]
                self.encoder = self.base_model()
                self.encoder.maxpool = nn.Identity()


        class Given(nn.Module):
            def __init__(self, builder):
                super().__init__()
                self.base_model = builder  # the caller's
                self.encoder = self.base_model()
                self.encoder.maxpool = nn.Identity()


        class Rebound(nn.Module):
            def __init__(self, builder):
                super().__init__()
                self.base_model = torchvision.models.resnet18
                self.encoder = self.base_model()

            def swap(self, builder):
                self.base_model = builder  # another value: either may have built it
                self.encoder = self.base_model()
                self.encoder.maxpool = nn.Identity()
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("downsampling_stored"), CASES, "TML301")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
