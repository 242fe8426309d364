"""TML501 on a model kept in a private attribute: detectron2's ``LossEvalHook``, copied into
many projects (detectree2, artus), keeps the trainer's model as ``self._model`` and runs it over
the whole validation loader with autograd on, only to log ``.item()``'d losses. ``_model``,
``__net``, ``_network`` (and ``_<word>_model``) name a model as ``model`` does.

Quiet: a private attribute holding a Python module (``self._module``: not a model name), a method
named so (``self._build_model()``), a wrapper object the file knows is no ``nn.Module``
(``self._model = YOLO(path)``), and the hook's training step, which backpropagates."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "loss_eval_hook": '''
        import numpy as np
        import torch


        class LossEvalHook:
            def __init__(self, eval_period, model, data_loader):
                self._model = model
                self._period = eval_period
                self._data_loader = data_loader

            def _do_loss_eval(self):
                losses = []
                for idx, inputs in enumerate(self._data_loader):
                    loss_batch = self._get_loss(inputs)
                    losses.append(loss_batch)
                return np.mean(losses)

            def _get_loss(self, data):
                metrics_dict = self._model(data)  # expect: TML501
                metrics_dict = {
                    k: v.detach().cpu().item() if isinstance(v, torch.Tensor) else float(v)
                    for k, v in metrics_dict.items()
                }
                return sum(loss for loss in metrics_dict.values())

            def after_step(self):
                self._do_loss_eval()
    ''',
    "validation_loop": '''
        import torch


        class Runner:
            def __init__(self, net, loader):
                self.__net = net
                self._loader = loader

            def validate(self):
                self.__net.eval()
                correct = 0
                for x, y in self._loader:
                    correct += (self.__net(x).argmax(1) == y).sum().item()  # expect: TML501
                return correct
    ''',
    "look_alikes": '''
        import importlib

        import torch
        from ultralytics import YOLO


        class Scorer:
            def __init__(self, name, path, loader):
                self._module = importlib.import_module(name)
                self._model = YOLO(path)
                self._loader = loader

            def _build_model(self):
                return torch.nn.Linear(4, 4)

            def evaluate(self):
                scores = []
                for x in self._loader:
                    scores.append(self._module.score(x))
                    scores.append(self._model(x)[0].boxes.conf.tolist())
                    scores.append(self._build_model()(x).sum().item())
                return scores


        class Trainer:
            def __init__(self, model, loader, optimizer):
                self._model = model
                self._loader = loader
                self._optimizer = optimizer

            def run_step(self):
                for x, y in self._loader:
                    loss = torch.nn.functional.mse_loss(self._model(x), y)
                    self._optimizer.zero_grad()
                    loss.backward()
                    self._optimizer.step()
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_private_models"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
