"""TML301 where the ResNet is named, not spelled: picked from a models package's namespace
(``torchvision.models.__dict__[name]``, ``vars(models)[name]``, a literal name too), built by
``timm.create_model(name)`` with the replacement under ``if "resnet" in name`` (or
``name.startswith("resnet")``, one side of an ``and``), and a helper that is handed the model
and replaces both its ``conv1`` and its ``maxpool``. Look-alikes stay quiet: a non-ResNet
literal name from the namespace, ``create_model(name)`` with no condition or an ``or``, the
replacement in the ``else`` arm, a helper that replaces ``fc`` only, ``maxpool`` only, or keeps
a stride-2 ``conv1``, and a helper whose ``model`` is a local it did not receive.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "namespace": '''
        import torch.nn as nn
        import torchvision
        from torchvision import models


        def from_torchvision(model_name, low_resolution=False, **kwargs):
            model = torchvision.models.__dict__[model_name](**kwargs)
            if "resnet" in model_name and low_resolution:
                model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)  # expect: TML301
                model.maxpool = nn.Identity()  # expect: TML301
            return model


        def literal(**kwargs):
            net = models.__dict__["resnet50"](**kwargs)
            net.maxpool = nn.Identity()  # expect: TML301
            return net


        def through_vars(name):
            net = vars(models)[name]()
            net.maxpool = nn.Sequential()  # expect: TML301
            return net


        def not_a_resnet(**kwargs):
            net = torchvision.models.__dict__["vgg16"](**kwargs)
            net.maxpool = nn.Identity()
            return net
    ''',
    "timm_name": '''
        import timm
        import torch.nn as nn


        def from_timm(model_name, low_resolution=False, **kwargs):
            model = timm.create_model(model_name, **kwargs)
            if low_resolution and "resnet" in model_name:
                model.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)  # expect: TML301
                model.maxpool = nn.Identity()  # expect: TML301
            return model


        def by_prefix(arch):
            model = timm.create_model(arch, pretrained=True)
            if arch.startswith("resnet"):
                model.maxpool = nn.Identity()  # expect: TML301
            return model


        def unconstrained(model_name):
            model = timm.create_model(model_name)
            model.maxpool = nn.Identity()
            return model


        def either(model_name, small):
            model = timm.create_model(model_name)
            if small or "resnet" in model_name:
                model.maxpool = nn.Identity()
            return model


        def other_arm(model_name):
            model = timm.create_model(model_name)
            if "resnet" in model_name:
                pass
            else:
                model.maxpool = nn.Identity()
            return model


        def other_name(model_name, backbone):
            model = timm.create_model(model_name)
            if "resnet" in backbone:
                model.maxpool = nn.Identity()
            return model
    ''',
    "helpers": '''
        import torch
        import torch.nn as nn


        def adapt_resnet_for_lowres(model):
            """Adapt a ResNet model for low resolution images."""
            model.conv1 = torch.nn.Conv2d(3, 64, kernel_size=(3, 3), stride=(1, 1), padding=(1, 1), bias=False)  # expect: TML301
            model.maxpool = torch.nn.Identity()  # expect: TML301
            return model


        class Wrapper(nn.Module):
            def cifar_stem(self, net):
                net.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)  # expect: TML301
                net.maxpool = nn.Identity()  # expect: TML301


        def keeps_stride(model):
            model.conv1 = nn.Conv2d(6, 64, kernel_size=7, stride=2, padding=3, bias=False)
            return model


        def keeps_stride_drops_pool(model):
            model.conv1 = nn.Conv2d(6, 64, kernel_size=7, stride=2, padding=3, bias=False)
            model.maxpool = nn.Identity()  # expect: TML301
            return model


        def head_only(model, classes):
            model.fc = nn.Linear(512, classes)
            return model


        def pool_only(model):
            model.maxpool = nn.Identity()
            return model


        def conv_only(model):
            model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            return model


        def local_model(build):
            model = build()
            model.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
            model.maxpool = nn.Identity()
            return model
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("downsampling_helpers"), CASES, "TML301")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
