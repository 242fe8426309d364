"""TML201 on activations run by index next to the elements of an ``nn.Sequential``: a network
whose forward walks ``self.layers[i](x)`` then ``self.activate_functions[i](x)`` (an MLP proxy
model of a multi-objective optimiser) runs the Sequential's modules one by one, in the order
they were given (``nn.Sequential(*layers)`` of a list built in ``__init__``), exactly as a
``nn.ModuleList`` would; and a builder that appends a block's modules to the ``nn.Sequential``
it is given (``def add_cnn_block(cfg, model: nn.Sequential, ...)``: ``model.append(conv)``,
``model.append(nn.ELU())``) runs each after the one appended before it (the first may follow
whatever the caller put there: not reported, nor a parameter not annotated as a Sequential);
a layer class a local takes in the arms of an ``if`` by dimension (``conv = nn.Conv2d`` or
``nn.Conv3d``, as ``self.conv`` already was); a ``nn.ModuleDict`` filled item by item (``self.block_dict["input"] = NNBlock(...)``), whose
items are what calling one by key may run. And PyTorch Geometric's gated and simplified convolutions
(``ResGatedGraphConv``, ``SGConv``, ``TAGConv``, ``LEConv``), whose ``forward`` ends, as PyG
documents them, in a sum of linear projections and aggregations with no activation of their
own: a fresh tensor their backward does not read; also imported from their own files
(``torch_geometric.nn.conv.rgat_conv``), and the first item of what an attention convolution
returns with ``return_attention_weights=True`` (``h, att = conv(...)``).

Look-alikes stay quiet: a Sequential whose elements include a Sigmoid (its backward reads its
output), PyG's GIN convolution (it ends in the user's own network), the first item of a project
block's ``(out, attention)`` (not known), a Sequential built from an
``OrderedDict`` (not followed).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "sequential_by_index": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class SingleModel(nn.Module):
            def __init__(self, input_size, hidden_size):
                super().__init__()
                layers = [nn.Linear(input_size, hidden_size[0])]
                for i in range(len(hidden_size) - 1):
                    layers.append(nn.Linear(hidden_size[i], hidden_size[i + 1]))
                layers.append(nn.Linear(hidden_size[-1], 1))
                self.layers = nn.Sequential(*layers)
                self.activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]  # expect: TML201
                self.hidden_size = hidden_size

            def forward(self, x):
                for i in range(len(self.hidden_size)):
                    x = self.layers[i](x)
                    x = self.activate_functions[i](x)
                return self.layers[len(self.hidden_size)](x)


        class Functional(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 2))

            def forward(self, x):
                for i in range(2):
                    x = self.layers[i](x)
                    x = F.leaky_relu(x)  # expect: TML201
                return self.layers[2](x)


        class Gated(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid(), nn.Linear(8, 2))

            def forward(self, x):
                for i in range(2):
                    x = self.layers[i](x)
                    x = F.leaky_relu(x)
                return self.layers[2](x)
    ''',
    "sequential_appended_then_called_whole": '''
        from torch import nn


        class PerClusterHead(nn.Module):
            def __init__(self, filters=512, layers=3, tasks=1):
                super().__init__()
                self.counts_head = nn.Sequential()
                for _ in range(layers):
                    self.counts_head.append(nn.LazyLinear(filters, bias=False))
                    self.counts_head.append(nn.ELU())  # expect: TML201
                self.counts_head.append(nn.LazyLinear(tasks))

            def forward(self, x):
                return self.counts_head(x)
    ''',
    "appended_by_a_builder": '''
        from torch import nn


        def add_cnn_block(cfg, model: nn.Sequential, nchannels: int) -> int:
            in_channels = out_channels = nchannels
            for _ in range(cfg.num_cnn_layers):
                out_channels = out_channels + cfg.cnn_expansion_factor
                model.append(nn.Conv1d(in_channels, out_channels, kernel_size=3, padding="same"))
                model.append(nn.ELU())  # expect: TML201
                in_channels = out_channels
            model.append(nn.ELU())
            model.append(nn.BatchNorm1d(out_channels))
            return out_channels


        def add_dense_block(model: nn.Sequential, in_channels: int, hidden: int, out_channels: int):
            model.append(nn.Flatten())
            model.append(nn.Linear(in_channels, hidden))
            model.append(nn.ELU())  # expect: TML201
            model.append(nn.Linear(hidden, out_channels))


        def add_head(model: nn.Sequential, hidden: int):
            model.append(nn.ELU())
            model.append(nn.Linear(hidden, 1))


        def add_unknown(model, hidden: int):
            model.append(nn.Linear(hidden, hidden))
            model.append(nn.ELU())
    ''',
    "class_chosen_by_dimension": '''
        from torch import nn


        class ConfigurationNet(nn.Module):
            def __init__(self, in_channels, channels, spatial_dim=2, gated=False):
                super().__init__()
                conv: type[nn.Conv2d | nn.Conv3d]
                if spatial_dim == 2:
                    conv = nn.Conv2d
                elif spatial_dim == 3:
                    conv = nn.Conv3d
                else:
                    raise ValueError(spatial_dim)
                self.first_conv = nn.Sequential(
                    conv(in_channels, channels, 3, padding="same"),
                    nn.LeakyReLU(negative_slope=0.1),  # expect: TML201
                    conv(channels, channels, 3, padding="same"),
                )
                if gated:
                    step = nn.Sigmoid
                else:
                    step = nn.Conv2d
                self.other = nn.Sequential(step(channels, channels, 1), nn.LeakyReLU(0.1), conv(channels, channels, 1))

            def forward(self, x):
                return self.other(self.first_conv(x))
    ''',
    "module_dict_items": '''
        import torch


        class NNBlock(torch.nn.Module):
            def __init__(self, input_dim, output_dim, hidden=50):
                super().__init__()
                self.input_layer = torch.nn.Linear(input_dim, hidden)
                self.output_layer = torch.nn.Linear(hidden, output_dim)

            def forward(self, x):
                return self.output_layer(self.input_layer(x))


        class GateBlock(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.lin = torch.nn.Linear(dim, dim)

            def forward(self, x):
                return torch.sigmoid(self.lin(x))


        class ParameterizerNN(torch.nn.Module):
            def __init__(self, input_dim, output_dim, dist_params=("mu",), hidden=50):
                super().__init__()
                self.dist_params = dist_params
                self.block_dict = torch.nn.ModuleDict()
                self.block_dict["input"] = NNBlock(input_dim, hidden, hidden)
                for parameter in dist_params:
                    self.block_dict[parameter] = NNBlock(hidden, output_dim, hidden)
                self.activation = torch.nn.ELU()  # expect: TML201

            def forward(self, inputs):
                hidden = self.activation(self.block_dict["input"](inputs))
                return {p: self.block_dict[p](hidden) for p in self.dist_params}


        class Gated(torch.nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.blocks = torch.nn.ModuleDict()
                self.blocks["input"] = GateBlock(dim)
                self.blocks["out"] = NNBlock(dim, 1, dim)
                self.activation = torch.nn.ELU()

            def forward(self, x):
                return self.blocks["out"](self.activation(self.blocks["input"](x)))
    ''',
    "graph_convolutions": '''
        import torch.nn.functional as F
        from torch import nn
        from torch_geometric import nn as tgnn
        from torch_geometric.nn.conv.rgat_conv import RGATConv
        from .blocks import AttentionBlock


        class ResGated(nn.Module):
            def __init__(self, d, n):
                super().__init__()
                self.convs = nn.ModuleList([tgnn.ResGatedGraphConv(d, d) for _ in range(n)])
                self.activation = F.elu  # expect: TML201
                self.out = nn.Linear(d, 1)

            def forward(self, x, edge_index):
                for conv in self.convs:
                    x = self.activation(conv(x, edge_index))
                return self.out(x)


        class Simplified(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.sg = tgnn.SGConv(d, d, K=2)
                self.tag = tgnn.TAGConv(d, d)
                self.out = nn.Linear(d, 1)

            def forward(self, x, edge_index):
                x = F.elu(self.sg(x, edge_index))  # expect: TML201
                x = F.elu(self.tag(x, edge_index))  # expect: TML201
                return self.out(x)


        class Relational(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.conv1 = RGATConv(d, d, num_relations=2, heads=1, concat=False, bias=False)
                self.conv2 = RGATConv(d, d, num_relations=2, heads=1, concat=False, bias=False)
                self.custom = AttentionBlock(d)
                self.decoder = nn.Linear(d, d)

            def forward(self, x, edge_index, edge_type):
                h1, att1 = self.conv1(x, edge_index, edge_type, return_attention_weights=True)
                h1 = F.elu(h1)  # expect: TML201
                h2, att2 = self.conv2(h1, edge_index, edge_type, return_attention_weights=True)
                h2 = F.elu(h2)  # expect: TML201
                h3, att3 = self.custom(h2, return_attention_weights=True)
                h3 = F.elu(h3)
                return self.decoder(h3), att1, att2, att3


        class Gin(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.gin = tgnn.GINConv(nn.Sequential(nn.Linear(d, d), nn.Sigmoid()))
                self.out = nn.Linear(d, 1)

            def forward(self, x, edge_index):
                return self.out(F.elu(self.gin(x, edge_index)))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("sequential_elements"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
