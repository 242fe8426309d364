"""TML201 in a ``Sequential`` of another package (mmengine's, the ``Sequential`` of a utility
package such as ``torch_einops_utils.nn``), read as ``nn.Sequential`` where the call gives it
modules only, positionally: at least two torch layers built in place, every other argument a
class built in place (``RMSNorm(dim)``) or such a Sequential. Look-alikes stay quiet: a call
that passes a name (what it holds is not seen), a string and a list (torch_geometric's
``Sequential("x, edge_index", [...])``), a keyword, a ``*list``, a container of another name,
an activation first in the Sequential (it runs on the caller's tensor).

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "utility_sequential": '''
        import torch.nn as nn
        from torch_einops_utils.nn import Sequential
        from mmengine.model import Sequential as MMSequential
        from mylib.layers import RMSNorm, Chain


        class Predictor(nn.Module):
            def __init__(self, dim, probe):
                super().__init__()
                self.to_pred = Sequential(
                    RMSNorm(dim * 2),
                    nn.Linear(dim * 2, dim * 2),
                    nn.LeakyReLU(),  # expect: TML201
                    nn.Linear(dim * 2, dim * 2),
                    nn.LeakyReLU(),  # expect: TML201
                    nn.Linear(dim * 2, dim),
                )
                self.stem = MMSequential(nn.Conv2d(3, dim, 3), nn.BatchNorm2d(dim), nn.ELU())  # expect: TML201
                self.probe = Sequential(probe, nn.Linear(dim, dim), nn.LeakyReLU(), nn.Linear(dim, dim))  # a name: quiet
                self.keyed = MMSequential(nn.Linear(dim, dim), nn.LeakyReLU(), nn.Linear(dim, dim), init_cfg=None)  # a keyword: quiet
                self.first = Sequential(nn.LeakyReLU(), nn.Linear(dim, dim), nn.Linear(dim, dim))  # the caller's tensor: quiet
                self.chain = Chain(nn.Linear(dim, dim), nn.LeakyReLU(), nn.Linear(dim, dim))  # not a Sequential: quiet

            def forward(self, x):
                x = self.stem(x).flatten(1)
                x = self.first(self.keyed(self.probe(x)))
                return self.chain(self.to_pred(x))
    ''',
    "graph_sequential": '''
        import torch.nn as nn
        from torch_geometric.nn import GCNConv, Sequential


        class Net(nn.Module):
            def __init__(self, cin, dim, layers):
                super().__init__()
                self.gnn = Sequential("x, edge_index", [
                    (GCNConv(cin, dim), "x, edge_index -> x"),
                    nn.LeakyReLU(),  # a string and a list: another kind of container, quiet
                    (GCNConv(dim, dim), "x, edge_index -> x"),
                ])
                self.spliced = Sequential(*layers, nn.Linear(dim, dim), nn.LeakyReLU(), nn.Linear(dim, dim))  # a *list: quiet

            def forward(self, x, edge_index):
                return self.spliced(self.gnn(x, edge_index))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_foreign_sequential"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
