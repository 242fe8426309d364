"""TML502 in a method a training framework runs once per batch (``analysis/step_hooks.py``):
Lightning's ``training_step`` adding its loss to an attribute (depp's
``self.val_loss += loss``, reset only at the epoch's end) or appending predictions to an
attribute list (``self.train_outputs.append(preds)``): the attribute outlives each call, so
every step's graph stays reachable, as in a written loop.

Look-alikes stay quiet: a number (``loss.item()``) or a detached copy, an attribute the step
binds afresh first (one step's list), a local sum, and ``validation_step`` (Lightning runs it
under ``no_grad``). A value the step returns as its loss (``return {"loss": loss}``) is a loss
whatever made it (a project helper's ``mse_loss`` scaled by attributes); other values of
helpers the rule cannot read (``spread``, a value returned under another key) stay quiet; so
does an accumulation in an arm a constructor's string default does not take (``if
self.cost_type == "average":`` with ``cost_type="smooth"``), unless a construction in the file
passes that string.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "lightning": '''
        import torch
        import torch.nn.functional as F
        from pytorch_lightning import LightningModule


        class Classifier(LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.val_loss = 0.0
                self.train_outputs = []
                self.seen = 0.0

            def forward(self, x):
                return self.net(x)

            def training_step(self, batch, batch_idx):
                x, y = batch
                logits = self.net(x)
                loss = F.cross_entropy(self(x), y)
                self.val_loss += loss  # expect: TML502
                self.train_outputs.append(logits)  # expect: TML502
                self.seen += loss.item()
                return loss

            def on_train_epoch_end(self):
                self.log("train_loss", self.val_loss)
                self.val_loss = 0.0
                self.train_outputs.clear()

            def validation_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self(x), y)
                self.train_outputs.append(loss)
                return loss
    ''',
    "returned_loss": '''
        import torch
        from pytorch_lightning import LightningModule

        from . import utils


        class Encoder(LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.dis_loss_w = 100.0
                self.val_loss = 0.0
                self.spread = 0.0
                self.logged = 0.0

            def training_step(self, batch, batch_idx):
                encoding = self.net(batch["seqs"])
                distance = utils.distance(encoding, encoding.detach())
                dis_loss = utils.mse_loss(distance, batch["distance"])
                loss = self.dis_loss_w * dis_loss * self.hparams.ratio
                self.val_loss += loss  # expect: TML502
                spread = utils.spread(encoding)
                self.spread += spread
                note = utils.norm(encoding)
                self.logged += note
                return {"loss": loss, "log": note}
    ''',
    "arms_by_default": '''
        import torch
        import torch.nn.functional as F
        from pytorch_lightning import LightningModule


        class Velocity(LightningModule):
            def __init__(self, net, cost_type="smooth"):
                super().__init__()
                self.net = net
                self.cost_type = cost_type
                self.cost_window = []
                self.total = 0.0

            def training_step(self, batch, batch_idx):
                x, y = batch
                cost = F.mse_loss(self.net(x), y)
                if self.cost_type == "average":
                    self.cost_window.append(cost)
                if self.cost_type == "smooth":
                    self.total += cost  # expect: TML502
                return {"loss": cost}


        class Windowed(LightningModule):
            def __init__(self, net, cost_type="smooth"):
                super().__init__()
                self.net = net
                self.cost_type = cost_type
                self.cost_window = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                cost = F.mse_loss(self.net(x), y)
                if self.cost_type == "average":
                    self.cost_window.append(cost)  # expect: TML502
                return {"loss": cost}


        def build(net):
            return Windowed(net, cost_type="average")
    ''',
    "look_alikes": '''
        import torch
        import torch.nn.functional as F
        from pytorch_lightning import LightningModule


        class Regressor(LightningModule):
            def __init__(self, net):
                super().__init__()
                self.net = net
                self.losses = []

            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.mse_loss(self.net(x), y)
                self.losses.append(loss.detach())
                self.step_outputs = []
                self.step_outputs.append(loss)
                total = 0.0
                total += loss
                return total
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("step_hooks"), CASES, "TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
