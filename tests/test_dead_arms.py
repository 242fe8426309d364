"""No rule reports code that cannot run (``analysis/dead_arms.py``): an ``elif`` whose test
implies an earlier test of its chain (ssondo's ``if self.classification_head:`` then ``elif
self.classification_head and relu_only:``), the body of ``if False:`` / ``if 0:``, the ``else``
of ``if True:``. Tried with several rules' sites (TML203 in a Sequential, TML201 on a layer,
TML601 on eager attention, TML501 on an evaluation call).

Look-alikes stay reported: an ``elif`` implied by nothing earlier (``if a and b:`` then
``elif a:``, ``if a:`` then ``elif b:``), a chain whose earlier test calls a function (a call may
change what the next test reads), ``if not False:``, the ``else`` of ``if False:``, an ``if``
over a name that is False only by its default (a caller may turn it on).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "implied_elif": '''
        import torch.nn as nn

        class Net(nn.Module):
            def __init__(self, dim, classes, dropout=0.2, relu_only=False, **kwargs):
                super().__init__()
                self.classification_head = kwargs.get("classification_head", False)
                if self.classification_head:
                    self.classifier = nn.Sequential(
                        nn.Linear(dim, dim),
                        nn.ReLU(inplace=True),
                        nn.Dropout(p=dropout, inplace=True),  # expect: TML203
                        nn.Linear(dim, classes),
                    )
                elif self.classification_head and relu_only:
                    self.classifier = nn.Sequential(
                        nn.Linear(dim, dim),
                        nn.ReLU(inplace=True),
                        nn.Dropout(p=dropout, inplace=True),
                        nn.Linear(dim, classes),
                    )
                elif relu_only and dropout > 0.5 and self.classification_head:
                    self.classifier = nn.Sequential(nn.ReLU(inplace=True), nn.Dropout(p=dropout, inplace=True))

            def forward(self, x):
                return self.classifier(x)
    ''',
    "implied_by_a_conjunction": '''
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim, wide=False, deep=False):
                super().__init__()
                if wide and deep:
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.1, inplace=True))  # expect: TML203
                elif deep and wide:
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.1, inplace=True))
                elif wide:
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.2, inplace=True))  # expect: TML203
                elif deep:
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.3, inplace=True))  # expect: TML203

            def forward(self, x):
                return self.body(x)
    ''',
    "switched_off_by_hand": '''
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.qkv = nn.Linear(dim, dim * 3)
                self.scale = dim ** -0.5

            def forward(self, x):
                q, k, v = self.qkv(x).chunk(3, dim=-1)
                if False:
                    attn = (q @ k.transpose(-2, -1)) * self.scale
                    attn = attn.softmax(dim=-1)
                    return attn @ v
                if 0:
                    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                    return w @ v
                return v
    ''',
    "else_of_true": '''
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def forward(self, q, k, v):
                if True:
                    out = v
                else:
                    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                    out = w @ v
                return out
    ''',
    "not_false_runs": '''
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def forward(self, q, k, v):
                if not False:
                    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                    return w @ v  # expect: TML601
                return v
    ''',
    "else_of_false_runs": '''
        import torch
        import torch.nn as nn

        class Attention(nn.Module):
            def forward(self, q, k, v):
                if False:
                    return v
                else:
                    w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
                    return w @ v  # expect: TML601
    ''',
    "call_in_earlier_test": '''
        import torch.nn as nn

        class Head(nn.Module):
            def __init__(self, dim, options):
                super().__init__()
                if options.pop("wide"):
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.1, inplace=True))  # expect: TML203
                elif options.pop("wide") and dim > 8:
                    self.body = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Dropout(0.2, inplace=True))  # expect: TML203

            def forward(self, x):
                return self.body(x)
    ''',
    "flag_off_by_default_may_run": '''
        import torch
        import torch.nn as nn

        class Generator(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Linear(8, 8)

            def forward(self, z):
                return self.net(z)

        def sample(model, n, debug=False):
            z = torch.randn(n, 8)
            if debug:
                out = model(z)  # expect: TML501
                print(out.mean().item())
            elif False:
                out = model(z)
                print(out.mean().item())

        def main():
            model = Generator()
            sample(model, 4, debug=True)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("dead_arms"), CASES, "TML201,TML203,TML501,TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
