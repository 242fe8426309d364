"""TML201 on the forms vocoder, GAN and detection code writes its layers in: a convolution
reached through a module list (iterated, indexed, zipped, enumerated; the list a display, a
comprehension, filled by ``append``/``extend``), a layer wrapped by ``weight_norm`` /
``spectral_norm`` (``torch.nn.utils`` and its ``parametrizations``, also ``orthogonal``), an activation built by
name (``getattr(torch.nn, name)(**params)`` with string and dict defaults, ``ACTS[name](...)``)
and a functional alias (``act = F.leaky_relu``). Look-alikes stay quiet: a list that mixes
convolutions with other layers, an input also read by a residual, a wrapped Linear whose
output is read again, name-built layers whose default keeps its output (``"Tanh"``,
``"Sigmoid"``) or that a caller of the file changes, a negative slope in the default dict, an
alias that is a parameter or either of two functions.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``. A second run checks which findings carry a fix, and what it writes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Dict

import pytest

from marked_cases import MARKER, Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # HiFi-GAN / MelGAN-style stacks: the conv is an element of a module list
    "module_lists": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class Iterated(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv1d(ch, ch, 3, padding=1) for _ in range(3)])

            def forward(self, x):
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)  # expect: TML201 fix=safe
                return x


        class AppendedIndexed(nn.Module):
            def __init__(self, ch, n):
                super().__init__()
                convs = []
                for i in range(n):
                    conv = nn.Conv2d(ch, ch, 3, padding=1)
                    convs.append(conv)
                self.convs = nn.ModuleList(convs)
                self.act = nn.LeakyReLU(0.2)  # expect: TML201 (every call of it follows a conv)

            def forward(self, x):
                x = self.convs[0](x)
                x = F.leaky_relu(x, 0.2)  # expect: TML201
                for i in range(1, len(self.convs)):
                    x = self.act(self.convs[i](x))
                return x


        class Zipped(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.convs1 = nn.ModuleList([nn.Conv1d(ch, ch, 3, padding=1), nn.Conv1d(ch, ch, 5, padding=2)])
                self.convs2 = nn.ModuleList()
                self.convs2.append(nn.Conv1d(ch, ch, 3, padding=1))
                self.convs2.extend([nn.Conv1d(ch, ch, 3, padding=1)])

            def forward(self, x):
                for c1, c2 in zip(self.convs1, self.convs2):
                    xt = F.leaky_relu(x, 0.1)  # x is read again by the residual below
                    xt = c1(xt)
                    xt = F.leaky_relu(xt, 0.1)  # expect: TML201
                    xt = c2(xt)
                    x = xt + x
                return x


        class Enumerated(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.blocks = [nn.Conv2d(ch, ch, 1)] + [nn.Conv2d(ch, ch, 3, padding=1) for _ in range(2)]
                self.norms = nn.ModuleList([nn.BatchNorm2d(ch) for _ in range(3)])

            def forward(self, x):
                outs = []
                for i, block in enumerate(self.blocks):
                    x = F.elu(block(x))  # expect: TML201
                    outs.append(self.norms[i](x))
                return outs


        class Mixed(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.layers = nn.ModuleList([nn.Conv1d(ch, ch, 3), nn.Sigmoid()])

            def forward(self, x):
                for layer in self.layers:
                    x = F.leaky_relu(layer(x), 0.1)  # a sigmoid keeps its output: quiet
                return x


        class Residual(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.convs = nn.ModuleList([nn.Conv1d(ch, ch, 3, padding=1) for _ in range(2)])

            def forward(self, x):
                for conv in self.convs:
                    h = conv(x)
                    x = F.leaky_relu(h, 0.1) + h  # h is read again
                return x


        class Unknown(nn.Module):
            def __init__(self, ch, layers):
                super().__init__()
                self.convs = nn.ModuleList(layers)  # what the caller passes: not known

            def forward(self, x):
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)
                return x
    ''',
    # weight normalisation wraps the layer and returns it
    "wrapped": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.utils import spectral_norm, weight_norm
        from torch.nn.utils.parametrizations import weight_norm as param_weight_norm


        class Discriminator(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.conv1 = weight_norm(nn.Conv1d(1, ch, 15, padding=7))
                self.conv2 = spectral_norm(nn.Conv2d(ch, ch, 3))
                self.conv3 = nn.utils.weight_norm(nn.Conv1d(ch, ch, 41, groups=4))
                self.conv4 = torch.nn.utils.parametrizations.spectral_norm(nn.Conv1d(ch, ch, 5))
                self.convs = nn.ModuleList([param_weight_norm(nn.Conv1d(ch, ch, 5)) for _ in range(2)])
                self.act = nn.LeakyReLU(0.2)  # expect: TML201 (runs after conv2)
                self.fc = weight_norm(nn.Linear(ch, ch))

            def forward(self, x, y):
                x = F.leaky_relu(self.conv1(x), 0.2)  # expect: TML201
                y = self.act(self.conv2(y))
                x = F.leaky_relu(self.conv3(x), 0.2)  # expect: TML201
                x = F.leaky_relu(self.conv4(x), 0.2)  # expect: TML201
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.2)  # expect: TML201
                h = self.fc(x)
                return F.leaky_relu(h, 0.2) * h, y  # h is read again
    ''',
    # transject: a Linear given an orthogonal weight (``parametrizations.orthogonal`` returns
    # the module it is given); the look-alike reads the Linear's output again
    "orthogonal": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.nn.utils.parametrizations import orthogonal


        class OrthogonalFeedForward(nn.Module):
            def __init__(self, d_model):
                super().__init__()
                self.linear_1 = orthogonal(nn.Linear(d_model, d_model))
                self.linear_2 = torch.nn.utils.parametrizations.orthogonal(nn.Linear(d_model, d_model))

            def forward(self, x):
                h = self.linear_1(x)
                x = F.elu(h) + h
                return F.elu(self.linear_2(x))  # expect: TML201
    ''',
    # ParallelWaveGAN / MelGAN: the activation is named by a constructor argument
    "by_name": '''
        import torch
        import torch.nn as nn

        ACTS = {"lrelu": nn.LeakyReLU, "elu": nn.ELU, "tanh": nn.Tanh}


        class Stack(nn.Module):
            def __init__(self, ch, nonlinear_activation="LeakyReLU", nonlinear_activation_params={"negative_slope": 0.2}):
                super().__init__()
                self.layers = nn.Sequential(
                    nn.Conv1d(ch, ch, 3),
                    getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),  # expect: TML201 fix=none
                )
                self.conv = nn.Conv1d(ch, ch, 3)
                self.act = getattr(nn, nonlinear_activation)(**nonlinear_activation_params)  # expect: TML201 fix=none

            def forward(self, x):
                x = self.layers(x)
                return self.act(self.conv(x))


        class Literal(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.layers = nn.Sequential(nn.Conv2d(ch, ch, 3), getattr(nn, "ELU")())  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.layers(x)


        class FromDict(nn.Module):
            def __init__(self, ch, act="lrelu"):
                super().__init__()
                self.conv = nn.Conv2d(ch, ch, 3)
                self.act = ACTS[act](0.2)  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))


        class KeepsOutput(nn.Module):
            def __init__(self, ch, nonlinear_activation="Tanh", act="tanh", gate="Sigmoid"):
                super().__init__()
                self.conv = nn.Conv1d(ch, ch, 3)
                self.a = getattr(nn, nonlinear_activation)()
                self.b = ACTS[act]()
                self.c = nn.Sequential(nn.Conv1d(ch, ch, 3), getattr(torch.nn, gate)())

            def forward(self, x):
                return self.a(self.conv(x)) + self.b(self.conv(x)) + self.c(x)


        class NegativeSlope(nn.Module):
            def __init__(self, ch, nonlinear_activation="LeakyReLU", nonlinear_activation_params={"negative_slope": -0.2}):
                super().__init__()
                self.layers = nn.Sequential(
                    nn.Conv1d(ch, ch, 3),
                    getattr(torch.nn, nonlinear_activation)(**nonlinear_activation_params),
                )

            def forward(self, x):
                return self.layers(x)


        class Changed(nn.Module):
            def __init__(self, ch, nonlinear_activation="LeakyReLU"):
                super().__init__()
                self.layers = nn.Sequential(nn.Conv1d(ch, ch, 3), getattr(nn, nonlinear_activation)())

            def forward(self, x):
                return self.layers(x)


        def build():
            return Changed(8, nonlinear_activation="Hardtanh")
    ''',
    # a functional alias, in the function or at module level
    "aliases": '''
        import torch.nn as nn
        import torch.nn.functional as F

        lrelu = F.leaky_relu


        class Block(nn.Module):
            def __init__(self, ch):
                super().__init__()
                self.conv = nn.Conv2d(ch, ch, 3)
                self.conv2 = nn.Conv2d(ch, ch, 3)

            def forward(self, x):
                act = F.leaky_relu
                x = act(self.conv(x), 0.2)  # expect: TML201 fix=safe
                return lrelu(self.conv2(x), 0.2)  # expect: TML201 fix=safe


        class Either(nn.Module):
            def __init__(self, ch, leaky=True):
                super().__init__()
                self.conv = nn.Conv2d(ch, ch, 3)
                self.leaky = leaky

            def forward(self, x, act=F.leaky_relu):
                act2 = F.leaky_relu if self.leaky else F.relu
                return act(self.conv(x), 0.2) + act2(self.conv(x))
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_forms"), CASES, "TML201,TML202,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])




def test_fixes(findings):
    """A literal call gets ``inplace=True`` (safe for LeakyReLU); a layer named by a parameter's
    default is unsafe (a caller elsewhere may name another one); ``**params`` has no place to
    put it: a finding without a fix. Rows marked ``fix=...`` say which."""
    checked = 0
    for name, source in CASES.items():
        for row, expected in marked_fixes(source).items():
            checked += 1
            assert fix_at(findings[name], row) == expected, (name, row)
    assert checked == 7


def test_fix_writes_inplace(tmp_path):
    source = textwrap.dedent(CASES["aliases"])
    path = tmp_path / "aliases.py"
    path.write_text(source, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", str(path), "--isolated", "--no-cache", "--fix",
         "--select", "TML201"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    fixed = path.read_text(encoding="utf-8")
    assert "x = act(self.conv(x), 0.2, inplace=True)" in fixed
    assert "return lrelu(self.conv2(x), 0.2, inplace=True)" in fixed
    assert "act(self.conv(x), 0.2) + act2(self.conv(x))" in fixed  # the look-alikes untouched


PROJECT = {
    "layers.py": '''
        import torch.nn as nn


        class Conv1d(nn.Module):
            def __init__(self, cin, cout, k):
                super().__init__()
                self.conv = nn.Conv1d(cin, cout, k, padding=k // 2)

            def forward(self, x):
                return self.conv(x)


        class Gated(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv1d(c, c, 3)

            def forward(self, x):
                return self.conv(x).sigmoid()
    ''',
    "model.py": '''
        import torch.nn as nn
        import torch.nn.functional as F

        from .layers import Conv1d, Gated


        class Local(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.conv = nn.Conv2d(c, c, 3)

            def forward(self, x):
                return self.conv(x)


        class Net(nn.Module):
            def __init__(self, c):
                super().__init__()
                self.pre = Conv1d(c, c, 3)
                self.local = Local(c)
                self.gate = Gated(c)
                self.act = nn.LeakyReLU(0.2)  # expect: TML201 (after the project's Conv1d)
                self.convs = nn.ModuleList([Conv1d(c, c, 3) for _ in range(2)])
                self.gates = nn.ModuleList([Conv1d(c, c, 3), Gated(c)])

            def forward(self, x, y):
                x = self.act(self.pre(x))
                y = F.leaky_relu(self.local(y), 0.2)  # expect: TML201
                z = F.leaky_relu(self.gate(x), 0.2)  # Gated returns a sigmoid's output: quiet
                for conv in self.convs:
                    x = F.leaky_relu(conv(x), 0.1)  # expect: TML201
                for gate in self.gates:
                    y = F.leaky_relu(gate(y), 0.1)  # one element is Gated: quiet
                return x, y, z
    ''',
}


def test_module_class_of_the_project(tmp_path):
    """A module class whose ``forward`` returns a convolution's output, defined in the file or
    imported from another file of the package, counts as that convolution."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name, source in PROJECT.items():
        (package / name).write_text(textwrap.dedent(source), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", str(package / "model.py"), "--isolated", "--no-cache",
         "--exit-zero", "--select", "TML201", "--output-format", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    rows = {(f["location"]["row"], f["code"]) for f in json.loads(result.stdout)}
    lines = textwrap.dedent(PROJECT["model.py"]).splitlines()
    expected = {(row, m.group(1)) for row, line in enumerate(lines, start=1) for m in [MARKER.search(line)] if m}
    assert rows == expected
