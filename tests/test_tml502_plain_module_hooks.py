"""Lightning runs ``validation_step`` / ``test_step`` / ``predict_step`` (and their ``on_*``
hooks) without autograd, but only a ``LightningModule``'s: a class that derives from torch's
``nn.Module`` itself is never run by Lightning, and its ``validation_step`` runs as its callers
run it (``autograd.framework_hook``). torchlaplace's ``GeneralNeuralLaplace(nn.Module)`` sums
every validation batch's loss tensor in a helper its ``validation_step`` calls, run by hand with
autograd on: TML502 reports the sum. The same code in a ``pl.LightningModule`` stays quiet.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "plain_module_and_lightning_hooks": """import torch
from torch import nn
import pytorch_lightning as pl


class GeneralNeuralLaplace(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss_fn = nn.MSELoss()

    def forward(self, x):
        return self.model(x)

    def _get_loss(self, dl):
        cum_loss = 0
        for batch in dl:
            preds = self.model(batch["x"])
            cum_loss += self.loss_fn(preds, batch["y"])  # expect: TML502
        return cum_loss / len(dl)

    def validation_step(self, dlval):
        mse = self._get_loss(dlval)
        return mse, mse


class LitLaplace(pl.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model
        self.loss_fn = nn.MSELoss()

    def forward(self, x):
        return self.model(x)

    def _val_loss(self, dl):
        cum_loss = 0
        for batch in dl:
            preds = self.model(batch["x"])
            cum_loss += self.loss_fn(preds, batch["y"])
        return cum_loss / len(dl)

    def validation_step(self, dlval):
        mse = self._val_loss(dlval)
        return mse, mse


def run(system, dlval):
    mse, _ = system.validation_step(dlval)
    return mse.item()
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("plain_module_hooks"), CASES, "TML501,TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
