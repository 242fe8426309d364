"""TML201 and TML203 asked of the value graph, in forms real code uses: layers returned by a
same-file factory (``self.act = get_act(name)``), a Sequential built and returned by a helper,
a tensor made by a same-file helper method (``h = self.conv_norm(x)``), with look-alikes that
must stay quiet (the tensor also read by a residual, kept by the helper, a view of a parameter,
a factory also used outside a module, a loop that rebinds the name).

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # a GAN discriminator whose activation a factory function chooses; the generator's
    # `*block()` splices were found before and still are
    # a factory's layer is reported where each call of it places it (`self.act = get_act(act)`):
    # there only the arm `act`'s default "leaky" takes (a safe edit of that construction), once
    # for both layers where the key is not known (`get_act(cfg.act)`: no safe edit, the ELU's is
    # not); `get_gate()` runs on a fresh tensor in `Down`, but
    # `apply_gate` calls it too, so the edit of the factory is not offered
    "gan_factory": '''
        import torch.nn as nn


        def get_act(name):
            if name == "leaky":
                return nn.LeakyReLU(0.2)  # reported where it is placed
            return nn.ELU()


        def get_gate():
            return nn.LeakyReLU(0.2)  # also used outside a module: what it runs on is not known


        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2))  # expect: TML201
            return layers


        class Generator(nn.Module):
            def __init__(self, latent_dim):
                super().__init__()
                self.model = nn.Sequential(*block(latent_dim, 128, normalize=False), *block(128, 256), nn.Linear(256, 784), nn.Tanh())

            def forward(self, z):
                return self.model(z)


        class Down(nn.Module):
            def __init__(self, cin, cout, act="leaky"):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 4, 2, 1)
                self.act = get_act(act)  # expect: TML201 fix=safe
                self.gate = get_gate()  # expect: TML201 fix=none

            def forward(self, x):
                return self.act(self.conv(x)) * self.gate(self.conv(x))


        class Skip(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.act = nn.LeakyReLU(0.2)

            def forward(self, x):
                y = self.conv(x)
                return self.act(y) + y  # read again: in place would change `y`


        def apply_gate(x):
            return get_gate()(x)


        class Up(nn.Module):
            def __init__(self, cin, cout, cfg):
                super().__init__()
                self.conv = nn.ConvTranspose2d(cin, cout, 4, 2, 1)
                self.act = get_act(cfg.activation)  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))
    ''',
    # a factory's layer as a list element: `layers.append(get_act(act))` in a block builder,
    # `layers += block(...)` in a loop, `nn.Sequential(*layers)`; a factory whose layer comes
    # first (what runs before it is not known) and `inplace` from a config stay quiet
    "list_factory": '''
        import torch.nn as nn


        def get_act(name):
            if name == "leaky":
                return nn.LeakyReLU(0.2)
            return nn.ELU()


        def get_first():
            return nn.LeakyReLU(0.1)


        def block(cin, cout, act="leaky", norm=True):
            layers = [nn.Conv2d(cin, cout, 3, padding=1)]
            if norm:
                layers.append(nn.BatchNorm2d(cout))
            layers.append(get_act(act))  # expect: TML201 fix=safe
            return layers


        class Net(nn.Module):
            def __init__(self, cfg):
                super().__init__()
                layers = []
                for cin, cout in [(3, 16), (16, 32)]:
                    layers += block(cin, cout, norm=cin > 3)
                self.body = nn.Sequential(*layers)
                self.head = nn.Sequential(get_first(), nn.Conv2d(32, 8, 1), nn.LeakyReLU(0.1, inplace=cfg.inplace))

            def forward(self, x):
                return self.head(self.body(x))
    ''',
    # a tensor made by a same-file helper method: what the helper returns is what arrives
    "helper_method": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class Disc(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3)
                self.norm = nn.InstanceNorm2d(c)
                self.scale = nn.Parameter(nn.init.ones_(nn.Parameter()))

            def conv_norm(self, x):
                return self.norm(self.conv(x))

            def conv_norm_kept(self, x):
                y = self.norm(self.conv(x))
                self.features = y  # kept: in place would change the stored tensor
                return y

            def forward(self, x):
                h = self.conv_norm(x)
                a = F.leaky_relu(h, 0.2)  # expect: TML201
                b = F.leaky_relu(self.conv_norm_kept(x), 0.2)
                c = F.leaky_relu(self.scale.view(1, -1, 1, 1), 0.2)  # a view of a parameter
                g = self.conv_norm(x)
                d = F.elu(g) + g  # read again
                if self.training:
                    e = F.elu(self.conv(x))  # expect: TML201
                else:
                    e = F.elu(self.conv(x), inplace=self.training)  # not a literal: quiet
                return a, b, c, d, e
    ''',
    # an in-place ReLU first in a Sequential that a helper builds and returns, then a residual
    "helper_sequential": '''
        import torch.nn as nn


        def make_body(c):
            layers = [nn.ReLU(inplace=True), nn.Conv2d(c, c, 3, padding=1)]
            layers += [nn.BatchNorm2d(c)]
            return nn.Sequential(*layers)


        def make_head(c):
            return nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(c, c, 1))


        class Res(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.body = make_body(c)
                self.head = make_head(c)
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                out = self.body(x) + x  # expect: TML203
                return self.head(self.conv(out))
    ''',
    # an in-place activation on what a helper method's sigmoid returned; a loop that rebinds
    # the name it overwrites stays quiet, one that reads the same tensor each round does not
    "helper_saves_output": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        class Gate(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.fc = nn.Linear(c, c)
                self.relu = nn.ReLU(inplace=True)
                self.heads = nn.ModuleList([nn.Linear(c, c) for _ in range(3)])

            def gate(self, x):
                return torch.sigmoid(self.fc(x))

            def forward(self, x):
                g = self.relu(self.gate(x))  # expect: TML203
                z = self.fc(x)
                for head in self.heads:
                    z = F.relu(z, inplace=True)
                    z = head(z)
                w = self.fc(x)
                for head in self.heads:
                    w = F.leaky_relu(w, 0.2)  # the next round runs it on a tanh's output
                    w = torch.tanh(head(w))
                v = self.fc(x)
                for head in self.heads:
                    v = F.leaky_relu(v, 0.2)  # expect: TML201
                    v = head(v) + v
                y = self.fc(x)
                outs = []
                for head in self.heads:
                    outs.append(head(F.hardtanh(y, inplace=True)))  # expect: TML203
                return g, z, w, v, outs
    ''',
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_graph"), CASES, "TML201,TML203", isolated=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_the_marked_ones(found, name):
    for row, expected in marked_fixes(CASES[name]).items():
        assert fix_at(found[name], row) == expected, (name, row)
