"""TML201 looks through a view module before the activation in a layer order: ``Linear,
Unflatten, LeakyReLU`` (a deep image prior's input network, ``FNN_in``), ``Linear, Flatten,
ELU``. ``nn.Unflatten`` returns a view of its input and ``nn.Flatten`` a view or a copy, so in
place the activation writes the Linear's output, which nothing keeps for backward and nothing
else in the Sequential reads (outputs and gradients equal, measured below).

Look-alikes stay quiet: a view after a ReLU (which keeps its output), a view first in the
Sequential (what it is given is not known there), a view after a layer whose output is not
known (a project module whose forward nobody can read).
"""

from __future__ import annotations

from typing import Dict

import pytest
import torch

from marked_cases import lint_cases, marked

CASES: Dict[str, str] = {
    "views_after_fresh_layers": '''
        import torch.nn as nn

        class Prior(nn.Module):
            def __init__(self, latent, channels):
                super().__init__()
                self.fnn_in = nn.Sequential(
                    nn.Linear(latent, channels * 16),
                    nn.Unflatten(1, (channels, 4, 4)),
                    nn.LeakyReLU(0.1),  # expect: TML201
                )
                self.head = nn.Sequential(
                    nn.Conv2d(channels, channels, 3),
                    nn.Flatten(),
                    nn.ELU(),  # expect: TML201
                    nn.Linear(channels * 4, 10),
                )

            def forward(self, z):
                return self.head(self.fnn_in(z))
    ''',
    "look_alikes": '''
        import torch.nn as nn
        from .blocks import Mystery

        class Prior(nn.Module):
            def __init__(self, latent, channels):
                super().__init__()
                self.after_relu = nn.Sequential(nn.Linear(latent, channels * 16), nn.ReLU(), nn.Unflatten(1, (channels, 4, 4)), nn.LeakyReLU(0.1))
                self.first = nn.Sequential(nn.Flatten(), nn.ELU(), nn.Linear(channels * 16, 10))
                self.unknown = nn.Sequential(Mystery(), nn.Flatten(), nn.ELU(), nn.Linear(channels * 16, 10))

            def forward(self, z):
                return self.first(self.after_relu(z)) + self.unknown(z)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("after_views"), CASES, "TML201")


@pytest.mark.slow  # starts the CLI
@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.parametrize("view", [lambda: torch.nn.Unflatten(1, (16, 2, 2)), lambda: torch.nn.Flatten()])
def test_in_place_after_a_view_gives_the_same_outputs_and_gradients(view):
    def run(inplace: bool):
        torch.manual_seed(0)
        layers = [torch.nn.Linear(8, 64), view(), torch.nn.LeakyReLU(0.1, inplace=inplace)]
        model = torch.nn.Sequential(*layers)
        x = torch.randn(3, 8)
        out = model(x)
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    out, grads = run(False)
    out_inplace, grads_inplace = run(True)
    assert torch.equal(out, out_inplace)
    assert all(torch.equal(a, b) for a, b in zip(grads, grads_inplace))
