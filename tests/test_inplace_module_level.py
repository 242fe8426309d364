"""TML201 on activations built at module level (``analysis/module_level_layers.py``): one
instance bound to a name (``ACT = nn.LeakyReLU(0.2)``) runs wherever the classes of the file
put it (``self.act = ACT``, ``nn.Sequential(nn.Linear(...), ACT, ...)``), and a list of
instances (``activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]``, an MLP proxy model's)
runs element by element where the one class that keeps it (``self.activate_functions =
activate_functions``) calls ``self.activate_functions[i]``; an entry of a module-level table
(``ACTIVATION = {"leaky_relu": nn.LeakyReLU(), ...}``) runs where a class selects it by a literal
key or by a parameter whose default is that key (``self.activation = ACTIVATION[activation]``).

Look-alikes stay quiet: the instance also placed after a Sigmoid (whose backward reads its
output), read by a module-level function (its callers are not known), a list that a function
outside the class also reads, a name rebound in a function, a table read by a key the code
does not show (``ACTIVATION[config.activation]``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "one_instance": '''
        import torch.nn as nn

        ACT = nn.LeakyReLU(0.2)  # expect: TML201


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.act = ACT

            def forward(self, x):
                return self.out(self.act(self.lin(x)))


        class Stack(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(d, d), ACT, nn.Linear(d, 1))

            def forward(self, x):
                return self.seq(x)
    ''',
    "one_instance_after_a_sigmoid": '''
        import torch.nn as nn

        ACT = nn.LeakyReLU(0.2)


        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.act = ACT

            def forward(self, x):
                return self.out(self.act(self.lin(x)))


        class Gate(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(d, d), nn.Sigmoid(), ACT, nn.Linear(d, 1))

            def forward(self, x):
                return self.seq(x)
    ''',
    "one_instance_in_a_function": '''
        import torch.nn as nn

        SHARED = nn.ELU()


        def apply(x):
            return SHARED(x)


        class User(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.act = SHARED

            def forward(self, x):
                return self.act(self.lin(x))
    ''',
    "list_kept_by_a_class": '''
        import torch.nn as nn

        activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]  # expect: TML201


        class SingleModel(nn.Module):
            def __init__(self, input_size, hidden_size):
                super().__init__()
                self.activate_functions = activate_functions
                layers = [nn.Linear(input_size, hidden_size[0])]
                for i in range(len(hidden_size) - 1):
                    layers.append(nn.Linear(hidden_size[i], hidden_size[i + 1]))
                layers.append(nn.Linear(hidden_size[-1], 1))
                self.layers = nn.Sequential(*layers)
                self.hidden_size = hidden_size

            def forward(self, x):
                for i in range(len(self.hidden_size)):
                    x = self.layers[i](x)
                    x = self.activate_functions[i](x)
                return self.layers[len(self.hidden_size)](x)
    ''',
    "list_read_outside_the_class": '''
        import torch.nn as nn

        activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]


        class SingleModel(nn.Module):
            def __init__(self):
                super().__init__()
                self.activate_functions = activate_functions
                self.layers = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4), nn.Linear(4, 1))

            def forward(self, x):
                for i in range(2):
                    x = self.layers[i](x)
                    x = self.activate_functions[i](x)
                return self.layers[2](x)


        def gate(x):
            return activate_functions[0](x.sigmoid())
    ''',
    # PELICAN's table: the entry a class selects by its parameter's default key
    "entry_of_a_table": '''
        import torch.nn as nn

        ACTIVATION = {
            "leaky_relu": nn.LeakyReLU(),  # expect: TML201
            "relu": nn.ReLU(),
        }


        class Block(nn.Module):
            def __init__(self, dim, activation="leaky_relu"):
                super().__init__()
                self.linear_in = nn.Linear(dim, dim)
                self.activation = ACTIVATION[activation]
                self.norm = nn.LayerNorm(dim)

            def forward(self, x):
                return self.norm(self.activation(self.linear_in(x)))
    ''',
    "entry_of_a_table_read_by_an_unknown_key": '''
        import torch.nn as nn

        ACTIVATION = {"leaky_relu": nn.LeakyReLU(), "relu": nn.ReLU()}


        class Block(nn.Module):
            def __init__(self, dim, config):
                super().__init__()
                self.linear_in = nn.Linear(dim, dim)
                self.activation = ACTIVATION[config.activation]
                self.norm = nn.LayerNorm(dim)

            def forward(self, x):
                return self.norm(self.activation(self.linear_in(x)))
    ''',
    "name_rebound": '''
        import torch.nn as nn

        ACT = nn.LeakyReLU(0.2)


        class Block(nn.Module):
            def __init__(self, d, ACT=None):
                super().__init__()
                self.lin = nn.Linear(d, d)
                self.out = nn.Linear(d, 1)
                self.act = ACT

            def forward(self, x):
                return self.out(self.act(self.lin(x)))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("module_level"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
