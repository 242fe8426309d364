"""TML201 on an activation run on what a project's own PyTorch Geometric layer returns.

Such a layer derives ``MessagePassing`` and ends in ``self.propagate(...)``: ``message`` on
every edge, then a scatter of the messages onto the nodes by its ``aggr`` (``"add"`` when none
is given), then ``update`` (the aggregate unchanged). A sum or mean scatter keeps nothing of its
result for backward, so an activation on it may run in place, as after PyG's own convolutions
(tests/test_inplace_graph_convolutions.py). Reported: the default aggregation, ``aggr="mean"``
handed to ``super().__init__``, ``**kwargs`` handed on where the construction passes no ``aggr``,
an ``aggr`` parameter the construction leaves at ``"add"``, the layer's result viewed or averaged
over heads before it is returned, a tuple returned in another arm (``return out, (edge_index,
alpha)`` behind ``return_attention_weights``: a layer reading the call's result never gets it),
``MessagePassing.__init__(self, aggr="mean")`` written out, the layer in another file of the
package.

Quiet: ``aggr="max"`` (the scatter's backward compares its result with the messages: in place
would break backward), the construction passing ``aggr="max"`` through ``**kwargs`` or the
parameter, a class that overrides ``update`` (or ``aggregate``), a look-alike ``propagate`` of a
class that does not derive ``MessagePassing``, a class that initialises only ``nn.Module`` (its
``aggr`` is not known).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked, project_findings

pytestmark = pytest.mark.slow  # starts the CLI

LAYER = '''
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn.conv import MessagePassing


class EdgeConv(MessagePassing):
    def __init__(self, dim_in, dim_out, heads=1, concat=True, **kwargs):
        super(EdgeConv, self).__init__(node_dim=0, **kwargs)
        self.heads, self.dim_out, self.concat = heads, dim_out, concat
        self.lin = nn.Parameter(torch.randn(dim_in, heads * dim_out))

    def forward(self, x, edge_index, return_attention_weights=None):
        h = torch.mm(x, self.lin).view(-1, self.heads, self.dim_out)
        out = self.propagate(edge_index, x=h)
        if self.concat:
            out = out.view(-1, self.heads * self.dim_out)
        else:
            out = out.mean(dim=1)
        if isinstance(return_attention_weights, bool):
            return out, (edge_index, self._alpha)
        return out

    def message(self, x_j):
        return x_j
'''

CASES: Dict[str, str] = {
    "default_aggregation": LAYER + '''

class Encoder(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.conv1 = EdgeConv(dims[0], dims[1], concat=False)
        self.conv2 = EdgeConv(dims[1], dims[2])

    def forward(self, x, edge_index):
        h = F.elu(self.conv1(x, edge_index))  # expect: TML201
        return self.conv2(h, edge_index)
''',
    "max_through_kwargs": LAYER + '''

class Encoder(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.conv1 = EdgeConv(dims[0], dims[1], aggr="max")
        self.conv2 = EdgeConv(dims[1], dims[2])

    def forward(self, x, edge_index):
        h = F.elu(self.conv1(x, edge_index))
        return self.conv2(h, edge_index)
''',
    "named_aggregations": '''
import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import MessagePassing


class MeanConv(MessagePassing):
    def __init__(self, dim):
        super().__init__(aggr="mean")
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class MaxConv(MessagePassing):
    def __init__(self, dim):
        super().__init__(aggr="max")
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class ChosenConv(MessagePassing):
    def __init__(self, dim, aggr="add"):
        super().__init__(aggr=aggr)
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class UpdatedConv(MessagePassing):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))

    def update(self, aggregated):
        return torch.sigmoid(aggregated)


class ExplicitMean(MessagePassing):
    def __init__(self, dim):
        MessagePassing.__init__(self, aggr="mean")
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class ModuleInit(MessagePassing):
    def __init__(self, dim):
        nn.Module.__init__(self)
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))


class Plain(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        return self.propagate(edge_index, x=self.lin(x))

    def propagate(self, edge_index, x):
        return torch.sigmoid(x)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mean = MeanConv(dim)
        self.max = MaxConv(dim)
        self.chosen = ChosenConv(dim)
        self.chosen_max = ChosenConv(dim, aggr="max")
        self.updated = UpdatedConv(dim)
        self.plain = Plain(dim)
        self.explicit = ExplicitMean(dim)
        self.module_init = ModuleInit(dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, edge_index):
        a = F.leaky_relu(self.mean(x, edge_index))  # expect: TML201
        b = F.leaky_relu(self.max(x, edge_index))
        c = F.leaky_relu(self.chosen(x, edge_index))  # expect: TML201
        d = F.leaky_relu(self.chosen_max(x, edge_index))
        e = F.leaky_relu(self.updated(x, edge_index))
        f = F.leaky_relu(self.plain(x, edge_index))
        g = F.leaky_relu(self.explicit(x, edge_index))  # expect: TML201
        h = F.leaky_relu(self.module_init(x, edge_index))
        return self.out(a) + self.out(b) + self.out(c) + self.out(d) + self.out(e) + self.out(f) + self.out(g) + self.out(h)
''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("message_passing"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


MODEL = '''
import torch.nn.functional as F
from torch import nn

from .convs import EdgeConv


class Encoder(nn.Module):
    def __init__(self, dims):
        super().__init__()
        self.conv1 = EdgeConv(dims[0], dims[1], concat=False)
        self.conv2 = EdgeConv(dims[1], dims[2])
        self.conv3 = EdgeConv(dims[1], dims[2], aggr="min")

    def forward(self, x, edge_index):
        h = F.elu(self.conv1(x, edge_index))
        g = F.elu(self.conv3(x, edge_index))
        return self.conv2(h, edge_index) + self.conv2(g, edge_index)
'''


def test_the_layer_of_another_file(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "convs.py").write_text(LAYER)
    (package / "model.py").write_text(MODEL)
    row = MODEL.splitlines().index("        h = F.elu(self.conv1(x, edge_index))") + 1
    assert project_findings(tmp_path, "TML201") == {("model.py", row)}
