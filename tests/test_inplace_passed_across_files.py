"""TML201 on an activation a file builds and hands to a module class of another file of the
project (``MultiLayerPerceptron(..., activation=torch.nn.LeakyReLU(0.2))`` with ``from .egnn
import MultiLayerPerceptron``), which appends it to a module list that ``forward`` runs in turn
after each Linear, in a loop whose rounds start with the activation (the round before ends with
a Linear, chosen by an ``if``/``else``): the activation runs on a Linear's output wherever it is
appended (the list's orders, ``layer_lists.Order``). The class's own default instance is the
same site in its file.

Look-alikes stay quiet: an activation handed to a class that runs each element on the list's
input and keeps every output, and one handed to a class that puts it first."""

from __future__ import annotations

from marked_cases import project_findings

EGNN = """import torch


class MultiLayerPerceptron(torch.nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim, num_hidden_layers, activation=torch.nn.LeakyReLU(0.2), include_final_activation=True):  # expect
        super(MultiLayerPerceptron, self).__init__()
        first_layer_dim = hidden_dim if num_hidden_layers > 0 else output_dim
        self.mlp = torch.nn.ModuleList(
            [
                torch.nn.Linear(input_dim, first_layer_dim),
            ]
        )
        for i in range(num_hidden_layers):
            self.mlp.append(activation)
            if i == num_hidden_layers - 1:
                self.mlp.append(torch.nn.Linear(hidden_dim, output_dim))
            else:
                self.mlp.append(torch.nn.Linear(hidden_dim, hidden_dim))
        if include_final_activation:
            self.mlp.append(activation)

    def forward(self, x):
        for layer in self.mlp:
            x = layer(x)
        return x


class Heads(torch.nn.Module):
    def __init__(self, dim, activation):
        super().__init__()
        self.heads = torch.nn.ModuleList([torch.nn.Linear(dim, dim), activation])

    def forward(self, x):
        return [head(x) for head in self.heads]


class ActFirst(torch.nn.Module):
    def __init__(self, dim, activation):
        super().__init__()
        self.mlp = torch.nn.ModuleList([activation, torch.nn.Linear(dim, dim)])

    def forward(self, x):
        for layer in self.mlp:
            x = layer(x)
        return x
"""

MODEL = """import torch
from .egnn import ActFirst, Heads, MultiLayerPerceptron


class Denoiser(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.mlp = MultiLayerPerceptron(
            input_dim=d,
            hidden_dim=d,
            output_dim=d,
            num_hidden_layers=2,
            activation=torch.nn.LeakyReLU(0.2),  # expect
            include_final_activation=False,
        )
        self.heads = Heads(d, torch.nn.ELU())
        self.first = ActFirst(d, torch.nn.ELU())

    def forward(self, x):
        return self.mlp(x) + self.first(x) + sum(self.heads(x))
"""


def test_an_activation_handed_to_another_files_module_list(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "egnn.py").write_text(EGNN)
    (package / "model.py").write_text(MODEL)
    expected = {(name, n) for name, text in (("egnn.py", EGNN), ("model.py", MODEL))
                for n, line in enumerate(text.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 2
    assert project_findings(tmp_path, "TML201") == expected
