"""TML501: ``self.<x>`` that another class of the method's lineage in the file binds to a
module is the model: a base class's ``get_prediction_list`` calling ``self.neural_network``,
which only its subclasses build (emulchem's ``Emulator`` and its ``ChemistryEmulator`` /
``RadiativeEmulator``), and a subclass's method calling what the base's ``__init__`` built
(``analysis/class_lineage.py``). Look-alikes: an unrelated class of the file binding the same
name, a subclass binding a wrapper object the file does not know as a module, the base's
output backpropagated, the call under ``torch.no_grad()``."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "built_by_subclasses": """
        import numpy as np
        import torch
        from torch import nn


        class NeuralNet(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.fc = nn.Linear(n, 1)

            def forward(self, x):
                return self.fc(x)


        class Emulator:
            def __init__(self, specie):
                self.specie = specie

            def get_prediction_list(self, x):
                x_val = self.input_scaler.transform(np.array(x).reshape(1, -1))
                y_val = self.neural_network(torch.FloatTensor(x_val)).detach().numpy()[0]  # expect: TML501
                return self.output_scaler.inverse_transform(y_val.reshape(1, -1))[0][0]


        class ChemistryEmulator(Emulator):
            def __init__(self, specie, path):
                Emulator.__init__(self, specie)
                self.neural_network = NeuralNet(6)
                self.neural_network.load_state_dict(torch.load(path))


        class RadiativeEmulator(Emulator):
            def __init__(self, specie, path):
                super().__init__(specie)
                self.neural_network = NeuralNet(3)
    """,
    "built_by_the_base": """
        import torch
        from torch import nn


        class Base:
            def __init__(self):
                self.scorer = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))


        class Ranker(Base):
            def rank(self, items):
                scores = self.scorer(items).squeeze(-1)  # expect: TML501
                return scores.argsort(descending=True).tolist()
    """,
    "look_alikes": """
        import torch
        from torch import nn


        class Other:
            def __init__(self):
                self.head = nn.Linear(4, 1)


        class Reader:
            def read(self, x):
                return self.head(x).detach().numpy()


        class Client:
            def predict(self, x):
                return self.engine(x).detach().numpy()


        class RemoteClient(Client):
            def __init__(self, url):
                self.engine = RemoteEngine(url)


        class Trainer:
            def step(self, x, y):
                loss = ((self.model(x) - y) ** 2).mean()
                loss.backward()
                return loss.item()

            def score(self, x):
                with torch.no_grad():
                    return self.model(x).numpy()


        class LinearTrainer(Trainer):
            def __init__(self):
                self.model = nn.Linear(4, 1)
    """,
}


def test_inherited_attributes(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML501")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])
