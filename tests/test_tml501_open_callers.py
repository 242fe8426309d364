"""TML501 reports a model call whose output reaches only sinks in a function one caller of the
file wraps in ``no_grad`` while another runs it with autograd on (``analysis/open_callers.py``):
abimca's ``_get_score_of_models_for_known_sequences`` is wrapped by ``predict`` and called per
step by ``fit``, which trains through ``self.base_model_train_step(x)``. Nothing can train on
such an output, so the open caller records its graph for nothing.

The open caller must train (``backward``, an optimizer's ``step``): it runs with autograd on
whoever calls it. Look-alikes stay quiet: a function every caller wraps in ``no_grad``, or whose
other caller trains nothing (cogdl's ``val_step``, which its trainer in another file wraps in
``no_grad``); one whose output is
returned (a caller may train on it); one whose only open caller is itself called only under
``no_grad``; and a method whose name another class's method shares, called with autograd on
on another object.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "one_caller_open_one_wrapped": """import numpy as np
import torch


class Identifier:
    def __init__(self, models):
        self.loss_fn = torch.nn.MSELoss()
        self.models = models
        self.opt = torch.optim.SGD([p for m in models for p in m.parameters()], lr=0.1)

    def _scores(self, models: list[torch.nn.Module], x):
        scores = []
        for cnt, model in enumerate(models):
            y_pred, latent = model(x)  # expect: TML501
            scores.append(latent.cpu().detach().numpy())
        return np.array(scores)

    def fit(self, x):
        for m in self.models:
            self.opt.zero_grad()
            y, _ = m(x)
            loss = self.loss_fn(y, x)
            loss.backward()
            self.opt.step()
        return self._scores(self.models, x)

    def predict(self, x):
        with torch.no_grad():
            return self._scores(self.models, x)


class Tracker:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def _train_step(self, x, y):  # (it calls nothing of its own class: it trains all the same)
        self.optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(self.model.forward(x), y)
        loss.backward()
        self.optimizer.step()

    def _score(self, x):
        return self.model(x).detach().cpu().numpy()  # expect: TML501

    def fit(self, xs, ys):
        scores = []
        for x, y in zip(xs, ys):
            self._train_step(x, y)
            scores.append(self._score(x))
        return scores

    def predict(self, xs):
        with torch.no_grad():
            return [self._score(x) for x in xs]
""",
    "look_alikes": """import numpy as np
import torch


class Wrapped:
    def __init__(self, model):
        self.model = model

    def _embed(self, x):
        return self.model(x).detach().cpu().numpy()

    def predict(self, x):
        with torch.no_grad():
            return self._embed(x)

    def predict_many(self, xs):
        with torch.no_grad():
            return [self._embed(x) for x in xs]

    def val_step(self, x):
        return {"embedding": self._embed(x)}  # (a trainer elsewhere may run it under no_grad)


class Returned:
    def __init__(self, model):
        self.model = model

    def _logits(self, x):
        return self.model(x)

    def train_step(self, x, y, opt):
        loss = torch.nn.functional.cross_entropy(self._logits(x), y)
        loss.backward()
        opt.step()

    def predict(self, x):
        with torch.no_grad():
            return self._logits(x).argmax(1)


class Chained:
    def __init__(self, model):
        self.model = model

    def _embed(self, x):
        return self.model(x).detach().cpu().numpy()

    def _collect(self, xs):
        return [self._embed(x) for x in xs]

    def evaluate(self, xs):
        with torch.no_grad():
            return self._collect(xs)


class Other:
    def _embed(self, x):
        return np.asarray(x)

    def run(self, x):
        return self._embed(x)
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("open_callers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
