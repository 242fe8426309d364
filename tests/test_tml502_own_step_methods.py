"""TML502 on a loss a method of the module class returns after running the module itself
(voodoonet's ``fwd_pass``: ``outputs = self(x)``, ``loss = self.loss(outputs, y)``, a backward
and a step when training, ``return cm, loss``), summed across the batches of the training loop
(``b_cm, b_loss = self.fwd_pass(batch_x, batch_y, train=True)``; ``batch_loss += b_loss``): the
method's returned loss is the caller's to know, element by element.

Look-alikes stay quiet: the same sums under ``torch.inference_mode()`` (validation), the loss's
``.item()`` summed, and a method that returns what it computes without running the module."""

from __future__ import annotations

from marked_cases import project_findings

MODEL = """import torch
import torch.nn as nn
from torch import Tensor


def calc_cm(pred, target):
    return torch.stack([(pred > 0).sum(), (target > 0).sum()])


class VoodooNet(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.fc = nn.Linear(n, 2)
        self.loss = nn.CrossEntropyLoss()
        self.optimizer = torch.optim.Adam(self.parameters())

    def forward(self, x):
        return self.fc(x)

    def fwd_pass(self, x: Tensor, y: Tensor, train: bool = False):
        if train:
            self.zero_grad()
        outputs = self(x)
        cm = calc_cm(outputs[:, 0], y)
        loss = self.loss(outputs, y)
        if train:
            loss.backward()
            self.optimizer.step()
        return cm, loss

    def penalty(self, x):
        return x.pow(2).mean(), x.abs().mean()

    def optimize(self, x, y, batch_size=256, epochs=2):
        self.train()
        for epoch in range(epochs):
            batch_loss = Tensor([0])
            batch_items = 0.0
            for i in range(0, len(x), batch_size):
                b_cm, b_loss = self.fwd_pass(x[i:i + batch_size], y[i:i + batch_size], train=True)
                batch_loss += b_loss  # expect
                batch_items += b_loss.item()
                p_sq, p_abs = self.penalty(x[i:i + batch_size])
                batch_items += p_sq
            print(batch_loss, batch_items)

    def validate(self, x, y, batch_size=256):
        val_loss = Tensor([0])
        for j in range(0, len(x), batch_size):
            with torch.inference_mode():
                v_cm, v_loss = self.fwd_pass(x[j:j + batch_size], y[j:j + batch_size])
                val_loss += v_loss
        return val_loss
"""


def test_a_loss_returned_by_the_modules_own_step_method(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    expected = {("model.py", n) for n, line in enumerate(MODEL.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 1
    assert project_findings(tmp_path, "TML502") == expected
