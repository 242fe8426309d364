"""TML201 on ``torch.selu(x)``, ``torch.celu(x, alpha)`` and ``torch.rrelu(x)``: the ``torch``
functions of activations that keep their input, with no ``inplace`` parameter (mars-gym's
``out = torch.selu(layer(out))``, bayesianflow's MLP). Their in-place forms are
``torch.selu_`` and so on, what ``F.selu(x, inplace=True)`` itself calls: the fix adds the
underscore (unsafe, as for ``F.selu``: in place, SELU's gradient is rebuilt from its result,
equal only to rounding; safe for ``torch.rrelu`` with non-negative bounds, as for ``F.rrelu``; no fix for ``from torch import selu``, whose in-place name
may not be imported).

Quiet: a result read only by an addition or a ``.sum()`` (it keeps nothing either way), an input
another layer also reads, the in-place forms themselves, and look-alikes: ``torch.sigmoid``, a
method ``x.selu()`` of a tensor, a function of the file named ``selu``."""

from __future__ import annotations

from pathlib import Path
import subprocess
import sys
import textwrap

import pytest
import torch

from marked_cases import lint_cases, marked

CASES = {
    "loop_of_linears": '''
        import torch
        import torch.nn as nn


        class PolicyEstimator(nn.Module):
            def __init__(self, sizes):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])])
                self.output = nn.Linear(sizes[-1], 2)

            def forward(self, x):
                out = x
                for layer in self.layers:
                    out = torch.selu(layer(out))  # expect: TML201 fix=unsafe
                return torch.log_softmax(self.output(out), dim=-1)
    ''',
    "alpha_and_rrelu": '''
        import torch
        import torch.nn as nn
        from torch import celu


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Conv2d(3, 8, 3)
                self.b = nn.Conv2d(8, 8, 3)
                self.c = nn.Conv2d(8, 8, 3)
                self.d = nn.Linear(8, 2)

            def forward(self, x):
                x = torch.celu(self.a(x), 0.5)  # expect: TML201 fix=unsafe
                x = torch.rrelu(self.b(x), 0.1, 0.3, self.training)  # expect: TML201 fix=safe
                x = celu(self.c(x))  # expect: TML201 fix=none
                return self.d(x.flatten(1))
    ''',
    "look_alikes": '''
        import torch
        import torch.nn as nn


        def selu(x):
            return x * 2


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(4, 4)
                self.b = nn.Linear(4, 4)
                self.c = nn.Linear(4, 4)

            def forward(self, x):
                h = self.a(x)
                shared = torch.selu(h) + h
                summed = torch.selu(self.b(shared)).sum()
                already = torch.selu_(self.c(shared))
                other = torch.sigmoid(self.c(already))
                method = self.c(other).selu()
                return selu(self.c(method)) + summed
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("torch_functions"), CASES, "TML201")


@pytest.mark.slow  # starts the CLI
@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


@pytest.mark.slow  # starts the CLI
def test_fix_kinds(findings):
    from marked_cases import marked_fixes

    for name, source in CASES.items():
        for row, expected in marked_fixes(source).items():
            assert findings[name][(row, "TML201")] == expected, (name, row)


@pytest.mark.slow  # starts the CLI
def test_the_fixed_model_gives_the_same_outputs_and_gradients(tmp_path: Path):
    source = textwrap.dedent(CASES["loop_of_linears"])
    (tmp_path / "model.py").write_text(source, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "model.py", "--select", "TML201", "--fix", "--unsafe-fixes",
         "--no-cache", "--isolated", "--exit-zero"],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    fixed = (tmp_path / "model.py").read_text(encoding="utf-8")
    assert "torch.selu_(layer(out))" in fixed and fixed.count("torch.selu(") == 0

    def run(text: str):
        namespace: dict = {}
        exec(compile(text, "model.py", "exec"), namespace)
        torch.manual_seed(0)
        model = namespace["PolicyEstimator"]([6, 16, 16, 8])
        x = torch.randn(5, 6)
        out = model(x)
        (out * torch.arange(out.numel()).reshape(out.shape)).sum().backward()
        return out.detach(), [p.grad.clone() for p in model.parameters()]

    out, grads = run(source)
    out_fixed, grads_fixed = run(fixed)
    assert torch.equal(out, out_fixed)
    # SELU's in-place backward rebuilds the gradient from the result: equal to rounding, not
    # bitwise (why the fix is unsafe, as for ``F.selu(x, inplace=True)``)
    assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-6) for a, b in zip(grads, grads_fixed))
