"""TML201 on module lists of rows: ``self.layers`` holds displays of the same width
(``self.layers.append(nn.ModuleList([conv, act, conv2, act2]))``), unpacked in ``forward`` as
``for conv1, act, conv2, act in self.layers``. The name bound at a position holds the module
of that position of each row, unless a later position binds the same name (the last binding
wins: that module runs twice, the earlier one never). Each module so called runs on what its
call is given, as a module attribute would. Look-alikes stay quiet: the module that never runs,
an input read again (a residual), a name also used otherwise than called (kept in a list),
rows of different widths, a list also read outside such loops. A position of the rows that
holds a module list of the same width in each row (a local ``resnet_block =
nn.ModuleList([...])`` put in the row) is unpacked by a nested target (``for excite, (conv1,
noise1, act1, ...), to_rgb in self.layers``); a layer a function of the file returns
(``leaky_relu()``) is judged at its place in the rows; a conv built by a local bound to either
of two classes (``klass = nn.Conv2d if plain else partial(AdaptiveConv2DMod, ...)``) makes what
both make.

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
    # gigagan's predictor: the activations a function of the file returns, the convs built by a
    # local bound to either of two classes (``partial`` of a modulated conv of the file); the
    # module path of an import (``einops.layers``) is no read of ``obj.layers``
    "factory_rows": '''
        from functools import partial

        import torch
        import torch.nn.functional as F
        from einops.layers.torch import Rearrange
        from torch import nn


        def leaky_relu(neg_slope=0.2):
            return nn.LeakyReLU(neg_slope)


        class AdaptiveConv2DMod(nn.Module):
            def __init__(self, dim, dim_out, kernel, num_conv_kernels=1):
                super().__init__()
                self.weights = nn.Parameter(torch.randn(num_conv_kernels, dim_out, dim, kernel, kernel))

            def forward(self, fmap, mod=None, kernel_mod=None):
                return F.conv2d(fmap, self.weights[0] * mod, padding=1)


        class GatedConv(nn.Module):
            def __init__(self, dim, dim_out, kernel):
                super().__init__()
                self.conv = nn.Conv2d(dim, dim_out, kernel, padding=1)

            def forward(self, fmap):
                return torch.sigmoid(self.conv(fmap))


        class Predictor(nn.Module):
            def __init__(self, dim, depth=4, num_conv_kernels=2, unconditional=False):
                super().__init__()
                self.unconditional = unconditional
                self.layers = nn.ModuleList([])
                klass = nn.Conv2d if unconditional else partial(AdaptiveConv2DMod, num_conv_kernels=num_conv_kernels)
                klass_kwargs = dict(padding=1) if unconditional else dict()
                for ind in range(depth):
                    self.layers.append(nn.ModuleList([
                        klass(dim, dim, 3, **klass_kwargs),
                        leaky_relu(),  # the name is bound again below: never runs, quiet
                        klass(dim, dim, 3, **klass_kwargs),
                        leaky_relu(),  # expect: TML201
                    ]))
                self.to_logits = nn.Sequential(nn.Conv2d(dim, 1, 1), Rearrange("b 1 h w -> b (h w)"))

            def forward(self, x, mod=None, kernel_mod=None):
                kwargs = dict()
                if not self.unconditional:
                    kwargs = dict(mod=mod, kernel_mod=kernel_mod)
                for conv1, activation, conv2, activation in self.layers:
                    inner_residual = x
                    x = conv1(x, **kwargs)
                    x = activation(x)
                    x = conv2(x, **kwargs)
                    x = activation(x)
                    x = x + inner_residual
                return self.to_logits(x)


        class Gated(nn.Module):
            def __init__(self, dim, depth=4, gated=False):
                super().__init__()
                self.layers = nn.ModuleList([])
                klass = GatedConv if gated else nn.Conv2d
                for ind in range(depth):
                    self.layers.append(nn.ModuleList([klass(dim, dim, 3), leaky_relu()]))  # a sigmoid in one arm: quiet

            def forward(self, x):
                for conv, act in self.layers:
                    x = act(conv(x))
                return x
    ''',
    # gigagan's generator: each row holds a local module list, unpacked by a nested target
    "nested_rows": '''
        import torch
        from torch import nn


        def leaky_relu(neg_slope=0.2):
            return nn.LeakyReLU(neg_slope)


        class Noise(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.weight = nn.Parameter(torch.zeros(dim, 1, 1))

            def forward(self, x, noise=None):
                if noise is None:
                    noise = torch.randn_like(x[:, :1])
                return x + self.weight * noise


        class Generator(nn.Module):
            def __init__(self, dims, skip):
                super().__init__()
                self.layers = nn.ModuleList([])
                self.gated = nn.ModuleList([])
                self.uneven = nn.ModuleList([])
                for dim_in, dim_out in dims:
                    excite = None
                    if skip:
                        excite = nn.Conv2d(dim_in, dim_in, 1)
                    resnet_block = nn.ModuleList([
                        nn.Conv2d(dim_in, dim_out, 3, padding=1),
                        Noise(dim_out),
                        leaky_relu(),  # expect: TML201
                        nn.Conv2d(dim_out, dim_out, 3, padding=1),
                        Noise(dim_out),
                        leaky_relu(),  # expect: TML201
                    ])
                    to_rgb = nn.Conv2d(dim_out, 3, 1)
                    self.layers.append(nn.ModuleList([excite, resnet_block, to_rgb]))
                    gate_block = nn.ModuleList([nn.Conv2d(dim_out, dim_out, 3), nn.Sigmoid(), nn.ELU()])  # after a sigmoid: quiet
                    self.gated.append(nn.ModuleList([gate_block, nn.Conv2d(dim_out, 3, 1)]))
                    short = nn.ModuleList([nn.Conv2d(dim_out, dim_out, 3), nn.ELU()])  # rows of two widths: quiet
                    self.uneven.append(nn.ModuleList([short, nn.Identity()]))
                    self.uneven.append(nn.ModuleList([nn.ModuleList([nn.Conv2d(dim_out, dim_out, 3), nn.Tanh(), nn.ELU()]), nn.Identity()]))

            def forward(self, x):
                rgb = 0
                for excite, (conv1, noise1, act1, conv2, noise2, act2), to_rgb in self.layers:
                    if excite is not None:
                        x = x * excite(x)
                    x = act1(noise1(conv1(x)))
                    x = act2(noise2(conv2(x)))
                    rgb = rgb + to_rgb(x)
                for (conv, gate, act), out in self.gated:
                    x = act(gate(conv(x)))
                for (conv, act), out in self.uneven:
                    x = out(act(conv(x)))
                return x, rgb
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_rows"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
