"""TML501 where the model runs inside a helper of the file that receives it (purediffusion's
``self.ddpm_step(model, x, t)`` after ``model.eval()``, guided diffusion's ``p_sample(model, x,
t)`` in a sampling loop): the helper's own call is left to its callers (a borrowed model), so
the caller's call of the helper is the model's run, judged there and reported at that call
(``model_helpers.helper_run_model``).

A method that runs a module of its own class and returns what it made (steganogan's
``_encode_decode``, called from a validation loop and from a sample writer) is such a helper too,
reported at its caller's call.

Look-alikes stay quiet: a helper that trains (backward inside), a helper decorated with
``torch.no_grad()``, a helper whose own call of the model is under ``no_grad``, a caller under
``no_grad``, a caller that backpropagates what the helper returns, an argument that is not a
model (a tensor the helper only indexes); for a method running its class's modules: one that
trains, one whose module call is under ``no_grad``, one that loops over the module itself, one
that returns nothing the module made or returns it detached (``.detach().cpu().numpy()``: the
helper's own call is judged, and reported, there), one that switches the module to evaluation
itself, and its call from a training loop; in a module class,
a method calling ``self.forward`` (its callers decide about autograd) unless the method switched
the part ``forward`` runs to evaluation first (``self.net.eval(); res = self.forward(x)``).
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


CODER = '''
        import torch
        import torch.nn as nn


        class Coder:
            def __init__(self, encoder, decoder):
                self.encoder = encoder
                self.decoder = decoder
                self.optimizer = torch.optim.Adam(
                    list(self.encoder.parameters()) + list(self.decoder.parameters()))

            def _encode_decode(self, cover, quantize=False):
                payload = torch.rand_like(cover)
                generated = self.encoder(cover, payload)
                if quantize:
                    generated = (255.0 * (generated + 1.0) / 2.0).long().float()
                decoded = self.decoder(generated)
                return generated, payload, decoded
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
    "own_module_in_validation": CODER + '''

            def _validate(self, loader, metrics):
                for cover, _ in loader:
                    generated, payload, decoded = self._encode_decode(cover, quantize=True)  # expect: TML501
                    metrics.append((decoded - payload).abs().mean().item())

            def write_samples(self, cover, path):
                generated, _, _ = self._encode_decode(cover)  # expect: TML501
                torch.save(generated.detach().cpu(), path)
    ''',
    "own_module_trained_or_quiet": CODER + '''

            def _fit(self, loader):
                for cover, _ in loader:
                    generated, payload, decoded = self._encode_decode(cover)
                    loss = (decoded - payload).pow(2).mean()
                    self.optimizer.zero_grad()
                    loss.backward()
                    self.optimizer.step()

            def _step(self, cover):
                generated = self.encoder(cover, cover)
                loss = generated.mean()
                loss.backward()
                return generated

            def _encode_quiet(self, cover):
                with torch.no_grad():
                    generated = self.encoder(cover, cover)
                return generated

            def _roll(self, cover, steps):
                for _ in range(steps):
                    cover = self.decoder(cover)
                return cover

            def _shape(self, cover):
                self.encoder(cover, cover)
                return cover.shape

            def _numbers(self, cover):
                return self.encoder(cover, cover).detach().cpu().numpy()  # expect: TML501

            def _evaluate(self, loader, metrics):
                for cover, _ in loader:
                    metrics.append(self._numbers(cover).mean())

            def _validate(self, loader, metrics):
                for cover, _ in loader:
                    metrics.append(self._step(cover).mean().item())
                    metrics.append(self._encode_quiet(cover).mean().item())
                    metrics.append(self._shape(cover))
                    metrics.append(self._roll(cover, 3).mean().item())
    ''',
    "module_class_methods": '''
        import torch
        import torch.nn as nn


        class Segmenter(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Conv2d(3, 1, 3)

            def forward(self, x):
                out = self.net(x)
                return out.sigmoid()

            def predict(self, x):
                return self.forward(x)

            def run(self, x):
                self.net.eval()
                res = self.forward(x)  # expect: TML501
                return res.detach().cpu().numpy()
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
