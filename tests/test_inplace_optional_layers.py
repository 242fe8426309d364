"""TML201/TML203 on layers a class's configuration makes optional or switches, modelled as
general constructs (the forms of a seventeenth held-out set's ``ConvBlock``, common in real code).

An optional module: ``self.bn = nn.BatchNorm2d(c) if batchnorm else None`` (either arm None) is
the layer it may be, since only that can be called; ``if self.bn: x = self.bn(x)`` runs it
where it is set, so the activation after runs on the conv output or the norm output.

A test of whether an attribute is set (``if self.act:``, ``if self.act is not None:``, ``not
self.act``, ``... if self.act is not None else x``) neither runs the module nor keeps it: the
activation still runs only where it is called. Look-alikes: the attribute handed on
(``hooks.append(self.act)``) or compared with something else than None (``self.act ==
other``): it may run elsewhere, quiet.

An ``inplace`` switch of ``__init__`` (``activation(inplace=inplace)`` with ``inplace=False``):
the layer runs as the default says, unless a call of the class in the file chooses otherwise;
reported without an edit (the switch is the configuration's, its callers' to set). Look-alikes:
a call of the class in the file passing ``inplace=True``, a default of True (no TML201), a
default that is not a literal, and the switch rebound in ``__init__``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "conv_block": '''
        import torch.nn as nn


        class ConvBlock(nn.Module):
            def __init__(self, cin, cout, activation=nn.LeakyReLU, batchnorm=False, inplace=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.batchnorm = nn.BatchNorm2d(cout) if batchnorm else None
                self.activation = activation(inplace=inplace) if activation else None  # expect: TML201 fix=none

            def forward(self, x):
                x = self.conv(x)
                if self.batchnorm:
                    x = self.batchnorm(x)
                if self.activation:
                    x = self.activation(x)
                return x
    ''',
    "guards": '''
        import torch.nn as nn


        class Guarded(nn.Module):
            def __init__(self, c, use_act=True):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU() if use_act else None  # expect: TML201 fix=unsafe

            def forward(self, x):
                x = self.fc(x)
                if self.act is not None:
                    x = self.act(x)
                return x


        class Ternary(nn.Module):
            def __init__(self, c, act=True):
                super().__init__()
                self.norm = nn.LayerNorm(c)
                self.act = None if not act else nn.LeakyReLU(0.1)  # expect: TML201 fix=safe

            def forward(self, x):
                h = self.norm(x)
                return self.act(h) if self.act is not None and not self.training else h


        class HandedOn(nn.Module):
            def __init__(self, c, hooks):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU() if c else None
                hooks.append(self.act)

            def forward(self, x):
                x = self.fc(x)
                if self.act is not None:
                    x = self.act(x)
                return x


        class Compared(nn.Module):
            def __init__(self, c, other):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU()
                self.same = self.act == other

            def forward(self, x):
                x = self.fc(x)
                if self.act:
                    x = self.act(x)
                return x


        class SavesOutput(nn.Module):
            def __init__(self, c, gate=True):
                super().__init__()
                self.gate = nn.Sigmoid() if gate else None
                self.act = nn.ELU()

            def forward(self, x):
                if self.gate is not None:
                    x = self.gate(x)
                return self.act(x)
    ''',
    "switches": '''
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, c, inplace=False):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.LeakyReLU(0.2, inplace=inplace)  # expect: TML201 fix=none

            def forward(self, x):
                return self.act(self.fc(x))


        class ChosenInPlace(nn.Module):
            def __init__(self, c, inplace=False):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.LeakyReLU(0.2, inplace=inplace)

            def forward(self, x):
                return self.act(self.fc(x))


        def build(c):
            return ChosenInPlace(c, inplace=True)


        class DefaultInPlace(nn.Module):
            def __init__(self, c, inplace=True):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU(inplace=inplace)

            def forward(self, x):
                return self.act(self.fc(x))


        class NotLiteral(nn.Module):
            def __init__(self, c, inplace=INPLACE):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU(inplace=inplace)

            def forward(self, x):
                return self.act(self.fc(x))


        class Rebound(nn.Module):
            def __init__(self, c, inplace=False):
                super().__init__()
                inplace = inplace or c > 64
                self.fc = nn.Linear(c, c)
                self.act = nn.ELU(inplace=inplace)

            def forward(self, x):
                return self.act(self.fc(x))


        INPLACE = True
    ''',
}


def test_optional_and_switched_layers(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201,TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
        for row, fix in marked_fixes(source).items():
            assert [f for (at, _), f in found[name].items() if at == row] == [fix], (name, row)
