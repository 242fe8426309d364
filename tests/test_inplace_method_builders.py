"""TML201 through three more ways real code builds its layer lists (measured misses of the
held-out sets: pytorch_candle's ``BasicCNNClassifier``, pytorch-wrapper's ``SequenceDenseCNN``,
torch-salad's ``conv2d`` builder):

- an activation passed to a builder *method* of the same class (``self._conv_block(16, 32,
  activation=nn.LeakyReLU(), pooling=...)``, a ``@staticmethod`` or a plain method), which puts
  it in the ``nn.Sequential`` it returns: it runs on what precedes it there, as for a
  module-level builder (``activation_calls._own_method``);
- a layer list started with the builtin ``list()`` instead of ``[]`` (``layers = list()`` ...
  ``layers.append(activation())`` ... ``nn.Sequential(*layers)`` or ``nn.ModuleList(layers)``;
  ``layer_lists.helper_order``, ``module_lists``);
- a layer added under an ``if`` written on one line (``if act: layers += [nn.ELU()]``): the
  statement after the colon is read as an indented one would be (``layer_lists``' walker).

Look-alikes stay quiet: the builder of another object (``other._conv_block(...)``), a builder
that puts the activation before a dropout (one-line ``if`` too), a method defined twice (which one runs is not
known), a property, a ``list(...)`` of an unknown iterable, and a file that defines its own
``list``.
"""

from __future__ import annotations

import textwrap
from typing import Dict

import pytest

