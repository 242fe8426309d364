"""TML501 follows a model's output into the functions that end it, wherever they live, and
into the arithmetic torch spells as functions:

- a helper imported from another file of the project, by a relative import or by the
  package's absolute name (``from pkg.utils.preparation import cpunum``; ``def cpunum(t):
  return t.cpu().detach().numpy()``): ``int(cpunum(self(graph)).item())`` in a module's
  ``predict`` is a number made of the output (a molecule filter's prediction API);
- ``torch.add(a, b)`` is arithmetic, not ``set.add``: a voting head's
  ``w = p / torch.add(p, q)`` keeps following the output to its ``torch.argmax``;
- a method that only returns what the class's module gives its argument
  (``def action_probabilities(self, state): return self.model(FloatTensor(state))``): a
  policy's ``predict`` drawing actions from it runs the module;
- the values of an output dict iterated by ``.items()`` (``{k: head[k].distribution(
  v.detach()).sample() for k, v in model_out.items()}``), not its keys (names);
- a model passed to a method of another class (``evaluate_and_save_results(self, model,
  ...)``) is the caller's to judge unless the class's own methods call it, all with autograd
  on: then the file says how it runs.

Look-alikes stay quiet: a project helper that returns the output (the caller may train on it),
an imported helper whose file stores it on an object, a method a ``@torch.no_grad()`` method
calls, one called from a method that switches the model itself (judged there), and one whose
callers hand on a model they were given (monai's ``Inferer.__call__(inputs, network)``: borrowed
there too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Set, Tuple

import pytest

from marked_cases import lint_cases, marked
from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

PREPARATION = """import numpy as np


def cpunum(tensor) -> np.ndarray:
    return tensor.cpu().detach().numpy()


def keep(tensor):
    return tensor * 2


class Store:
    pass


def remember(tensor):
    Store.last = tensor
    return 0
"""

FILTER = """import torch
from torch import nn

from pkg.utils.preparation import cpunum, keep, remember


class Filter(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, 1)

    def forward(self, graph):
        return self.lin(graph)

    def fit(self, loader, optimizer):
        for graph, y in loader:
            loss = (self(graph) - y).pow(2).mean()
            loss.backward()
            optimizer.step()

    def predict(self, graph) -> int:
        return int(cpunum(self(graph)).item())

    def predict_kept(self, graph):
        return keep(self(graph))

    def predict_remembered(self, graph):
        return remember(self(graph))
"""

GENERATOR = """import torch
from torch import nn

from ..utils.preparation import cpunum


class Generator(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, mol):
        return self.lin(mol)

    def generate(self, mol):
        vector = cpunum(self(mol).squeeze())
        return [i for i, v in enumerate(vector) if v > 0.5]
"""


def _project(root: Path) -> Path:
    package = root / "pkg"
    for folder in (package, package / "utils", package / "model"):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "__init__.py").write_text("")
    (package / "utils" / "preparation.py").write_text(PREPARATION)
    (package / "model" / "filter.py").write_text(FILTER)
    (package / "model" / "generator.py").write_text(GENERATOR)
    return root


def _row(text: str, line: str) -> int:
    return text.splitlines().index(line) + 1


@pytest.mark.parametrize("extra", [("--no-cache",), ("--no-cache", "--isolated")], ids=["default", "isolated"])
def test_helpers_of_other_files_end_the_output(tmp_path, extra):
    found: Set[Tuple[str, int]] = lint_project(_project(tmp_path), "TML501", *extra)
    assert found == {
        ("filter.py", _row(FILTER, "        return int(cpunum(self(graph)).item())")),
        ("generator.py", _row(GENERATOR, "        vector = cpunum(self(mol).squeeze())")),
    }


CASES: Dict[str, str] = {
    "torch_add_is_arithmetic": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class SplitVoteNet(nn.Module):
            def __init__(self, a, b, hidden, out, qnet_type):
                super().__init__()
                self.subnet_a = qnet_type(a, hidden, out)
                self.subnet_b = qnet_type(b, hidden, out)

            def forward(self, x_a, x_b):
                return self.subnet_a(x_a), self.subnet_b(x_b)

            def predict(self, x_a, x_b):
                y_a, y_b = self.forward(x_a, x_b)  # expect: TML501
                sign_a = torch.max(F.softmax(y_a, dim=-1), dim=-1, keepdim=True)[0]
                sign_b = torch.max(F.softmax(y_b, dim=-1), dim=-1, keepdim=True)[0]
                w = sign_a / torch.add(sign_a, sign_b)
                y = y_a * w + y_b * (1 - w)
                return torch.argmax(y, 1)


        class Collector(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(4, 4)
                self.seen = set()

            def forward(self, x):
                return self.lin(x)

            def predict(self, x):
                out = self.forward(x)
                self.seen.add(out)
                return len(self.seen)
    ''',
    "model_given_by_own_methods": '''
        import torch


        class Runner:
            def evaluate_and_save_results(self, model, features, use_rf=False):
                if use_rf:
                    y_pred = model.predict(features)
                else:
                    y_pred = model(torch.tensor(features))  # expect: TML501
                    y_pred = y_pred.detach().numpy()
                print(y_pred.mean())

            def train_test_predict(self, features):
                model = self.fit(features)
                self.evaluate_and_save_results(model, features)


        class NoGradRunner:
            def evaluate_results(self, model, features):
                y_pred = model(torch.tensor(features))
                print(y_pred.detach().numpy())

            @torch.no_grad()
            def run(self, model, features):
                self.evaluate_results(model, features)


        class Inferer:
            def _run_inference(self, network, patch):
                out = network(patch)
                print(out.detach().numpy())

            def __call__(self, network, patch):
                network.eval()
                self._run_inference(network, patch)


        class SlidingWindowInferer:
            def _run_inference(self, network, patch):
                out = network(patch)
                print(out.detach().numpy())

            def __call__(self, inputs, network):
                return self._run_inference(network, inputs)


        class Borrowed:
            def score(self, network, patch):
                out = network(patch)
                print(out.detach().numpy())
    ''',
    "output_items": '''
        import torch


        class ModelInference:
            def __init__(self, model):
                self.model = model
                self.model.eval()

            def _sample_output(self, batch):
                model_out = self.model(batch)  # expect: TML501
                sampling = {
                    k: self.model.head_map[k].distribution(v.detach()).sample((1,)).flatten()
                    for k, v in model_out.items()
                    if k in self.model.head_map.keys()
                }
                data = {k[5:]: v for k, v in sampling.items() if k[:5] == "next_"}
                data["churn"] = sampling["p_churn"]
                return data

            def _kept_output(self, batch):
                model_out = self.model(batch)
                return {k: v for k, v in model_out.items()}
    ''',
    "a_method_that_only_runs_the_module": '''
        import torch
        from torch import nn


        class PolicyEstimator(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.model = nn.Sequential(nn.Linear(sizes[0], sizes[1]), nn.Tanh(), nn.Linear(sizes[1], sizes[2]), nn.Softmax(dim=-1))
                self.optimizer = torch.optim.Adam(self.parameters())

            def action_probabilities(self, state):
                """The probability of each action."""
                return self.model(torch.FloatTensor(state))

            def predict(self, state, k=1):
                probabilities = self.action_probabilities(state)  # expect: TML501
                prediction = torch.multinomial(probabilities, num_samples=k, replacement=False)
                return prediction.detach().numpy()

            def update(self, state, reward):
                loss = -(self.action_probabilities(state).log() * reward).sum()
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()

            def act(self, state):
                return self.action_probabilities(state)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("sink_helpers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
