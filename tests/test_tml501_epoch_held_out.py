"""TML501: a loop over held-out data inside the epoch loop, after the epoch's training batches
(upside-down-rl's ``GymModel.train``: ``for st_t, cmd_t, act_t in test_data_loader: preds =
self.model(st_t, cmd_t)``, the loss of ``self.loss = nn.CrossEntropyLoss()`` only ``.item()``-ed),
never backpropagates: the loop is wrapped in ``torch.no_grad()``. Look-alikes: the held-out loop
before the epoch's training (a training call after it), one that backpropagates inside, and a
training-named function that computes a loss and never backpropagates (a step left unfinished)."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "after_the_epoch": """
        import numpy as np
        import torch
        from torch import nn


        class GymModel:
            def __init__(self, model):
                self.model = model
                self.optim = torch.optim.Adam(model.parameters())
                self.loss = nn.CrossEntropyLoss()

            def train(self, train_data_loader, test_data_loader):
                for i in range(128):
                    for st_t, cmd_t, act_t in train_data_loader:
                        self.optim.zero_grad()
                        preds = self.model(st_t, cmd_t)
                        loss_val = self.loss(preds, act_t)
                        loss_val.backward()
                        self.optim.step()
                    test_losses = []
                    for st_t, cmd_t, act_t in test_data_loader:
                        preds = self.model(st_t, cmd_t)  # expect: TML501 fix=unsafe
                        loss_val = self.loss(preds, act_t).item()
                        test_losses.append(loss_val)
                    print(np.mean(test_losses))
    """,
    "before_the_epoch": """
        import torch
        from torch import nn


        class Learner:
            def __init__(self, model):
                self.model = model
                self.optim = torch.optim.Adam(model.parameters())
                self.loss = nn.CrossEntropyLoss()

            def fit(self, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    for x, y in val_loader:
                        print(self.loss(self.model(x), y).item())
                    for x, y in train_loader:
                        self.optim.zero_grad()
                        self.loss(self.model(x), y).backward()
                        self.optim.step()
    """,
    "trains_on_held_out": """
        import torch
        from torch import nn


        class MetaLearner:
            def __init__(self, model):
                self.model = model
                self.optim = torch.optim.SGD(model.parameters(), lr=0.1)
                self.loss = nn.MSELoss()

            def fit(self, train_loader, val_loader, epochs):
                for epoch in range(epochs):
                    for x, y in train_loader:
                        self.loss(self.model(x), y).backward()
                    for x, y in val_loader:
                        self.loss(self.model(x), y).backward()
                        self.optim.step()
    """,
    "unfinished_step": """
        import torch
        from torch import nn


        class Agent:
            def __init__(self, policy):
                self.policy = policy
                self.loss = nn.MSELoss()

            def train_policy(self, batches):
                for obs, target in batches:
                    policy_loss = self.loss(self.policy(obs), target)
                    print(policy_loss.item())
    """,
}


def test_held_out_loops_in_the_epoch(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