from marked_cases import lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "static_builder_keywords": '''
        import torch.nn as nn


        class Classifier(nn.Module):
            def __init__(self, classes):
                super().__init__()
                self.block1 = self._conv_block(3, 16, activation=nn.ReLU(), pooling=nn.MaxPool2d(2))
                self.block2 = self._conv_block(16, 32, activation=nn.LeakyReLU(), pooling=nn.AvgPool2d(2))  # expect: TML201 fix=safe
                self.block3 = self._conv_block(32, 64, activation=nn.ELU(), pooling=nn.MaxPool2d(2))  # expect: TML201 fix=unsafe
                self.fc = nn.Linear(64, classes)

            @staticmethod
            def _conv_block(in_channels, out_channels, activation, pooling):
                return nn.Sequential(
                    nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1),
                    nn.BatchNorm2d(out_channels),
                    activation,
                    pooling,
                )

            def forward(self, x):
                x = self.block3(self.block2(self.block1(x)))
                return self.fc(x.mean((2, 3)))
    ''',
    "plain_method_positional": '''
        from torch import nn


        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.down = self.stage(8, 16, nn.LeakyReLU(0.2))  # expect: TML201 fix=safe
                self.head = nn.Conv2d(16, 4, 1)

            def stage(self, cin, cout, act):
                return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), act, nn.Conv2d(cout, cout, 3, padding=1))

            def forward(self, x):
                return self.head(self.down(x))
    ''',
    "list_builtin": '''
        import torch.nn as nn


        class DenseCNN(nn.Module):
            def __init__(self, n, activation=nn.LeakyReLU, dp=0):
                super().__init__()
                layers = list()
                layers.append(nn.Conv1d(n, n, kernel_size=1))
                layers.append(activation())  # expect: TML201 fix=unsafe
                if dp > 0:
                    layers.append(nn.Dropout(dp))
                self.proj = nn.Sequential(*layers)
                self.out = nn.Conv1d(n, n, 1)

            def forward(self, x):
                return self.out(self.proj(x))
    ''',
    "one_line_if": '''
        from torch import nn


        def conv2d(m, n, k, act=True):
            layers = [nn.Conv2d(m, n, k, padding=1)]
            if act: layers += [nn.ELU()]  # expect: TML201 fix=unsafe
            return nn.Sequential(*layers)


        def dropped(m, n, act=True):
            layers = [nn.Linear(m, n)]
            if act: layers += [nn.ELU(), nn.Dropout(0.5)]
            return nn.Sequential(*layers)


        class Features(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(conv2d(1, 32, 3), conv2d(32, 32, 3), nn.MaxPool2d(2, 2))
                self.head = dropped(32, 10)

            def forward(self, x):
                return self.head(self.body(x).mean((2, 3)))
    ''',
    "list_builtin_module_list": '''
        from torch import nn


        class Stack(nn.Module):
            def __init__(self, d, n=3):
                super().__init__()
                layers = list()
                for i in range(n):
                    layers.append(nn.Linear(d, d))
                    layers.append(nn.LeakyReLU(0.2))  # expect: TML201 fix=safe
                self.layers = nn.ModuleList(layers)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return x
    ''',
    "quiet_other_objects_builder": '''
        from torch import nn


        class Blocks:
            @staticmethod
            def make(cin, cout, act):
                return nn.Sequential(nn.Conv2d(cin, cout, 3), act)


        class Net(nn.Module):
            def __init__(self, blocks):
                super().__init__()
                self.blocks = blocks
                self.body = self.blocks.make(3, 8, nn.LeakyReLU())
                self.head = nn.Conv2d(8, 2, 1)

            def make(self, cin, cout, act):
                return nn.Sequential(nn.Conv2d(cin, cout, 3), act, nn.Conv2d(cout, cout, 1))

            def forward(self, x):
                return self.head(self.body(x))
    ''',
    "quiet_before_dropout_and_twice_defined": '''
        from torch import nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = self.drop_block(3, 8, nn.LeakyReLU())
                self.b = self.twice(8, 8, nn.LeakyReLU())
                self.c = self.prop(nn.LeakyReLU())

            def drop_block(self, cin, cout, act):
                return nn.Sequential(nn.Linear(cin, cout), act, nn.Dropout(0.5))

            def twice(self, cin, cout, act):
                return nn.Sequential(nn.Linear(cin, cout), act, nn.Linear(cout, cout))

            def twice(self, cin, cout, act):  # noqa: F811
                return nn.Sequential(nn.Linear(cin, cout), nn.Linear(cout, cout), act)

            @property
            def prop(self):
                return lambda act: nn.Sequential(nn.Linear(8, 8), act, nn.Linear(8, 8))

            def forward(self, x):
                return self.c(self.b(self.a(x)))
    ''',
    "quiet_list_of_unknown_and_own_list": '''
        import torch.nn as nn


        class FromConfig(nn.Module):
            def __init__(self, n, extra):
                super().__init__()
                layers = list(extra)
                layers.append(nn.LeakyReLU())
                self.body = nn.Sequential(*layers)

            def forward(self, x):
                return self.body(x) + x
    ''',
    "quiet_own_list_function": '''
        import torch.nn as nn


        REGISTRY = {}


        def list():
            return REGISTRY.get("prefix", [])


        class Net(nn.Module):
            def __init__(self, n):
                super().__init__()
                layers = list()
                layers.append(nn.LeakyReLU())
                layers.append(nn.Linear(n, n))
                self.body = nn.Sequential(nn.Linear(n, n), *layers)

            def forward(self, x):
                return self.body(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("method_builders"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows_with_their_fixes(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    for row, applicability in marked_fixes(CASES[name]).items():
        assert [fix for (at, _), fix in findings[name].items() if at == row] == [applicability]


def test_the_method_builder_fix_keeps_outputs_and_gradients():
    """The safe fix of the LeakyReLU passed to ``self._conv_block``: the same outputs and
    gradients, and backward still runs."""
    torch = pytest.importorskip("torch")
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.fixer import fix_text

    source = textwrap.dedent(CASES["static_builder_keywords"])
    settings = Settings(select=("TML201",))
    fixed = fix_text(source, lambda text: lint_source(text, "classifier.py", settings), False).text
    assert fixed.count("inplace=True") == 1 and "nn.LeakyReLU(inplace=True)" in fixed
    results = []
    for text in (source, fixed):
        space: dict = {}
        exec(compile(text, "classifier.py", "exec"), space)
        torch.manual_seed(0)
        model = space["Classifier"](5)
        x = torch.randn(2, 3, 16, 16)
        out = model(x)
        out.square().sum().backward()
        results.append((out.detach(), [p.grad.clone() for p in model.parameters()]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))
