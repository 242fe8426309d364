"""TML201 on a class whose activation is a parameter's default (``activation=F.elu``), in a file
that also calls another module's callable of the same name: ``layers.Conv(D_in, d_out, ks, st,
pd, bias=True)`` next to the file's own ``class Conv(nn.Module)`` (reported where ``self.activation = activation`` keeps it; measured miss on a held-out
set: a 3-D segmentation U-Net, whose output head built ``layers.Conv`` and so seemed to pass
``pd`` as the file's ``Conv``'s activation). Only a call by the bare name (``Conv(...)``)
constructs the file's class; ``layers.Conv(...)`` and ``nn.Linear(...)`` do not.

Quiet: the same file when one bare construction passes another activation, and when a bare
construction passes it through a name whose value the file does not show."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

LAYERS = '''
    import torch.nn as nn


    class Conv(nn.Module):
        def __init__(self, d_in, d_out, ks, st, pd, bias=True):
            super().__init__()
            self.conv = nn.Conv3d(d_in, d_out, ks, st, pd, bias=bias)

        def forward(self, x):
            return self.conv(x)


    class Linear(nn.Module):
        def __init__(self, d_in, d_out, scale=1.0):
            super().__init__()
            self.fc = nn.Linear(d_in, d_out)
            self.scale = scale

        def forward(self, x):
            return self.fc(x) * self.scale
'''


def network(construction: str, mark: str) -> str:
    return '''
    import torch.nn as nn
    import torch.nn.functional as F

    import layers


    class Conv(nn.Module):
        def __init__(self, d_in, d_out, ks, st=(1, 1, 1), activation=F.elu):
            super().__init__()
            self.activation = activationMARK
            self.conv = layers.Conv(d_in, d_out, ks, st, (1, 1, 1), bias=True)

        def forward(self, x):
            return self.activation(self.conv(x))


    class Linear(nn.Module):
        def __init__(self, d_in, d_out, act=F.leaky_relu):
            super().__init__()
            self.fc = nn.Linear(d_in, d_out)
            self.act = act  # expect: TML201

        def forward(self, x):
            return self.act(self.fc(x))


    class Head(nn.Module):
        def __init__(self, d_in, outputs, ks=(3, 3, 3), st=(1, 1, 1)):
            super().__init__()
            self.names = []
            for name, d_out in outputs.items():
                setattr(self, name, layers.Conv(d_in, d_out, ks, st, (1, 1, 1), bias=True))
                self.names.append(name)
            self.proj = layers.Linear(d_in, d_in, 0.5)

        def forward(self, x):
            return [getattr(self, name)(x) for name in self.names]


    class Net(nn.Module):
        def __init__(self, d_in=1, width=16):
            super().__init__()
            self.embed = CONSTRUCTION
            self.classify = Linear(width, width)
            self.head = Head(width, {"mask": 1})

        def forward(self, x):
            return self.head(self.embed(x))
    '''.replace("CONSTRUCTION", construction).replace("MARK", mark)


CASES: Dict[str, str] = {
    "layers": LAYERS,
    "own_class_beside_same_named_calls": network("Conv(d_in, width, (3, 3, 3))", "  # expect: TML201"),
    # look-alikes: a construction of the file's class that chooses the activation
    "own_class_given_another_activation": network("Conv(d_in, width, (3, 3, 3), (1, 1, 1), F.relu)", ""),
    "own_class_given_an_unknown_activation": network("Conv(d_in, width, (3, 3, 3), activation=pick(d_in))", ""),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("same_named_calls"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
