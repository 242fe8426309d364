"""TML201 stays quiet where what the activation makes goes only to dropouts that drop, in every
form that says so, not only as the next element of one ``nn.Sequential``: a dropout keeps only
its mask, so out of place the activation's input is the one tensor kept, in place its result
(saved-tensor bytes measured equal in tests/test_module_rules.py).

Also where what the activation makes goes only to readers that keep nothing of it for backward:
the kept tensor of ``torch.where(adj > 0, e, zero_vec)`` (pyGAT; its backward needs only the
condition), a softmax (it keeps its own output), a graph library's softmax over edges (DGL's
``edge_softmax``), a layer of the file whose ``forward`` reads it only through dropouts that
drop (Kipf's GCN layer, ``input = self.dropout(input)`` first; not one that also multiplies it), an addition or subtraction (``F.elu(q * scale) + 1`` of a linear attention's
feature map, ``act(fc(x)) - skip``: its backward reads neither term), a ``.mean()``/``.sum()``
(SuperGAT's negative scores: a reduction's backward reads nothing); not where the result is
also projected or multiplied, or is the ``where``'s condition.

The forms: forward code read from the value graph (``y = self.drop(self.act(self.fc(x)))``,
``h = self.act(h)`` then ``h = self.dropout(h)``, a functional ``F.elu`` then ``F.dropout``, a
Sequential attribute whose first layer is a dropout), and layers a factory returns or a local
holds, placed before a dropout in a Sequential (the successor relation at each place).

Look-alikes stay reported: a dropout with p = 0 (literal, or a parameter that every call leaves
at 0, or that a class built nowhere in its file keeps at its default 0, also read as Lightning's
``self.hparams.<parameter>``, also handed down to the blocks it builds), an activation whose result is also read elsewhere (a product with it, a list of features), a
dropout that is not the only layer that may follow (an optional one), a factory placed once
before a dropout and once before a conv (reported at the second place only). A call whose result
nothing reads (overwritten unread, also after joining an ``if``) keeps nothing: it neither makes
the layer reported nor keeps it quiet.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "forward_nested_calls": '''
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim, classes, rate=0.3):
                super().__init__()
                self.proj = nn.Linear(dim, dim)
                self.nonlin = nn.ELU()
                self.drop = nn.Dropout(rate)
                self.out = nn.Linear(dim, classes)

            def forward(self, feats):
                return self.out(self.drop(self.nonlin(self.proj(feats))))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.head = Head(64, 10)
                self.head2 = Head(64, 10, rate=0.1)
    ''',
    "forward_statements": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.norm = nn.BatchNorm1d(c)
                self.act = nn.LeakyReLU(0.1)
                self.dropout = nn.Dropout(p=0.25)
                self.conv = nn.Conv1d(c, c, 3)

            def forward(self, x):
                h = self.norm(self.conv(x))
                h = self.act(h)
                h = self.dropout(h)
                return h

        class Functional(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                y = F.elu(self.conv(x))
                return F.dropout(y, 0.2, self.training)

        class IntoHead(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.act = nn.SELU()
                self.head = nn.Sequential(nn.Dropout(0.5), nn.Linear(c, 1))

            def forward(self, x):
                return self.head(self.act(self.fc(x)))
    ''',
    # Kipf's GCN layer starts with ``input = self.dropout(input)``: the next layer, a class of
    # the file, keeps nothing of the activation's result either (gcn4lp's GAT-GAE encoder)
    "next_layer_drops_first": '''
        import torch
        import torch.nn as nn


        class GraphConvolution(nn.Module):
            def __init__(self, in_features, out_features, dropout):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(in_features, out_features))
                self.dropout = nn.Dropout(dropout)

            def forward(self, input, adj):
                input = self.dropout(input)
                support = torch.mm(input, self.weight)
                return torch.spmm(adj, support)


        class Residual(nn.Module):
            def __init__(self, features, dropout):
                super().__init__()
                self.weight = nn.Parameter(torch.empty(features, features))
                self.dropout = nn.Dropout(dropout)

            def forward(self, input, adj):
                return torch.spmm(adj, torch.mm(input, self.weight)) + self.dropout(input)


        class Encoder(nn.Module):
            def __init__(self, n, hidden, dropout):
                super().__init__()
                self.fc = nn.Linear(n, hidden)
                self.gc1 = GraphConvolution(hidden, hidden, dropout)
                self.res = Residual(hidden, dropout)
                self.elu = nn.ELU()
                self.act = nn.ELU()  # expect: TML201

            def forward(self, x, adj):
                h = self.gc1(self.elu(self.fc(x)), adj)
                return self.res(self.act(self.fc(x)), adj)
    ''',
    "forward_look_alikes": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class NoDrop(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3)
                self.act = nn.LeakyReLU(0.2)  # expect: TML201
                self.drop = nn.Dropout(0.0)

            def forward(self, x):
                return self.drop(self.act(self.conv(x)))

        class Skip(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3)
                self.act = nn.ELU()  # expect: TML201
                self.drop = nn.Dropout(0.1)

            def forward(self, x):
                y = self.conv(x)
                z = self.act(y)
                return self.drop(z) * z

        class Features(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3)
                self.act = nn.LeakyReLU(0.1)  # expect: TML201
                self.drop = nn.Dropout(0.1)

            def forward(self, x, feats):
                y = self.act(self.conv(x))
                feats.append(y)
                return self.drop(y)

        class Functional(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                y = F.elu(self.conv(x))  # expect: TML201
                return F.dropout(y, p=0.0, training=self.training) * 2

        class Model(nn.Module):
            def __init__(self, c, p=0.0):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3)
                self.act = nn.LeakyReLU(0.1)  # expect: TML201
                self.drop = nn.Dropout(p)

            def forward(self, x):
                return self.drop(self.act(self.conv(x)))

        def build(c):
            return Model(c)
    ''',
    "placed_factories": '''
        import torch.nn as nn

        def nonlinearity(slope=0.1):
            return nn.LeakyReLU(slope)

        class Mlp(nn.Module):
            def __init__(self, dim, hidden, p=0.5):
                super().__init__()
                self.body = nn.Sequential(
                    nn.Linear(dim, hidden), nonlinearity(), nn.Dropout(p),
                    nn.Linear(hidden, hidden), nonlinearity(0.2),  # expect: TML201
                    nn.Linear(hidden, dim),
                )

            def forward(self, x):
                return self.body(x)

        def classifier(dim, classes):
            act = nn.ELU()
            return nn.Sequential(nn.Linear(dim, dim), act, nn.AlphaDropout(0.2), nn.Linear(dim, classes))

        def regressor(dim, use_dropout):
            act = nn.ELU()  # expect: TML201
            return nn.Sequential(nn.Linear(dim, dim), act, *([nn.Dropout(0.2)] if use_dropout else []), nn.Linear(dim, 1))

        def never(dim):
            act = nn.ELU()  # expect: TML201
            return nn.Sequential(nn.Linear(dim, dim), act, nn.Dropout(p=0), nn.Linear(dim, 1))
    ''',
    "defaults_of_classes_built_nowhere": '''
        import pytorch_lightning as pl
        import torch.nn as nn
        import torch.nn.functional as F

        class Regressor(pl.LightningModule):
            def __init__(self, dim, hidden=64, dropout=0.0, lr=1e-3):
                super().__init__()
                self.save_hyperparameters()
                self.fc1 = nn.Linear(dim, hidden)
                self.act = nn.LeakyReLU(0.1)  # expect: TML201
                self.drop = nn.Dropout(self.hparams.dropout)
                self.fc2 = nn.Linear(hidden, 1)

            def forward(self, x):
                return self.fc2(self.drop(self.act(self.fc1(x))))

        class Tower(nn.Module):
            def __init__(self, dims, dropout_p=0.0):
                super().__init__()
                self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:]))
                self.dropout = nn.Dropout(p=dropout_p)

            def forward(self, x):
                for layer in self.layers:
                    x = self.dropout(F.leaky_relu(layer(x)))  # expect: TML201
                return x

        class Dropping(pl.LightningModule):
            def __init__(self, dim, dropout=0.2):
                super().__init__()
                self.save_hyperparameters()
                self.fc1 = nn.Linear(dim, dim)
                self.act = nn.ELU()
                self.drop = nn.Dropout(self.hparams["dropout"])

            def forward(self, x):
                return self.drop(self.act(self.fc1(x)))

        class Built(nn.Module):
            def __init__(self, dim, dropout_p=0.0):
                super().__init__()
                self.fc1 = nn.Linear(dim, dim)
                self.act = nn.ELU()
                self.drop = nn.Dropout(dropout_p)

            def forward(self, x):
                return self.drop(self.act(self.fc1(x)))

        def build(dim):
            return Built(dim, dropout_p=0.3)
    ''',
    # mxfold2: the probability handed down from the model built nowhere to the blocks it builds
    "defaults_passed_down": '''
        import torch.nn as nn

        class CNNLayer(nn.Module):
            def __init__(self, n_in, n_out, dropout_rate=0.0):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Conv1d(n_in, n_out, 7, padding=3),
                    nn.GroupNorm(1, n_out),
                    nn.CELU(),  # expect: TML201
                    nn.Dropout(p=dropout_rate),
                )

            def forward(self, x):
                return self.net(x)

        class Encoder(nn.Module):
            def __init__(self, n_in, n_out=64, dropout_rate=0.0):
                super().__init__()
                self.conv = CNNLayer(n_in, n_out, dropout_rate=dropout_rate)

            def forward(self, x):
                return self.conv(x)

        class NeuralNet(nn.Module):
            def __init__(self, n_in=4, dropout_rate=0.0):
                super().__init__()
                self.encoder = Encoder(n_in, dropout_rate=dropout_rate)

            def forward(self, x):
                return self.encoder(x)

        class DroppingBlock(nn.Module):
            def __init__(self, n, dropout_rate=0.0):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(n, n), nn.ELU(), nn.Dropout(dropout_rate))

            def forward(self, x):
                return self.net(x)

        class DroppingNet(nn.Module):
            def __init__(self, n, dropout_rate=0.25):
                super().__init__()
                self.block = DroppingBlock(n, dropout_rate=dropout_rate)

            def forward(self, x):
                return self.block(x)
    ''',
    "readers_that_keep_nothing": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from dgl.ops import edge_softmax

        class GraphAttentionLayer(nn.Module):
            def __init__(self, dim, heads=1):
                super().__init__()
                self.W = nn.Linear(dim, dim)
                self.a = nn.Linear(2 * dim, 1)
                self.leakyrelu = nn.LeakyReLU(0.2)

            def forward(self, h, adj):
                wh = self.W(h)
                n = wh.size(0)
                pairs = torch.cat([wh.repeat_interleave(n, 0), wh.repeat(n, 1)], dim=1)
                e = self.leakyrelu(self.a(pairs).view(n, n))
                zero_vec = -9e15 * torch.ones_like(e)
                attention = torch.where(adj > 0, e, zero_vec)
                attention = F.softmax(attention, dim=1)
                return attention @ wh

        class Scores(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.score = nn.Linear(dim, 1)

            def forward(self, x):
                return F.softmax(F.elu(self.score(x)), dim=1) * x

        class EdgeAttention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.proj = nn.Linear(dim, 1)
                self.act = nn.LeakyReLU(0.2)

            def forward(self, g, h):
                e = self.act(self.proj(h))
                return edge_softmax(g, e)

        class AlsoProjected(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.a = nn.Linear(dim, dim)
                self.b = nn.Linear(dim, dim)
                self.act = nn.LeakyReLU(0.2)  # expect: TML201

            def forward(self, x, adj):
                e = self.act(self.a(x))
                return torch.where(adj > 0, e, torch.zeros_like(e)).softmax(dim=1) + self.b(e)

        class AsCondition(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.a = nn.Linear(dim, dim)

            def forward(self, x, y):
                e = F.elu(self.a(x))  # expect: TML201
                return torch.where(e > 0, x, y)

        class MeanScores(nn.Module):
            """SuperGAT's negative scores: a reduction's backward reads nothing of its input."""

            def __init__(self, dim):
                super().__init__()
                self.a = nn.Linear(dim, dim)

            def forward(self, x, w):
                mean = F.leaky_relu(self.a(x), 0.2).mean(dim=-1)
                weighted = F.leaky_relu(self.a(x), 0.2).mean(dim=-1) * F.leaky_relu(self.a(x), 0.2)  # expect: TML201
                return mean + weighted.sum(-1)
    ''',
    # pyara's block: the first call's result is overwritten unread (`out = self.conv1(signal)`
    # next), so it keeps nothing either way; the other call feeds only a dropout: quiet.
    # The same block with the dead call's result read instead: reported.
    "dead_call_and_dropout": '''
        from torch import nn

        class ResNetBlock(nn.Module):
            def __init__(self, cin, depth, first=False):
                super().__init__()
                self.first = first
                self.conv1 = nn.Conv2d(cin, depth, 3, padding=1)
                self.bn1 = nn.BatchNorm2d(depth)
                self.lrelu = nn.LeakyReLU(0.01)
                self.dropout = nn.Dropout(0.5)
                self.pre_bn = nn.BatchNorm2d(cin)

            def forward(self, signal):
                if not self.first:
                    out = self.pre_bn(signal)
                    out = self.lrelu(out)
                else:
                    out = signal
                out = self.conv1(signal)
                out = self.bn1(out)
                out = self.lrelu(out)
                return self.dropout(out)

        class ReadBlock(nn.Module):
            def __init__(self, cin, depth):
                super().__init__()
                self.conv1 = nn.Conv2d(cin, depth, 3, padding=1)
                self.bn1 = nn.BatchNorm2d(depth)
                self.lrelu = nn.LeakyReLU(0.01)  # expect: TML201
                self.dropout = nn.Dropout(0.5)
                self.pre_bn = nn.BatchNorm2d(cin)

            def forward(self, signal):
                out = self.pre_bn(signal)
                out = self.lrelu(out)
                out = self.conv1(out)
                out = self.bn1(out)
                out = self.lrelu(out)
                return self.dropout(out)
    ''',
    "feature_map_plus_one_keeps_nothing": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class LinearAttention(nn.Module):
            def forward(self, q, k, v):
                d = q.shape[-1]
                scale = d ** -0.25
                q_lin = F.elu(q.float() * scale) + 1.0
                k_lin = F.elu(k.float() * scale) + 1.0
                kv = torch.matmul(k_lin.transpose(-2, -1), v.float())
                return torch.matmul(q_lin, kv)

        class Residual(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.act = nn.ELU()

            def forward(self, x, skip):
                return self.act(self.fc(x)) - skip
    ''',
    "sum_beside_a_keeping_reader_stays_reported": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.fc = nn.Linear(d, d)
                self.fc2 = nn.Linear(d, d)
                self.bias = nn.Parameter(torch.zeros(d))

            def forward(self, x):
                h = F.elu(self.fc(x))  # expect: TML201
                total = h + 1.0
                return self.fc2(h) + total
    ''',
    "slice_read_only_by_an_addition": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class Embedding(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.embed = nn.Linear(n, h)
                self.extra_encoder = nn.Linear(n, h)
                self.out = nn.Linear(h, h)

            def forward(self, ids, batch_features):
                input2 = self.embed(ids)
                input2 += F.leaky_relu(F.dropout(self.extra_encoder(batch_features), p=0.2,
                                                 training=self.training))[:input2.shape[0]]
                return input2

            def kept(self, ids, batch_features):
                h = F.leaky_relu(self.extra_encoder(batch_features))  # expect: TML201
                return self.out(h[: ids.shape[0]])
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_dropout_after"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
