"""TML201 for activations a factory function builds (``def leaky(slope=0.1): return
nn.LeakyReLU(slope)``): reported at each place a call of the factory puts the layer (an element
of ``nn.Sequential``, a list spliced into one, ``layers.append(...)`` in a loop, ``self.act =
leaky()`` called in ``forward``, a module list run as a chain), each place judged on its own, as
a layer written there would be; the factory's definition is not reported. The edit goes into
the factory and is offered only when every call of it in the project qualifies; a factory with
an ``inplace`` parameter is fixed at each call instead. Factories of another file of the project
(imported relatively) are followed; a factory the module defines twice is its last `def`; a parameter rebound
to what a factory returns for it (``activation = resolve_nn_activation(activation)``, before any
other read) is that layer; a local looked up in a module-level table of layer classes by a
parameter's default (``act_fn = ACTIVATION_FN[activation]``) is that class. Look-alikes stay quiet: a place after a layer that needs its
output, a tensor read again, the block's own input, a factory never placed, a local class called
``LeakyReLU``.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``
(``fix=...``: the fix's applicability, ``none`` for a finding without one).
"""

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
    # the form of the report: one factory placed three times, in two Sequentials; every place
    # qualifies, so each finding carries the one edit of the factory (safe: every call gives
    # the slope a non-negative literal)
    "three_places": '''
        import torch.nn as nn


        def leaky_relu(p=0.1):
            return nn.LeakyReLU(p)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Conv2d(3, 8, 3),
                    leaky_relu(),  # expect: TML201 fix=safe
                    nn.Conv2d(8, 8, 3),
                    leaky_relu(),  # expect: TML201 fix=safe
                )
                self.head = nn.Sequential(nn.Linear(4, 4), leaky_relu(0.2))  # expect: TML201 fix=safe

            def forward(self, x):
                return self.head(self.net(x))
    ''',
    # a negative slope: in place, backward would raise; that place stays quiet, and the edit
    # of the factory is not offered at the other
    "negative_slope": '''
        import torch.nn as nn


        def leaky(slope=0.1):
            return nn.LeakyReLU(slope)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Conv2d(3, 8, 3), leaky())  # expect: TML201 fix=none
                self.b = nn.Sequential(nn.Conv2d(8, 8, 3), leaky(-0.2))

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    # nested factories with keyword arguments: `make_act(...)` returns `leaky(**kwargs)`; each
    # `make_act` call is the place (unsafe: what reaches `slope` through `**kwargs` is not read). A factory never placed and a local class called LeakyReLU
    # stay quiet
    "nested": '''
        import torch
        import torch.nn as nn


        def leaky(slope=0.1):
            return nn.LeakyReLU(slope)


        def make_act(name="leaky", **kwargs):
            if name == "leaky":
                return leaky(**kwargs)
            return nn.ReLU()


        def unused_factory():
            return nn.LeakyReLU(0.3)


        class LeakyReLU(nn.Module):
            def forward(self, x):
                return torch.where(x > 0, x, 0.1 * x)


        class Stem(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem = nn.Sequential(
                    nn.Conv2d(3, 8, 3),
                    make_act("leaky", slope=0.2),  # expect: TML201 fix=unsafe
                    nn.Conv2d(8, 8, 3),
                    make_act(slope=0.1),  # expect: TML201 fix=unsafe
                )
                self.local = nn.Sequential(nn.Conv2d(8, 8, 1), LeakyReLU())

            def forward(self, x):
                return self.local(self.stem(x))
    ''',
    # `inplace` as a factory parameter defaulting to False: each call chooses, so each call
    # that leaves it False is reported and fixed at the call (`act_layer(inplace=True)`; safe:
    # the slope each gets is a non-negative literal)
    "inplace_parameter": '''
        import torch.nn as nn


        def act_layer(slope=0.1, inplace=False):
            return nn.LeakyReLU(slope, inplace=inplace)


        class Mid(nn.Module):
            def __init__(self):
                super().__init__()
                self.mid = nn.Sequential(
                    nn.Conv2d(8, 8, 3),
                    act_layer(),  # expect: TML201 fix=safe
                    nn.Conv2d(8, 8, 3),
                    act_layer(0.2, inplace=True),
                    nn.Linear(8, 8),
                    act_layer(inplace=False),  # expect: TML201 fix=safe
                    nn.Sigmoid(),
                    act_layer(),
                )

            def forward(self, x):
                return self.mid(x)
    ''',
    # partials: each call of the partial is a construction of its own, fixed at the call; a
    # list comprehension of Sequentials, a list filled in a loop and spliced; after a sigmoid
    # (which keeps its output for backward) it stays quiet
    "partials": '''
        import functools
        from functools import partial

        import torch.nn as nn

        Act = functools.partial(nn.LeakyReLU, 0.2)
        Elu = partial(nn.ELU, alpha=1.0)


        class Blocks(nn.Module):
            def __init__(self, chans=(8, 16, 32)):
                super().__init__()
                self.blocks = nn.Sequential(*[nn.Sequential(nn.Conv2d(c, c, 3, padding=1), Act()) for c in chans])  # expect: TML201 fix=safe
                self.gate = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid(), Act())
                layers = []
                for c in chans:
                    layers.append(nn.Conv2d(c, c, 1))
                    layers.append(Elu())  # expect: TML201 fix=unsafe
                self.body = nn.Sequential(*layers)

            def forward(self, x):
                return self.gate(self.body(self.blocks(x)))
    ''',
    # a factory returning `nn.Sequential(conv, nn.LeakyReLU(...))`: the activation's input is
    # made inside the factory, the same at every place, so it is reported once, at the
    # construction (placing the block after a sigmoid changes nothing for it)
    "block_factory": '''
        import torch.nn as nn


        def conv_act(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.LeakyReLU(0.1))  # expect: TML201 fix=safe


        class Convs(nn.Module):
            def __init__(self):
                super().__init__()
                self.convs = nn.Sequential(conv_act(8, 8), conv_act(8, 8), nn.Sigmoid(), conv_act(8, 8))

            def forward(self, x):
                return self.convs(x)
    ''',
    # places judged one by one: an element of a module list run as a chain and an attribute
    # called on a fresh tensor qualify; first in a Sequential (the block's input) and an
    # attribute whose input is read again do not, so the factory's edit is offered nowhere
    "mixed_places": '''
        import torch.nn as nn


        def leaky(slope=0.1):
            return nn.LeakyReLU(slope)


        class Chain(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Conv2d(8, 8, 3), leaky(), nn.Conv2d(8, 8, 3)])  # expect: TML201 fix=none
                self.pre = nn.Sequential(leaky(), nn.Conv2d(8, 8, 3))

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return self.pre(x)


        class Res(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(8, 8, 3, padding=1)
                self.act = leaky()
                self.act2 = leaky()  # expect: TML201 fix=none

            def forward(self, x):
                y = self.conv(x)
                return self.act(y) + y + self.conv(self.act2(self.conv(x)))
    ''',
    # a factory the module defines twice, alike (phenaki-pytorch's cvivit.py): a call in a
    # function runs the last `def`, which is followed (and is the one the edit goes into)
    "defined_twice": '''
        import torch.nn as nn


        def leaky_relu(p=0.1):
            return nn.LeakyReLU(p)


        def exists(v):
            return v is not None


        def leaky_relu(p=0.1):
            return nn.LeakyReLU(p)


        class DiscriminatorBlock(nn.Module):
            def __init__(self, cin, cout):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Conv2d(cin, cout, 3, padding=1),
                    leaky_relu(),  # expect: TML201 fix=safe
                    nn.Conv2d(cout, cout, 3, padding=1),
                    leaky_relu(),  # expect: TML201 fix=safe
                )

            def forward(self, x):
                return self.net(x)
    ''',
    # look-alikes: the later `def` returns a layer that is no activation, or one in place (what
    # the first returns is never built); the name bound again by an import; a placed layer
    # whose input is read again (a residual)
    "defined_twice_quiet": '''
        import torch.nn as nn


        def act(p=0.1):
            return nn.LeakyReLU(p)


        def act(p=0.1):
            return nn.Identity()


        def hot(p=0.1):
            return nn.LeakyReLU(p)


        def hot(p=0.1):
            return nn.LeakyReLU(p, inplace=True)


        def gelu():
            return nn.LeakyReLU(0.1)


        def gelu():
            return nn.LeakyReLU(0.1)


        from .layers import gelu


        def leaky(p=0.1):
            return nn.LeakyReLU(p)


        def leaky(p=0.1):
            return nn.LeakyReLU(p)


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Conv2d(3, 8, 3), act(), nn.Conv2d(8, 8, 3), hot(), nn.Conv2d(8, 8, 3), gelu())
                self.conv = nn.Conv2d(8, 8, 3, padding=1)
                self.res = leaky()

            def forward(self, x):
                y = self.conv(self.a(x))
                return y + self.res(y)
    ''',
    # rsl_rl's ActorCritic: the parameter rebound to what the factory returns for it
    "parameter_rebound": '''
        import torch.nn as nn

        def resolve_nn_activation(act_name):
            if act_name == "elu":
                return nn.ELU()
            elif act_name == "relu":
                return nn.ReLU()
            raise ValueError(act_name)

        class ActorCritic(nn.Module):
            def __init__(self, obs, actions, hidden=(64, 64), activation="elu"):
                super().__init__()
                activation = resolve_nn_activation(activation)  # expect: TML201 fix=none
                layers = [nn.Linear(obs, hidden[0]), activation]
                for i in range(len(hidden) - 1):
                    layers.append(nn.Linear(hidden[i], hidden[i + 1]))
                    layers.append(activation)
                layers.append(nn.Linear(hidden[-1], actions))
                self.actor = nn.Sequential(*layers)

            def forward(self, x):
                return self.actor(x)

        class ReadFirst(nn.Module):
            def __init__(self, obs, activation="elu"):
                super().__init__()
                self.name = activation
                activation = resolve_nn_activation(activation)  # the parameter read before: not known here
                self.actor = nn.Sequential(nn.Linear(obs, obs), activation, nn.Linear(obs, 1))

            def forward(self, x):
                return self.actor(x)
    ''',
    "table_lookup": '''
        import torch.nn as nn

        ACTIVATION_FN = {
            "relu": nn.ReLU,
            "leaky_relu": nn.LeakyReLU,
            "tanh": nn.Tanh,
        }

        class HyperNetwork(nn.Module):
            def __init__(self, input_dim, output_dim, hidden_dim=64, activation="leaky_relu"):
                super().__init__()
                if activation not in ACTIVATION_FN:
                    raise ValueError(activation)
                act_fn = ACTIVATION_FN[activation]
                self.input_layer = nn.Sequential(nn.Linear(input_dim, hidden_dim), act_fn())  # expect: TML201 fix=unsafe
                self.output_layer = nn.Linear(hidden_dim, output_dim)

            def forward(self, x):
                return self.output_layer(self.input_layer(x))

        class Squashed(nn.Module):
            def __init__(self, dim, activation="tanh"):
                super().__init__()
                act_fn = ACTIVATION_FN[activation]
                self.net = nn.Sequential(nn.Linear(dim, dim), act_fn(), nn.Linear(dim, dim))

            def forward(self, x):
                return self.net(x)
    ''',
    # a layer class the constructor keeps on `self` (chosen by dimension: `nn.Conv2d` or
    # `nn.Conv3d`) and calls to build the list's elements: each element is a convolution
    "class_held_on_self": '''
        import torch
        import torch.nn as nn

        class JINet(nn.Module):
            def __init__(self, spacetime_ndim=2, layers=3):
                super().__init__()
                self.layers = layers
                if spacetime_ndim == 2:
                    self.conv = nn.Conv2d
                else:
                    self.conv = nn.Conv3d
                self.convs = nn.ModuleList()
                for index in range(layers):
                    self.convs.append(self.conv(in_channels=8, out_channels=8, kernel_size=1))
                self.lrelu = nn.LeakyReLU(negative_slope=0.01)  # expect: TML201 fix=safe

            def forward(self, x):
                x = self.convs[0](x)
                x = self.lrelu(x)
                y = x
                for index in range(1, self.layers):
                    x = self.convs[index](x)
                    x = self.lrelu(x)
                    y = y + x
                return y

        class Gated(nn.Module):
            def __init__(self, gated=True):
                super().__init__()
                if gated:
                    self.squash = nn.Sigmoid
                else:
                    self.squash = nn.Conv2d
                self.first = self.squash()
                self.act = nn.LeakyReLU(0.1)  # after a sigmoid, which needs its output: quiet

            def forward(self, x):
                return self.act(self.first(x))

        class Instances(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Sigmoid()
                self.act = nn.LeakyReLU(0.1)  # `self.conv` is an instance, a sigmoid: quiet

            def forward(self, x):
                return self.act(self.conv(x))
    ''',
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_factories"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fixes_are_the_marked_ones(found, name):
    for row, expected in marked_fixes(CASES[name]).items():
        assert fix_at(found[name], row) == expected, (name, row)


# -- a factory of another file of the project ---------------------------------------------------

PROJECT = {
    "pkg/__init__.py": "",
    # `leaky` is placed here and imported by model.py: reported here, without the edit (a
    # place in model.py does not qualify); `lonely` is placed only here: its edit is offered
    "pkg/layers.py": '''
        import torch.nn as nn


        def leaky(slope=0.1):
            return nn.LeakyReLU(slope)


        def act(slope=0.1, inplace=False):
            return nn.LeakyReLU(slope, inplace=inplace)


        def lonely(slope=0.1):
            return nn.LeakyReLU(slope)


        def hot(slope=0.1):
            return nn.LeakyReLU(slope, inplace=True)


        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(8, 8, 3), leaky(), nn.Conv2d(8, 8, 3), lonely())  # expect: TML201

            def forward(self, x):
                return self.body(x)
    ''',
    # no activation is named here: the factories of layers.py are followed; the edit of `leaky`
    # is that file's (no fix here); `act(0.2)` is fixed at the call; `hot()` runs in place on
    # a sigmoid's output (TML203, whose edit would be layers.py's too)
    "pkg/model.py": '''
        import torch.nn as nn

        from .layers import act, hot, leaky


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Conv2d(3, 8, 3), leaky(), nn.Sigmoid(), leaky())  # expect: TML201 fix=none
                self.b = nn.Sequential(nn.Conv2d(8, 8, 3), act(0.2), nn.Conv2d(8, 8, 3), act(inplace=True))  # expect: TML201 fix=safe
                self.c = nn.Sequential(nn.Linear(8, 8), nn.Sigmoid(), hot())  # expect: TML203 fix=none

            def forward(self, x):
                return self.c(self.b(self.a(x)))
    ''',
}


def _run(folder: Path, *options: str, select: str = "TML201") -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torchmemlint", "check", str(folder), "--no-cache", "--isolated",
               "--select", select, *options]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def _write(folder: Path, files: Dict[str, str]) -> None:
    for name, source in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")


def test_factories_of_another_file_are_reported_where_placed(tmp_path):
    _write(tmp_path, PROJECT)
    result = _run(tmp_path, "--exit-zero", "--output-format", "json", select="TML201,TML203")
    assert result.returncode == 0, result.stderr
    found: Dict[str, Found] = {name: {} for name in PROJECT}
    for finding in json.loads(result.stdout):
        name = Path(finding["filename"]).relative_to(tmp_path).as_posix()
        fix = finding["fix"]
        found[name][(finding["location"]["row"], finding["code"])] = fix["applicability"] if fix else None
    for name, source in PROJECT.items():
        assert set(found[name]) == marked(source), name
        for row, expected in marked_fixes(source).items():
            assert fix_at(found[name], row) == expected, (name, row)
    # `lonely`'s place in layers.py carries the factory's edit; `leaky`'s does not
    lonely_row = next(row for row, line in enumerate(textwrap.dedent(PROJECT["pkg/layers.py"]).splitlines(), 1) if "lonely())" in line)
    assert fix_at(found["pkg/layers.py"], lonely_row) == "safe"


def test_fix_edits_each_factory_once_and_converges(tmp_path):
    """Several findings share one edit of the factory: `--fix` applies it once, and a second
    run changes nothing."""
    files = {f"{name}.py": source for name, source in CASES.items()}
    files.update(PROJECT)
    _write(tmp_path, files)
    first = _run(tmp_path, "--fix", "--unsafe-fixes", "--exit-zero")
    assert first.returncode == 0, first.stderr
    fixed = {name: (tmp_path / name).read_text(encoding="utf-8") for name in files}
    assert fixed["three_places.py"].count("inplace=True") == 1
    assert "return nn.LeakyReLU(p, inplace=True)" in fixed["three_places.py"]
    assert "return nn.LeakyReLU(slope, inplace=True)" in fixed["nested.py"]
    assert fixed["inplace_parameter.py"].count("act_layer(inplace=True),") == 2
    assert fixed["inplace_parameter.py"].count("act_layer(),") == 1  # after the sigmoid
    assert "act(0.2, inplace=True)" in fixed["pkg/model.py"]
    assert "def leaky(slope=0.1):\n    return nn.LeakyReLU(slope)\n" in fixed["pkg/layers.py"]  # imported: not offered
    assert "return nn.LeakyReLU(slope, inplace=True)" in fixed["pkg/layers.py"]  # `lonely`
    assert "return nn.LeakyReLU(slope)\n" in fixed["mixed_places.py"]  # not every place qualifies
    assert "return nn.LeakyReLU(slope)\n" in fixed["negative_slope.py"]
    second = _run(tmp_path, "--fix", "--unsafe-fixes", "--exit-zero")
    assert second.returncode == 0, second.stderr
    assert {name: (tmp_path / name).read_text(encoding="utf-8") for name in files} == fixed
    again = _run(tmp_path, "--exit-zero", "--output-format", "json")
    assert [f for f in json.loads(again.stdout) if f["fix"]] == []


def test_cached_fix_goes_when_another_file_starts_importing_the_factory(tmp_path):
    """With the result cache: `lonely`'s edit is offered while only layers.py calls it; once
    model.py imports it (layers.py unchanged), layers.py is linted again and the edit goes."""
    _write(tmp_path, PROJECT)

    def fixes() -> Dict[str, Found]:
        result = subprocess.run(
            [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--select", "TML201",
             "--output-format", "json", "--exit-zero", "."],
            capture_output=True, text=True, cwd=tmp_path, timeout=120,
        )
        assert result.returncode == 0, result.stderr
        found: Dict[str, Found] = {}
        for finding in json.loads(result.stdout):
            name = Path(finding["filename"]).resolve().relative_to(tmp_path.resolve()).as_posix()
            fix = finding["fix"]
            found.setdefault(name, {})[(finding["location"]["row"], finding["code"])] = fix["applicability"] if fix else None
        return found

    lonely_row = next(row for row, line in enumerate(textwrap.dedent(PROJECT["pkg/layers.py"]).splitlines(), 1) if "lonely())" in line)
    assert fix_at(fixes()["pkg/layers.py"], lonely_row) == "safe"
    model = tmp_path / "pkg" / "model.py"
    text = model.read_text()
    assert "from .layers import act, hot, leaky\n" in text
    model.write_text(text.replace("from .layers import act, hot, leaky\n", "from .layers import act, hot, leaky, lonely\n"))
    assert fix_at(fixes()["pkg/layers.py"], lonely_row) is None
