"""TML501 knows a module by the return annotation of what built it: ``self.actor =
self.build_actor().to(self.device)`` with an abstract ``def build_actor(self) ->
torch.nn.Module`` (maslourl's DDPG, whose subclasses build the network), or a top-level
``def make_policy() -> nn.Module``. A straight-line ``self.actor.eval(); mu =
self.actor(obs)`` whose output is only made numpy is then reported as for any plainly named
model.

Look-alikes stay quiet: a builder annotated with a plain class that has its own ``eval``
(``-> Scorer``), and an unannotated builder.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "abstract_builder": """from abc import ABC, abstractmethod

import torch


class DDPG(ABC):
    def __init__(self, cuda=True):
        self.device = torch.device("cuda" if cuda else "cpu")
        self.actor = self.build_actor().to(self.device)

    @abstractmethod
    def build_actor(self) -> torch.nn.Module:
        pass

    def choose_action(self, observation, noise=None):
        self.actor.eval()
        observation = torch.tensor(observation, dtype=torch.float32).to(self.device)
        mu = self.actor(observation)  # expect: TML501
        if noise is not None:
            mu = mu + torch.tensor(noise(), dtype=torch.float32).to(self.device)
        return mu.cpu().detach().numpy()
""",
    "function_builder": """import torch
from torch import nn


def make_policy(size: int) -> nn.Module:
    return nn.Sequential(nn.Linear(size, size), nn.Tanh())


class Agent:
    def __init__(self, size):
        self.policy = make_policy(size)

    def act(self, obs):
        self.policy.eval()
        action = self.policy(torch.as_tensor(obs))  # expect: TML501
        return action.detach().numpy()
""",
    # look-alikes
    "plain_class_builder": """import torch


class Scorer:
    def eval(self):
        return self

    def __call__(self, x):
        return x.sum()


class Ranker:
    def __init__(self):
        self.scorer = self.build_scorer()
        self.other = self.build_other()

    def build_scorer(self) -> Scorer:
        return Scorer()

    def build_other(self):
        return Scorer()

    def rank(self, x):
        self.scorer.eval()
        score = self.scorer(x)
        return score.detach().numpy()

    def rank_other(self, x):
        self.other.eval()
        score = self.other(x)
        return score.detach().numpy()
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("annotated_builders"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
