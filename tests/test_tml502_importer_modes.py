"""TML502 leaves a loop without backward whose autograd mode its callers set to them
(``importer_modes.decided_elsewhere``), as TML501 does: DMLP's ``DDPM.sample`` folds each
step's ``eps_model`` output into ``x_i`` over the sampling loop, and the project's generation
script runs ``ddpm.sample(...)`` inside ``torch.no_grad()`` (judged false on a held-out set);
a top-level ``collect(model, loader)`` appending outputs that every importer calls under
``torch.inference_mode()``.

Still reported: the same method or function that no file calls, or that a caller in its own
file runs with autograd on; a loop that trains (its graph nodes stay reachable whoever calls)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

MODELS = """import torch
from torch import nn


class DDPM(nn.Module):
    def __init__(self, eps_model, n_T):
        super().__init__()
        self.eps_model = eps_model
        self.n_T = n_T

    def sample(self, n, size):
        x_i = torch.randn(n, *size)
        for i in range(self.n_T, 0, -1):
            z = torch.randn(n, *size) if i > 1 else 0
            eps = self.eps_model(x_i, i / self.n_T)
            x_i = 0.5 * (x_i - eps * 0.1) + 0.2 * z
        return x_i


def collect(model, loader):
    model.eval()
    outputs = []
    for x in loader:
        outputs.append(model(x))
    return torch.cat(outputs)
"""

GENERATION = """import torch
from .models import DDPM, collect


def generate(ddpm, loader):
    with torch.no_grad():
        images = ddpm.sample(16, (3, 32, 32))
    with torch.inference_mode():
        feats = collect(ddpm.eps_model, loader)
    return images, feats
"""

SITES = {
    ("models.py", MODELS.splitlines().index("            x_i = 0.5 * (x_i - eps * 0.1) + 0.2 * z") + 1),
    ("models.py", MODELS.splitlines().index("        outputs.append(model(x))") + 1),
}


def _project(root: Path, files: Dict[str, str]) -> Path:
    package = root / "dmlp"
    package.mkdir()
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).write_text(text)
    return root


def test_quiet_where_the_callers_turn_autograd_off(tmp_path):
    project = _project(tmp_path, {"models.py": MODELS, "generation.py": GENERATION})
    assert lint_project(project, "TML502", "--no-cache") == set()


CALLED_WITH_AUTOGRAD = MODELS + """

def demo(ddpm, loader):
    print(ddpm.sample(4, (3, 8, 8)).shape)
    print(collect(ddpm.eps_model, loader).shape)
"""


@pytest.mark.parametrize("files", [
    {"models.py": MODELS},  # nobody calls them
    {"models.py": CALLED_WITH_AUTOGRAD, "generation.py": GENERATION},  # a caller of their file with autograd on
], ids=["nobody_calls", "own_file_with_autograd"])
def test_reported_otherwise(tmp_path, files):
    assert lint_project(_project(tmp_path, dict(files)), "TML502", "--no-cache") == SITES


TRAINS = """import torch
from torch import nn


class Learner(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def fit(self, loader, optimizer):
        losses = []
        for x, y in loader:
            loss = ((self.net(x) - y) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss)
        return losses
"""

RUNNER = """import torch
from .learner import Learner


def main(net, loader, optimizer):
    return Learner(net).fit(loader, optimizer)
"""


def test_a_loop_that_trains_is_reported_whoever_calls(tmp_path):
    project = _project(tmp_path, {"learner.py": TRAINS, "runner.py": RUNNER})
    row = TRAINS.splitlines().index("            losses.append(loss)") + 1
    assert lint_project(project, "TML502", "--no-cache") == {("learner.py", row)}
