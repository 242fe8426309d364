"""TML201 where what feeds the activation is a layer the class builds in a roundabout way:

* a reparametrisation wrapper around a builder's call (``spectral_norm(conv2d(ni, nf, 4))``,
  ``conv2d`` a function of the file returning ``nn.Conv2d``): what the builder's module makes;
* a Sequential element written as a conditional expression (``weight_norm(nn.Conv1d(...)) if
  use_weight_norm else nn.Conv1d(...)``): what either arm makes;
* a module list one of whose elements is replaced by index (``self.layers[0] =
  nn.Embedding(...)``: an embedding makes a fresh tensor its backward does not read);
* a plain list filled by ``append`` and then rewrapped (``self.convs = nn.ModuleList(self.convs)``);
* a list built in a loop that puts the activation before each layer but the first (``if i >
  0: layers.append(activation)``, ``i`` counting from 0: ``analysis/loop_counters.py``).

Look-alikes stay quiet: a wrapper around a builder of a class the file does not know, a
conditional whose other arm is such a class, an element replaced by such a class, a rewrapped
list whose element output is read again by a residual, a loop whose counter starts at 1 or
whose test lets the activation come first (``if i < 2:``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "wrapper_of_builder": '''
        import torch.nn as nn
        from somewhere import ExternalConv


        def conv2d(ni, nf, ks, stride=1, padding=0):
            return nn.Conv2d(ni, nf, ks, stride, padding, bias=False)


        def external(ni, nf):
            return ExternalConv(ni, nf)


        def down(ni, nf):
            return nn.Sequential(
                nn.utils.spectral_norm(conv2d(ni, nf, 4, 2, 1)),
                nn.LeakyReLU(0.2),  # expect: TML201
                nn.Conv2d(nf, nf, 3),
            )


        def down_external(ni, nf):
            return nn.Sequential(
                nn.utils.spectral_norm(external(ni, nf)),
                nn.LeakyReLU(0.2),
                nn.Conv2d(nf, nf, 3),
            )
    ''',
    "conditional_element": '''
        import torch.nn as nn
        from somewhere import ExternalConv


        class ResidualStack(nn.Module):
            def __init__(self, channels, dilation=1, use_weight_norm=True):
                super().__init__()
                self.block = nn.Sequential(
                    nn.ReflectionPad1d(dilation),
                    nn.utils.weight_norm(nn.Conv1d(channels, channels, 3, dilation=dilation))
                    if use_weight_norm else nn.Conv1d(channels, channels, 3, dilation=dilation),
                    nn.LeakyReLU(0.2),  # expect: TML201
                    nn.Conv1d(channels, channels, 1),
                )
                self.other = nn.Sequential(
                    nn.Conv1d(channels, channels, 3) if use_weight_norm else ExternalConv(channels),
                    nn.LeakyReLU(0.2),
                    nn.Conv1d(channels, channels, 1),
                )

            def forward(self, x):
                return x + self.block(x) + self.other(x)
    ''',
    "element_replaced": '''
        import torch
        import torch.nn as nn
        from somewhere import ExternalEncoder


        class Embedder(nn.Module):
            def __init__(self, size, class_input=True):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(i, size[k + 1]) for k, i in enumerate(size[:-2])])
                if class_input:
                    self.layers[0] = nn.Embedding(size[0], size[1])
                self.layers.append(nn.Linear(size[-2], size[-1]))

            def forward(self, x):
                for layer in self.layers[:-1]:
                    x = torch.selu(layer(x))  # expect: TML201
                return self.layers[-1](x)


        class Replaced(nn.Module):
            def __init__(self, size):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(i, size[k + 1]) for k, i in enumerate(size[:-2])])
                self.layers[0] = ExternalEncoder(size[0], size[1])
                self.layers.append(nn.Linear(size[-2], size[-1]))

            def forward(self, x):
                for layer in self.layers[:-1]:
                    x = torch.selu(layer(x))
                return self.layers[-1](x)
    ''',
    "list_rewrapped": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class FeedForward(nn.Module):
            def __init__(self, channels, depth=4):
                super().__init__()
                self.convs = []
                for i in range(depth - 1):
                    conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1)
                    self.convs.append(conv)
                self.convs = nn.ModuleList(self.convs)
                self.final_conv = nn.Conv2d(channels * (depth - 1), 1, kernel_size=1)

            def forward(self, x):
                xn = []
                for conv in self.convs:
                    x = conv(x)
                    x = F.leaky_relu(x, negative_slope=0.01)  # expect: TML201
                    xn.append(x)
                return self.final_conv(torch.cat(xn, 1))


        class Residual(nn.Module):
            def __init__(self, channels, depth=4):
                super().__init__()
                self.convs = []
                for i in range(depth - 1):
                    self.convs.append(nn.Conv2d(channels, channels, kernel_size=3, padding=1))
                self.convs = nn.ModuleList(self.convs)

            def forward(self, x):
                for conv in self.convs:
                    y = conv(x)
                    x = F.leaky_relu(y, negative_slope=0.01) + y
                return x
    ''',
    "counted_loop": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class MaskedLinear(nn.Linear):
            def forward(self, x):
                return F.linear(x, self.weight * self.mask, self.bias)


        class MADE(nn.Module):
            def __init__(self, *dims, activation=nn.LeakyReLU()):  # expect: TML201
                super().__init__()
                layers = []
                for i, (in_dim, out_dim) in enumerate(zip(dims, dims[1:])):
                    if i > 0:
                        layers.append(activation)
                    layers.append(MaskedLinear(in_dim, out_dim))
                self.mlp = nn.Sequential(*layers)

            def forward(self, x):
                return self.mlp(x)


        class FromOne(nn.Module):
            def __init__(self, *dims, activation=nn.ELU()):
                super().__init__()
                layers = []
                for i in range(1, len(dims)):
                    if i > 0:
                        layers.append(activation)
                    layers.append(nn.Linear(dims[i - 1], dims[i]))
                self.mlp = nn.Sequential(*layers)

            def forward(self, x):
                return self.mlp(x)


        class Early(nn.Module):
            def __init__(self, *dims, activation=nn.CELU()):
                super().__init__()
                layers = []
                for i in range(len(dims) - 1):
                    if i < 2:
                        layers.append(activation)
                    layers.append(nn.Linear(dims[i], dims[i + 1]))
                self.mlp = nn.Sequential(*layers)

            def forward(self, x):
                return self.mlp(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_rebuilt"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
