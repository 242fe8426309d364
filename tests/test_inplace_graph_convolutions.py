"""TML201 after PyTorch Geometric's graph convolutions (``GCNConv``, ``GATConv``, ``SAGEConv``
...): their ``forward`` ends in an aggregation over the edges and an optional bias, with no
activation of their own, so what they return is a fresh tensor nothing keeps for backward, like
a ``Linear``'s output (``vocabulary.GRAPH_CONVOLUTIONS``, written from PyG's documentation).
Also after PyG's own dense ``Linear`` (``F.linear``) and ``BatchNorm`` (``nn.BatchNorm1d``),
imported as deepAntigen does, ``import torch_geometric.nn.dense.linear as pyg_linear``; and
after an element of a module list of PyG's convolutions, run in a loop.

Look-alikes stay quiet: a ``GINConv`` (it runs the user's own ``nn`` last, which may keep its
output), a convolution's output also read by a residual sum, and a class of the same name that
is not PyG's.
"""

from __future__ import annotations

import textwrap

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

SOURCE = '''
import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv
from torch_geometric.nn.conv import GATv2Conv
from torch_geometric.nn.norm import BatchNorm
import torch_geometric.nn.dense.linear as pyg_linear


class Net(torch.nn.Module):
    def __init__(self, c, h, o):
        super().__init__()
        self.conv1 = GATConv(c, h, heads=2, concat=False)
        self.conv2 = GCNConv(h, h)
        self.conv3 = SAGEConv(h, h)
        self.conv4 = GATv2Conv(h, h)
        self.gin = GINConv(torch.nn.Sequential(torch.nn.Linear(h, h), torch.nn.ReLU()))
        self.lin = torch.nn.Linear(h, o)

    def forward(self, x, edge_index):
        h = self.conv1(x, edge_index)
        h = F.elu(h)  # expect
        h = F.elu(self.conv2(h, edge_index))  # expect
        r = self.conv3(h, edge_index)
        h = F.leaky_relu(r, 0.2) + r
        h = F.elu(self.conv4(h, edge_index))  # expect
        h = F.elu(self.gin(h, edge_index))
        return self.lin(h)


class Dense(torch.nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.layer_atom = pyg_linear.Linear(c, h, weight_initializer="kaiming_uniform")
        self.layer_atom2 = pyg_linear.Linear(h, h, weight_initializer="kaiming_uniform")
        self.norm = BatchNorm(h)
        self.out = torch.nn.Linear(h, 1)

    def forward(self, x):
        h = F.leaky_relu(self.layer_atom(x), 0.1)  # expect
        h = F.leaky_relu(self.layer_atom2(h), 0.1) + h
        return self.out(F.elu(self.norm(h)))  # expect


class Stacked(torch.nn.Module):
    def __init__(self, d, n):
        super().__init__()
        self.convs = torch.nn.ModuleList([GCNConv(d, d) for _ in range(n)])
        self.final_layer = torch.nn.Linear(d, 1)

    def forward(self, a, edge_index):
        for conv in self.convs:
            a = F.elu(conv(a, edge_index))  # expect
        return self.final_layer(a)


class GCNConv2(torch.nn.Module):
    def forward(self, x, edge_index):
        return torch.sigmoid(x)


class Local(torch.nn.Module):
    def __init__(self, h):
        super().__init__()
        self.conv = GCNConv2()

    def forward(self, x, edge_index):
        return F.elu(self.conv(x, edge_index))
'''


def test_activations_after_graph_convolutions():
    text = textwrap.dedent(SOURCE)
    found = {f.location.row for f in lint_source(text, "case.py", Settings(select=("TML201",)))}
    marked = {row for row, line in enumerate(text.splitlines(), start=1) if line.endswith("# expect")}
    assert len(marked) == 6
    assert found == marked
