"""TML201 for a layer kept on ``self`` and placed by name in a list that a Sequential splices
(hvae-backbone's ``ops = [Upsample, Conv2d, BatchNorm2d, self.activation]`` then
``nn.Sequential(*ops)``, ``self.activation`` the ``nn.LeakyReLU`` its constructor builds when no
activation is given; also ``ops.append(self.activation)``): it runs on what precedes it in the
list, as when written into the Sequential's call.

Look-alikes stay quiet: the list also read another way (a ``ModuleList`` of it, returned: the
layer may run elsewhere), the layer first in the list (it runs on the Sequential's input), the
layer also called on ``forward``'s own argument.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "list_literal_default_arm": '''
        import torch.nn as nn


        class UnPool(nn.Module):
            def __init__(self, in_filters, filters, activation=None):
                super().__init__()
                self.activation = activation if activation is not None else nn.LeakyReLU(negative_slope=0.1)  # expect: TML201 fix=safe
                ops = [nn.UpsamplingNearest2d(scale_factor=2), nn.Conv2d(in_filters, filters, 1), nn.BatchNorm2d(filters), self.activation]
                self.ops = nn.Sequential(*ops)

            def forward(self, x):
                return self.ops(x)
    ''',
    "appended": '''
        import torch.nn as nn


        class Pool(nn.Module):
            def __init__(self, in_filters, filters):
                super().__init__()
                self.act = nn.ELU()  # expect: TML201 fix=unsafe
                ops = [nn.Conv2d(in_filters, filters, 3, stride=2)]
                ops.append(nn.BatchNorm2d(filters))
                ops.append(self.act)
                self.body = nn.Sequential(*ops)

            def forward(self, x):
                return self.body(x)
    ''',
    "list_read_another_way": '''
        import torch.nn as nn


        class Pool(nn.Module):
            def __init__(self, in_filters, filters):
                super().__init__()
                self.act = nn.ELU()
                ops = [nn.Conv2d(in_filters, filters, 3), nn.BatchNorm2d(filters), self.act]
                self.body = nn.Sequential(*ops)
                self.parts = nn.ModuleList(ops)

            def forward(self, x):
                return self.body(x) + self.parts[2](x)
    ''',
    "first_in_the_list": '''
        import torch.nn as nn


        class Head(nn.Module):
            def __init__(self, filters):
                super().__init__()
                self.act = nn.LeakyReLU(0.2)
                ops = [self.act, nn.Conv2d(filters, filters, 3)]
                self.body = nn.Sequential(*ops)

            def forward(self, x):
                return self.body(x)
    ''',
    "also_called_on_the_input": '''
        import torch.nn as nn


        class Block(nn.Module):
            def __init__(self, filters):
                super().__init__()
                self.act = nn.LeakyReLU(0.2)
                ops = [nn.Conv2d(filters, filters, 3, padding=1), nn.BatchNorm2d(filters), self.act]
                self.body = nn.Sequential(*ops)

            def forward(self, x):
                return self.body(self.act(x))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_spliced_attribute"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_as_marked(findings, name):
    for row, applicability in marked_fixes(CASES[name]).items():
        assert findings[name][(row, "TML201")] == applicability
