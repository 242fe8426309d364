"""TML502 and a Lightning module's ``training_step``: what it returns (the loss, or a dict holding
it under ``"loss"``) is backpropagated by the trainer, so a loss summed over the model's heads
of one batch and returned (the twentieth held-out set's DeepAb) keeps no graph across
iterations.

The same sum over one batch's heads is quiet too where nothing backpropagates it (not returned,
or in a method with another name): the loop runs no model and iterates no loader, so the sum
holds one forward's graphs, which the heads' outputs hold anyway, and nothing grows from batch
to batch (the twenty-third set's discriminator losses). A sum over a loader that
``training_step`` does not return stays reported (every batch's graph is kept until the step
ends).
"""

from __future__ import annotations

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

STEP = '''
import pytorch_lightning as pl
import torch
from torch import nn


class Model(pl.LightningModule):
    def __init__(self, targets):
        super().__init__()
        self.targets = targets
        self.heads = nn.ModuleDict({t: nn.Linear(8, 4) for t in targets})
        self.criterion = nn.CrossEntropyLoss(reduction="none")

    def forward(self, x):
        return {t: self.heads[t](x) for t in self.targets}

    def training_step(self, batch, batch_idx):
        preds = self(batch["x"])
        loss = 0
        targets = batch["target"]
        loss_mask = batch["loss_mask"]
        for t in self.targets:
            loss_unmasked = self.criterion(preds[t], targets[t].long()).squeeze(-1)
            loss += (loss_unmasked * loss_mask[t]).sum() / loss_mask[t].sum()
        self.log("train/loss", loss)
        return loss
'''

DICT = STEP.replace("        return loss\n", '        return {"loss": loss, "log": {"loss": loss.detach()}}\n')

ONE_BATCH = {
    "not returned": STEP.replace("        return loss\n", "        self.last = loss\n        return None\n"),
    "another name": STEP.replace("def training_step(self, batch, batch_idx):", "def score_step(self, batch, batch_idx):"),
}
REPORTED = {
    "over a loader": STEP.replace(
        "        for t in self.targets:\n"
        "            loss_unmasked = self.criterion(preds[t], targets[t].long()).squeeze(-1)\n"
        "            loss += (loss_unmasked * loss_mask[t]).sum() / loss_mask[t].sum()\n",
        "        total = 0\n"
        "        for x, y in self.val_loader:\n"
        "            total += self.criterion(self.heads['a'](x), y).sum()\n",
    ).replace("        return loss\n", "        return preds\n"),
}


def tml502_rows(source):
    settings = Settings(select=("TML502",))
    return [f.location.row for f in lint_source(source, "model.py", settings, settings.enabled_codes()) if f.code == "TML502"]


@pytest.mark.parametrize("source", [STEP, DICT], ids=["loss", "dict"])
def test_a_loss_summed_over_heads_and_returned_by_training_step_is_backpropagated(source):
    assert tml502_rows(source) == []


@pytest.mark.parametrize("name", sorted(ONE_BATCH))
def test_a_sum_over_one_batchs_heads_is_quiet_even_where_nothing_backpropagates_it(name):
    source = ONE_BATCH[name]
    assert source != STEP
    assert tml502_rows(source) == []


@pytest.mark.parametrize("name", sorted(REPORTED))
def test_a_sum_the_trainer_does_not_backpropagate_is_reported(name):
    source = REPORTED[name]
    assert source != STEP
    assert tml502_rows(source) != []
