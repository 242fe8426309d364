"""TML201 on activation functions a class's configuration chooses (the form of a fifth held-out
set's temporal-fusion GRN, ``self.activation_fn = get_activation_fn(activation)``), modelled as
general constructs (``analysis/chosen_functions.py``).

An attribute that holds a torch function (``self.act = F.elu``), one a helper of the file
returns from a literal dict by the constructor's string default (``return table.get(name,
F.elu)``), one that a module-level dict gives by a key every call passes alike (through the
callers' own parameters and ``self.x`` set from one), a local looked up in such a dict, and a
constructor parameter defaulting to the function that no call of the file changes
(``activation=F.leaky_relu``, then ``self.activation = activation``): each runs where it is called. Reported where the function is chosen, without an edit (another
key may choose a function without ``inplace``).

Look-alikes stay quiet: calls of the class in the file choosing differently, a required key no
call of the file passes, a key that chooses ReLU, an input read again after the call, the
attribute handed on, a dict bound twice, and a key missing from a dict read with ``[]``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "grn": '''
        from typing import Callable

        import torch.nn as nn
        import torch.nn.functional as F


        def get_activation_fn(activation_str: str) -> Callable:
            activation_map = {
                "ReLU": F.relu,
                "Tanh": F.tanh,
                "LeakyReLU": F.leaky_relu,
                "ELU": F.elu,
            }
            return activation_map.get(activation_str, F.elu)


        class GRN(nn.Module):
            def __init__(self, input_size, hidden_size, context_size=None, activation="ELU"):
                super().__init__()
                self.lin_a = nn.Linear(input_size, hidden_size)
                if context_size is not None:
                    self.lin_c = nn.Linear(context_size, hidden_size, bias=False)
                self.lin_i = nn.Linear(hidden_size, hidden_size)
                self.activation_fn = get_activation_fn(activation)  # expect: TML201 fix=none

            def forward(self, a, c=None):
                x = self.lin_a(a)
                if c is not None:
                    x = x + self.lin_c(c).unsqueeze(1)
                x = self.activation_fn(x)
                return self.lin_i(x)


        class Selection(nn.Module):
            def __init__(self, hidden_size, grn_activation):
                super().__init__()
                self.grn = GRN(hidden_size, hidden_size, activation=grn_activation)


        class Model(nn.Module):
            def __init__(self, hidden_size, grn_activation="ELU"):
                super().__init__()
                self.grn_activation = grn_activation
                self.selection = Selection(hidden_size, grn_activation=self.grn_activation)
                self.context = GRN(hidden_size, hidden_size)
    ''',
    "plain": '''
        import torch.nn as nn
        import torch.nn.functional as F

        ACTS = {"elu": F.elu, "selu": F.selu, "relu": F.relu}


        class Alias(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = F.elu  # expect: TML201 fix=none

            def forward(self, x):
                return self.act(self.fc(x))


        class Keyed(nn.Module):
            def __init__(self, c, act="selu"):
                super().__init__()
                self.norm = nn.LayerNorm(c)
                self.act = ACTS[act]  # expect: TML201 fix=none

            def forward(self, x):
                return self.act(self.norm(x))


        def block(x, act="elu"):
            fn = ACTS[act]
            return fn(x + 1)  # expect: TML201 fix=none


        class Residual(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = F.elu

            def forward(self, x):
                h = self.fc(x)
                return self.act(h) + h


        class HandedOn(nn.Module):
            def __init__(self, c, hooks):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = F.elu
                hooks.append(self.act)

            def forward(self, x):
                return self.act(self.fc(x))


        class ReluKey(nn.Module):
            def __init__(self, c, act="relu"):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = ACTS[act]

            def forward(self, x):
                return self.act(self.fc(x))


        class Missing(nn.Module):
            def __init__(self, c, act="gelu"):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = ACTS[act]

            def forward(self, x):
                return self.act(self.fc(x))
    ''',
    "unknown": '''
        import torch.nn as nn
        import torch.nn.functional as F

        TABLE = {"elu": F.elu, "relu": F.relu}
        TABLE = {"elu": F.relu, "relu": F.relu}
        ONE = {"elu": F.elu, "relu": F.relu}


        class Chosen(nn.Module):
            def __init__(self, c, act="elu"):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = ONE[act]

            def forward(self, x):
                return self.act(self.fc(x))


        def build(c):
            return [Chosen(c), Chosen(c, act="relu")]


        class Required(nn.Module):
            def __init__(self, c, act):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = ONE[act]

            def forward(self, x):
                return self.act(self.fc(x))


        class Twice(nn.Module):
            def __init__(self, c, act="elu"):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = TABLE[act]

            def forward(self, x):
                return self.act(self.fc(x))
    ''',
    # progentrl's WaveNet block: the function is the constructor's default
    "parameter_default": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class DilConv1dWithGLU(nn.Module):
            def __init__(self, num_channels, dilation, activation=F.leaky_relu):
                super().__init__()
                self.start_ln = nn.LayerNorm(num_channels)
                self.start_conv1x1 = nn.Conv1d(num_channels, num_channels, kernel_size=1)
                self.gate_ln = nn.LayerNorm(num_channels)
                self.end_conv1x1 = nn.Conv1d(num_channels, num_channels, kernel_size=1)
                self.activation = activation  # expect: TML201 fix=none

            def forward(self, x_inp):
                x = self.start_ln(x_inp.transpose(1, 2)).transpose(1, 2)
                x = self.activation(x)
                x = self.start_conv1x1(x)
                x = self.gate_ln(x.transpose(1, 2)).transpose(1, 2)
                x = self.activation(x)
                return self.end_conv1x1(x) * torch.sigmoid(x) + x_inp


        class Decoder(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.layers = nn.ModuleList([DilConv1dWithGLU(c, 2 ** i) for i in range(4)])


        class Other(nn.Module):
            def __init__(self, c, activation=F.elu):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.activation = activation

            def forward(self, x):
                return self.activation(self.fc(x))


        def build(c):
            return [Other(c), Other(c, activation=torch.tanh)]
    ''',
}


def test_chosen_functions(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201,TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
        for row, fix in marked_fixes(source).items():
            assert [f for (at, _), f in found[name].items() if at == row] == [fix], (name, row)
