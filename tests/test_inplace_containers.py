"""TML201 asked of what a computation makes, in the forms vocoders and GAN discriminators write:

* calling an element of a module list of ``nn.Sequential``s makes what the Sequential's last
  layers make (``self.convs += [nn.Sequential(nn.Conv2d(...), act)]``, a comprehension of them,
  called as ``self.convs[i](x)`` or in a loop), and an activation first in such a Sequential
  runs on what every element call is given (the previous stage's convolution, an average of
  blocks, a view of a convolution's output);
* a module class's ``forward`` is summarised over every ``return`` and every arm that reaches
  one (``wx = wx.squeeze(1)`` under an ``if``, a ``transpose`` of a value nothing else reads),
  its ``self.conv`` kept as a layer when later rewrapped (``weight_norm(self.conv)``, and
  ``remove_parametrizations(self.conv, ...)`` in another method);
* wrappers bound to a local (``norm_f = spectral_norm if sn else weight_norm``, or ``else lambda x: x``);
* ``**params`` of a call copied from a parameter's default dict, with literal keys set;
* a ``forward`` whose loop over never-empty module lists (``nn.ModuleList([... for i in
  range(3)])``, written out) rebinds ``x`` to an addition: it returns the addition, never ``x``.

Look-alikes stay quiet: an element call whose input is read again by a residual, a module list
that is also handed on (``checkpoint(layer, x)``, returned), a Sequential that ends in a sigmoid,
a class whose ``forward`` returns a sigmoid in one branch, a view of a value also stored, a
caller's default dict that names another activation, a dict changed by ``update``.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``; rows marked ``fix=...`` also say which fix the finding carries.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Dict

import pytest

from marked_cases import MARKER, Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # HiFi-GAN (espnet's form): Sequentials as elements of module lists
    "sequential_lists": '''
        import torch
        import torch.nn as nn


        class Generator(nn.Module):
            def __init__(self, channels=64, scales=(8, 8), nonlinear_activation="LeakyReLU",
                         nonlinear_activation_params={"negative_slope": 0.1}):
                super().__init__()
                self.input_conv = torch.nn.Conv1d(80, channels, 7, 1, padding=3)
                self.upsamples = torch.nn.ModuleList()
                self.blocks = torch.nn.ModuleList()
                self.num_blocks = 3
                for i, s in enumerate(scales):
                    self.upsamples += [
                        torch.nn.Sequential(
                            getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),  # expect: TML201 fix=none
                            torch.nn.ConvTranspose1d(channels, channels, s * 2, s, padding=s // 2),
                        )
                    ]
                    for j in range(self.num_blocks):
                        self.blocks += [torch.nn.Conv1d(channels, channels, 3, padding=1)]

            def forward(self, c):
                c = self.input_conv(c)
                for i in range(len(self.upsamples)):
                    c = self.upsamples[i](c)
                    cs = 0.0
                    for j in range(self.num_blocks):
                        cs += self.blocks[i * self.num_blocks + j](c)
                    c = cs / self.num_blocks
                return c


        class ResidualBlock(nn.Module):
            def __init__(self, channels, dilations=(1, 3, 5)):
                super().__init__()
                self.convs1 = nn.ModuleList()
                self.convs2 = nn.ModuleList()
                for d in dilations:
                    self.convs1 += [nn.Sequential(nn.LeakyReLU(0.1), nn.Conv1d(channels, channels, 3, dilation=d, padding=d))]
                    self.convs2 += [nn.Sequential(nn.LeakyReLU(0.1), nn.Conv1d(channels, channels, 3, padding=1))]  # expect: TML201 fix=safe

            def forward(self, x):
                for idx in range(len(self.convs1)):
                    xt = self.convs1[idx](x)  # x is read again by the residual: its LeakyReLU stays out of place
                    xt = self.convs2[idx](xt)
                    x = xt + x
                return x


        class PeriodDiscriminator(nn.Module):
            def __init__(self, channels=(1, 32, 128)):
                super().__init__()
                self.convs = nn.ModuleList([
                    nn.Sequential(nn.Conv2d(cin, cout, (5, 1), (3, 1), padding=(2, 0)), nn.LeakyReLU(0.1))  # expect: TML201 fix=safe
                    for cin, cout in zip(channels, channels[1:])
                ])
                self.ups = nn.ModuleList([nn.Sequential(nn.LeakyReLU(0.2), nn.Conv2d(8, 8, 3)) for _ in range(2)])

            def forward(self, x):
                outs = []
                for layer in self.convs:
                    x = layer(x)
                    outs += [x]
                for up in self.ups:
                    x = up(x)  # first: the last output of self.convs, also held in outs: quiet
                return x, outs


        class Upsampler(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = nn.Conv2d(8, 8, 3)
                self.ups = nn.ModuleList([nn.Sequential(nn.LeakyReLU(0.2), nn.Conv2d(8, 8, 3)) for _ in range(2)])  # expect: TML201 fix=safe

            def forward(self, x):
                x = self.pre(x)
                for up in self.ups:
                    x = up(x)  # self.pre's output, then the previous element's (a conv)
                return x


        class Handed(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = nn.Conv1d(8, 8, 3)
                self.stages = nn.ModuleList([nn.Sequential(nn.LeakyReLU(0.1), nn.Conv1d(8, 8, 3)) for _ in range(2)])

            def forward(self, x):
                x = self.pre(x)
                for stage in self.stages:
                    x = stage(x)
                return x

            def forward_checkpointed(self, x):
                for stage in self.stages:
                    x = torch.utils.checkpoint.checkpoint(stage, x)  # runs it on what it is given
                return x


        class Forwarded(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = nn.Conv1d(8, 8, 3)
                self.stages = nn.ModuleList([nn.Sequential(nn.LeakyReLU(0.1), nn.Conv1d(8, 8, 3)) for _ in range(2)])

            def forward(self, x):
                x = self.pre(x)
                for stage in self.stages:
                    x = stage(x)
                return x

            def run(self, y):
                for stage in self.stages:
                    y = stage.forward(y)  # the caller's tensor
                return y


        class Exposed(nn.Module):
            def __init__(self):
                super().__init__()
                self.pre = nn.Conv1d(8, 8, 3)
                self.stages = nn.ModuleList([nn.Sequential(nn.LeakyReLU(0.1), nn.Conv1d(8, 8, 3)) for _ in range(2)])

            def forward(self, x):
                x = self.pre(x)
                for i in range(2):
                    x = self.stages[i](x)
                return x

            def stage_list(self):
                return self.stages  # a caller may run them on anything


        class GatedHeads(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = nn.ModuleList([nn.Sequential(nn.Conv1d(8, 8, 1), nn.Sigmoid()) for _ in range(2)])

            def forward(self, x):
                for head in self.heads:
                    x = torch.nn.functional.leaky_relu(head(x), 0.1)  # a sigmoid keeps its output: quiet
                return x
    ''',
    # speechbrain's form: a project conv class whose forward returns views in branches
    "forward_summaries": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.utils.parametrize import remove_parametrizations


        class Conv1d(nn.Module):
            def __init__(self, cin, cout, k, skip_transpose=False, weight_norm=False):
                super().__init__()
                self.skip_transpose = skip_transpose
                self.unsqueeze = False
                self.conv = nn.Conv1d(cin, cout, k, padding=k // 2)
                if weight_norm:
                    self.conv = nn.utils.parametrizations.weight_norm(self.conv)

            def forward(self, x):
                if not self.skip_transpose:
                    x = x.transpose(1, -1)
                wx = self.conv(x)
                if self.unsqueeze:
                    wx = wx.squeeze(1)
                if not self.skip_transpose:
                    wx = wx.transpose(1, -1)
                return wx

            def remove_weight_norm(self):
                self.conv = remove_parametrizations(self.conv, "weight")


        class EarlyReturn(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)
                self.pool = nn.MaxPool2d(2)

            def forward(self, x, down=False):
                if down:
                    return self.pool(self.conv(x))
                return self.conv(x).contiguous()


        class SometimesGated(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3, padding=1)

            def forward(self, x, gate=False):
                if gate:
                    return torch.sigmoid(self.conv(x))
                return self.conv(x)


        class Cached(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3, padding=1)

            def forward(self, x):
                h = self.conv(x)
                self.last = h
                return h.transpose(1, 2)  # a view of a tensor also kept in self.last


        class Generator(nn.Module):
            def __init__(self, c, use_spectral_norm=False):
                super().__init__()
                norm_f = nn.utils.spectral_norm if use_spectral_norm else nn.utils.parametrizations.weight_norm
                self.conv_pre = Conv1d(80, c, 7, skip_transpose=True, weight_norm=True)
                self.convs = nn.ModuleList([norm_f(nn.Conv1d(c, c, 5, padding=2)) for _ in range(3)])
                self.convs1 = nn.ModuleList([Conv1d(c, c, 3, skip_transpose=True) for _ in range(3)])
                self.early = EarlyReturn(c)
                self.gated = SometimesGated(c)
                self.cached = Cached(c)

            def forward(self, x, y):
                o = self.conv_pre(x)
                o = F.leaky_relu(o, 0.1)  # expect: TML201 fix=safe
                for layer in self.convs:
                    o = layer(o)
                    o = F.leaky_relu(o, 0.1)  # expect: TML201 fix=safe
                for c1 in self.convs1:
                    o = F.leaky_relu(c1(o), 0.1)  # expect: TML201 fix=safe
                y = F.leaky_relu(self.early(y), 0.2)  # expect: TML201 fix=safe
                y = F.leaky_relu(self.gated(y), 0.2)  # a sigmoid in one branch: quiet
                z = F.leaky_relu(self.cached(o), 0.2)  # quiet: in place would change self.last
                return o, y, z


        class Chosen(nn.Module):
            def __init__(self, c, mode):
                super().__init__()
                wrap = nn.utils.parametrizations.weight_norm if mode else make_block
                self.convs = nn.ModuleList([wrap(nn.Conv1d(c, c, 3)) for _ in range(2)])

            def forward(self, x):
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)  # make_block is not a wrapper: quiet
                return x


        def make_block(conv):
            return nn.Sequential(conv, nn.Sigmoid())


        class IdentityWhenPlain(nn.Module):
            def __init__(self, c, use_spectral_norm=False):
                super().__init__()
                norm_f = nn.utils.spectral_norm if use_spectral_norm else lambda x: x
                self.convs = nn.ModuleList([norm_f(nn.Conv1d(c, c, 5, padding=2)) for _ in range(3)])

            def forward(self, x):
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)  # expect: TML201 fix=safe
                return x


        class OtherLambda(nn.Module):
            def __init__(self, c, use_spectral_norm=False):
                super().__init__()
                norm_f = nn.utils.spectral_norm if use_spectral_norm else lambda x: nn.Sequential(x, nn.Sigmoid())
                self.convs = nn.ModuleList([norm_f(nn.Conv1d(c, c, 5, padding=2)) for _ in range(3)])

            def forward(self, x):
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)  # a lambda that is no identity: quiet
                return x
    ''',
    # lightweight-gan's form: a function of the file that returns the module (a Sequential)
    "builders": '''
        import torch.nn as nn
        from einops.layers.torch import Rearrange


        def SPConvDownsample(dim, dim_out=None):
            dim_out = dim_out or dim
            return nn.Sequential(
                Rearrange("b c (h s1) (w s2) -> b (c s1 s2) h w", s1=2, s2=2),
                nn.Conv2d(dim * 4, dim_out, 1),
            )


        def resample(dim, down=True):
            if down:
                return nn.Conv2d(dim, dim, 3, 2, 1)
            return nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(dim, dim, 3, padding=1))


        def gate(dim):
            return nn.Sequential(nn.Conv2d(dim, dim, 1), nn.Sigmoid())


        def maybe_tanh(dim, last=False):
            if last:
                return nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.Tanh())
            return nn.Conv2d(dim, dim, 3, padding=1)


        class Discriminator(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.down = nn.Sequential(
                    SPConvDownsample(c, c),
                    nn.LeakyReLU(0.1),  # expect: TML201 fix=safe
                    nn.Conv2d(c, c, 3, padding=1),
                )
                self.up = nn.Sequential(resample(c, down=False), nn.LeakyReLU(0.2), nn.Conv2d(c, c, 1))  # expect: TML201 fix=safe
                self.gated = nn.Sequential(gate(c), nn.LeakyReLU(0.2), nn.Conv2d(c, c, 1))  # a sigmoid's output: quiet
                self.last = nn.Sequential(maybe_tanh(c), nn.LeakyReLU(0.2), nn.Conv2d(c, c, 1))  # a tanh in one return: quiet

            def forward(self, x):
                return self.last(self.gated(self.up(self.down(x))))


        class LocalBuilders(nn.Module):
            """xreflection's VGG discriminator: a builder defined inside ``__init__``."""

            def __init__(self, c):
                super().__init__()

                def conv(*args, **kwargs):
                    return nn.Conv2d(*args, **kwargs)

                def squash(dim):
                    return nn.Sequential(nn.Conv2d(dim, dim, 1), nn.Sigmoid())

                self.body = nn.Sequential(
                    conv(c, 64, kernel_size=3, padding=1),
                    nn.LeakyReLU(0.2),  # expect: TML201 fix=safe
                    conv(64, 64, kernel_size=3, stride=2, padding=1),
                    squash(64),
                    nn.LeakyReLU(0.2),  # a sigmoid's output: quiet
                    conv(64, 64, kernel_size=3, padding=1),
                )

            def forward(self, x):
                return self.body(x)


        class RenamedBuilder(nn.Module):
            def __init__(self, c, gated=False):
                super().__init__()

                def conv(dim):
                    return nn.Conv2d(dim, dim, 3, padding=1)

                if gated:
                    conv = gate  # another layer under the same name: unknown, quiet
                self.body = nn.Sequential(conv(c), nn.LeakyReLU(0.2), nn.Conv2d(c, c, 1))

            def forward(self, x):
                return self.body(x)
    ''',
    # torchgan's form: one layer bound to a local (the default of a layer parameter), placed in Sequentials
    "locals": '''
        import torch.nn as nn


        class DCGANDiscriminator(nn.Module):
            def __init__(self, nonlinearity=None, last_nonlinearity=None, batchnorm=True):
                super().__init__()
                nl = nn.LeakyReLU(0.2) if nonlinearity is None else nonlinearity  # expect: TML201 fix=unsafe
                last_nl = (
                    last_nonlinearity if last_nonlinearity is not None else nn.LeakyReLU(0.2)  # expect: TML201 fix=unsafe
                )
                model = [nn.Sequential(nn.Conv2d(3, 64, 4, 2, 1), nl)]
                if batchnorm:
                    for _ in range(2):
                        model.append(nn.Sequential(nn.Conv2d(64, 64, 4, 2, 1), nn.BatchNorm2d(64), nl))
                else:
                    for _ in range(2):
                        model.append(nn.Sequential(nn.Conv2d(64, 64, 4, 2, 1), nl))
                model.append(nn.Sequential(nn.Conv2d(64, 64, 4, 2, 1), last_nl))
                self.model = nn.Sequential(*model)

            def forward(self, x):
                return self.model(x)


        class Critic(nn.Module):
            def __init__(self, norm=None, nonlinearity=None):
                super().__init__()
                nl = nonlinearity or nn.LeakyReLU(0.2)  # expect: TML201 fix=unsafe
                self.body = nn.Sequential(nn.Conv2d(3, 8, 4, 2, 1), nl, nn.Conv2d(8, 8, 4, 2, 1), nn.BatchNorm2d(8), nl)

            def forward(self, x):
                return self.body(x)


        class LookAlikes(nn.Module):
            def __init__(self, nonlinearity=None, act_layer=None, gate=None):
                super().__init__()
                first = nn.LeakyReLU(0.2) if nonlinearity is None else nonlinearity
                kept = nn.LeakyReLU(0.2) if act_layer is None else act_layer
                after_gate = nn.LeakyReLU(0.2) if gate is None else gate
                self.a = nn.Sequential(first, nn.Conv2d(8, 8, 3))  # first: what it runs on is the caller's
                self.b = nn.Sequential(nn.Conv2d(8, 8, 3), kept)
                self.act = kept  # also used on its own
                self.c = nn.Sequential(nn.Conv2d(8, 8, 3), nn.Sigmoid(), after_gate)  # a sigmoid keeps its output

            def forward(self, x):
                return self.act(self.c(self.b(self.a(x))))
    ''',
    # espnet's discriminators: built through `**params` copied from a default dict
    "dict_spread": '''
        import copy

        import torch
        import torch.nn as nn


        class PeriodDiscriminator(nn.Module):
            def __init__(self, period=2, channels=32, nonlinear_activation="LeakyReLU",
                         nonlinear_activation_params={"negative_slope": 0.1}):
                super().__init__()
                self.convs = nn.ModuleList()
                self.convs += [
                    nn.Sequential(
                        nn.Conv2d(1, channels, (5, 1), (3, 1), padding=(2, 0)),
                        getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),  # expect: TML201 fix=none
                    )
                ]

            def forward(self, x):
                outs = []
                for layer in self.convs:
                    x = layer(x)
                    outs += [x]
                return outs


        class MultiPeriodDiscriminator(nn.Module):
            def __init__(self, periods=(2, 3), discriminator_params={
                "channels": 32,
                "nonlinear_activation": "LeakyReLU",
                "nonlinear_activation_params": {"negative_slope": 0.1},
            }):
                super().__init__()
                self.discriminators = nn.ModuleList()
                for period in periods:
                    params = copy.deepcopy(discriminator_params)
                    params["period"] = period
                    self.discriminators += [PeriodDiscriminator(**params)]


        class ScaleDiscriminator(nn.Module):
            def __init__(self, nonlinear_activation="LeakyReLU", nonlinear_activation_params={"negative_slope": 0.1}):
                super().__init__()
                self.layers = nn.ModuleList(
                    [nn.Sequential(nn.Conv1d(1, 16, 15, padding=7), getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params))]
                )

            def forward(self, x):
                for f in self.layers:
                    x = f(x)
                return x


        class MultiScale(nn.Module):
            def __init__(self, params={"nonlinear_activation": "Tanh"}, extra=None):
                super().__init__()
                copied = dict(params)
                self.a = ScaleDiscriminator(**copied)  # names another activation: quiet
                updated = params.copy()
                updated.update(extra or {})
                self.b = ScaleDiscriminator(**updated)  # anything: quiet
    ''',
    # MelGAN's generator: a residual stack whose loop over its (never empty) module lists
    # rebinds x to an addition, so its forward never returns its input
    "looped_forward": '''
        import torch.nn as nn


        class ResStack(nn.Module):
            def __init__(self, channel):
                super().__init__()
                self.blocks = nn.ModuleList([
                    nn.Sequential(nn.LeakyReLU(0.2), nn.Conv1d(channel, channel, 3, padding=1))
                    for i in range(3)
                ])
                self.shortcuts = nn.ModuleList([nn.Conv1d(channel, channel, 1) for i in range(3)])

            def forward(self, x):
                for block, shortcut in zip(self.blocks, self.shortcuts):
                    x = shortcut(x) + block(x)
                return x


        class MaybeEmpty(nn.Module):
            def __init__(self, channel, depth):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(channel, channel, 1) for i in range(depth)])

            def forward(self, x):
                for block in self.blocks:
                    x = x + block(x)
                return x


        class Written(nn.Module):
            def __init__(self, channel):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv1d(channel, channel, 1), nn.Conv1d(channel, channel, 1)])

            def forward(self, x):
                for block in self.blocks:
                    x = x + block(x)
                return x


        class Generator(nn.Module):
            def __init__(self, mel_channel, depth):
                super().__init__()
                self.generator = nn.Sequential(
                    nn.Conv1d(mel_channel, 64, 7),
                    ResStack(64),
                    nn.LeakyReLU(0.2),  # expect: TML201 fix=safe
                    nn.Conv1d(64, 64, 3),
                    Written(64),
                    nn.LeakyReLU(0.2),  # expect: TML201 fix=safe
                    nn.Conv1d(64, 64, 3),
                )
                self.head = nn.Sequential(
                    nn.Tanh(),
                    MaybeEmpty(64, depth),
                    nn.LeakyReLU(0.2),  # (may run on the tanh's output, which it keeps for backward)
                    nn.Conv1d(64, 1, 7),
                )

            def forward(self, mel):
                return self.head(self.generator(mel))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_containers"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_fixes(findings):
    """A literal LeakyReLU gets a safe ``inplace=True``; a layer built with ``**params`` has no
    place to put it: a finding without a fix."""
    checked = 0
    for name, source in CASES.items():
        for row, expected in marked_fixes(source).items():
            checked += 1
            assert fix_at(findings[name], row) == expected, (name, row)
    assert checked == 18


