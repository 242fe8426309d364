"""TML501 where the model runs inside a helper of the file that receives it (purediffusion's
``self.ddpm_step(model, x, t)`` after ``model.eval()``, guided diffusion's ``p_sample(model, x,
t)`` in a sampling loop): the helper's own call is left to its callers (a borrowed model), so
the caller's call of the helper is the model's run, judged there and reported at that call
(``module_calls.helper_run_model``).

Look-alikes stay quiet: a helper that trains (backward inside), a helper decorated with
``torch.no_grad()``, a helper whose own call of the model is under ``no_grad``, a caller under
``no_grad``, a caller that backpropagates what the helper returns, an argument that is not a
model (a tensor the helper only indexes).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

DENOISER = '''
        import torch
        import torch.nn as nn


        class Denoiser(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 8)

            def forward(self, x, t):
                return self.net(x) * t
'''

CASES: Dict[str, str] = {
    "method_helper_after_eval": DENOISER + '''

        class Pipeline:
            def __init__(self, steps):
                self.steps = steps

            def step(self, model, x, t):
                noise = model(x, timesteps=t).detach()
                return x - 0.1 * noise

            def reverse(self, model, x):
                model.eval()
                for t in reversed(range(self.steps)):
                    x = self.step(model, x, t)  # expect: TML501
                return x
    ''',
    "function_helper_in_sampling_loop": DENOISER + '''

        def p_sample(model, x, t):
            eps = model(x, t)
            return x - eps


        def sample_loop(model, shape, steps=10):
            model.eval()
            x = torch.randn(shape)
            for t in range(steps):
                x = p_sample(model, x, t)  # expect: TML501
            return x.cpu().numpy()
    ''',
    "helper_trains": DENOISER + '''

        def train_step(model, optimizer, x, t):
            loss = model(x, t).pow(2).mean()
            loss.backward()
            optimizer.step()
            return loss.item()


        def fit(model, optimizer, loader):
            model.eval()
            for x, t in loader:
                train_step(model, optimizer, x, t)
    ''',
    "helper_without_grad": DENOISER + '''

        @torch.no_grad()
        def p_sample(model, x, t):
            return x - model(x, t)


        def q_sample(model, x, t):
            with torch.no_grad():
                eps = model(x, t)
            return x - eps


        def sample_loop(model, shape, steps=10):
            model.eval()
            x = torch.randn(shape)
            for t in range(steps):
                x = p_sample(model, x, t)
                x = q_sample(model, x, t)
            return x
    ''',
    "caller_without_grad": DENOISER + '''

        def p_sample(model, x, t):
            return x - model(x, t)


        @torch.no_grad()
        def sample_loop(model, shape, steps=10):
            model.eval()
            x = torch.randn(shape)
            for t in range(steps):
                x = p_sample(model, x, t)
            return x
    ''',
    "caller_backpropagates": DENOISER + '''

        def denoise(model, x, t):
            return x - model(x, t)


        def unrolled_loss(model, x, target, steps=4):
            for t in range(steps):
                x = denoise(model, x, t)
            loss = (x - target).pow(2).mean()
            loss.backward()
            return loss.item()
    ''',
    "argument_not_a_model": DENOISER + '''

        def pick(table, x, t):
            return table(x, t)


        def lookup(table, x, steps=4):
            out = []
            for t in range(steps):
                out.append(pick(table, x, t).item())
            return out
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_helper_runs"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
