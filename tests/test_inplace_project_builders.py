"""TML201 where the layer before the activation comes from a builder function of another file
of the project (``("bn", batch_norm_2d(c))`` with ``from pkg._defaults import batch_norm_2d``,
``def batch_norm_2d(c): return nn.BatchNorm2d(c, momentum=0.01)``): the builder's returns say
what it makes, as for one of the same file (``analysis/producers.py``). Also where the layers
are keyed into a local dict declared with an annotation (``layers: "OrderedDict[str,
nn.Module]" = OrderedDict()``; ``factories.assigned_values`` reads annotated assignments).

Look-alikes stay quiet: a builder of another file that returns an activation that saves its
output (``nn.Sigmoid``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Set, Tuple

from marked_cases import project_findings

DEFAULTS = """from torch import nn


def batch_norm_2d(channels):
    return nn.BatchNorm2d(channels, momentum=0.01, eps=1e-3)


def gate(channels):
    return nn.Sigmoid()
"""

LAYERS = """from collections import OrderedDict

from torch import nn

from pkg._defaults import batch_norm_2d, gate


def encoder_layer(width_in, width_out):
    return nn.Sequential(OrderedDict([
        ("conv", nn.Conv2d(width_in, width_out, 3)),
        ("bn", batch_norm_2d(width_out)),
        ("elu", nn.ELU()),  # expect
    ]))


def decoder_layer(width_in, width_out, last):
    layers: "OrderedDict[str, nn.Module]" = OrderedDict()
    layers["deconv"] = nn.ConvTranspose2d(width_in, width_out, 3)
    if not last:
        layers["bn"] = batch_norm_2d(width_out)
        layers["elu"] = nn.ELU()  # expect
    return nn.Sequential(layers)


def gated_layer(width):
    return nn.Sequential(nn.Conv2d(width, width, 3), gate(width), nn.ELU())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.ModuleList([encoder_layer(1, 8), encoder_layer(8, 8)])
        self.dec = nn.ModuleList([decoder_layer(8, 8, False), decoder_layer(8, 1, True)])
        self.gated = gated_layer(8)

    def forward(self, x):
        for layer in self.enc:
            x = layer(x)
        for layer in self.dec:
            x = layer(x)
        return self.gated(x)
"""


def _findings(root: Path) -> Set[Tuple[str, int]]:
    return project_findings(root, "TML201")


def _package(root: Path, files: Dict[str, str]) -> None:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / name).write_text(text)


def _expected(name: str, text: str) -> Set[Tuple[str, int]]:
    return {(name, n) for n, line in enumerate(text.splitlines(), 1) if line.endswith("# expect")}


def test_a_builder_of_another_file(tmp_path):
    _package(tmp_path, {"_defaults.py": DEFAULTS, "layers.py": LAYERS})
    expected = _expected("layers.py", LAYERS)
    assert len(expected) == 2
    assert _findings(tmp_path) == expected


# a project's own weight-norm helper, which returns the module it is given through torch's
# parametrization (style-bert-vits2's `utils/weight_norm.py`), chosen by a flag as HiFi-GAN's
# discriminators do: the list holds convolutions; a helper that builds another module does not
WEIGHT_NORM = """from torch import nn
from torch.nn.utils.parametrizations import weight_norm as parametrized_weight_norm


def weight_norm(module: nn.Module, name: str = "weight", dim: int = 0) -> nn.Module:
    return parametrized_weight_norm(module, name=name, dim=dim)


def gated(module: nn.Module) -> nn.Module:
    return nn.Sequential(module, nn.Sigmoid())
"""

DISCRIMINATOR = """import torch.nn.functional as F
from torch import nn
from torch.nn.utils import spectral_norm

from pkg.utils import gated, weight_norm


class DiscriminatorS(nn.Module):
    def __init__(self, use_spectral_norm=False):
        super().__init__()
        norm_f = weight_norm if use_spectral_norm is False else spectral_norm
        self.convs = nn.ModuleList([norm_f(nn.Conv1d(1, 16, 15, 1, padding=7)), norm_f(nn.Conv1d(16, 64, 41, 4, padding=20))])
        self.conv_post = norm_f(nn.Conv1d(64, 1, 3, 1, padding=1))

    def forward(self, x):
        fmap = []
        for layer in self.convs:
            x = layer(x)
            x = F.leaky_relu(x, 0.1)  # expect
            fmap.append(x)
        return self.conv_post(x), fmap


class Gated(nn.Module):
    def __init__(self, use_gate=True):
        super().__init__()
        norm_f = gated if use_gate else weight_norm
        self.convs = nn.ModuleList([norm_f(nn.Conv1d(1, 16, 15, 1, padding=7))])

    def forward(self, x):
        for layer in self.convs:
            x = F.leaky_relu(layer(x), 0.1)
        return x
"""


def test_a_weight_norm_helper_of_another_file(tmp_path):
    _package(tmp_path, {"utils.py": WEIGHT_NORM, "discriminator.py": DISCRIMINATOR})
    expected = _expected("discriminator.py", DISCRIMINATOR)
    assert len(expected) == 1
    assert _findings(tmp_path) == expected
