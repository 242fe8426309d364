"""TML502 and a sum of losses handed back to be backpropagated (``callers.returned_for_backward``).

A function that sums the losses of a rollout over a loop and returns the sum (or a value
computed from it) to a caller that calls ``backward`` on it accumulates gradients on purpose:
every iteration's graph is what that backward needs, and ``.item()`` would break training. The
caller may be a function of the same file, or the base class of another file of the project
whose training step runs ``self.compute_loss(...)`` then ``accelerator.backward(loss)`` (an RL
trainer's subclass): quiet. A sum returned to a caller that only prints it (also when that
caller called ``backward`` earlier on another value of the same name, deep-daze's warm-up loop),
one a method of the same class returns to nobody who trains, and a sum never returned stay
reported; so does the subclass once the base class stops
backpropagating (the result cache keys the finding by the base's file)."""

from __future__ import annotations

from pathlib import Path

from project_cli import lint_project

BASE = '''import torch


class BaseRLTrainer:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def compute_loss(self, trajectories):
        raise NotImplementedError

    def train_step(self, trajectories):
        self.optimizer.zero_grad()
        loss, metrics = self.compute_loss(trajectories)
        self.accelerator.backward(loss)
        self.optimizer.step()
        return metrics
'''

TRAINER = '''import torch
import torch.nn.functional as F

from .base import BaseRLTrainer


class PolicyTrainer(BaseRLTrainer):
    def compute_loss(self, trajectories):
        total_policy_loss = 0.0
        total_kl = 0.0
        steps = 0
        for traj in trajectories:
            for state, action in zip(traj.states, traj.actions):
                log_prob = F.log_softmax(self.model(state), dim=-1).gather(-1, action).sum()
                total_policy_loss += -log_prob * traj.advantage
                total_kl += log_prob - traj.ref_log_prob
                steps += 1
        total_loss = total_policy_loss / steps + 0.1 * total_kl / steps
        return total_loss, {"loss": total_loss.item()}

    def score(self, trajectories):
        total = 0.0
        for traj in trajectories:
            for state in traj.states:
                total += self.model(state).sum()  # SCORE
        return total


def rollout_loss(model, batches):
    total = 0.0
    for x, y in batches:
        total += F.mse_loss(model(x), y)
    return total


def train(model, optimizer, data):
    loss = rollout_loss(model, data)
    loss.backward()
    optimizer.step()


def validate(model, batches):
    total = 0.0
    for x, y in batches:
        total += F.mse_loss(model(x), y)  # VALIDATE
    return total


def report(model, data):
    print(validate(model, data).item())


def step_total(model, data, optimizer):
    total = 0.0
    for x, y in data:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        total += loss  # STEP_TOTAL
    optimizer.step()
    return total


def fit(model, data, optimizer, warmup):
    for x in warmup:
        loss = model(x).sum()
        loss.backward()
    for epoch in range(3):
        loss = step_total(model, data, optimizer)
        print(loss.item())


def kept(model, batches):
    total = 0.0
    for x, y in batches:
        total += F.mse_loss(model(x), y)  # KEPT
    print(total)
'''


def _row(text: str, marker: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.endswith("# " + marker))


def test_a_summed_loss_returned_to_a_backward_is_quiet_and_others_stay_reported(tmp_path: Path) -> None:
    package = tmp_path / "rl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text(BASE)
    (package / "trainer.py").write_text(TRAINER)
    reported = {("trainer.py", _row(TRAINER, m)) for m in ("SCORE", "VALIDATE", "STEP_TOTAL", "KEPT")}
    assert lint_project(tmp_path, "TML502") == reported
    # the base class no longer backpropagates: the subclass's sums are reported, also from a
    # warm cache (the finding is keyed by base.py)
    cache = str(tmp_path / "cache")
    assert lint_project(tmp_path, "TML502", "--cache-dir", cache) == reported
    (package / "base.py").write_text(BASE.replace("        self.accelerator.backward(loss)\n", "        print(loss)\n"))
    changed = lint_project(tmp_path, "TML502", "--cache-dir", cache)
    assert changed == reported | {("trainer.py", 15), ("trainer.py", 16)}


LOSSES = '''import torch
import torch.nn as nn
import torch.nn.functional as F


def IBP_loss(xlat_batch, target_batch, batch_index, tau=0.1):
    kl_loss = nn.KLDivLoss(reduction="batchmean")
    batches = torch.unique(batch_index)
    loss = 0
    for cur_batch in batches:
        idx = batch_index == cur_batch
        log_p = F.log_softmax(xlat_batch[idx] @ xlat_batch[idx].t() / tau, dim=1)
        q = F.softmax(target_batch[idx] @ target_batch[idx].t() / tau, dim=1)
        loss += kl_loss(log_p, q)
    return loss / len(batches)


def compute_val_loss(model, batches):
    loss = 0
    for x, y in batches:
        loss += F.mse_loss(model(x), y)  # VAL_LOSS
    return loss / len(batches)


def group_divergence(xlat_batch, target_batch, batch_index, tau=0.1):
    kl_loss = nn.KLDivLoss(reduction="batchmean")
    batches = torch.unique(batch_index)
    total = 0
    for cur_batch in batches:
        idx = batch_index == cur_batch
        log_p = F.log_softmax(xlat_batch[idx] @ xlat_batch[idx].t() / tau, dim=1)
        q = F.softmax(target_batch[idx] @ target_batch[idx].t() / tau, dim=1)
        total += kl_loss(log_p, q)  # NOT_A_LOSS_FUNCTION
    return total / len(batches)
'''


def test_a_loss_function_summing_its_terms_is_quiet(tmp_path: Path) -> None:
    """PRESENT's ``IBP_loss``: a function named as a loss, without backward, sums one term per
    group of ``torch.unique(batch_index)`` (a loop over ``batches`` that is no loader) and runs no
    model: the sum is the loss. A loss function whose loop runs the model over batches, and a sum
    over groups in a function not named as a loss (the same code), stay reported."""
    (tmp_path / "layers.py").write_text(LOSSES)
    reported = {("layers.py", _row(LOSSES, m)) for m in ("VAL_LOSS", "NOT_A_LOSS_FUNCTION")}
    assert lint_project(tmp_path, "TML502") == reported


SCRIPT = '''import torch

model = torch.nn.Linear(4, 1)
optimizer = torch.optim.Adam(model.parameters())
for epoch in range(6):
    loss = 0
    for x, y in train_dataset:
        y_hat = model(x)
        loss = loss + torch.mean((y_hat - y) ** 2)
    loss = loss / len(train_dataset)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()

model.eval()
loss = 0
for x, y in test_dataset:
    y_hat = model(x)
    loss = loss + torch.mean((y_hat - y) ** 2)  # TEST_LOSS
print("MSE", loss.item() / len(test_dataset))
'''


def test_a_test_loss_summed_after_the_training_loop_is_reported(tmp_path: Path) -> None:
    """A script that trains on ``loss`` (summed over each epoch's batches, then backpropagated)
    and then sums the test loss into the same name, with autograd on: the training sum is what
    its backward needs (quiet); the test sum, after which nothing backpropagates, keeps every
    test batch's graph (graph-package's traffic prediction)."""
    (tmp_path / "script.py").write_text(SCRIPT)
    assert lint_project(tmp_path, "TML502") == {("script.py", _row(SCRIPT, "TEST_LOSS"))}
