"""TML201: a layer built in one arm and, in the other, a module class of the project whose
``forward`` only returns its input (Deeplodocus's ``EmptyLayer`` in ``app/layers/empty.py``,
``self.norm_layer = nn.BatchNorm2d(c)`` / ``else: self.norm_layer = EmptyLayer()``) is an
``nn.Identity`` by another name: the activation after it is judged on what either arm makes.
Look-alike: the other arm a class whose ``forward`` returns ``torch.sigmoid(x)``, whose backward
reads that output (an in-place activation on it would fail backward)."""

from __future__ import annotations

from marked_cases import project_findings, write_package

EMPTY = """import torch
import torch.nn as nn


class EmptyLayer(nn.Module):

    def __init__(self):
        super(EmptyLayer, self).__init__()

    def forward(self, x):
        \"\"\"Nothing: the input as it is.\"\"\"
        return x


class Gate(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)
"""

MODEL = """import torch.nn as nn

from ..layers.empty import EmptyLayer, Gate


class ConvLayer(nn.Module):
    def __init__(self, cin, cout, batch_norm=True, negative_slope=0.0):
        super().__init__()
        self.conv_layer = nn.Conv2d(cin, cout, 3)
        if batch_norm:
            self.norm_layer = nn.BatchNorm2d(cout)
        else:
            self.norm_layer = EmptyLayer()
        self.activation_layer = nn.LeakyReLU(negative_slope=0.1)

    def forward(self, x):
        x = self.conv_layer(x)
        x = self.norm_layer(x)
        return self.activation_layer(x)


class GatedLayer(nn.Module):
    def __init__(self, cin, cout, batch_norm=True):
        super().__init__()
        self.conv_layer = nn.Conv2d(cin, cout, 3)
        if batch_norm:
            self.norm_layer = nn.BatchNorm2d(cout)
        else:
            self.norm_layer = Gate()
        self.activation_layer = nn.LeakyReLU(negative_slope=0.1)

    def forward(self, x):
        x = self.conv_layer(x)
        x = self.norm_layer(x)
        return self.activation_layer(x)
"""


def test_identity_classes_of_the_project(tmp_path):
    write_package(tmp_path, {"app/layers/empty.py": EMPTY, "app/models/yolo.py": MODEL})
    assert project_findings(tmp_path, "TML201") == {("yolo.py", 14)}
