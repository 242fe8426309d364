"""TML502 where the training step is a helper of the file: the loop only calls it and keeps
what it returns (an RL agent's ``loss = self.optimize(transitions)``, which runs the policy
network, backpropagates and returns the loss tensor; ``recent_loss.append(loss)``).

- A loop that calls a method of the file which trains (backward, an optimizer step) computes,
  and a plain method's own loss or output is what it returns, made in each run of the loop
  (``helper_returns``: nothing the caller knows goes in, the method runs its class's modules).
- A list kept as a slice of itself (``recent = recent[-k:]``) is not started again: the last
  ``k`` iterations' graphs stay alive.
- A module the class holds is known by what ``__init__`` builds, whatever it is named
  (``self._actor = Actor(...)``: ``self._actor.log_prob(obs, action)`` is a model output).

Look-alikes stay quiet: a helper that returns ``loss.item()``; one that runs under
``torch.no_grad()``; a list started afresh every iteration; a method of a plain object the
class holds (a replay buffer's ``sample``); the handles of hooks registered on a model's
modules (``handles.append(module.register_backward_hook(f))``: a handle, not an output).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

AGENT = '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Actor(nn.Module):
            def __init__(self, n_obs, n_actions):
                super().__init__()
                self.body = nn.Linear(n_obs, n_actions)

            def log_prob(self, obs, action):
                return F.log_softmax(self.body(obs), dim=-1).gather(1, action)


        class ReplayBuffer:
            def __init__(self, size):
                self.items = []

            def sample(self, n):
                return torch.stack(self.items[-n:])


        class Agent:
            def __init__(self, net, optimizer, n_obs, n_actions):
                self.policy_net = net
                self.optimizer = optimizer
                self._actor = Actor(n_obs, n_actions)
                self._buffer = ReplayBuffer(1000)

            def optimize(self, batch):
                values = self.policy_net(batch.x)
                loss = F.smooth_l1_loss(values, batch.y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss

            def optimize_number(self, batch):
                values = self.policy_net(batch.x)
                loss = F.smooth_l1_loss(values, batch.y)
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
                return loss.item()

            @torch.no_grad()
            def score(self, batch):
                return F.smooth_l1_loss(self.policy_net(batch.x), batch.y)
'''

CASES: Dict[str, str] = {
    "helper_trains_and_returns_its_loss": AGENT + '''
            def train(self, replay, steps):
                recent_loss = []
                while steps > 0:
                    batch = replay.sample(32)
                    loss = self.optimize(batch)
                    recent_loss.append(loss)  # expect: TML502
                    steps -= 1
                return recent_loss
    ''',
    "kept_as_a_slice_of_itself": AGENT + '''
            def train(self, loader, every=100):
                recent_loss = []
                for batch in loader:
                    loss = self.optimize(batch)
                    recent_loss.append(loss)  # expect: TML502
                    recent_loss = recent_loss[-every:]
                return sum(recent_loss) / len(recent_loss)
    ''',
    "started_afresh_every_iteration": AGENT + '''
            def train(self, loader):
                for batch in loader:
                    recent_loss = []
                    loss = self.optimize(batch)
                    recent_loss.append(loss)
                    print(recent_loss)
    ''',
    "helper_returns_a_number": AGENT + '''
            def train(self, loader):
                total = 0.0
                for batch in loader:
                    total += self.optimize_number(batch)
                return total
    ''',
    "helper_without_autograd": AGENT + '''
            def evaluate(self, loader):
                scores = []
                for batch in loader:
                    scores.append(self.score(batch))
                return scores
    ''',
    "held_module_with_any_name": AGENT + '''
            def update(self, loader):
                total_actor_loss = 0
                for obs, action, advantage in loader:
                    ratio = torch.exp(self._actor.log_prob(obs, action))
                    actor_loss = -(ratio * advantage).mean()
                    self.optimizer.zero_grad()
                    actor_loss.backward()
                    self.optimizer.step()
                    total_actor_loss += actor_loss  # expect: TML502
                return total_actor_loss
    ''',
    "held_plain_object": AGENT + '''
            def refill(self, loader):
                total = 0
                for batch in loader:
                    loss = F.mse_loss(self.policy_net(batch.x), batch.y)
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()
                    total += self._buffer.sample(8).sum()
                return total
    ''',
    "hook_handles_kept": AGENT + '''
            def guide(self, module):
                self.handles = []
                for module in module.modules():
                    if isinstance(module, nn.ReLU):
                        self.handles.append(module.register_backward_hook(lambda m, gi, go: (go[0].clamp(min=0),)))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml502_training_helpers"), CASES, "TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