PROJECT = {
    "nnet/CNN.py": '''
        import torch.nn as nn


        class Conv1d(nn.Module):
            def __init__(self, cin, cout, k, skip_transpose=False):
                super().__init__()
                self.skip_transpose = skip_transpose
                self.conv = nn.Conv1d(cin, cout, k, padding=k // 2)

            def forward(self, x):
                if not self.skip_transpose:
                    x = x.transpose(1, -1)
                wx = self.conv(x)
                if not self.skip_transpose:
                    return wx.transpose(1, -1)
                return wx


        class Gate(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 1)

            def forward(self, x):
                if self.training:
                    return self.conv(x)
                return self.conv(x).sigmoid()
    ''',
    "models/hifigan.py": '''
        import torch.nn as nn
        import torch.nn.functional as F

        from sbpkg.nnet.CNN import Conv1d, Gate


        class ResBlock(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.convs1 = nn.ModuleList([Conv1d(c, c, 3, skip_transpose=True) for _ in range(3)])
                self.gates = nn.ModuleList([Gate(c) for _ in range(3)])
                self.conv_pre = Conv1d(c, c, 7)

            def forward(self, x):
                x = F.leaky_relu(self.conv_pre(x), 0.1)  # expect: TML201
                for c1, g in zip(self.convs1, self.gates):
                    xt = F.leaky_relu(x, 0.1)  # x is read again by the residual
                    xt = c1(xt)
                    xt = F.leaky_relu(xt, 0.1)  # expect: TML201
                    xt = F.leaky_relu(g(xt), 0.1)  # Gate may return a sigmoid's output: quiet
                    x = xt + x
                return x
    ''',
}


def test_module_class_imported_by_absolute_name(tmp_path):
    """``from sbpkg.nnet.CNN import Conv1d`` inside the package ``sbpkg`` is the project's class:
    its ``forward`` (two returns, a transpose of the convolution's output) is read there."""
    package = tmp_path / "sbpkg"
    for name, source in PROJECT.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    for folder in (package, package / "nnet", package / "models"):
        (folder / "__init__.py").write_text("", encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", str(package / "models" / "hifigan.py"), "--isolated",
         "--no-cache", "--exit-zero", "--select", "TML201", "--output-format", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = {(f["location"]["row"], f["code"]) for f in json.loads(result.stdout)}
    lines = textwrap.dedent(PROJECT["models/hifigan.py"]).splitlines()
    expected = {(row, m.group(1)) for row, line in enumerate(lines, start=1) for m in [MARKER.search(line)] if m}
    assert rows == expected
