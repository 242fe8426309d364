"""TML201 on forms a fifteenth held-out set showed it missed, modelled as general constructs.

Where a module instance runs (``analysis/module_flow.py``): an activation that a factory of
the project returns, chosen by a configuration string (``nonlinearity(cfg)``: ``nn.ELU`` or
``nn.ReLU`` per ``cfg.nonlinearity``, ``nn.Tanh`` otherwise), imported by absolute name from
the file's own package, and

- bound to a local (``activation = nonlinearity(cfg)``) that is appended to a list spliced
  into ``nn.Sequential`` after a loop over a list written out (which runs at least once), and
  passed on to a builder of another module (``create_mlp(sizes, n, activation)``, whose
  ``layers.extend([fc_layer(...), activation])`` puts it after the Linear that ``fc_layer``
  returns, maybe spectrally normed);
- passed to a class of the same file whose ``__init__`` appends it after each convolution;
- passed directly to the builder (``create_mlp(sizes, n, nonlinearity(cfg))``).

One instance runs at each of those places: it is reported, at the factory's call, when every
place follows a layer whose output nothing else reads. The builder's parameter is reported too,
where the builder places it (``analysis/passed_layers.py``), when every call of the builder in
the project passes such a layer for it (``create_mlp``; not ``plain_mlp``, which one caller
gives a ``Swish`` module of its own or the factory's layer, depending on a flag).

A list held by ``self`` in ``__init__`` (``self.proj = []``, ``self.proj.append(...)`` ...
``self.proj = nn.Sequential(*self.proj)``, another arm assigning a single Linear) is read as a
local list is.

A flag kept on ``self`` (``self.outermost = outermost``) and tested around a call in
``forward`` ties the call to the arms of ``__init__`` that built the module it runs
(``analysis/flag_arms.py``): pix2pix's ``UnetSkipConnectionBlock`` runs ``return
self.model(x)`` only when outermost, and the outermost arm's list starts with a convolution, so
the in-place LeakyReLU first in the other arms is reported (TML203) at the ``torch.cat`` only.
Still reported: a flag that is not the parameter itself (``self.inner = not outermost``, or the
parameter rebound first), and an outermost arm that starts with the activation too.

Look-alikes stay quiet: the factory's layer first in a Sequential run on a tensor read again;
a local also kept as an attribute run on a tensor read again; a builder that puts the
activation first, or keeps it on ``self``; a loop over a parameter (which may be empty, so the
activation may come first); a builder whose returned layer may be wrapped by a class whose output backward needs (a
sigmoid);
a list on ``self`` that a method of ``self`` may change before the splice; a factory returning
``nn.Softmax``/``nn.Identity`` (no in-place form).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

UTILS = '''
    import torch
    from torch import nn
    from torch.nn.utils import spectral_norm


    def nonlinearity(cfg, inplace=False):
        if cfg.nonlinearity == "elu":
            return nn.ELU(inplace=inplace)
        elif cfg.nonlinearity == "relu":
            return nn.ReLU(inplace=inplace)
        elif cfg.nonlinearity == "tanh":
            return nn.Tanh()
        else:
            raise ValueError(cfg.nonlinearity)


    def soft(cfg):
        return nn.Softmax(dim=1) if cfg.soft else nn.Identity()


    class Wrapped(nn.Module):
        def __init__(self, layer):
            super().__init__()
            self.layer = layer

        def forward(self, x):
            return torch.sigmoid(self.layer(x))


    def fc_layer(n_in, n_out, spec_norm=False):
        layer = nn.Linear(n_in, n_out)
        if spec_norm:
            layer = spectral_norm(layer)
        return layer


    def odd_layer(n_in, n_out, wrap=False):
        layer = nn.Linear(n_in, n_out)
        if wrap:
            layer = Wrapped(layer)
        return layer


    def create_mlp(sizes, n_in, activation):
        layers = []
        for size in sizes:
            layers.extend([fc_layer(n_in, size), activation])  # expect: TML201
            n_in = size
        if len(layers) > 0:
            return nn.Sequential(*layers)
        return nn.Identity()


    def plain_mlp(sizes, n_in, activation):
        layers = []
        for size in sizes:
            layers.extend([nn.Linear(n_in, size), activation])
            n_in = size
        return nn.Sequential(*layers)


    def leading_mlp(sizes, n_in, activation):
        layers = []
        for size in sizes:
            layers.extend([activation, nn.Linear(n_in, size)])
            n_in = size
        return nn.Sequential(*layers)


    def odd_mlp(sizes, n_in, activation):
        layers = []
        for size in sizes:
            layers.extend([odd_layer(n_in, size), activation])
            n_in = size
        return nn.Sequential(*layers)
'''

ENCODERS = '''
    import torch
    from torch import nn

    from pkg.utils import create_mlp, leading_mlp, nonlinearity, odd_mlp, plain_mlp, soft


    class ResBlock(nn.Module):
        def __init__(self, cfg, c):
            super().__init__()
            layers = [
                nonlinearity(cfg),
                nn.Conv2d(c, c, 3, padding=1),
                nonlinearity(cfg),  # expect: TML201
                nn.Conv2d(c, c, 3, padding=1),
            ]
            self.core = nn.Sequential(*layers)

        def forward(self, x):
            return self.core(x) + x


    class ConvImpl(nn.Module):
        def __init__(self, filters, activation):
            super().__init__()
            layers = []
            for c_in, c_out in filters:
                layers.append(nn.Conv2d(c_in, c_out, 3))
                layers.append(activation)
            self.head = nn.Sequential(*layers)
            self.mlp = create_mlp([64], 128, activation)

        def forward(self, x):
            return self.mlp(self.head(x).flatten(1))


    class ConvEncoder(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            activation = nonlinearity(cfg)  # expect: TML201
            self.enc = ConvImpl([[3, 16], [16, 32]], activation)

        def forward(self, x):
            return self.enc(x)


    class ResnetEncoder(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            conf = [[16, 2], [32, 2]]
            layers = []
            c_in = 3
            for c_out, blocks in conf:
                layers.append(nn.Conv2d(c_in, c_out, 3))
                for _ in range(blocks):
                    layers.append(ResBlock(cfg, c_out))
                c_in = c_out
            activation = nonlinearity(cfg)  # expect: TML201
            layers.append(activation)
            self.head = nn.Sequential(*layers)
            self.mlp = create_mlp(cfg.sizes, 32, activation)

        def forward(self, x):
            return self.mlp(self.head(x).flatten(1))


    class MlpEncoder(nn.Module):
        def __init__(self, cfg, n):
            super().__init__()
            self.mlp = create_mlp(cfg.sizes, n, nonlinearity(cfg))  # expect: TML201

        def forward(self, x):
            return self.mlp(x)


    class MaybeEmpty(nn.Module):
        def __init__(self, cfg, conf):
            super().__init__()
            layers = []
            for c_out in conf:
                layers.append(nn.Conv2d(3, c_out, 3))
            activation = nonlinearity(cfg)
            layers.append(activation)
            self.head = nn.Sequential(*layers)

        def forward(self, x):
            return self.head(x) + x


    class AlsoKept(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            activation = nonlinearity(cfg)
            self.head = nn.Sequential(nn.Conv2d(3, 3, 3), activation)
            self.act = activation

        def forward(self, x):
            y = self.act(x)
            return self.head(y) + x


    class Leading(nn.Module):
        def __init__(self, cfg, n):
            super().__init__()
            self.mlp = leading_mlp(cfg.sizes, n, nonlinearity(cfg))

        def forward(self, x):
            return self.mlp(x) + x


    class Odd(nn.Module):
        def __init__(self, cfg, n):
            super().__init__()
            self.mlp = odd_mlp(cfg.sizes, n, nonlinearity(cfg))

        def forward(self, x):
            return self.mlp(x)


    class Keeps(nn.Module):
        def __init__(self, activation):
            super().__init__()
            self.act = activation
            self.conv = nn.Conv2d(3, 3, 3)

        def forward(self, x):
            return self.conv(self.act(x)) + x


    class KeepsEncoder(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            activation = nonlinearity(cfg)
            self.block = Keeps(activation)

        def forward(self, x):
            return self.block(x)


    class Swish(nn.Module):
        def forward(self, x):
            return x * torch.sigmoid(x)


    class Plain(nn.Module):
        def __init__(self, cfg, n, swish):
            super().__init__()
            self.mlp = plain_mlp(cfg.sizes, n, nonlinearity(cfg))  # expect: TML201
            self.other = plain_mlp(cfg.sizes, n, Swish() if swish else nonlinearity(cfg))

        def forward(self, x):
            return self.other(self.mlp(x))


    class Soft(nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.head = nn.Sequential(nn.Linear(4, 4), soft(cfg))

        def forward(self, x):
            return self.head(x)
'''

HELD_LIST = '''
    import torch
    from torch import nn


    class Generator(nn.Module):
        def __init__(self, hidden, out, n_layers=2, p=0.1):
            super(Generator, self).__init__()
            if n_layers == 1:
                self.proj = nn.Linear(hidden, out)
            else:
                self.proj = []
                for i in range(n_layers - 1):
                    self.proj.append(nn.Linear(hidden, hidden))
                    self.proj.append(nn.LeakyReLU(negative_slope=0.1))  # expect: TML201
                    self.proj.append(nn.LayerNorm(hidden))
                    self.proj.append(nn.Dropout(p))
                self.proj.append(nn.Linear(hidden, out))
                self.proj = torch.nn.Sequential(*self.proj)

        def forward(self, x):
            return self.proj(x)


    class Extended(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.proj = [nn.Linear(hidden, hidden)]
            self._extend(hidden)
            self.proj.append(nn.LeakyReLU(0.1))
            self.proj = nn.Sequential(*self.proj)

        def _extend(self, hidden):
            self.proj.append(nn.Sigmoid())

        def forward(self, x):
            return self.proj(x)


    class Leading(nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.body = []
            self.body.append(nn.LeakyReLU(0.1))
            self.body.append(nn.Linear(hidden, hidden))
            self.body = nn.Sequential(*self.body)

        def forward(self, x):
            return self.body(x) + x
'''

FLAG_ARMS = '''
    import torch
    from torch import nn


    class SkipBlock(nn.Module):
        def __init__(self, outer, inner, submodule=None, outermost=False, innermost=False):
            super().__init__()
            self.outermost = outermost
            downconv = nn.Conv2d(outer, inner, 4, 2, 1)
            downrelu = nn.LeakyReLU(0.2, True)
            uprelu = nn.ReLU(True)
            if outermost:
                down = [downconv]
                up = [uprelu, nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1), nn.Tanh()]
                model = down + [submodule] + up
            elif innermost:
                down = [downrelu, downconv]
                up = [uprelu, nn.ConvTranspose2d(inner, outer, 4, 2, 1)]
                model = down + up
            else:
                down = [downrelu, downconv]
                up = [uprelu, nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1)]
                model = down + [submodule] + up
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if self.outermost:
                return self.model(x)
            else:
                return torch.cat([x, self.model(x)], 1)  # expect: TML203


    class NotOutermost(nn.Module):
        def __init__(self, outer, inner, outermost=False):
            super().__init__()
            self.inner = not outermost
            downrelu = nn.LeakyReLU(0.2, True)
            if outermost:
                model = [nn.Conv2d(outer, inner, 3)]
            else:
                model = [downrelu, nn.Conv2d(outer, inner, 3)]
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if not self.inner:
                return self.model(x)  # expect: TML203
            return torch.cat([x, self.model(x)], 1)  # expect: TML203


    class Rebound(nn.Module):
        def __init__(self, outer, inner, outermost=False):
            super().__init__()
            outermost = outermost or inner > 64
            self.outermost = outermost
            downrelu = nn.LeakyReLU(0.2, True)
            if outermost:
                model = [nn.Conv2d(outer, inner, 3)]
            else:
                model = [downrelu, nn.Conv2d(outer, inner, 3)]
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if self.outermost:
                return self.model(x)  # expect: TML203
            return torch.cat([x, self.model(x)], 1)  # expect: TML203


    class BothStart(nn.Module):
        def __init__(self, outer, inner, outermost=False):
            super().__init__()
            self.outermost = outermost
            downrelu = nn.LeakyReLU(0.2, True)
            if outermost:
                model = [downrelu, nn.Conv2d(outer, inner, 3), nn.Tanh()]
            else:
                model = [downrelu, nn.Conv2d(outer, inner, 3)]
            self.model = nn.Sequential(*model)

        def forward(self, x):
            if self.outermost:
                return self.model(x)  # expect: TML203
            return torch.cat([x, self.model(x)], 1)  # expect: TML203


    class SkipConnection(nn.Module):
        """The nineteenth held-out set's pix2pix copy: ``self.model`` built in an ``if``/``else``
        on the submodule, each Sequential splicing the arm's lists."""

        def __init__(self, outer, inner, sub_module=None, outermost=False, innermost=False):
            super().__init__()
            self.outermost = outermost
            down_conv = nn.Conv2d(outer, inner, 4, 2, 1)
            down_relu = nn.LeakyReLU(0.2, inplace=True)
            up_relu = nn.ReLU(inplace=True)
            if outermost:
                down = [down_conv]
                up = [up_relu, nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1), nn.Tanh()]
            elif innermost:
                down = [down_relu, down_conv]
                up = [up_relu, nn.ConvTranspose2d(inner, outer, 4, 2, 1)]
            else:
                down = [down_relu, down_conv]
                up = [up_relu, nn.ConvTranspose2d(inner * 2, outer, 4, 2, 1)]
            if sub_module is not None:
                self.model = nn.Sequential(*down, sub_module, *up)
            else:
                self.model = nn.Sequential(*down, *up)

        def forward(self, x):
            if self.outermost:
                return self.model(x)
            return torch.cat([x, self.model(x)], dim=1)  # expect: TML203


    class EmptyDown(nn.Module):
        """The outermost arm splices nothing before the submodule, a name: it may come first."""

        def __init__(self, outer, inner, sub_module=None, outermost=False):
            super().__init__()
            self.outermost = outermost
            down_relu = nn.LeakyReLU(0.2, inplace=True)
            if outermost:
                down = []
            else:
                down = [down_relu, nn.Conv2d(outer, inner, 4, 2, 1)]
            if sub_module is not None:
                self.model = nn.Sequential(*down, sub_module)
            else:
                self.model = nn.Sequential(*down, nn.Conv2d(outer, inner, 3))

        def forward(self, x):
            if self.outermost:
                return self.model(x)  # expect: TML203
            return torch.cat([x, self.model(x)], dim=1)  # expect: TML203


    class LeadingRelu(nn.Module):
        """Written before the splice in one of the two Sequentials: first in either arm."""

        def __init__(self, outer, inner, sub_module=None, outermost=False):
            super().__init__()
            self.outermost = outermost
            if outermost:
                down = [nn.Conv2d(outer, inner, 4, 2, 1)]
            else:
                down = [nn.Conv2d(outer, inner, 4, 2, 1)]
            if sub_module is not None:
                self.model = nn.Sequential(nn.LeakyReLU(0.2, inplace=True), *down, sub_module)
            else:
                self.model = nn.Sequential(*down)

        def forward(self, x):
            if self.outermost:
                return self.model(x)  # expect: TML203
            return torch.cat([x, self.model(x)], dim=1)  # expect: TML203
'''

CASES: Dict[str, Dict[str, str]] = {
    "pkg": {"__init__": "", "utils": UTILS, "encoders": ENCODERS},
    "flat": {"held_list": HELD_LIST, "flag_arms": FLAG_ARMS},
}


@pytest.mark.parametrize("folder", sorted(CASES))
def test_module_instances_are_judged_where_they_run(tmp_path: Path, folder: str) -> None:
    cases = CASES[folder]
    root = tmp_path / folder
    root.mkdir()
    found = lint_cases(root, cases, "TML201,TML203")
    for name, source in cases.items():
        assert set(found[name]) == marked(source), name
