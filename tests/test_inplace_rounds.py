"""TML201 on tensors a loop carries and on modules that only inherit ``forward``: a
functional activation at the head of a loop over a module list (``o = F.leaky_relu(o, 0.2);
o = layer(o)``: the value from before the loop in the first round, a layer's output in the
next), an activation after a loop whose every round binds the name again (``o = z_sum / k``:
the value from before the loop arrives only when no round ran), and a module class of the file
that derives one torch layer and adds no ``forward`` (``class Conv1d(nn.Conv1d)`` that only
initialises its weights). Look-alikes stay quiet: a round that binds the name only under an
``if``, a loop a ``break`` may leave, a value from before the loop that a residual reads after
it, a subclass of an activation or with its own ``forward``, an input read again in the round.
A loop over a slice of a module list (``for layer in self.layers[1:]``) runs some of its
elements: what any of them makes.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # a vocoder's downsampling block: a ModuleList of a subclass of nn.Conv1d run as a chain,
    # each layer after a leaky_relu of what the previous one made
    "inherited_forward": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class Conv1d(nn.Conv1d):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                nn.init.orthogonal_(self.weight)


        class Gate(nn.Sigmoid):
            pass


        class Shift(nn.Conv1d):
            def forward(self, x):
                return x


        class DBlock(nn.Module):
            def __init__(self, cin, cout, factor):
                super().__init__()
                self.factor = factor
                self.main = nn.ModuleList([Conv1d(cin, cout, 3, padding=1), Conv1d(cout, cout, 3, padding=2, dilation=2)])

            def forward(self, x):
                o = F.interpolate(x, size=x.shape[-1] // self.factor)
                for layer in self.main:
                    o = F.leaky_relu(o, 0.2)  # expect: TML201
                    o = layer(o)
                return o


        class Gated(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.main = nn.ModuleList([Gate(), Gate()])

            def forward(self, x):
                o = F.interpolate(x, size=4)
                for layer in self.main:
                    o = F.leaky_relu(o, 0.2)  # after a sigmoid (it keeps its output): quiet
                    o = layer(o)
                return o


        class Shifted(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.main = nn.ModuleList([Shift(c, c, 3), Shift(c, c, 3)])

            def forward(self, x):
                o = F.interpolate(x, size=4)
                for layer in self.main:
                    o = F.leaky_relu(o, 0.2)  # its own forward returns its input: quiet
                    o = layer(o)
                return o


        class Residual(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.main = nn.ModuleList([Conv1d(c, c, 3, padding=1), Conv1d(c, c, 3, padding=1)])

            def forward(self, x):
                o = F.interpolate(x, size=4)
                for layer in self.main:
                    h = F.leaky_relu(o, 0.2)  # `o` is read again by the residual: quiet
                    o = layer(h) + o
                return o
    ''',
    # a HiFi-GAN generator: after the loop the name holds what the last round bound (a sum of
    # resblock outputs divided by a count), or, when no round ran, the first conv's output
    "after_the_loop": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Generator(nn.Module):
            def __init__(self, c, n, k):
                super().__init__()
                self.num_upsamples, self.num_kernels = n, k
                self.conv_pre = nn.Conv1d(80, c, 7, padding=3)
                self.ups = nn.ModuleList([nn.ConvTranspose1d(c, c, 4, 2) for _ in range(n)])
                self.resblocks = nn.ModuleList([nn.Conv1d(c, c, 3, padding=1) for _ in range(n * k)])
                self.conv_post = nn.Conv1d(c, 1, 7, padding=3)
                self.conds = nn.ModuleList([nn.Conv1d(16, c, 1) for _ in range(n)])
                self.cond_in_each_up_layer = True

            def forward(self, x, g):
                o = self.conv_pre(x)
                for i in range(self.num_upsamples):
                    o = F.leaky_relu(o, 0.1)  # expect: TML201
                    o = self.ups[i](o)
                    if self.cond_in_each_up_layer:
                        o = o + self.conds[i](g)
                    z_sum = None
                    for j in range(self.num_kernels):
                        if z_sum is None:
                            z_sum = self.resblocks[i * self.num_kernels + j](o)
                        else:
                            z_sum += self.resblocks[i * self.num_kernels + j](o)
                    o = z_sum / self.num_kernels
                o = F.leaky_relu(o)  # expect: TML201
                o = self.conv_post(o)
                return torch.tanh(o)


        class Sometimes(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.conv_pre = nn.Conv1d(80, c, 7, padding=3)
                self.blocks = nn.ModuleList([nn.Conv1d(c, c, 3, padding=1) for _ in range(n)])
                self.down = nn.Conv1d(c, c, 3, padding=1)

            def forward(self, x, flags):
                o = self.conv_pre(x)
                skips = []
                for block, flag in zip(self.blocks, flags):
                    skips.append(block(o))
                    if flag:
                        o = self.down(o)
                o = F.leaky_relu(o)  # a round may leave `o` as it was, after `block` read it: quiet
                return o, skips


        class Stopped(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.conv_pre = nn.Conv1d(80, c, 7, padding=3)
                self.blocks = nn.ModuleList([nn.Conv1d(c, c, 3, padding=1) for _ in range(n)])

            def forward(self, x, feats):
                o = self.conv_pre(x)
                for block in self.blocks:
                    feats.append(o)
                    if feats[-1].mean() > 0:
                        break
                    o = block(o)
                o = F.leaky_relu(o)  # `break` may leave `o` as it was, kept in `feats`: quiet
                return o


        class Kept(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.conv_pre = nn.Conv1d(80, c, 7, padding=3)
                self.blocks = nn.ModuleList([nn.Conv1d(c, c, 3, padding=1) for _ in range(n)])

            def forward(self, x):
                o = self.conv_pre(x)
                first = o
                for block in self.blocks:
                    o = block(o) + 1
                o = F.leaky_relu(o)  # no round ran: `first` is the same tensor, read below: quiet
                return o + first
    ''',
    # an MLP whose first layer runs before the loop over the rest (``self.layers[1:]``)
    "sliced_list": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class MLP(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(c, c) for _ in range(n)])
                self.out = nn.Linear(c, 1)

            def forward(self, h):
                h = self.layers[0](h)
                for layer in self.layers[1:]:
                    h = F.elu(h)  # expect: TML201
                    h = layer(h)
                return self.out(F.elu(h))  # expect: TML201


        class Gates(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(c, c), nn.Sigmoid(), nn.Sigmoid()])

            def forward(self, h):
                h = self.layers[0](h)
                for layer in self.layers[1:]:
                    h = layer(h)
                return F.elu(h)  # a sigmoid's output (it keeps it for backward): quiet


        class Skips(nn.Module):
            def __init__(self, c, n):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(c, c) for _ in range(n)])

            def forward(self, h):
                h = self.layers[0](h)
                for layer in self.layers[1:]:
                    a = F.elu(h)  # `h` is read again by the residual: quiet
                    h = layer(a) + h
                return h
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_rounds"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
