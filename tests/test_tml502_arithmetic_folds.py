"""TML502: a value folded into itself by arithmetic keeps each iteration's graph like ``+=`` does.
A running mean of the batch losses (dl-selection's ``validate``: ``mean_loss = (N * mean_loss +
n * loss) / (N + n)``), a moving average of a model output (MINE's ``ma_et = (1 - ma_rate) *
ma_et + ma_rate * torch.mean(et)``, host memory in a loop that trains), a sampler's update
(``x = 0.9 * x + 0.1 * eps``), a sum of two terms (``acc = acc + a + b``) and an attribute
(``self.total = self.total * 0.5 + loss``). Look-alikes: the same folds of ``.item()`` numbers,
under ``torch.no_grad()``, of a loss that is backpropagated, a value only scaled (``x = x *
0.5``), read inside a call as well (``acc = f(acc) + out``) and a recurrence inside ``forward``."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "running_mean": """
        import torch


        def validate(model, loader, loss_fn):
            mean_loss = 0
            N = 0
            for x, y in loader:
                n = len(x)
                loss = loss_fn(model(x), y)
                mean_loss = (N * mean_loss + n * loss) / (N + n)  # expect: TML502 fix=none
                N += n
            return mean_loss
    """,
    "moving_average_while_training": """
        import torch


        def train(mine_net, batches, optimizer, ma_rate=0.01):
            ma_et = 1.0
            for joint, marginal in batches:
                t = mine_net(joint)
                et = torch.exp(mine_net(marginal))
                ma_et = (1 - ma_rate) * ma_et + ma_rate * torch.mean(et)  # expect: TML502
                loss = -(torch.mean(t) - (1 / ma_et.mean()).detach() * torch.mean(et))
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    """,
    "two_terms_and_attributes": """
        import torch
        from torch import nn


        class Evaluator:
            def __init__(self, model):
                self.model = model
                self.criterion = nn.MSELoss()
                self.total = 0.0

            def evaluate(self, loader):
                acc = 0
                for x, y in loader:
                    out = self.model(x)
                    acc = acc + self.criterion(out, y) + out.abs().mean()  # expect: TML502
                    self.total = self.total * 0.5 + self.criterion(out, y)  # expect: TML502
                return float(acc)
    """,
    "numbers_and_no_grad": """
        import torch


        def validate(model, loader, loss_fn):
            mean_loss = 0.0
            N = 0
            for x, y in loader:
                n = len(x)
                loss = loss_fn(model(x), y)
                mean_loss = (N * mean_loss + n * loss.item()) / (N + n)
                N += n
            avg = 0.0
            with torch.no_grad():
                for x, y in loader:
                    avg = 0.9 * avg + 0.1 * loss_fn(model(x), y)
            return mean_loss, avg
    """,
    "backpropagated_and_scaled": """
        import torch


        def train(model, loader, optimizer, aux_fn, loss_fn):
            scale = 1.0
            for x, y in loader:
                out = model(x)
                loss = loss_fn(out, y)
                loss = 0.5 * loss + aux_fn(out)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                scale = scale * 0.5


        def collect(model, loader, norm):
            acc = 0
            for x in loader:
                acc = norm(acc) + model(x).sum()
            return acc.item()
    """,
    "recurrence_in_forward": """
        import torch
        from torch import nn


        class Leaky(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.cell = nn.Linear(size, size)

            def forward(self, xs):
                h = torch.zeros_like(xs[0])
                for x in xs:
                    h = 0.9 * h + 0.1 * torch.tanh(self.cell(x))
                return h
    """,
}


def test_arithmetic_folds(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML502")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])
