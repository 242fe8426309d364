"""TML501 and the evaluation method of a training-loop class that is given the model
(parse-pytorch's ``TrainLoop.eval_step(self, inputs, labels, model)`` beside a ``train_step``
that backpropagates): the class is the loop, the method its evaluation, run with autograd on.
A runner's method that is given a network and whose class never trains (monai's
``Inferer._run_inference``: evaluators call it without autograd, trainers with it) stays
quiet, as does the evaluation method its own class calls under ``torch.no_grad()``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

LOOP = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class TrainLoop:
        def __init__(self, params):
            self.params = params

        def train_step(self, inputs, targets, model, optimizer):
            loss = nn.functional.cross_entropy(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            return loss.item()

        def eval_step(self, inputs, labels, model):
            if self.params["method"] == "PARSE":
                outputs = model(inputs, compute_model=True)[0]  # row 18
            else:
                outputs = model(inputs, compute_model=True)  # row 20
            pred = torch.max(outputs, 1)[1]
            err = nn.CrossEntropyLoss()(outputs, torch.max(labels, 1)[1])
            return err.item(), pred.detach().cpu().numpy()


    class Inferer:
        def predict_patch(self, network, patch):
            return network(patch)


    class GuardedLoop:
        def train_step(self, inputs, targets, model, optimizer):
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()

        def validate_step(self, inputs, model):
            return model(inputs).mean().item()

        def evaluate(self, batches, model):
            with torch.no_grad():
                return [self.validate_step(inputs, model) for inputs in batches]


    class NoGradLoop:
        def train_step(self, inputs, targets, model, optimizer):
            loss = nn.functional.mse_loss(model(inputs), targets)
            loss.backward()
            optimizer.step()

        @torch.no_grad()
        def eval_step(self, inputs, model):
            return model(inputs).argmax(1).cpu().numpy()
    """
)


def test_the_evaluation_method_of_a_training_loop_class_is_reported(tmp_path):
    (tmp_path / "train_loop.py").write_text(LOOP)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML501", "train_loop.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    rows = sorted(int(line.split(":")[1]) for line in result.stdout.splitlines() if "TML501" in line)
    assert rows == [18, 20], result.stdout + result.stderr
    assert "in `eval_step()` with autograd on" in result.stdout
