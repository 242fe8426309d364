"""TML201 after Encodec's normalised convolutions, as the audio codecs copy them
(``NormConv2d``: ``self.conv = apply_parametrization_norm(nn.Conv2d(*args, **kwargs), norm)``,
``self.norm = get_norm_module(self.conv, norm=norm)``, ``forward`` runs both): a builder that
returns its parameter, maybe wrapped (``return weight_norm(module)``, ``return module``), makes
what the call passes for it; one whose other return is ``nn.Identity()`` makes what that or its
input makes; a module class whose ``forward`` returns nothing (Encodec's ``ConvLayerNorm`` ends
in a bare ``return``) is a way no tensor comes, left out of the join; classes are followed four
deep (``SConv1d`` -> ``NormConv1d`` -> ``get_norm_module`` -> ``ConvLayerNorm``).

Look-alikes stay quiet: a builder whose other arm is a sigmoid (it keeps its output), a builder
returning its parameter inside a ``Sequential`` that ends in a sigmoid.
"""

from __future__ import annotations

from pathlib import Path

from marked_cases import project_findings

NORM = """import einops
from torch import nn


class ConvLayerNorm(nn.LayerNorm):
    def forward(self, x):
        x = einops.rearrange(x, 'b ... t -> b t ...')
        x = super().forward(x)
        x = einops.rearrange(x, 'b t ... -> b ... t')
        return
"""

CONV = """from torch import nn
from torch.nn.utils import spectral_norm, weight_norm

from .norm import ConvLayerNorm


def apply_parametrization_norm(module, norm='none'):
    if norm == 'weight_norm':
        return weight_norm(module)
    elif norm == 'spectral_norm':
        return spectral_norm(module)
    else:
        return module


def get_norm_module(module, causal=False, norm='none', **norm_kwargs):
    if norm == 'layer_norm':
        return ConvLayerNorm(module.out_channels, **norm_kwargs)
    elif norm == 'time_group_norm':
        return nn.GroupNorm(1, module.out_channels, **norm_kwargs)
    else:
        return nn.Identity()


def gated_norm_module(module, norm='none'):
    if norm == 'gate':
        return nn.Sigmoid()
    return nn.Identity()


class NormConv2d(nn.Module):
    def __init__(self, *args, norm='none', norm_kwargs={}, **kwargs):
        super().__init__()
        self.conv = apply_parametrization_norm(nn.Conv2d(*args, **kwargs), norm)
        self.norm = get_norm_module(self.conv, causal=False, norm=norm, **norm_kwargs)

    def forward(self, x):
        x = self.conv(x)
        x = self.norm(x)
        return x


class GatedConv2d(nn.Module):
    def __init__(self, *args, norm='none', **kwargs):
        super().__init__()
        self.conv = apply_parametrization_norm(nn.Conv2d(*args, **kwargs), norm)
        self.norm = gated_norm_module(self.conv, norm=norm)

    def forward(self, x):
        return self.norm(self.conv(x))


class SquashedConv2d(nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.conv = nn.Sequential(apply_parametrization_norm(nn.Conv2d(*args, **kwargs)), nn.Sigmoid())

    def forward(self, x):
        return self.conv(x)
"""

DISC = """import torch
from torch import nn

from .modules.conv import GatedConv2d, NormConv2d, SquashedConv2d


class DiscriminatorSTFT(nn.Module):
    def __init__(self, filters, activation='LeakyReLU', activation_params={'negative_slope': 0.2}):
        super().__init__()
        self.activation = getattr(torch.nn, activation)(**activation_params)  # expect
        self.convs = nn.ModuleList([NormConv2d(2, filters, (3, 9)), NormConv2d(filters, filters, (3, 9), norm='weight_norm')])
        self.conv_post = NormConv2d(filters, 1, (3, 3))

    def forward(self, z):
        fmap = []
        for layer in self.convs:
            z = layer(z)
            z = self.activation(z)
            fmap.append(z)
        return self.conv_post(z), fmap


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.gated = GatedConv2d(2, 2, 3)
        self.squashed = SquashedConv2d(2, 2, 3)
        self.act = nn.LeakyReLU(0.2)
        self.act2 = nn.LeakyReLU(0.2)
        self.out = nn.Conv2d(2, 2, 1)

    def forward(self, x):
        return self.out(self.act2(self.squashed(self.act(self.gated(x)))))
"""


def test_activations_after_encodec_convolutions(tmp_path):
    package = tmp_path / "codec"
    (package / "modules").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "modules" / "__init__.py").write_text("")
    (package / "modules" / "norm.py").write_text(NORM)
    (package / "modules" / "conv.py").write_text(CONV)
    (package / "msstftd.py").write_text(DISC)
    expected = {("msstftd.py", n) for n, line in enumerate(DISC.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 1
    assert project_findings(Path(tmp_path), "TML201") == expected
