"""TML201 after a norm built from a chain of the project's own subclasses of a torch layer, none
with a ``forward`` of its own (torchfusion's ``BatchNorm2d(BatchNorm)`` and
``BatchNorm(_BatchNorm)``, which only initialise the weights and check the input's rank): the
chain makes what the torch layer at its root makes (``producers._inherited``). Measured miss on
a held-out set: torchfusion's ``StandardGeneratorBlock``, whose LeakyReLU (a parameter's default)
runs on such a norm's output, the chain in another file of the package.

A look-alike stays quiet: a chain rooted at an activation (its ``inplace`` is the subclass's
business)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from marked_cases import lint_cases, marked
from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

NORMS = '''
import torch.nn as nn
from torch.nn.modules.batchnorm import _BatchNorm


class BatchNorm(_BatchNorm):
    def __init__(self, num_features, eps=1e-5, momentum=0.1, weight_init=None):
        super(BatchNorm, self).__init__(num_features, eps, momentum)
        if weight_init is not None:
            weight_init(self.weight.data)


class BatchNorm2d(BatchNorm):
    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError("expected 4D input")
'''

BLOCK = '''

class Block(nn.Module):
    def __init__(self, c, activation=nn.LeakyReLU(0.2)):  # expect: TML201
        super().__init__()
        self.conv = nn.ConvTranspose2d(c, c, 4, stride=2, padding=1)
        self.bn = BatchNorm2d(c)
        self.activation = activation

    def forward(self, x):
        return self.activation(self.bn(self.conv(x)))
'''

CASES: Dict[str, str] = {
    "chain_in_the_file": NORMS + BLOCK,
    "chain_rooted_at_an_activation": '''
import torch.nn as nn


class Act(nn.ELU):
    pass


class Act2(Act):
    pass
''' + BLOCK.replace("  # expect: TML201", "").replace("BatchNorm2d(c)", "Act2()"),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("layer_subclass_chains"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_the_chain_in_another_file_of_the_package(tmp_path: Path):
    package = tmp_path / "pkg"
    (package / "layers").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers" / "__init__.py").write_text("from .layers import BatchNorm, BatchNorm2d\n")
    (package / "layers" / "layers.py").write_text(NORMS)
    block = "import torch.nn as nn\nfrom pkg.layers import *\n" + BLOCK
    (package / "blocks.py").write_text(block)
    row = block.splitlines().index("    def __init__(self, c, activation=nn.LeakyReLU(0.2)):  # expect: TML201") + 1
    assert lint_project(tmp_path, "TML201", "--no-cache") == {("blocks.py", row)}
