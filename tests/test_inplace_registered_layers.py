"""TML201 in a Sequential subclass that registers a list's layers one by one, in order: rsl_rl's
``MLP``, copied into robotics packages (telekinesis-rlbotics)::

    class MLP(nn.Sequential):
        def __init__(self, ...):
            super().__init__()
            layers = [nn.Linear(...), activation, ...]
            for idx, layer in enumerate(layers):
                self.add_module(f"{idx}", layer)

is the Sequential ``super().__init__(*layers)`` builds (``analysis/registered_layers.py``): an
activation after a Linear there runs out of place as in ``nn.Sequential(*layers)``. Also ``for
layer in layers: self.add_module(str(i), layer)`` and an activation a helper returns by name
(``activation_mod = _resolve_activation(activation)``, a table entry).

Quiet: the same loop in a plain ``nn.Module`` (its ``forward`` decides the order), a Sequential
subclass that registers other modules too, a loop over another expression (``reversed(layers)``),
and an activation followed by a dropout that drops."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "rsl_rl_mlp": '''
        import torch.nn as nn


        def _resolve_activation(act_name: str) -> nn.Module:
            activations = {"relu": nn.ReLU(), "elu": nn.ELU(), "tanh": nn.Tanh()}
            if act_name not in activations:
                raise ValueError(act_name)
            return activations[act_name]


        class MLP(nn.Sequential):
            def __init__(self, input_dim, output_dim, hidden_dims=(256, 256), activation: str = "elu"):
                super().__init__()
                activation_mod = _resolve_activation(activation)  # expect: TML201
                layers = [nn.Linear(input_dim, hidden_dims[0]), activation_mod]
                for i in range(len(hidden_dims) - 1):
                    layers.append(nn.Linear(hidden_dims[i], hidden_dims[i + 1]))
                    layers.append(activation_mod)
                layers.append(nn.Linear(hidden_dims[-1], output_dim))
                for idx, layer in enumerate(layers):
                    self.add_module(f"{idx}", layer)
    ''',
    "plain_loop": '''
        import torch.nn as nn


        class Encoder(nn.Sequential):
            def __init__(self, channels):
                super().__init__()
                layers = []
                for a, b in zip(channels, channels[1:]):
                    layers.append(nn.Conv2d(a, b, 3))
                    layers.append(nn.BatchNorm2d(b))
                    layers.append(nn.LeakyReLU(0.2))  # expect: TML201
                layers.append(nn.Conv2d(channels[-1], 1, 1))
                i = 0
                for layer in layers:
                    self.add_module(str(i), layer)
                    i += 1
    ''',
    "look_alikes": '''
        import torch.nn as nn


        class NotASequential(nn.Module):
            def __init__(self):
                super().__init__()
                layers = [nn.Linear(4, 4), nn.ELU(), nn.Linear(4, 4)]
                for idx, layer in enumerate(layers):
                    self.add_module(f"{idx}", layer)

            def forward(self, x):
                return x


        class RegistersMore(nn.Sequential):
            def __init__(self):
                super().__init__()
                self.add_module("head", nn.Linear(4, 4))
                layers = [nn.Linear(4, 4), nn.ELU(), nn.Linear(4, 4)]
                for idx, layer in enumerate(layers):
                    self.add_module(f"{idx}", layer)


        class Reversed(nn.Sequential):
            def __init__(self):
                super().__init__()
                layers = [nn.Linear(4, 4), nn.ELU(), nn.Linear(4, 4)]
                for idx, layer in enumerate(reversed(layers)):
                    self.add_module(f"{idx}", layer)


        class Dropped(nn.Sequential):
            def __init__(self):
                super().__init__()
                layers = [nn.Linear(4, 4), nn.ELU(), nn.Dropout(0.5), nn.Linear(4, 4)]
                for idx, layer in enumerate(layers):
                    self.add_module(f"{idx}", layer)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_registered_layers"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
