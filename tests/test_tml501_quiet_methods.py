"""TML501 and a model handed to a function by the file's top level: rnaglib's
``run_virtual_screen(model, loader)`` calls ``model.predict_ligands(...)`` on every batch, and
the ``if __name__ == "__main__":`` block builds the model from another file of the package, puts
it in evaluation mode and hands it in. The top level is then the caller that switched the model
(this raised an internal error, TML900, that lost the file's loop findings).

Quiet where the class's method runs its modules under ``with torch.no_grad():`` itself (or is
decorated so): such a call records no graph (``analysis/quiet_methods.py``). Reported, naming
the top level, where the method does not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts the CLI

MODEL = '''
import torch
from torch import nn


class VSModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 8)
        self.decoder = nn.Linear(8, 1)

    def predict_ligands(self, pocket, ligands):
        with torch.no_grad():
            embedding = self.encoder(pocket)
            return self.decoder(embedding * ligands)

    @torch.no_grad()
    def score(self, pocket):
        return self.decoder(self.encoder(pocket))

    def rank(self, pocket, ligands):
        return self.decoder(self.encoder(pocket) * ligands)
'''

EVALUATE = '''
import numpy as np


def run_virtual_screen(model, dataloader):
    efs = []
    for data in dataloader:
        scores = model.predict_ligands(data["pocket"], data["ligands"])[:, 0].numpy()
        efs.append(scores.mean())
    return efs


def run_scores(model, dataloader):
    return [model.score(data["pocket"]).numpy() for data in dataloader]


def run_ranks(model, dataloader):
    efs = []
    for data in dataloader:
        ranks = model.rank(data["pocket"], data["ligands"]).detach().numpy()
        efs.append(ranks.mean())
    return efs


if __name__ == "__main__":
    from screen.model import VSModel

    model = VSModel()
    model.eval()
    loader = [{"pocket": np.zeros(8), "ligands": np.ones(8)}]
    run_virtual_screen(model, loader)
    run_scores(model, loader)
    run_ranks(model, loader)
'''


def test_a_model_switched_by_the_top_level(tmp_path: Path):
    package = tmp_path / "screen"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(MODEL)
    (package / "evaluate.py").write_text(EVALUATE)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML5", "--output-format", "json",
         "--exit-zero", "--no-cache", "."],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    found = [(Path(f["filename"]).name, f["location"]["row"], f["code"], f["message"]) for f in json.loads(result.stdout)]
    row = EVALUATE.splitlines().index('        ranks = model.rank(data["pocket"], data["ligands"]).detach().numpy()') + 1
    assert [(name, at, code) for name, at, code, _ in found] == [("evaluate.py", row, "TML501")]
    assert "at the top level of the file" in found[0][3]
