"""TML201 where a class is kept on ``self`` and built from there: ``self.act_layer = nn.ELU``
then ``self.act = self.act_layer()`` (the activation is the class's, its site the build), and
``self.conv = GATv2Conv`` then ``self.layer1 = self.conv(c, h)`` (what the layer makes is what
PyG's graph convolution makes: a fresh aggregation, so an activation on it may run in place), as
a local alias of the class (``conv = GATv2Conv``) already was.

Look-alikes stay quiet: the held class built with ``inplace=True``, a held function (not a
class: what it returns is not known), attributes that name each other (never followed round), a held ``GINConv`` (it runs the user's own ``nn`` last),
a class held in two arms that disagree (``nn.ELU`` or ``nn.Identity``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "held_activation_class": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.act_layer = nn.ELU
                self.conv = nn.Conv2d(c, c, 3)
                self.act = self.act_layer()  # expect: TML201
                self.conv2 = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.conv2(self.act(self.conv(x)))


        class InPlace(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.act_layer = nn.ELU
                self.conv = nn.Conv2d(c, c, 3)
                self.act = self.act_layer(inplace=True)
                self.conv2 = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.conv2(self.act(self.conv(x)))


        class Either(nn.Module):
            def __init__(self, c, plain=False):
                super().__init__()
                if plain:
                    self.act_layer = nn.Identity
                else:
                    self.act_layer = nn.ELU
                self.conv = nn.Conv2d(c, c, 3)
                self.act = self.act_layer()
                self.conv2 = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.conv2(self.act(self.conv(x)))
    ''',
    "held_graph_convolution": '''
        import torch.nn as nn
        import torch.nn.functional as F
        from torch_geometric.nn import GATv2Conv, GINConv


        def make_conv(c, h):
            return GATv2Conv(c, h)


        class Encoder(nn.Module):
            def __init__(self, c, h):
                super().__init__()
                self.conv = GATv2Conv
                self.hidden1 = self.conv(in_channels=c, out_channels=h, heads=2)
                self.hidden2 = self.conv(in_channels=2 * h, out_channels=h)

            def forward(self, x, edge_index):
                out1, attention = self.hidden1(x, edge_index, return_attention_weights=True)
                out1 = F.leaky_relu(out1)  # expect: TML201
                return self.hidden2(out1, edge_index)


        class Built(nn.Module):
            def __init__(self, c, h):
                super().__init__()
                self.conv = make_conv
                self.hidden1 = self.conv(c, h)
                self.hidden2 = self.conv(h, h)

            def forward(self, x, edge_index):
                return self.hidden2(F.leaky_relu(self.hidden1(x, edge_index)), edge_index)


        class Circular(nn.Module):
            def __init__(self, c, h):
                super().__init__()
                self.conv = self.other
                self.other = self.conv
                self.hidden1 = self.conv(c, h)
                self.hidden2 = GATv2Conv(h, h)

            def forward(self, x, edge_index):
                return self.hidden2(F.leaky_relu(self.hidden1(x, edge_index)), edge_index)


        class Isomorphism(nn.Module):
            def __init__(self, h):
                super().__init__()
                self.conv = GINConv
                self.hidden1 = self.conv(nn.Sequential(nn.Linear(h, h), nn.Sigmoid()))
                self.hidden2 = self.conv(nn.Linear(h, h))

            def forward(self, x, edge_index):
                return self.hidden2(F.leaky_relu(self.hidden1(x, edge_index)), edge_index)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("held_classes"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
