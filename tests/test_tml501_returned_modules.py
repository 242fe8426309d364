"""TML501 knows a module by what built it when a builder of the file returns one: a method of
the class or a top-level function every ``return`` of which returns a module build, or a local
bound only to module builds (``analysis/module_builders.py``). dssm's ``self.mlp_left =
self.make_mlp_layer(...)`` returning ``nn.Sequential(*mlp)``, relaxit's ``self.actor =
self._build_actor_network()``, deepmorpheus's ``model = attempt_checkpoint_load(...)`` (``model =
Tagger(n); model.load_state_dict(...); return model``); fastnet's deep copy of its model,
``self.bestModel = copy.deepcopy(self.model)``: each is then judged as a module built in place
would be.

Look-alikes stay quiet in the same evaluation loop where a builder returning ``nn.Linear`` is
reported: a builder returning a plain class's instance through a local, one that may return
``None``, one that returns its parameter, a generator, a function returning a tokenizer, and a
deep copy of a plain class's instance; a builder of a loss (parlai's ``build_criterion``: a loss
records a graph only from its inputs) and one that freezes what it returns
(``extractor.requires_grad_(False)``: a frozen network records no graph of its own).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "method_builder_in_module_class": """import torch
from torch import nn


class DSSM(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp_left = self.make_mlp_layer(4, 2)

    def make_mlp_layer(self, n_in, n_out):
        mlp = [nn.Linear(n_in, n_out), nn.ReLU()]
        return nn.Sequential(*mlp)

    def forward(self, q):
        return self.mlp_left(q)

    def encode(self, vectors):
        self.eval()
        with torch.no_grad():
            vectors = torch.FloatTensor(vectors)
        vectors = self.mlp_left(vectors).tolist()  # expect: TML501
        return vectors

""",
    "method_builder_in_eval_loop": """import torch
from torch import nn


class A2C:
    def __init__(self, env, hidden=64):
        self.env = env
        self.actor = self._build_actor_network(hidden)

    def _build_actor_network(self, hidden):
        layers = [nn.Linear(4, hidden), nn.Tanh(), nn.Linear(hidden, 2)]
        return nn.Sequential(*layers).double()  # (a move: still the module)

    def evaluate_episode(self, episodes):
        rewards = []
        for _ in range(episodes):
            observation = torch.as_tensor(self.env.reset())
            action_logits = self.actor(observation)  # expect: TML501
            rewards.append(self.env.step(int(action_logits.argmax().item())))
        return rewards

""",
    "function_builder_returning_a_local": """import torch
from torch import nn


class Tagger(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lstm = nn.LSTM(n, n)

    def forward(self, x):
        return self.lstm(x)[0]


def attempt_checkpoint_load(path, n):
    model = Tagger(n)
    model.load_state_dict(torch.load(path))
    model = model.to("cpu")
    return model


def tag_from_lines(lines, path):
    model = attempt_checkpoint_load(path, 8)
    tags = []
    for line in lines:
        out = model(torch.as_tensor(line))  # expect: TML501
        tags.append(torch.argmax(out, -1).tolist())
    return tags
""",
    "deep_copy_of_the_model": """import copy

import torch


class Scorer:
    def __call__(self, x):
        return x.sum()


class Classifier:
    def __init__(self, n):
        self.model = torch.nn.Sequential(torch.nn.Linear(n, 1), torch.nn.Tanh())
        self.bestModel = copy.deepcopy(self.model)
        self.scorer = Scorer()
        self.best_scorer = copy.deepcopy(self.scorer)

    def __call__(self, vec):
        ret = self.bestModel(vec)  # expect: TML501
        return ret.detach().numpy().flatten()

    def score(self, vec):
        ret = self.best_scorer(vec)
        return ret.detach().numpy().flatten()
""",
    # look-alikes beside a builder that is one
    "builders_of_other_things": """import torch
from torch import nn


class Scorer:
    def eval(self):
        return self

    def __call__(self, x):
        return x.sum()


class Ranker:
    def __init__(self, size, net=None):
        self.scorer = self.build_scorer()
        self.maybe = self.build_maybe(size)
        self.given = self.build_given(net)
        self.many = self.build_many(size)
        self.ok = self.build_ok(size)
        self.criterion = self.build_criterion()
        self.extractor = self.build_extractor(size)

    def build_criterion(self):
        weight = torch.ones(2)
        return torch.nn.CrossEntropyLoss(weight=weight, reduction="none")

    def build_extractor(self, size):
        extractor = nn.Linear(size, size)
        extractor.requires_grad_(False)
        return extractor

    def build_scorer(self):
        scorer = Scorer()
        return scorer

    def build_maybe(self, size):
        if size == 0:
            return None
        return nn.Linear(size, size)

    def build_given(self, net):
        return net

    def build_many(self, size):
        yield nn.Linear(size, size)

    def build_ok(self, size):
        return nn.Linear(size, size)

    def evaluate_ranks(self, batches):
        out = []
        for x in batches:
            out.append(self.scorer(x).item())
            out.append(self.maybe(x).tolist())
            out.append(self.given(x).tolist())
            out.append(self.many(x).tolist())
            out.append(self.ok(x).tolist())  # expect: TML501
            out.append(self.criterion(x, x).tolist())
            out.append(self.extractor(x).tolist())
        return out


def make_optimizer(model):
    return torch.optim.Adam(model.parameters())


def make_tokenizer():
    return str.split


def predict_words(lines, model):
    tokenize = make_tokenizer()
    words = []
    for line in lines:
        words.append(tokenize(line))
    return words
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("returned_modules"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
