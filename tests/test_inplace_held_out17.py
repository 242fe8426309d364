"""TML201 on a form a seventeenth held-out set showed it missed, modelled as a general construct.

- A local bound in each arm of an ``if`` chain that tests a string parameter (``if activation
  == "leakyrelu": act = nn.LeakyReLU() elif activation == "elu": act = nn.ELU() else: raise``,
  maybe declared first, ``act: nn.Module``), then placed (``fc_out.append(act)`` ...
  ``nn.Sequential(*fc_out)``): where the name is read it holds the layer of the arm the
  parameter's default picks (``activation: str = "leakyrelu"``, never rebound), the default
  configuration, and that layer runs at each place the name puts it
  (``analysis/module_flow.py``: ``dispatched_reads``, asked for a layer built in the arm and
  for a call of a function returning one, ``act = leaky()``). The place is the same whichever
  arm runs, so the fix (``inplace=True`` on the arm's layer) is safe.

Look-alikes stay quiet: a default that picks an arm building a layer TML201 does not judge
(``nn.ReLU``); a default that no arm tests for; the arm's layer already in place; the name
kept as ``self.act`` and called on an input read again; the name also bound outside the
chain. A parameter only case-folded first (``activation = activation.lower()``) is read through
the fold: its default ``"leakyrelu"`` still picks the LeakyReLU arm (``Rebound``: a site).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from marked_cases import fix_at, lint_cases, marked, marked_fixes
from torchmemlint.analysis.module_flow import dispatched_reads
from torchmemlint.tree import node_index

HEAD = '''
    from typing import List

    import torch
    import torch.nn as nn


    def leaky():
        return nn.LeakyReLU(0.1)


    class LineConvSampler(nn.Module):
        def __init__(self, num_fc_layers: int = 3, fc_size: int = 256, num_actions: int = 16,
                     activation: str = "leakyrelu"):
            super().__init__()
            self.activation = activation
            fc_out: List[nn.Module] = []
            for layer in range(num_fc_layers):
                out_features = num_actions if layer + 1 == num_fc_layers else fc_size
                fc_out.append(nn.Linear(in_features=fc_size, out_features=out_features))
                if layer + 1 < num_fc_layers:
                    act: nn.Module
                    if activation == "leakyrelu":
                        act = nn.LeakyReLU()  # expect: TML201 fix=safe
                    elif activation == "elu":
                        act = nn.ELU()
                    else:
                        raise RuntimeError(f"Invalid activation function {activation}.")
                    fc_out.append(act)
            self.fc_out = nn.Sequential(*fc_out)

        def forward(self, image_emb):
            return self.fc_out(image_emb.flatten(start_dim=1))


    class Kept(nn.Module):
        def __init__(self, size=8, activation="leakyrelu"):
            super().__init__()
            self.fc = nn.Linear(size, size)
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)  # expect: TML201 fix=safe
            elif activation == "elu":
                act = nn.ELU()
            self.act = act

        def forward(self, x):
            h = self.fc(x)
            return self.act(h)


    class FactoryHead(nn.Module):
        def __init__(self, n=3, size=8, activation="leaky"):
            super().__init__()
            layers = []
            for i in range(n):
                layers.append(nn.Linear(size, size))
                if activation == "leaky":
                    act = leaky()  # expect: TML201 fix=safe
                elif activation == "elu":
                    act = nn.ELU()
                layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)
'''

QUIET = '''
    import torch
    import torch.nn as nn


    class ReluByDefault(nn.Module):
        def __init__(self, size=8, activation="relu"):
            super().__init__()
            layers = [nn.Linear(size, size)]
            if activation == "relu":
                act = nn.ReLU()
            elif activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)
            layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)


    class NoArmForDefault(nn.Module):
        def __init__(self, size=8, activation="gelu"):
            super().__init__()
            layers = [nn.Linear(size, size)]
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)
            elif activation == "elu":
                act = nn.ELU()
            else:
                raise ValueError(activation)
            layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)


    class AlreadyInPlace(nn.Module):
        def __init__(self, size=8, activation="leakyrelu"):
            super().__init__()
            layers = [nn.Linear(size, size)]
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2, inplace=True)
            elif activation == "elu":
                act = nn.ELU(inplace=True)
            layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)


    class KeptOnInputReadAgain(nn.Module):
        def __init__(self, size=8, activation="leakyrelu"):
            super().__init__()
            self.fc = nn.Linear(size, size)
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)
            elif activation == "elu":
                act = nn.ELU()
            self.act = act

        def forward(self, x):
            h = self.fc(x)
            return self.act(h) + h


    class Rebound(nn.Module):
        def __init__(self, size=8, activation="leakyrelu"):
            super().__init__()
            activation = activation.lower()
            layers = [nn.Linear(size, size)]
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)  # expect: TML201
            elif activation == "elu":
                act = nn.ELU()
            layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)


    class BoundOutsideTheChain(nn.Module):
        def __init__(self, size=8, activation="leakyrelu", custom=None):
            super().__init__()
            layers = [nn.Linear(size, size)]
            if activation == "leakyrelu":
                act = nn.LeakyReLU(0.2)
            elif activation == "elu":
                act = nn.ELU()
            if custom is not None:
                act = custom
            layers.append(act)
            self.net = nn.Sequential(*layers)

        def forward(self, x):
            return self.net(x)
'''

CASES = {"head": HEAD, "quiet": QUIET}


@pytest.mark.slow  # starts the CLI
def test_held_out17_forms(tmp_path: Path) -> None:
    found = lint_cases(tmp_path, CASES, "TML201,TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name
    for name, source in CASES.items():
        for row, fix in marked_fixes(source).items():
            assert fix_at(found[name], row) == fix, (name, row)


def _reads(source: str, layer: str):
    module = cst.parse_module(source)
    index = node_index(module)
    function = next(n for n in index.order if type(n) is cst.FunctionDef and n.name.value == "build")
    line = next(
        n for n in index.order
        if type(n) is cst.SimpleStatementLine and module.code_for_node(n).strip().endswith(layer)
    )
    reads = dispatched_reads(index, line, line.body[0].value, function)
    return None if reads is None else [module.code_for_node(index.order[index.parent[index.find(r)]]) for r in reads]


_BUILD = '''
def build(kind="leaky", size=8):
    layers = [nn.Linear(size, size)]
    act: nn.Module
    if kind == "leaky":
        act = nn.LeakyReLU()
    elif "elu" == kind:
        act = nn.ELU()
    layers.append(act)
    return nn.Sequential(*layers)
'''


@pytest.mark.parametrize(
    "source, layer, expected",
    [
        (_BUILD, "act = nn.LeakyReLU()", ["act"]),  # the read in append(act), not the bindings
        (_BUILD, "act = nn.ELU()", None),  # not the default's arm
        (_BUILD.replace('kind="leaky"', 'kind="elu"'), "act = nn.ELU()", ["act"]),
        (_BUILD.replace('kind="leaky"', "kind=None"), "act = nn.LeakyReLU()", None),
        (_BUILD.replace("    layers.append", "    act = nn.Tanh()\n    layers.append"), "act = nn.LeakyReLU()", None),
        (_BUILD.replace("elif", "if"), "act = nn.LeakyReLU()", ["act"]),  # (another chain, still another string)
        (_BUILD.replace('"elu" == kind', '"leaky" == kind'), "act = nn.LeakyReLU()", None),
    ],
)
def test_dispatched_reads(source: str, layer: str, expected) -> None:
    assert _reads(source, layer) == expected
