"""TML501: an item of a container that the function puts in evaluation mode and then calls is a
model run (functionalfilet's ``self.SEEDER_LIST[index].eval(); out_probs =
self.SEEDER_LIST[index](in_tensor)``, in an RL ``step`` and in ``predict``, also chunk by chunk
in a comprehension), whatever the function's name. Look-alikes: another item switched
(``[0]`` before ``[index]``), the item trained (``.train()`` and a backward), the call under
``torch.no_grad()``."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "switched_items": """
        import numpy as np
        import torch
        from torch import nn


        class Filet:
            def __init__(self, n):
                self.SEEDER_LIST = [nn.Linear(4, 2) for _ in range(n)]
                self.optimizer = [torch.optim.Adam(s.parameters()) for s in self.SEEDER_LIST]

            def step(self, state, index=0):
                self.SEEDER_LIST[index].eval()
                out_probs = self.SEEDER_LIST[index](state)  # expect: TML501
                dilemna = np.squeeze(out_probs.cpu().detach().numpy())
                return int(dilemna.argmax())

            def predict(self, x, index=0, batch=8):
                self.SEEDER_LIST[index].eval()
                if x.shape[0] <= batch:
                    out = self.SEEDER_LIST[index](x)  # expect: TML501
                else:
                    out = torch.cat([self.SEEDER_LIST[index](i) for i in torch.split(x, batch)])  # expect: TML501
                return out.cpu().detach().numpy()
    """,
    "look_alikes": """
        import torch
        from torch import nn


        class Pool:
            def __init__(self, n):
                self.members = [nn.Linear(4, 2) for _ in range(n)]
                self.optimizer = [torch.optim.Adam(m.parameters()) for m in self.members]

            def other_item(self, x, index=0):
                self.members[0].eval()
                return self.members[index](x).detach().numpy()

            def fit(self, x, y, index=0):
                self.members[index].train()
                loss = ((self.members[index](x) - y) ** 2).mean()
                loss.backward()
                self.optimizer[index].step()

            def score(self, x, index=0):
                self.members[index].eval()
                with torch.no_grad():
                    out = self.members[index](x)
                return out.numpy()
    """,
}


def test_switched_items(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])
