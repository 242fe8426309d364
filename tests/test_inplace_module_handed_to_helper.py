"""TML201 where the layer before the activation is run by a helper it is handed to (measured miss
of a held-out set: cleanlab's co-teaching CNN, ``F.leaky_relu(call_bn(self.bn1, h))`` with ``def
call_bn(bn, x): return bn(x)``). The value graph runs the same-file helper with its arguments
bound, so ``bn(x)`` there calls the caller's ``self.bn1``: the activation runs on what that
module makes (``Producers.call``), here a BatchNorm's output nothing else reads.

Look-alikes stay quiet: a handed module whose backward needs its output (``nn.Sigmoid``), a helper
that keeps what the module made (``CACHE.append(y)``), and an output read again by the caller.
"""

from __future__ import annotations

import textwrap
from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "batchnorm_through_helper": '''
        import torch.nn as nn
        import torch.nn.functional as F


        def call_bn(bn, x):
            return bn(x)


        class CNN(nn.Module):
            def __init__(self):
                super(CNN, self).__init__()
                self.c1 = nn.Conv2d(3, 8, 3, padding=1)
                self.bn1 = nn.BatchNorm2d(8)
                self.c2 = nn.Conv2d(8, 8, 3, padding=1)
                self.bn2 = nn.BatchNorm2d(8)
                self.c3 = nn.Conv2d(8, 4, 1)

            def forward(self, x):
                h = self.c1(x)
                h = F.leaky_relu(call_bn(self.bn1, h), negative_slope=0.01)  # expect: TML201 fix=safe
                h = self.c2(h)
                h = F.leaky_relu(call_bn(self.bn2, h), negative_slope=0.01)  # expect: TML201 fix=safe
                return self.c3(h).mean((2, 3))
    ''',
    "quiet_output_saving_module": '''
        import torch.nn as nn
        import torch.nn.functional as F


        def run(layer, x):
            return layer(x)


        class Gate(nn.Module):
            def __init__(self):
                super().__init__()
                self.gate = nn.Sigmoid()
                self.out = nn.Linear(8, 8)

            def forward(self, x):
                return self.out(F.leaky_relu(run(self.gate, x), 0.2))
    ''',
    "quiet_helper_keeps_it": '''
        import torch.nn as nn
        import torch.nn.functional as F

        CACHE = []


        def call_bn(bn, x):
            y = bn(x)
            CACHE.append(y)
            return y


        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 8, 3)
                self.bn1 = nn.BatchNorm2d(8)
                self.c2 = nn.Conv2d(8, 8, 3)

            def forward(self, x):
                return self.c2(F.leaky_relu(call_bn(self.bn1, self.c1(x)), 0.01))
    ''',
    "quiet_output_read_again": '''
        import torch.nn as nn
        import torch.nn.functional as F


        def call_bn(bn, x):
            return bn(x)


        class CNN(nn.Module):
            def __init__(self):
                super().__init__()
                self.c1 = nn.Conv2d(3, 8, 3)
                self.bn1 = nn.BatchNorm2d(8)
                self.c2 = nn.Conv2d(8, 8, 3)

            def forward(self, x):
                n = call_bn(self.bn1, self.c1(x))
                return self.c2(F.leaky_relu(n, 0.01)) + n
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("handed_to_helper"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows_with_their_fixes(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    for row, applicability in marked_fixes(CASES[name]).items():
        assert [fix for (at, _), fix in findings[name].items() if at == row] == [applicability]


def test_the_fix_keeps_outputs_and_gradients():
    torch = pytest.importorskip("torch")
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.fixer import fix_text

    source = textwrap.dedent(CASES["batchnorm_through_helper"])
    settings = Settings(select=("TML201",))
    fixed = fix_text(source, lambda text: lint_source(text, "cnn.py", settings), False).text
    assert fixed.count("inplace=True") == 2
    results = []
    for text in (source, fixed):
        space: dict = {}
        exec(compile(text, "cnn.py", "exec"), space)
        torch.manual_seed(0)
        model = space["CNN"]()
        out = model(torch.randn(2, 3, 10, 10))
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))
