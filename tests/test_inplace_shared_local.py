"""TML201 for one activation module a constructor binds to a local, places in a Sequential
and also keeps as ``self.act`` (spandrel's MIRNet-v2 ``RCB``: ``act = nn.LeakyReLU(0.2)``,
``self.body = nn.Sequential(conv, act, conv)``, ``self.act = act``, then
``self.act(self.gcnet(res))``): one module, run after the conv in the Sequential and wherever
``self.act`` is called; reported (with the fix) when every one of those inputs is a fresh
tensor nothing else reads. Look-alikes stay quiet: ``self.act`` applied to a tensor read again
later, or to ``forward``'s own input; its result changed in place after it (MIRNet's own
``res += x``: in place, backward would raise); the local also handed to another function.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEADER = '''
    import torch
    import torch.nn as nn


    class ContextBlock(nn.Module):
        def __init__(self, n):
            super().__init__()
            self.conv = nn.Conv2d(n, n, 1)

        def forward(self, x):
            term = self.conv(x.mean((2, 3), keepdim=True))
            x = x + term
            return x


    def register(module):
        return module
'''


def _rcb(mark: str, forward: str, extra: str = "") -> str:
    return HEADER + f'''

    class RCB(nn.Module):
        def __init__(self, n, bias=False):
            super().__init__()
            act = nn.LeakyReLU(0.2){mark}
            self.body = nn.Sequential(nn.Conv2d(n, n, 3, padding=1, bias=bias), act, nn.Conv2d(n, n, 3, padding=1, bias=bias))
            self.act = act{extra}
            self.gcnet = ContextBlock(n)

        def forward(self, x):
{forward}
'''


CASES: Dict[str, str] = {
    "fresh_both": _rcb("  # expect: TML201 fix=safe", '''
            res = self.body(x)
            res = self.act(self.gcnet(res))
            return res + x
    '''),
    # MIRNet-v2's own ``res += x``: in place the LeakyReLU keeps its result for backward, which
    # ``+=`` then changes (autograd raises; tests/test_inplace_alternatives.py)
    "changed_after": _rcb("", '''
            res = self.body(x)
            res = self.act(self.gcnet(res))
            res += x
            return res
    '''),
    "read_again": _rcb("", '''
            res = self.body(x)
            g = self.gcnet(res)
            res = self.act(g)
            return res + g
    '''),
    "forward_input": _rcb("", '''
            return self.body(self.act(x))
    '''),
    "handed_on": _rcb("", '''
            res = self.body(x)
            res = self.act(self.gcnet(res))
            return res
    ''', extra="\n            register(act)"),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("shared_local"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_the_fix_is_safe(findings):
    (row, _), = findings["fresh_both"]
    assert fix_at(findings["fresh_both"], row) == "safe"
