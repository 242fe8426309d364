"""TML201 for an activation kept on ``self`` as one of the layers a constructor chooses
between, as real code writes it: an ``if`` expression (``self.act = nn.LeakyReLU(0.1) if leaky
else nn.ReLU()``) or a table subscripted by a constructor parameter (aydin's
``self.activation_function = {"ReLU": nn.ReLU(), "lrel": nn.LeakyReLU(0.1)}[self.activation]``).

The layer of an arm is judged where the attribute runs, as a layer assigned directly would be,
when its arm may be taken: a flag or key that its default selects, a construction of the class
(in its file or in a file importing it) that passes the flag on or the entry's key, a key or
flag nothing says (a class nobody builds with a parameter without a literal default). An arm
taken only when a caller asks, and none does, stays quiet, whatever it holds (a construction, a
factory's layer, a local; an optional layer, `... if use_act else None`); so does a literal key
that selects another entry; `act == "lrelu"` is read as a table of two entries. Look-alikes: an
arm whose input is read again.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``
(``fix=...``: the fix's applicability; ELU's is unsafe wherever it is written, as the rule's
documentation says)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from marked_cases import Found, fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # aydin's form: the key through `self.activation`, the model building the block with "lrel"
    "table_chosen_by_construction": '''
        from torch import nn


        class DilatedConv(nn.Module):
            def __init__(self, cin, cout, activation="ReLU"):
                super().__init__()
                self.activation = activation
                self.conv = nn.Conv2d(cin, cout, 3)
                self.activation_function = {
                    "ReLU": nn.ReLU(),
                    "swish": nn.SiLU(),
                    "lrel": nn.LeakyReLU(0.1),  # expect: TML201 fix=safe
                }[self.activation]

            def forward(self, x):
                x = self.conv(x)
                x = self.activation_function(x)
                return x


        class JINet(nn.Module):
            def __init__(self):
                super().__init__()
                self.dilated = nn.ModuleList([DilatedConv(3, 8, activation="lrel") for _ in range(3)])

            def forward(self, x):
                for layer in self.dilated:
                    x = layer(x)
                return x
    ''',
    "table_key_is_the_default": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, act="elu"):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = {"relu": nn.ReLU(), "elu": nn.ELU()}[act]  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))
    ''',
    # nobody passes "lrel", the default is "relu": the LeakyReLU never runs
    "table_entry_never_chosen": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, act="relu"):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = {"relu": nn.ReLU(), "lrel": nn.LeakyReLU(0.2)}[act]

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 8)
                self.b = Block(8, 8, act="relu")

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "table_literal_key": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = {"relu": nn.ReLU(), "lrel": nn.LeakyReLU(0.2)}["relu"]
                self.conv2 = nn.Conv2d(cout, cout, 3)
                self.act2 = {"relu": nn.ReLU(), "lrel": nn.LeakyReLU(0.2)}["lrel"]  # expect: TML201 fix=safe

            def forward(self, x):
                return self.act2(self.conv2(self.act(self.conv(x))))
    ''',
    # a required key nobody in the file gives: any entry may be the one
    "table_key_not_known": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, act):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = {"relu": nn.ReLU(), "lrel": nn.LeakyReLU(0.2)}[act]  # expect: TML201 fix=safe

            def forward(self, x):
                return self.act(self.conv(x))
    ''',
    "if_arm_on_by_default": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, leaky=True):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.LeakyReLU(0.1) if leaky else nn.ReLU()  # expect: TML201 fix=safe

            def forward(self, x):
                return self.act(self.conv(x))
    ''',
    "if_arm_off_by_default": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, leaky=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.LeakyReLU(0.1) if leaky else nn.ReLU()

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 8)

            def forward(self, x):
                return self.a(x)
    ''',
    "if_arm_turned_on": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, leaky=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.ELU() if leaky else nn.ReLU()  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 8, leaky=True)

            def forward(self, x):
                return self.a(x)
    ''',
    # the arm off by default holds a factory's layer or a local: quiet as a direct construction
    "factory_in_arm_off": '''
        from torch import nn


        def leaky():
            return nn.LeakyReLU(0.2)


        class Block(nn.Module):
            def __init__(self, cin, cout, leaky_on=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = leaky() if leaky_on else nn.ReLU()

            def forward(self, x):
                return self.act(self.conv(x))


        class Local(nn.Module):
            def __init__(self, cin, cout, leaky_on=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                act = nn.LeakyReLU(0.2)
                self.act = act if leaky_on else nn.ReLU()

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 8)
                self.b = Local(8, 8)

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    # a string compared in the `if`: read as a table of two entries
    "if_string_test": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, act="relu"):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.LeakyReLU(0.2) if act == "lrelu" else nn.ReLU()

            def forward(self, x):
                return self.act(self.conv(x))


        class Other(nn.Module):
            def __init__(self, cin, cout, act="relu"):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.ReLU() if act != "elu" else nn.ELU()  # expect: TML201 fix=unsafe

            def forward(self, x):
                return self.act(self.conv(x))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(3, 8)
                self.b = Other(8, 8, act="elu")

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    # an optional layer (`... if use_act else None`) off by default runs nowhere: quiet
    "optional_layer_off": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, cout, use_act=False):
                super().__init__()
                self.conv = nn.Conv2d(cin, cout, 3)
                self.act = nn.LeakyReLU(0.2) if use_act else None

            def forward(self, x):
                x = self.conv(x)
                if self.act is not None:
                    x = self.act(x)
                return x
    ''',
    # look-alike: the activation's input is read again (a residual): out of place is needed
    "input_read_again": '''
        from torch import nn


        class Block(nn.Module):
            def __init__(self, cin, leaky=True):
                super().__init__()
                self.conv = nn.Conv2d(cin, cin, 3, padding=1)
                self.act = nn.LeakyReLU(0.1) if leaky else nn.ReLU()

            def forward(self, x):
                h = self.conv(x)
                return self.act(h) + h
    ''',
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_chosen_layers"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_the_marked_ones(found, name):
    for row, expected in marked_fixes(CASES[name]).items():
        assert fix_at(found[name], row) == expected, (name, row)


# -- the block in one file, its constructions in another -------------------------------------

LAYERS = '''
from torch import nn


class DilatedConv(nn.Module):
    def __init__(self, cin, cout, activation="ReLU"):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.activation = activation
        self.activation_function = {"ReLU": nn.ReLU(), "lrel": nn.LeakyReLU(0.1)}[self.activation]{mark}

    def forward(self, x):
        return self.activation_function(self.conv(x))


class IfConv(nn.Module):
    def __init__(self, cin, cout, leaky=False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)
        self.act = nn.LeakyReLU(0.1) if leaky else nn.ReLU(){mark}

    def forward(self, x):
        return self.act(self.conv(x))
'''

MODEL = '''
from torch import nn

from .layers import DilatedConv, IfConv


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = DilatedConv(3, 8, activation={key})
        self.b = IfConv(8, 8, leaky={flag})

    def forward(self, x):
        return self.b(self.a(x))
'''


@pytest.mark.parametrize("chosen", [True, False])
def test_constructions_in_another_file_choose_the_arm(tmp_path, chosen):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    layers = LAYERS.replace("{mark}", "  # expect: TML201" if chosen else "")
    (package / "layers.py").write_text(layers, encoding="utf-8")
    (package / "model.py").write_text(
        MODEL.format(key='"lrel"' if chosen else '"ReLU"', flag="True" if chosen else "False"), encoding="utf-8"
    )
    for target in (package, package / "layers.py"):  # the package, or the block's file alone
        result = subprocess.run(
            [sys.executable, "-m", "torchmemlint", "check", str(target), "--isolated", "--no-cache", "--exit-zero",
             "--select", "TML201", "--output-format", "json"],
            capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        rows = {(f["location"]["row"], f["code"]) for f in json.loads(result.stdout) if f["filename"].endswith("layers.py")}
        assert rows == marked(layers), (target, chosen)


def test_fix_puts_inplace_into_the_chosen_entry(tmp_path):
    (tmp_path / "block.py").write_text(textwrap.dedent(CASES["table_chosen_by_construction"]), encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", str(tmp_path), "--isolated", "--no-cache", "--fix",
         "--exit-zero", "--select", "TML201"],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    fixed = (tmp_path / "block.py").read_text(encoding="utf-8")
    assert '"lrel": nn.LeakyReLU(0.1, inplace=True),' in fixed
    assert '"ReLU": nn.ReLU(),' in fixed
