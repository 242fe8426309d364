"""TML501 leaves a function alone whose callers in other project files run it with autograd
off (``analysis/importer_modes.py``): fluospotter's ``validate(model, loader)`` in
``inference.py`` switches the model to evaluation and runs it over every batch, and
``training.py`` calls it inside ``with torch.inference_mode():`` (judged a look-alike on a
held-out set). A package ``__init__.py`` that imports the module whole and reads nothing of it
calls nothing.

Still reported: a caller running it with autograd on (in its own file or another), a file
calling it through the module (``inference.validate(...)``: not followed), and a function no
file imports."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

INFERENCE = """import torch


def validate(model, loader):
    model.eval()
    total = 0.0
    for images, labels in loader:
        preds = model(images)
        total += (preds.argmax(dim=1) == labels).float().mean().item()
    return total / len(loader)
"""

TRAINING = """import torch
from .inference import validate


def train(model, loader, val_loader, optimizer, epochs):
    for epoch in range(epochs):
        model.train()
        for images, labels in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            loss.backward()
            optimizer.step()
        with torch.inference_mode():
            score = validate(model, val_loader)
        print(epoch, score)
"""

SITE = {("inference.py", INFERENCE.splitlines().index("        preds = model(images)") + 1)}


def _project(root: Path, files: Dict[str, str]) -> Path:
    package = root / "spots"
    package.mkdir()
    for name, text in {"__init__.py": "from . import inference\n", **files}.items():
        (package / name).write_text(text)
    return root


QUIET = {
    "inference_mode": {"inference.py": INFERENCE, "training.py": TRAINING},
    "no_grad": {"inference.py": INFERENCE, "training.py": TRAINING.replace("torch.inference_mode()", "torch.no_grad()")},
    # a second importer, also with autograd off
    "two_importers": {"inference.py": INFERENCE, "training.py": TRAINING,
                      "evaluate.py": "import torch\nfrom spots.inference import validate\n\n\n"
                                     "@torch.no_grad()\ndef main(model, loader):\n    return validate(model, loader)\n"},
}

REPORTED = {
    "with_autograd": {"inference.py": INFERENCE, "training.py": TRAINING.replace(
        "        with torch.inference_mode():\n            score = validate(model, val_loader)\n",
        "        score = validate(model, val_loader)\n")},
    "second_importer_with_autograd": {**QUIET["inference_mode"], "evaluate.py":
                                      "from spots.inference import validate\n\n\ndef main(model, loader):\n    return validate(model, loader)\n"},
    "own_file_with_autograd": {"inference.py": INFERENCE + "\n\ndef report(model, loader):\n    print(validate(model, loader))\n",
                               "training.py": TRAINING},
    "through_the_module": {"inference.py": INFERENCE, "training.py": TRAINING.replace(
        "from .inference import validate", "from . import inference").replace(
        "score = validate(model, val_loader)", "score = inference.validate(model, val_loader)")},
    "nobody_imports_it": {"inference.py": INFERENCE},
}


@pytest.mark.parametrize("name", sorted(QUIET))
def test_quiet_where_every_importer_turns_autograd_off(tmp_path, name):
    assert lint_project(_project(tmp_path, dict(QUIET[name])), "TML501", "--no-cache") == set()


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_reported_otherwise(tmp_path, name):
    found = lint_project(_project(tmp_path, dict(REPORTED[name])), "TML501", "--no-cache")
    assert SITE <= found
