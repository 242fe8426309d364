"""TML201 on module lists of rows: ``self.layers`` holds displays of the same width
(``self.layers.append(nn.ModuleList([conv, act, conv2, act2]))``), unpacked in ``forward`` as
``for conv1, act, conv2, act in self.layers``. The name bound at a position holds the module
of that position of each row, unless a later position binds the same name (the last binding
wins: that module runs twice, the earlier one never). Each module so called runs on what its
call is given, as a module attribute would. Look-alikes stay quiet: the module that never runs,
an input read again (a residual), a name also used otherwise than called (kept in a list),
rows of different widths, a list also read outside such loops.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # a GAN discriminator's blocks, each row unpacked with one name for both activations
    "shared_name": '''
        import torch.nn as nn


        class Predictor(nn.Module):
            def __init__(self, dim, depth):
                super().__init__()
                self.layers = nn.ModuleList([])
                for _ in range(depth):
                    self.layers.append(nn.ModuleList([
                        nn.Conv2d(dim, dim, 3, padding=1),
                        nn.LeakyReLU(0.2),  # the name is bound again below: never runs, quiet
                        nn.Conv2d(dim, dim, 3, padding=1),
                        nn.LeakyReLU(0.2),  # expect: TML201
                    ]))

            def forward(self, x):
                for conv1, activation, conv2, activation in self.layers:
                    x = conv1(x)
                    x = activation(x)
                    x = conv2(x)
                    x = activation(x)
                return x
    ''',
    "rows": '''
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, dim, depth):
                super().__init__()
                self.layers = nn.ModuleList([nn.ModuleList([nn.Linear(dim, dim), nn.ELU()]) for _ in range(depth)])  # expect: TML201
                self.blocks = nn.ModuleList([nn.ModuleList([nn.Linear(dim, dim), nn.ELU()]) for _ in range(depth)])  # residual: quiet
                self.kept = nn.ModuleList([nn.ModuleList([nn.Linear(dim, dim), nn.ELU()]) for _ in range(depth)])  # kept: quiet
                self.mixed = nn.ModuleList([
                    nn.ModuleList([nn.Linear(dim, dim), nn.ELU()]),  # rows of two widths: quiet
                    nn.ModuleList([nn.Linear(dim, dim), nn.Sigmoid(), nn.ELU()]),
                ])
                self.read = nn.ModuleList([nn.ModuleList([nn.Linear(dim, dim), nn.ELU()]) for _ in range(depth)])  # read below: quiet

            def forward(self, x, feats):
                for lin, act in self.layers:
                    x = act(lin(x))
                for lin, act in self.blocks:
                    h = lin(x)
                    x = act(h) + h
                for lin, act in self.kept:
                    feats.append(act)
                    x = act(lin(x))
                for row in self.mixed:
                    x = row[-1](row[0](x))
                for lin, act in self.read:
                    x = act(lin(x))
                return self.read[0][1](x), feats
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_rows"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
