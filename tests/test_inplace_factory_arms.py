"""TML201 judges a layer a factory returns only at the calls that can take the factory's arm
building it (``analysis/factory_arms.py``): splifft's ``get_act(act_type)`` returns ``nn.ELU()``
only under ``act_type.startswith("elu")``, and its model passes ``cfg.act_type``, a config
dataclass field whose default is ``"gelu"``.

Quiet: an arm of ``__init__`` that the parameter's default does not take and no construction
asks for (pyhealth's ``elif activation == "leaky_relu": self.activation = nn.LeakyReLU()``,
``activation="relu"``: ``factory_arms.never_built``); a literal key that takes another arm; a
config class's field default that does; a
parameter every construction of the calling class passes such a value for; a key that an
earlier ``if ...: return`` catches first; keys tested by ``in``, ``startswith``, ``.lower()``; an ``else`` arm the default reaches.
Reported as before: the key that takes the arm (literal, field default, a construction passing
it), a key nothing tells (a parameter without a default), a config field another construction
of the class in the file sets to the layer's key, and the default's arm of a local chosen
before an ``else`` fallback, the local then appended after Linears rewrapped by
``spectral_norm`` (the same module).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

FACTORY = '''
        from dataclasses import dataclass

        import torch.nn as nn


        def get_act(act_type: str) -> nn.Module:
            if act_type == "gelu":
                return nn.GELU()
            elif act_type == "relu":
                return nn.ReLU()
            elif act_type.startswith("elu"):
                return nn.ELU()
            raise ValueError(act_type)
'''

CASES: Dict[str, str] = {
    "literal_keys": FACTORY + '''

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), get_act("gelu"), nn.Conv2d(8, 8, 3))
                self.b = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), get_act("elu"), nn.Conv2d(8, 8, 3))  # expect: TML201

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "config_field_default": FACTORY + '''

        @dataclass
        class Params:
            dim: int
            act_type: str = "gelu"


        class Up(nn.Module):
            def __init__(self, channels, act_type):
                super().__init__()
                self.conv = nn.Sequential(nn.BatchNorm2d(channels), get_act(act_type), nn.ConvTranspose2d(channels, channels, 2, 2))

            def forward(self, x):
                return self.conv(x)


        class Net(nn.Module):
            def __init__(self, cfg: Params):
                super().__init__()
                self.up = Up(cfg.dim, cfg.act_type)
                self.final = nn.Sequential(nn.Conv2d(cfg.dim, cfg.dim, 1), get_act(cfg.act_type), nn.Conv2d(cfg.dim, 3, 1))

            def forward(self, x):
                return self.final(self.up(x))
    ''',
    "config_field_default_takes_it": FACTORY + '''

        @dataclass
        class Params:
            dim: int
            act_type: str = "elu0.5"


        class Net(nn.Module):
            def __init__(self, cfg: Params):
                super().__init__()
                self.final = nn.Sequential(nn.Conv2d(cfg.dim, cfg.dim, 1), get_act(cfg.act_type), nn.Conv2d(cfg.dim, 3, 1))  # expect: TML201

            def forward(self, x):
                return self.final(x)
    ''',
    "config_field_set_by_a_construction": FACTORY + '''

        @dataclass
        class Params:
            dim: int = 8
            act_type: str = "gelu"


        class Net(nn.Module):
            def __init__(self, cfg: Params):
                super().__init__()
                self.final = nn.Sequential(nn.Conv2d(cfg.dim, cfg.dim, 1), get_act(cfg.act_type), nn.Conv2d(cfg.dim, 3, 1))  # expect: TML201

            def forward(self, x):
                return self.final(x)


        def build():
            return Net(Params(act_type="elu"))
    ''',
    "unknown_key": FACTORY + '''

        class Net(nn.Module):
            def __init__(self, act):
                super().__init__()
                self.final = nn.Sequential(nn.Conv2d(8, 8, 1), get_act(act), nn.Conv2d(8, 3, 1))  # expect: TML201

            def forward(self, x):
                return self.final(x)
    ''',
    "parameter_default_and_constructions": FACTORY + '''

        class Block(nn.Module):
            def __init__(self, channels, act="relu"):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(channels, channels, 3), nn.BatchNorm2d(channels), get_act(act), nn.Conv2d(channels, channels, 3))

            def forward(self, x):
                return self.body(x)


        class Other(nn.Module):
            def __init__(self, channels, act="relu"):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(channels, channels, 3), nn.BatchNorm2d(channels), get_act(act), nn.Conv2d(channels, channels, 3))  # expect: TML201

            def forward(self, x):
                return self.body(x)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.Sequential(Block(8), Block(8, act="gelu"), Other(8), Other(8, "elu"))

            def forward(self, x):
                return self.blocks(x)
    ''',
    "init_arm_default_not_taken": '''
        import torch.nn as nn


        class MLP(nn.Module):
            def __init__(self, dim, n_layers=3, activation: str = "relu"):
                super().__init__()
                if activation == "relu":
                    self.activation = nn.ReLU()
                elif activation == "leaky_relu":
                    self.activation = nn.LeakyReLU()
                elif activation == "elu":
                    self.activation = nn.ELU()
                else:
                    raise ValueError(activation)
                modules = [nn.Linear(dim, dim)]
                for _ in range(n_layers - 1):
                    modules.append(self.activation)
                    modules.append(nn.Linear(dim, dim))
                self.mlp = nn.Sequential(*modules)

            def forward(self, x):
                return self.mlp(x)
    ''',
    "init_arm_taken_by_a_construction": '''
        import torch.nn as nn


        class MLP(nn.Module):
            def __init__(self, dim, n_layers=3, activation: str = "relu"):
                super().__init__()
                if activation == "relu":
                    self.activation = nn.ReLU()
                elif activation == "leaky_relu":
                    self.activation = nn.LeakyReLU()  # expect: TML201
                else:
                    raise ValueError(activation)
                modules = [nn.Linear(dim, dim)]
                for _ in range(n_layers - 1):
                    modules.append(self.activation)
                    modules.append(nn.Linear(dim, dim))
                self.mlp = nn.Sequential(*modules)

            def forward(self, x):
                return self.mlp(x)


        def build():
            return MLP(16, activation="leaky_relu")
    ''',
    # qgans-pro's WassersteinDiscriminator: the default's arm before an ``else`` fallback, one
    # instance appended after each (spectral-normed) Linear
    "local_arm_before_an_else": '''
        import torch.nn as nn


        class WassersteinDiscriminator(nn.Module):
            def __init__(self, input_dim, hidden_dims=(512, 256), activation="leaky_relu", use_spectral_norm=True):
                super().__init__()
                if activation == "relu":
                    act_fn = nn.ReLU()
                elif activation == "leaky_relu":
                    act_fn = nn.LeakyReLU(0.2)  # expect: TML201
                else:
                    act_fn = nn.LeakyReLU(0.2)
                layers = []
                current_dim = input_dim
                for hidden_dim in hidden_dims:
                    linear = nn.Linear(current_dim, hidden_dim)
                    if use_spectral_norm:
                        linear = nn.utils.spectral_norm(linear)
                    layers.append(linear)
                    layers.append(act_fn)
                    current_dim = hidden_dim
                layers.append(nn.Linear(current_dim, 1))
                self.network = nn.Sequential(*layers)

            def forward(self, x):
                return self.network(x)


        class Gated(nn.Module):
            """The else arm reached by the default: not the arm's to judge; and a wrapper that
            is not the same module (a Sequential around the Linear, ending in a Sigmoid)."""

            def __init__(self, d, activation="gelu"):
                super().__init__()
                if activation == "relu":
                    act_fn = nn.ReLU()
                elif activation == "leaky_relu":
                    act_fn = nn.LeakyReLU(0.2)
                else:
                    act_fn = nn.LeakyReLU(0.1)
                linear = nn.Linear(d, d)
                linear = nn.Sequential(linear, nn.Sigmoid())
                self.body = nn.Sequential(linear, act_fn, nn.Linear(d, 1))

            def forward(self, x):
                return self.body(x)
    ''',
    "early_returns_and_tests": '''
        import torch.nn as nn


        def make_act(name, slope=0.2):
            if name.lower() in ("relu", "relu6"):
                return nn.ReLU()
            if name.endswith("gelu"):
                return nn.GELU()
            if "silu" in name:
                return nn.SiLU()
            return nn.LeakyReLU(slope)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), make_act("ReLU"), nn.Conv2d(8, 8, 3))
                self.b = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), make_act("fast_gelu"), nn.Conv2d(8, 8, 3))
                self.c = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), make_act("silu"), nn.Conv2d(8, 8, 3))
                self.d = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), make_act("lrelu"), nn.Conv2d(8, 8, 3))  # expect: TML201

            def forward(self, x):
                return self.d(self.c(self.b(self.a(x))))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_factory_arms"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
