"""TML201 through the helpers small libraries write around their layers (flexray's ``ConvBlock``):

- a *by-name builder*, a function of the file that looks a layer class up in ``torch.nn`` by
  the name it is given (``cls = getattr(torch_nn, name, None)``, maybe a fallback lookup of the
  same name, ``return cls()``; an instance or a class handed in is returned as it is), called
  with a literal or a parameter whose default is one (``get_activation(activation)``,
  ``activation="LeakyReLU"``): the layer it names, reported without a fix (the name, not the
  call, would have to change);
- a builder that returns ``None`` in some arms (``_make_norm(norm, c)``: no norm): a ``None``
  is never placed in a Sequential, so what the builder makes is what its other returns make;
- a local holding a layer that is tested against ``None`` before it is appended (``if
  norm_layer is not None: layers.append(norm_layer)``): still that layer, or nothing.

Look-alikes stay quiet: a builder looking up a name in another module (``getattr(F, name)``,
functions), a by-name builder whose name argument comes from a caller's variable with no
default, and a builder that also returns a Sigmoid.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``
(``fix=none``: a finding without a fix).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = """import torch
import torch.nn as torch_nn
import torch.nn.functional as F


def get_activation(name):
    if isinstance(name, torch_nn.Module):
        return name
    if isinstance(name, type) and issubclass(name, torch_nn.Module):
        return name()
    activation_cls = getattr(torch_nn, name, None)
    if activation_cls is None:
        activation_cls = _case_insensitive(name)
    if activation_cls is None:
        raise ValueError(name)
    return activation_cls()


def _case_insensitive(name):
    lowered = name.lower()
    for attribute in dir(torch_nn):
        if attribute.lower() == lowered:
            return getattr(torch_nn, attribute)
    return None


def _make_norm(norm, channels):
    if norm is None:
        return None
    if norm == "batch":
        return torch_nn.BatchNorm2d(channels)
    return torch_nn.GroupNorm(8, channels)


"""

CASES = {
    "conv_block": HEAD + """class ConvBlock(torch_nn.Module):
    def __init__(self, cin, cout, *, num_convs=1, activation="LeakyReLU", norm=None, dropout=0.0):
        super().__init__()
        layers = []
        current = cin
        for _ in range(num_convs):
            layers.append(torch_nn.Conv2d(current, cout, 3, padding=1))
            norm_layer = _make_norm(norm, cout)
            activation_layer = get_activation(activation)  # expect: TML201 fix=none
            if norm_layer is not None:
                layers.append(norm_layer)
            layers.append(activation_layer)
            if dropout > 0:
                layers.append(torch_nn.Dropout2d(p=dropout))
            current = cout
        self.layers = torch_nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)
""",
    "literal_name": HEAD + """class Head(torch_nn.Module):
    def __init__(self, d):
        super().__init__()
        self.body = torch_nn.Sequential(torch_nn.Linear(d, d), get_activation("ELU"), torch_nn.Linear(d, 1))  # expect: TML201 fix=none

    def forward(self, x):
        return self.body(x)
""",
    # look-alikes
    "functional_lookup": HEAD + """def get_function(name):
    return getattr(F, name)


class Mlp(torch_nn.Module):
    def __init__(self, d, act="leaky_relu"):
        super().__init__()
        self.fc = torch_nn.Linear(d, d)
        self.act = get_function(act)

    def forward(self, x):
        return self.act(self.fc(x))
""",
    "name_without_default": HEAD + """class Block(torch_nn.Module):
    def __init__(self, d, activation):
        super().__init__()
        self.body = torch_nn.Sequential(torch_nn.Linear(d, d), get_activation(activation), torch_nn.Linear(d, 1))

    def forward(self, x):
        return self.body(x)
""",
    "norm_or_gate": HEAD + """def norm_or_gate(kind, c):
    if kind is None:
        return None
    if kind == "gate":
        return torch_nn.Sigmoid()
    return torch_nn.BatchNorm2d(c)


class Gated(torch_nn.Module):
    def __init__(self, c, kind="batch"):
        super().__init__()
        layers = [torch_nn.Conv2d(c, c, 1)]
        extra = norm_or_gate(kind, c)
        if extra is not None:
            layers.append(extra)
        layers.append(torch_nn.LeakyReLU(0.2))
        layers.append(torch_nn.Conv2d(c, c, 1))
        self.body = torch_nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("by_name_builders"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


def test_by_name_layers_have_no_fix(found):
    checked = 0
    for name, source in CASES.items():
        for row, expected in marked_fixes(source).items():
            checked += 1
            assert fix_at(found[name], row) == expected, (name, row)
    assert checked == 2
