"""TML502 and the terms of the loss a loop backpropagates: whatever computes them (a static
method of the class, a distribution's ``entropy()``, a function of another module), names that
``loss = a + w * b - c * d`` sums before ``loss.backward()`` carry its graph, and a list that
keeps them across the loop keeps every round's graph (cherry's PPO update). Quiet for what the
loss reads through a call's arguments (the targets), a constant weight, a name bound again to
``.item()`` before it is kept, ``.detach()``, and a loop with no backward."""

from __future__ import annotations

import subprocess
import sys

PPO = """\
import torch


class PPO:
    @staticmethod
    def policy_loss(new_log_probs, old_log_probs, advantages, clip=0.1):
        ratios = torch.exp(new_log_probs - old_log_probs)
        return -torch.min(ratios * advantages, ratios.clamp(1 - clip, 1 + clip) * advantages).mean()

    def update(self, replay, policy, optimizer, state_value, steps=10):
        policy_losses, entropies, value_losses = [], [], []
        for step in range(steps):
            batch = replay.sample(64)
            densities = policy(batch.state())
            values = state_value(batch.state())
            entropy = densities.entropy().mean()
            policy_loss = PPO.policy_loss(densities.log_prob(batch.action()), batch.log_prob(), batch.advantage())
            value_loss = (values - batch.retur()).pow(2).mean()
            loss = policy_loss
            loss = loss + 0.5 * value_loss
            loss = loss - 0.01 * entropy
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            policy_losses.append(policy_loss)
            entropies.append(entropy)
            value_losses.append(value_loss)
        return sum(policy_losses) / len(policy_losses), entropies, value_losses


def train(model, loader, optimizer, criterion, kl_weight):
    targets, weights, detached, kls, before = [], [], [], [], []
    w = 0.5
    for x, y in loader:
        out, mu, logvar = model(x)
        y = y.float()
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        before.append(kl)
        loss = criterion(out, y) + w * kl * kl_weight
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        targets.append(y)
        weights.append(w)
        kl = kl.item()
        kls.append(kl)
        detached.append(loss.detach())
    return targets, weights, kls, detached, before
"""

PRE = """\
import torch
from losses import contrastive, orthogonality


def fit(encoder, data, opt, epochs=3):
    history, evaluations = [], []
    for epoch in range(epochs):
        for x1, x2 in data:
            task = contrastive(encoder(x1), encoder(x2))
            reg = orthogonality(encoder.weight)
            history.append(reg)
            (task + 1e-3 * reg).backward()
            opt.step()
            opt.zero_grad()
    for x1, x2 in data:
        score = contrastive(encoder(x1), encoder(x2))
        evaluations.append(score)
    return history, evaluations
"""


def _rows(tmp_path, name, text):
    (tmp_path / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML502", name],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    return sorted(int(line.split(":")[1]) for line in result.stdout.splitlines() if ": TML502" in line)


def test_terms_of_the_backpropagated_loss_kept_after_the_backward(tmp_path):
    # 25-27: PPO's three terms; 38: the KL of the model's outputs (known before); not 47-51
    assert _rows(tmp_path, "ppo.py", PPO) == [25, 26, 27, 38]


def test_a_term_kept_before_the_backward_of_its_round(tmp_path):
    # 11: a function of another module, kept before the backward; not 17: the loop after trains nothing
    assert _rows(tmp_path, "pre.py", PRE) == [11]
