"""TML201 and TML203 when an arm of the ``if`` that builds a layer list raises or returns
(``else: raise ValueError("Unknown upsampling mode!")``): no order of the list goes on along
that arm (``layer_lists``: ``_ENDED``). Measured on a held-out set: pytorch3d's ``UpBlock`` was
reported by TML203 as if its in-place ReLU could come first in its Sequential (only the raising
arm leaves the list empty there), and the same form hid an out-of-place LeakyReLU after the conv
of every arm that does not raise.

Look-alike: an arm that really leaves the list empty (it prints, and goes on) keeps the in-place
activation first: reported by TML203."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "quiet_inplace_relu_after_every_arm_that_goes_on": '''
        from torch import nn


        class UpBlock(nn.Module):
            def __init__(self, cin, cout, mode="transpose"):
                super().__init__()
                net = list()
                if mode == "transpose":
                    net += [nn.ConvTranspose2d(cin, cout, 4, 2, 1)]
                elif mode == "nearest":
                    net += [nn.UpsamplingNearest2d(scale_factor=2), nn.Conv2d(cin, cout, 3, padding=1)]
                else:
                    raise ValueError("Unknown upsampling mode!")
                net += [nn.ReLU(True)]
                self.net = nn.Sequential(*net)

            def forward(self, x):
                return self.net(x)
    ''',
    "leaky_after_every_arm_that_goes_on": '''
        from torch import nn


        class Down(nn.Module):
            def __init__(self, cin, cout, kind="conv"):
                super().__init__()
                layers = []
                if kind == "conv":
                    layers.append(nn.Conv2d(cin, cout, 3))
                elif kind == "sep":
                    layers.append(nn.Conv2d(cin, cout, 1))
                else:
                    raise NotImplementedError(kind)
                layers.append(nn.LeakyReLU(0.2))  # expect: TML201
                layers.append(nn.Conv2d(cout, cout, 3))
                self.body = nn.Sequential(*layers)

            def forward(self, x):
                return self.body(x)
    ''',
    "an_empty_arm_keeps_the_activation_first": '''
        from torch import nn


        class Maybe(nn.Module):
            def __init__(self, c, pre=True):
                super().__init__()
                net = []
                if pre:
                    net.append(nn.Conv2d(c, c, 3))
                else:
                    print("no conv")
                net.append(nn.ReLU(inplace=True))
                self.net = nn.Sequential(*net)

            def forward(self, x):
                return self.net(x)  # expect: TML203
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("raising_arms"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
