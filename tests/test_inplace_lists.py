"""TML201 through list mutations and module lists, in the forms research code writes:

* a builder that appends ``Linear`` then ``ELU()`` in a loop and drops the last activation
  (``layers.pop(-1)``, ``layers.pop()``, ``layers = layers[:-1]``, ``del layers[-1]``) before
  ``nn.Sequential(*layers)`` (or ``nn.Sequential(*layers[:-1])``, ``layers[:-2]``, ``layers[1:]``) or ``super().__init__(*layers)`` in an ``nn.Sequential`` subclass;
* an activation passed in as a constructor argument (``final_activation=nn.ELU()``) that the
  class appends after its last layer;
* ``for i, (conv, norm) in enumerate(zip(self.convs, self.norms))``;
* a ``ModuleList`` extended with ``[Conv1d, LeakyReLU(), BatchNorm1d]`` in a loop and run in
  order by ``for block in self.blocks: x = block(x)``: a Sequential by another name;
* ``nn.Sequential(*sum([[nn.Linear(a, b), act()] for i in range(n)], [])[:-1])``: each round's
  list follows the one before, the last activation cut;
* a module list of activations (built directly or by a factory) whose elements a loop calls
  one by one (``for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.acts1, self.acts2)``,
  ``self.acts[i](...)``): each runs at those calls;
* a module list of module lists (``nn.ModuleList([convs() for _ in bands])``, ``convs = lambda:
  nn.ModuleList([...])``) whose elements' modules a nested loop calls (``for band, stack in
  zip(x_bands, self.band_convs): for i, layer in enumerate(stack):``);
* a list rebound in each round of a loop (``layer_modules = [nn.Linear(a, b)]``, an ``ELU()``
  appended, a dropout only ``if dropout > 0`` with a default of 0) and spliced into the
  Sequential that round builds: the target sees only what the rounds reaching it assign;
* a list begun as ``nn.ModuleList()`` (or ``nn.ModuleList([...])``), an attribute or a local,
  extended in a loop and spliced into a Sequential (IVIM-NET's encoders);
* a constructor's default activation instance (``activation=nn.LeakyReLU(0.2)``) appended after
  each Linear of a module list that ``forward`` runs in turn;
* a local list filled by appends in a loop and under ``if``s, then ``nn.ModuleList(modules)``
  run in turn (fastbnns): what runs before each element is the successor relation
  ``nn.Sequential(*modules)`` is read with.

Look-alikes stay quiet: a pop at an index that is not the end, a slice by a variable, a popped value used, an
activation passed after an ELU (its output is needed in backward), a passed layer the class
also stores, a residual read of the norm's output, a module-list loop that also keeps each
output or adds its input back, a list that ``insert`` reorders, an element also called on its
own, an activation first in its display, a ``super().__init__`` of a class that is not a
Sequential, an activation first in each summed round (what the round before ends with, or the
Sequential's input), an activation list whose input is also kept (``feats.append(h)``) or that another
method hands out, a ``ModuleList`` of what a call returns, an ELU after a Sigmoid (whose backward reads its output);
a default activation appended first, after a Sigmoid, rebound in ``__init__``, or in a list
whose every output ``forward`` keeps; in a local list, an activation a dropout follows, one that
may follow a Sigmoid, one in a list whose elements all run on forward's input; an element a
dropout that drops or an in-place layer runs after (a display, or a local list).

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    "pop": '''
        import torch.nn as nn


        def fully_connected(sizes):
            layers = []
            for in_size, out_size in zip(sizes, sizes[1:]):
                layers.append(nn.Linear(in_size, out_size))
                layers.append(nn.ELU())  # expect: TML201
            layers.pop(-1)
            return nn.Sequential(*layers)


        def sliced(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers += [nn.Linear(a, b), nn.ELU()]  # expect: TML201
            layers = layers[:-1]
            return nn.Sequential(*layers)


        def spliced_slice(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers += [nn.Linear(a, b), nn.ELU()]  # expect: TML201
            return nn.Sequential(*layers[:-1])


        def two_dropped(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers += [nn.Linear(a, b), nn.BatchNorm1d(b), nn.ELU()]  # expect: TML201
            layers = layers[:-2]
            return nn.Sequential(*layers)


        def head_dropped(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers += [nn.ELU(), nn.Linear(a, b)]  # expect: TML201
            return nn.Sequential(*layers[1:])


        def cut_unknown(sizes, n):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers += [nn.Linear(a, b), nn.ELU()]
            return nn.Sequential(*layers[:n])


        class Net(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                layers = []
                for a, b in zip(sizes, sizes[1:]):
                    layers.append(nn.Linear(a, b))
                    layers.append(nn.ELU())  # expect: TML201
                del layers[-1]
                self.body = nn.Sequential(*layers)

            def forward(self, x):
                return self.body(x)


        def popped_middle(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers.append(nn.Linear(a, b))
                layers.append(nn.ELU())
            layers.pop(1)
            return nn.Sequential(*layers)


        def popped_used(sizes):
            layers = []
            for a, b in zip(sizes, sizes[1:]):
                layers.append(nn.Linear(a, b))
                layers.append(nn.ELU())
            last = layers.pop()
            return nn.Sequential(*layers), last
    ''',
    "subclass": '''
        import torch.nn as nn


        class FullyConnected(nn.Sequential):
            def __init__(self, sizes, final_activation=None):
                layers = []
                for in_size, out_size in zip(sizes, sizes[1:]):
                    layers.append(nn.Linear(in_size, out_size))
                    layers.append(nn.ELU())  # expect: TML201
                layers.pop(-1)
                if final_activation is not None:
                    layers.append(final_activation)
                super().__init__(*layers)


        class Stacked(nn.Sequential):
            def __init__(self, sizes, final=None):
                layers = []
                for in_size, out_size in zip(sizes, sizes[1:]):
                    layers.append(nn.Linear(in_size, out_size))
                    layers.append(nn.ELU())  # expect: TML201
                if final is not None:
                    layers.append(final)
                super().__init__(*layers)


        class Kept(nn.Sequential):
            def __init__(self, sizes, final):
                self.final = final
                super().__init__(nn.Linear(sizes[0], sizes[1]), final)


        class Pair(nn.Sequential):
            def __init__(self, first, second):
                super().__init__(first, nn.Linear(8, 8), second)


        class Plain(nn.Module):
            def __init__(self, act):
                super().__init__()
                self.act = act


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = FullyConnected([8, 16, 16], final_activation=nn.ELU())  # expect: TML201
                self.other = FullyConnected([8, 16], nn.ELU())  # expect: TML201
                self.after_elu = Stacked([8, 16], final=nn.ELU())
                self.kept = Kept([8, 16], nn.ELU())
                self.plain = Plain(nn.ELU())
                self.pair = Pair(
                    nn.ELU(),
                    nn.ELU(),  # expect: TML201
                )
                self.head = nn.Linear(16, 1)

            def forward(self, x):
                return self.head(self.body(x)) + self.other(x) + self.after_elu(x) + self.kept(x) + self.plain.act(x) + self.pair(x)
    ''',
    "enum_zip": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv1d(8, 8, 3) for _ in range(3)])
                self.norms = nn.ModuleList([nn.InstanceNorm1d(8, affine=True) for _ in range(3)])

            def forward(self, x):
                for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
                    x = conv(x)
                    x = F.leaky_relu(norm(x))  # expect: TML201
                return x


        class Residual(nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv1d(8, 8, 3) for _ in range(3)])
                self.norms = nn.ModuleList([nn.InstanceNorm1d(8, affine=True) for _ in range(3)])

            def forward(self, x):
                for i, (conv, norm) in enumerate(zip(self.convs, self.norms)):
                    y = norm(conv(x))
                    x = F.leaky_relu(y) + y
                return x
    ''',
    "chained_list": '''
        import torch.nn as nn


        class XVector(nn.Module):
            def __init__(self):
                super().__init__()
                self.tdnns = nn.ModuleList()
                c = 8
                for out in (16, 16, 32):
                    self.tdnns.extend(
                        [
                            nn.Conv1d(c, out, 3),
                            nn.LeakyReLU(),  # expect: TML201
                            nn.BatchNorm1d(out),
                        ]
                    )
                    c = out

            def forward(self, x):
                for block in self.tdnns:
                    x = block(x)
                return x


        class KeepsEach(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(8, 8, 3), nn.LeakyReLU(), nn.BatchNorm1d(8)])

            def forward(self, x):
                feats = []
                for block in self.blocks:
                    x = block(x)
                    feats.append(x)
                return feats


        class AddsBack(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(8, 8, 3), nn.LeakyReLU(), nn.BatchNorm1d(8)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x) + x
                return x


        class Reordered(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(8, 8, 3), nn.LeakyReLU(), nn.BatchNorm1d(8)])
                self.blocks.insert(1, nn.Dropout(0.1))

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x


        class AlsoAlone(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(8, 8, 3), nn.LeakyReLU(), nn.BatchNorm1d(8)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x

            def probe(self, x):
                return self.blocks[1](x)


        class FirstInDisplay(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList()
                for _ in range(3):
                    self.blocks.extend([nn.LeakyReLU(), nn.Conv1d(8, 8, 3)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return x
    ''',
    # a multi-band discriminator: a module list of module lists, a band's convs looped over
    "nested_lists": '''
        import torch
        import torch.nn.functional as F
        from torch import nn
        from torch.nn.utils import weight_norm


        class Block(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return torch.sigmoid(self.conv(x))


        class DiscriminatorR(nn.Module):
            def __init__(self, channels, bands):
                super().__init__()
                self.bands = bands
                convs = lambda: nn.ModuleList([
                    weight_norm(nn.Conv2d(2, channels, (3, 9), (1, 1), padding=(1, 4))),
                    weight_norm(nn.Conv2d(channels, channels, (3, 9), (1, 2), padding=(1, 4))),
                ])
                self.band_convs = nn.ModuleList([convs() for _ in range(len(self.bands))])
                gated = lambda: nn.ModuleList([nn.Conv2d(channels, channels, 3), nn.Sigmoid()])
                self.gated = nn.ModuleList([gated() for _ in range(len(self.bands))])
                self.blocks = nn.ModuleList([Block(channels) for _ in range(len(self.bands))])

            def forward(self, x_bands):
                fmap = []
                x = []
                for band, stack in zip(x_bands, self.band_convs):
                    for i, layer in enumerate(stack):
                        band = layer(band)
                        band = F.leaky_relu(band, 0.1)  # expect: TML201
                        if i > 0:
                            fmap.append(band)
                    x.append(band)
                for band, stack in zip(x_bands, self.gated):
                    for layer in stack:
                        band = F.leaky_relu(layer(band), 0.1)  # a sigmoid among them: quiet
                    x.append(band)
                for block in self.blocks:
                    for layer in block.children():
                        x.append(F.leaky_relu(layer(x_bands[0]), 0.1))  # not a module list's elements: quiet
                return torch.cat(x, dim=-1), fmap
    ''',
    "activation_lists": '''
        import torch.nn as nn
        from torch.nn.utils import weight_norm

        class Snake(nn.Module):
            def forward(self, x):
                return x + x.sin() ** 2

        def make_activation(kind):
            if kind == "snake":
                return Snake()
            return nn.LeakyReLU(0.1)

        class ResBlock(nn.Module):
            def __init__(self, ch, dilations=(1, 3, 5), activation="lrelu"):
                super().__init__()
                self.convs1 = nn.ModuleList([weight_norm(nn.Conv1d(ch, ch, 3, dilation=d, padding=d)) for d in dilations])
                self.convs2 = nn.ModuleList([weight_norm(nn.Conv1d(ch, ch, 3, padding=1)) for _ in dilations])
                self.acts1 = nn.ModuleList([make_activation(activation) for _ in dilations])
                self.acts2 = nn.ModuleList([make_activation(activation) for _ in dilations])  # expect: TML201

            def forward(self, x, x_mask=None):
                for c1, c2, a1, a2 in zip(self.convs1, self.convs2, self.acts1, self.acts2):
                    xt = a1(x)  # x is read again by the residual below
                    if x_mask is not None:
                        xt = xt * x_mask
                    xt = a2(c1(xt))
                    x = c2(xt) + x
                return x

        class Indexed(nn.Module):
            def __init__(self, ch, n=3):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv2d(ch, ch, 3, padding=1) for _ in range(n)])
                self.acts = nn.ModuleList([nn.ELU() for _ in range(n)])  # expect: TML201
                self.norms = nn.ModuleList([nn.BatchNorm2d(ch) for _ in range(n)])

            def forward(self, x):
                for i in range(len(self.convs)):
                    x = self.norms[i](self.acts[i](self.convs[i](x)))
                return x

        class KeptOutputs(nn.Module):
            def __init__(self, ch, n=3):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv2d(ch, ch, 3, padding=1) for _ in range(n)])
                self.acts = nn.ModuleList([nn.LeakyReLU(0.2) for _ in range(n)])

            def forward(self, x):
                feats = []
                for conv, act in zip(self.convs, self.acts):
                    h = conv(x)
                    feats.append(h)
                    x = act(h)
                return x, feats

        class AlsoExposed(nn.Module):
            def __init__(self, ch, n=2):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv1d(ch, ch, 3, padding=1) for _ in range(n)])
                self.acts = nn.ModuleList([nn.LeakyReLU(0.2) for _ in range(n)])

            def forward(self, x):
                for conv, act in zip(self.convs, self.acts):
                    x = act(conv(x))
                return x

            def activations(self):
                return list(self.acts)
    ''',
    "summed_lists": '''
        import torch.nn as nn

        def mlp(n_in, n_hid, n_out, n_layer, act=nn.LeakyReLU):
            n = [n_in] + [n_hid] * n_layer + [n_out]
            return nn.Sequential(*sum([[nn.Linear(n[i], n[i + 1]), act()] for i in range(n_layer + 1)], [])[:-1])  # expect: TML201

        def head(n_in, n_out):
            return nn.Sequential(*sum([[nn.ELU(), nn.Linear(n_in, n_in)] for _ in range(2)], []), nn.Linear(n_in, n_out))

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = mlp(4, 16, 2, 2)
                self.b = head(4, 2)

            def forward(self, x):
                return self.a(x) + self.b(x)
    ''',
    "rebuilt_each_round": '''
        import torch.nn as nn

        class Encoder(nn.Module):
            def __init__(self, input_dim, hidden_dims, latent_dim, dropout: float = 0.0, use_bn: bool = True):
                super().__init__()
                self.layers = nn.ModuleList()
                prev_dim = input_dim
                for hidden_dim in hidden_dims:
                    layer_modules = [nn.Linear(prev_dim, hidden_dim)]
                    if use_bn:
                        layer_modules.append(nn.BatchNorm1d(hidden_dim))
                    layer_modules.append(nn.ELU())  # expect: TML201
                    if dropout > 0:
                        layer_modules.append(nn.Dropout(dropout))
                    self.layers.append(nn.Sequential(*layer_modules))
                    prev_dim = hidden_dim
                self.fc_mu = nn.Linear(prev_dim, latent_dim)

            def forward(self, x):
                h = x
                for layer in self.layers:
                    h = layer(h)
                return self.fc_mu(h)

        class Dropping(nn.Module):
            def __init__(self, input_dim, hidden_dims, dropout: float = 0.1):
                super().__init__()
                self.layers = nn.ModuleList()
                for hidden_dim in hidden_dims:
                    layer_modules = [nn.Linear(input_dim, hidden_dim)]
                    layer_modules.append(nn.ELU())
                    layer_modules.append(nn.Dropout(dropout))
                    self.layers.append(nn.Sequential(*layer_modules))
                    input_dim = hidden_dim

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x

        class Extended(nn.Module):
            def __init__(self, dims):
                super().__init__()
                blocks = []
                for d in dims:
                    layers = [nn.Linear(d, d)]
                    layers.append(nn.ELU())  # expect: TML201
                    blocks.append(nn.Sequential(*layers))
                layers.append(nn.Linear(4, 4))  # (after the loop: the Sequentials are built)
                self.blocks = nn.ModuleList(blocks)

            def forward(self, x):
                for block in self.blocks:
                    x = block(x) + x
                return x
    ''',
    "module_list_spliced": '''
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, n_inputs, depth=2, width=32, batch_norm=True, dropout=0.1):
                super().__init__()
                self.fc_layers0 = nn.ModuleList()
                width_in = n_inputs
                for i in range(depth):
                    self.fc_layers0.extend([nn.Linear(width_in, width)])
                    width_in = width
                    if batch_norm:
                        self.fc_layers0.extend([nn.BatchNorm1d(width)])
                    self.fc_layers0.extend([nn.ELU()])  # expect: TML201
                    if dropout != 0 and i != depth - 1:
                        self.fc_layers0.extend([nn.Dropout(dropout)])
                self.encoder0 = nn.Sequential(*self.fc_layers0, nn.Linear(width, 1))

            def forward(self, x):
                return self.encoder0(x)

        class Seeded(nn.Module):
            def __init__(self, dims):
                super().__init__()
                layers = nn.ModuleList([nn.Linear(4, dims[0])])
                for d in dims:
                    layers.append(nn.ELU())  # expect: TML201
                    layers.append(nn.Linear(d, d))
                self.net = nn.Sequential(*layers)

            def forward(self, x):
                return self.net(x)

        class SeededByCall(nn.Module):
            def __init__(self, dims, make):
                super().__init__()
                layers = nn.ModuleList(make(dims))  # (what make returns is not shown)
                layers.append(nn.ELU())
                layers.append(nn.Linear(4, 4))
                self.net = nn.Sequential(*layers)

            def forward(self, x):
                return self.net(x)

        class AfterSigmoid(nn.Module):
            def __init__(self, dims):
                super().__init__()
                layers = nn.ModuleList([nn.Linear(4, 4), nn.Sigmoid()])
                layers.append(nn.ELU())  # (the Sigmoid's backward reads its output)
                self.net = nn.Sequential(*layers)

            def forward(self, x):
                return self.net(x)
    ''',
    # the constructor's default activation (one instance, made with the ``def``) appended after
    # each Linear of a module list that forward runs in turn (a shepherd-style MLP)
    "default_instance_in_chain": '''
        import torch
        from torch import nn


        class MultiLayerPerceptron(nn.Module):
            def __init__(self, dims, activation=torch.nn.LeakyReLU(0.2), final=False):  # expect: TML201
                super().__init__()
                self.layers = nn.ModuleList()
                for i in range(len(dims) - 1):
                    self.layers.append(nn.Linear(dims[i], dims[i + 1]))
                    if final or i < len(dims) - 2:
                        self.layers.append(activation)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class ActivationFirst(nn.Module):
            def __init__(self, dims, activation=nn.ELU()):
                super().__init__()
                self.layers = nn.ModuleList()
                for i in range(len(dims) - 1):
                    self.layers.append(activation)  # (first: it runs on forward's input)
                    self.layers.append(nn.Linear(dims[i], dims[i + 1]))

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class EveryOutputKept(nn.Module):
            def __init__(self, dims, activation=nn.ELU()):
                super().__init__()
                self.layers = nn.ModuleList()
                for i in range(len(dims) - 1):
                    self.layers.append(nn.Linear(dims[i], dims[i + 1]))
                    self.layers.append(activation)

            def forward(self, x):
                outs = []
                for layer in self.layers:
                    x = layer(x)
                    outs.append(x)  # (each output kept: the Linear's too)
                return outs


        class AfterSigmoidByDefault(nn.Module):
            def __init__(self, dims, activation=nn.ELU()):
                super().__init__()
                self.layers = nn.ModuleList()
                for i in range(len(dims) - 1):
                    self.layers.append(nn.Linear(dims[i], dims[i + 1]))
                    self.layers.append(nn.Sigmoid())
                    self.layers.append(activation)  # (the Sigmoid's backward reads its output)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class Rebound(nn.Module):
            def __init__(self, dims, activation=nn.ELU()):
                super().__init__()
                activation = activation if dims else nn.Sigmoid()
                self.layers = nn.ModuleList()
                for i in range(len(dims) - 1):
                    self.layers.append(nn.Linear(dims[i], dims[i + 1]))
                    self.layers.append(activation)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    ''',
    # fastbnns' MLP: a local list filled by appends (an activation class, the constructor's
    # default, built after each Linear under ``if activation is not None``), then
    # ``nn.ModuleList(modules)`` run in turn: each order of the list puts a Linear before it
    "local_list_in_module_list": '''
        import torch
        import torch.nn as nn


        class MLP(torch.nn.Module):
            def __init__(self, a, b, hidden=128, n_hidden=3, activation: type = torch.nn.LeakyReLU):
                super().__init__()
                modules = [torch.nn.Linear(in_features=a, out_features=hidden)]
                if activation is not None:
                    modules.append(activation())  # expect: TML201
                for _ in range(n_hidden):
                    modules.append(torch.nn.Linear(in_features=hidden, out_features=hidden))
                    if activation is not None:
                        modules.append(activation())  # expect: TML201
                modules.append(torch.nn.Linear(in_features=hidden, out_features=b))
                self.module_list = torch.nn.ModuleList(modules)

            def forward(self, x):
                for layer in self.module_list:
                    x = layer(x)
                return x


        class DropAfter(nn.Module):
            def __init__(self, a, h, n=3):
                super().__init__()
                layers = [nn.Linear(a, h)]
                for _ in range(n):
                    layers.append(nn.LeakyReLU(0.1))
                    layers.append(nn.Dropout(0.5))  # (what reads the result keeps only its mask)
                    layers.append(nn.Linear(h, h))
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class EitherBefore(nn.Module):
            def __init__(self, a, h, n=3, squash=False):
                super().__init__()
                layers = [nn.Linear(a, h)]
                for _ in range(n):
                    if squash:
                        layers.append(nn.Sigmoid())  # (then the ELU follows a Sigmoid)
                    layers.append(nn.ELU())
                    layers.append(nn.Linear(h, h))
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class NotAChain(nn.Module):
            def __init__(self, a, h, n=3):
                super().__init__()
                layers = [nn.Linear(a, h)]
                for _ in range(n):
                    layers.append(nn.LeakyReLU(0.1))
                    layers.append(nn.Linear(h, h))
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                return [layer(x) for layer in self.layers]  # (each on forward's input)
    ''',
    # what runs after an element of a module list run in turn: a dropout that drops (in place
    # would keep as many tensors) or a layer that changes its input in place (backward would
    # raise), in a display or in a local list made into the module list
    "module_list_followers": '''
        import torch.nn as nn


        class Plain(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ELU(), nn.Linear(4, 4)])  # expect: TML201

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class InPlaceNext(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ELU(), nn.ReLU(inplace=True), nn.Linear(4, 4)])

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class DropNext(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(4, 4), nn.ELU(), nn.Dropout(0.5), nn.Linear(4, 4)])

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class LocalInPlaceNext(nn.Module):
            def __init__(self):
                super().__init__()
                layers = [nn.Linear(4, 4)]
                layers.append(nn.ELU())
                layers.append(nn.ReLU(inplace=True))
                layers.append(nn.Linear(4, 4))
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x


        class LocalDropoutThatDropsNothing(nn.Module):
            def __init__(self):
                super().__init__()
                layers = [nn.Linear(4, 4)]
                layers.append(nn.ELU())  # expect: TML201
                layers.append(nn.Dropout(0.0))
                layers.append(nn.Linear(4, 4))
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_lists"), CASES, "TML201,TML203,TML204")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_trimmed_orders_drop_what_a_slice_or_pop_removes():
    """``Order.trimmed`` / ``drop_last`` on the successor relation of a loop-built list."""
    from torchmemlint.analysis.layer_lists import Order

    linear, act = object(), object()
    body = Order.sequence([linear, act])
    looped = Order.empty()
    for _ in range(3):  # the loop's fixpoint: the body 0, 1, 2 ... times
        looped = looped.union(looped.then(body))
    popped = looped.drop_last()
    assert popped.last == frozenset({linear}) and popped.predecessors(act) == [linear]
    assert not popped.nullable  # one round popped leaves [linear]; popping an empty list raises
    assert looped.trimmed(slice(None, -1)) == popped
    assert looped.trimmed(slice(1, None)).first == frozenset({act})
    assert looped.trimmed(slice(None, -2)).last == frozenset({act})
    assert Order.sequence([linear, act]).drop_last().single() == [linear]
    assert looped.trimmed(slice(None, None, 2)) is None and looped.trimmed(5) is None
