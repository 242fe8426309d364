"""TML402 on a single layer of a torchvision ResNet the class holds (``analysis/library_parts.py``,
written from torchvision's documentation): hi-ml-cpath checkpoints ``self.feature_extractor_fn.avgpool``
and ``.fc`` one by one, in a mixin that only asserts ``isinstance(self.feature_extractor_fn,
ResNet)`` (its ``__init__`` keeps what it is given); the same for a ResNet the class builds
itself (``self.encoder = resnet18(weights=None).to(device)``).

Look-alikes stay quiet: a stage of the ResNet (``layer1``, many blocks), a part of an encoder
the class neither builds as a ResNet nor asserts to be one, and a part of the ResNet that
torchvision does not document (``self.encoder.head``).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "asserted_resnet": """import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential
from torchvision.models.resnet import ResNet


class BaseCheckpointingMixin:
    def __init__(self, feature_extractor_fn, segments=2):
        self.feature_extractor_fn = feature_extractor_fn
        self.segments = segments


class ResNetCheckpointingMixin(BaseCheckpointingMixin):
    def validate(self):
        assert isinstance(self.feature_extractor_fn, ResNet), "Expected a ResNet"

    def custom_forward(self, images):
        images = checkpoint_sequential(self.feature_extractor_fn.layer1, self.segments, images)
        images = checkpoint(self.feature_extractor_fn.layer2, images, use_reentrant=False)
        images = checkpoint(self.feature_extractor_fn.avgpool, images, use_reentrant=False)  # expect: TML402
        images = torch.flatten(images, 1)
        return checkpoint(self.feature_extractor_fn.fc, images, use_reentrant=False)  # expect: TML402
""",
    "built_resnet": """import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torchvision.models import resnet18


class Encoder(nn.Module):
    def __init__(self, device="cpu"):
        super().__init__()
        self.encoder = resnet18(weights=None).to(device)

    def forward(self, x):
        x = checkpoint(self.encoder.conv1, x, use_reentrant=False)  # expect: TML402
        x = self.encoder.maxpool(self.encoder.relu(self.encoder.bn1(x)))
        x = checkpoint(self.encoder.layer1, x, use_reentrant=False)
        return checkpoint(self.encoder.head, x, use_reentrant=False)
""",
    "unknown_encoder": """import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .encoders import build_encoder


class Wrapper(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.encoder = build_encoder(name)

    def forward(self, x):
        return checkpoint(self.encoder.fc, x, use_reentrant=False)
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("library_parts"), CASES, "TML402")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
