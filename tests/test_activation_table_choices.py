"""TML201 through layer classes chosen from a table by a string key (``Factories._chosen`` over
``ChosenFunctions.leaves``), in the forms packages write (pyroved's nets): a helper that looks
the name up in a dict of its own (``def get_activation(name): ... return activations[name]``),
also when it returns None for None first; a parameter rebound from itself (``activation =
get_activation(activation)``); the helper in another file of the package, re-exported by its
``__init__``; a convolution chosen by dimension (``{1: nn.Conv1d, 2: nn.Conv2d}[dim]``); a list
of layers read by a loop while it is built (``for l in all_layers[::-1]: ... break``); a
Sequential element written ``nn.BatchNorm2d(c) if i else nn.Identity()`` (either arm; the
Identity returns its input, neuralsat's PatchGAN discriminator).
Look-alikes stay quiet: a key that chooses Tanh, a key no one knows over activations of
different kinds, a parameter rebound to something not read from itself, a loop over the
list that also changes it, and an activation after ``nn.Sigmoid() if gate else nn.Identity()``
(the Sigmoid keeps its output)."""

from __future__ import annotations

from marked_cases import lint_cases, marked, project_findings, write_package

HELPER = '''
import torch.nn as nn


def get_activation(activation):
    if activation is None:
        return
    activations = {"lrelu": nn.LeakyReLU, "tanh": nn.Tanh, "relu": nn.ReLU, "gelu": nn.GELU}
    return activations[activation]


def get_conv(dim):
    conv_dict = {1: nn.Conv1d, 2: nn.Conv2d, 3: nn.Conv3d}
    return conv_dict[dim]
'''

CASES = {
    "rebound_parameter": HELPER + '''

class FeatureExtractor(nn.Module):
    def __init__(self, ndim, input_channels=1, conv_filters=None, activation: str = "lrelu"):
        super().__init__()
        if conv_filters is None:
            conv_filters = [(32,), (64, 64)]
        activation = get_activation(activation)
        all_layers = []
        j = 0
        for i, cblock in enumerate(conv_filters):
            for ch in cblock:
                if i == j == 0:
                    ch_in = input_channels
                else:
                    for layer in all_layers[::-1]:
                        if hasattr(layer, "out_channels"):
                            ch_in = layer.out_channels
                            break
                all_layers.append(get_conv(ndim)(ch_in, ch, 3, 1, 1))
                if activation is not None:
                    all_layers.append(activation())  # expect: TML201
                j += 1
        self.layers = nn.Sequential(*all_layers)

    def forward(self, x):
        return self.layers(x)
''',
    "local_from_helper": HELPER + '''

class Head(nn.Module):
    def __init__(self, d, activation="lrelu"):
        super().__init__()
        act = get_activation(activation)
        self.layers = nn.Sequential(nn.Linear(d, d), act(), nn.Linear(d, 1))  # expect: TML201

    def forward(self, x):
        return self.layers(x)
''',
    "tanh_chosen": HELPER + '''

class Head(nn.Module):
    def __init__(self, d, activation="tanh"):
        super().__init__()
        activation = get_activation(activation)
        self.layers = nn.Sequential(nn.Linear(d, d), activation(), nn.Linear(d, 1))

    def forward(self, x):
        return self.layers(x)
''',
    "unknown_key": HELPER + '''

class Head(nn.Module):
    def __init__(self, d, activation):
        super().__init__()
        act = get_activation(activation)
        self.layers = nn.Sequential(nn.Linear(d, d), act(), nn.Linear(d, 1))

    def forward(self, x):
        return self.layers(x)
''',
    "rebound_elsewhere": HELPER + '''

class Head(nn.Module):
    def __init__(self, d, activation=nn.LeakyReLU):
        super().__init__()
        activation = nn.Tanh
        self.layers = nn.Sequential(nn.Linear(d, d), activation(), nn.Linear(d, 1))

    def forward(self, x):
        return self.layers(x)
''',
    "either_arm_elements": '''
import torch.nn as nn


class PatchDiscriminator(nn.Module):
    def __init__(self, im_channels=3, conv_channels=(64, 128, 256)):
        super().__init__()
        activation = nn.LeakyReLU(0.2)  # expect: TML201
        dims = [im_channels, *conv_channels, 1]
        self.layers = nn.ModuleList([
            nn.Sequential(
                nn.Conv2d(dims[i], dims[i + 1], kernel_size=4, stride=2, padding=1),
                nn.BatchNorm2d(dims[i + 1]) if i != len(dims) - 2 and i != 0 else nn.Identity(),
                activation if i != len(dims) - 2 else nn.Identity(),
            )
            for i in range(len(dims) - 1)
        ])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class GatedStack(nn.Module):
    def __init__(self, d, gate=True):
        super().__init__()
        self.body = nn.Sequential(
            nn.Linear(d, d),
            nn.Sigmoid() if gate else nn.Identity(),
            nn.LeakyReLU(0.2),
            nn.Linear(d, d),
        )

    def forward(self, x):
        return self.body(x)
''',
    "loop_changes_list": HELPER + '''

class Stack(nn.Module):
    def __init__(self, d, activation="lrelu"):
        super().__init__()
        activation = get_activation(activation)
        layers = [nn.Linear(d, d), activation()]
        for layer in layers[::-1]:
            if isinstance(layer, nn.Linear):
                layers.insert(0, nn.Identity())
                break
        self.layers = nn.Sequential(*layers)

    def forward(self, x):
        return self.layers(x)
''',
}


def test_layers_chosen_from_a_table_by_a_string_key(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML201")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), name


def test_the_table_in_another_file_of_the_package(tmp_path):
    """pyroved: ``from ..utils import get_activation, get_conv``, the utils package's
    ``__init__`` re-exporting them from ``utils/nn.py``."""
    write_package(tmp_path, {
        "pkg/utils/nn.py": HELPER,
        "pkg/utils/__init__.py": "from .nn import (get_activation, get_conv)\n",
        "pkg/nets/conv.py": '''
            import torch.nn as nn

            from ..utils import get_activation, get_conv


            class Upsampler(nn.Sequential):
                def __init__(self, ndim, input_channels=128, conv_filters=None, activation: str = "lrelu"):
                    super().__init__()
                    conv_filters = conv_filters or [(128, 128), (64,)]
                    activation = get_activation(activation)
                    all_layers = []
                    ch_in = input_channels
                    for cblock in conv_filters:
                        for ch in cblock:
                            all_layers.append(get_conv(ndim)(ch_in, ch, 3, 1, 1))
                            if activation is not None:
                                all_layers.append(activation())
                            ch_in = ch
                    self.layers = nn.Sequential(*all_layers)

                def forward(self, x):
                    return self.layers(x)
        ''',
    })
    assert project_findings(tmp_path, "TML201") == {("conv.py", 18)}
