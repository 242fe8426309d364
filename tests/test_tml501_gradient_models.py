"""TML501 stays quiet in a file that may evaluate a model whose forward computes gradients
itself (``analysis/gradient_models.py``): an interatomic potential whose forces are
``-torch.autograd.grad(energy, positions)``, as nequix's, SevenNet's and pyiann's are (judged
false on held-out sets: ``torch.no_grad()`` there makes ``autograd.grad`` raise). The model's
class may be in the file, or in a project file it imports (directly, through a package's
re-export, or through another module); the answer is part of the result cache's key.

Still reported: a file whose models compute no gradient in ``forward`` (a WGAN critic with a
gradient-penalty method that ``forward`` does not run), a project module the evaluation file
does not import, and a file that only names torch inside another word (a JAX training script
citing ``pytorch_ema``) is no torch code at all."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

POTENTIAL = """import torch
import torch.nn as nn


class Potential(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 16), nn.SiLU(), nn.Linear(16, 1))

    def forward(self, positions):
        positions.requires_grad_(True)
        energy = self.net(positions).sum()
        return energy, self._forces(energy, positions)

    def _forces(self, energy, positions):
        return -torch.autograd.grad(energy, positions, create_graph=self.training)[0]
"""

# ``from torch.autograd import grad`` spelled as a bare call, directly in forward
POTENTIAL_BARE_GRAD = """import torch.nn as nn
from torch.autograd import grad


class Potential(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 1)

    def forward(self, positions):
        energy = self.net(positions).sum()
        return energy, -grad(energy, positions, create_graph=True)[0]
"""

# a look-alike: the gradient penalty is a method forward never runs
CRITIC = """import torch
import torch.nn as nn


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(3, 1)

    def forward(self, x):
        return self.net(x)

    def gradient_penalty(self, real, fake):
        mixed = (real + fake) / 2
        mixed.requires_grad_(True)
        g = torch.autograd.grad(self(mixed).sum(), mixed, create_graph=True)[0]
        return ((g.norm(2, dim=1) - 1) ** 2).mean()
"""

EVALUATE = """import torch

{imports}


def evaluate(model, loader):
    model.eval()
    total = 0.0
    for batch in loader:
        energy, forces = model(batch)
        total += forces.abs().mean().item()
    return total
"""

SITE = ("train.py", EVALUATE.splitlines().index("        energy, forces = model(batch)") + 1)


def _project(root: Path, files: Dict[str, str]) -> Path:
    package = root / "mlip"
    package.mkdir()
    (package / "__init__.py").write_text(files.pop("__init__.py", ""))
    for name, text in files.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    return root


@pytest.mark.parametrize(
    "files",
    [
        {"model.py": POTENTIAL, "train.py": EVALUATE.format(imports="from .model import Potential")},
        {"model.py": POTENTIAL_BARE_GRAD, "train.py": EVALUATE.format(imports="from mlip.model import Potential")},
        # through the package's re-export
        {"__init__.py": "from .model import Potential\n", "model.py": POTENTIAL,
         "train.py": EVALUATE.format(imports="from mlip import Potential")},
        # through another module the evaluation file imports
        {"model.py": POTENTIAL, "build.py": "from .model import Potential\n\n\ndef build():\n    return Potential()\n",
         "train.py": EVALUATE.format(imports="from .build import build")},
        # in the file itself
        {"train.py": EVALUATE.format(imports="") + "\n\n" + POTENTIAL.split("\n", 2)[2]},
    ],
    ids=["imported", "bare_grad", "reexported", "through_a_builder", "same_file"],
)
@pytest.mark.parametrize("extra", [("--no-cache",), ("--no-cache", "--isolated")], ids=["default", "isolated"])
def test_quiet_where_the_model_computes_forces(tmp_path, files, extra):
    assert lint_project(_project(tmp_path, dict(files)), "TML501", *extra) == set()


@pytest.mark.parametrize(
    "files",
    [
        {"model.py": CRITIC, "train.py": EVALUATE.format(imports="from .model import Critic")},
        # the potential is in the project, but the evaluation file does not import it
        {"model.py": POTENTIAL, "train.py": EVALUATE.format(imports="")},
    ],
    ids=["critic_penalty", "not_imported"],
)
def test_reported_elsewhere(tmp_path, files):
    assert lint_project(_project(tmp_path, dict(files)), "TML501", "--no-cache") == {SITE}


def test_an_edit_to_the_imported_model_reaches_the_cached_finding(tmp_path):
    project = _project(tmp_path, {"model.py": CRITIC.replace("Critic", "Potential"),
                                  "train.py": EVALUATE.format(imports="from .model import Potential")})
    assert lint_project(project, "TML501") == {SITE}
    (project / "mlip" / "model.py").write_text(POTENTIAL)
    assert lint_project(project, "TML501") == set()  # warm: train.py's key holds model.py's text


JAX_TRAIN = """import jax
import optax

# exponential moving average, as in https://github.com/fadel/pytorch_ema


def evaluate(model, loader):
    total = 0.0
    for batch in loader:
        out = model(batch)
        total += float(out.mean())
    return total
"""


def test_a_jax_file_that_names_pytorch_in_a_comment_is_not_read(tmp_path):
    (tmp_path / "train.py").write_text(JAX_TRAIN)
    assert lint_project(tmp_path, "TML501", "--no-cache") == set()
    # the same file importing torch is read
    (tmp_path / "train.py").write_text(JAX_TRAIN.replace("import optax", "import optax\nimport torch"))
    row = JAX_TRAIN.splitlines().index("        out = model(batch)") + 2
    assert lint_project(tmp_path, "TML501", "--no-cache") == {("train.py", row)}


def test_a_file_naming_pytorch_in_a_comment_without_another_framework_is_read(tmp_path):
    # enniolearning's `prediction_fcts.py`: torch only in a comment's link, its model from a helper
    (tmp_path / "predict.py").write_text(JAX_TRAIN.replace("import jax\nimport optax\n", "import numpy as np\n"))
    row = JAX_TRAIN.splitlines().index("        out = model(batch)")
    assert lint_project(tmp_path, "TML501", "--no-cache") == {("predict.py", row)}
