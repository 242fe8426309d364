"""TML201 for a layer class handed to a builder method through a parameter without a default
(cytosummarynet's ``self._build_layers(..., activation=activation)``, ``activation`` defaulting
to ``nn.LeakyReLU`` in ``__init__``; ``_build_layers`` appends ``activation()`` after each
``nn.Linear``): the parameter holds what every call of the method in the file passes
(``factories.Factories._parameter``), followed as a defaulted parameter is.

Look-alikes stay quiet: a call passing something not known (a parameter of a function nobody
calls, a config lookup), calls passing layers the rule does not cover (``nn.GELU``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "passed_from_init_default": '''
        import torch.nn as nn


        class Summary(nn.Module):
            def __init__(self, input_dim, output_dim, num_layers=2, activation: nn.Module = nn.LeakyReLU):
                super().__init__()
                self.cells = self._build_layers(input_dim, output_dim, num_layers, activation=activation)
                self.proj = self._build_layers(output_dim, output_dim, 3, activation)

            def _build_layers(self, input_dim, output_dim, num_layers, activation):
                layers = []
                for i in range(num_layers - 1):
                    layers.append(nn.Linear(input_dim if i == 0 else 256, 256))
                    layers.append(activation())  # expect: TML201
                layers.append(nn.Linear(256, output_dim))
                return nn.Sequential(*layers)

            def forward(self, x):
                return self.proj(self.cells(x).mean(1))
    ''',
    "passed_gelu": '''
        import torch.nn as nn


        class Summary(nn.Module):
            def __init__(self, input_dim, output_dim):
                super().__init__()
                self.cells = self._build_layers(input_dim, output_dim, nn.GELU)

            def _build_layers(self, input_dim, output_dim, activation):
                return nn.Sequential(nn.Linear(input_dim, 256), activation(), nn.Linear(256, output_dim))

            def forward(self, x):
                return self.cells(x)
    ''',
    "passed_unknown": '''
        import torch.nn as nn

        ACTS = {}


        class Summary(nn.Module):
            def __init__(self, input_dim, output_dim, name):
                super().__init__()
                self.cells = self._build_layers(input_dim, output_dim, ACTS[name])

            def _build_layers(self, input_dim, output_dim, activation):
                return nn.Sequential(nn.Linear(input_dim, 256), activation(), nn.Linear(256, output_dim))

            def forward(self, x):
                return self.cells(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_required_factory"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
