"""TML201 for an activation a factory builds in one arm of a string dispatch (``if act ==
"ELU": act_fn = nn.ELU() elif ...``), the string first case-folded (``act = act.upper()``), as
real code writes it (DeepCubeAI's ``get_act_fn``, rsl_rl's ``resolve_nn_activation``):

* a call passing a literal picks one arm: ``get_act_fn("RELU")`` builds no ELU, whatever the
  case the caller writes (``"relu"`` folded to ``"RELU"``);
* a class that hands its required ``act`` parameter on (``get_act_fn(act)`` in ``__init__``)
  builds what its constructions pass: in its own file or in the files that import it
  (``ResnetModel(..., "RELU")`` in ``env.py``), through a constructor parameter of theirs;
* a construction passing ``"ELU"`` keeps the ELU site, and a class nobody builds keeps every
  arm's site (what it is given is not known).

The CLI runs over a package, as a subprocess; each file must report exactly the marked rows."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from marked_cases import marked

pytestmark = pytest.mark.slow  # starts the CLI

MODELS = '''
import torch.nn as nn


def get_act_fn(act: str) -> nn.Module:
    act = act.upper()
    if act == "RELU":
        act_fn: nn.Module = nn.ReLU()
    elif act == "ELU":
        act_fn = nn.ELU()
    elif act == "LRELU":
        act_fn = nn.LeakyReLU()
    else:
        raise ValueError(act)
    return act_fn


class ResnetModel(nn.Module):
    def __init__(self, dim: int, n: int, act: str) -> None:
        super().__init__()
        self.blocks = nn.ModuleList()
        self.block_act_fns = nn.ModuleList()
        for _ in range(n):
            self.blocks.append(nn.Linear(dim, dim))
            self.block_act_fns.append(get_act_fn(act)){mark}

    def forward(self, x):
        for block, act_fn in zip(self.blocks, self.block_act_fns):
            x = act_fn(block(x) + x)
        return x


class Plain(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.act = get_act_fn("relu")

    def forward(self, x):
        return self.act(self.lin(x))


class Picked(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.act = get_act_fn("elu")  # expect: TML201

    def forward(self, x):
        return self.act(self.lin(x))
'''

ENV = '''
from .models import ResnetModel


class Sokoban:
    def build(self):
        return ResnetModel(8, 4, "RELU")


class Cube3:
    def __init__(self, act_fn: str):
        self.resnet = ResnetModel(8, 4, act_fn)


def cube3():
    return Cube3("{second}")
'''


def lint(root: Path, *paths: str):
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML201", "--no-cache", "--isolated",
         "--output-format", "json", *paths],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr
    return {(Path(f["filename"]).name, f["location"]["row"]) for f in json.loads(proc.stdout)}


def write(root: Path, second: str, with_env: bool = True) -> str:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    mark = "  # expect: TML201" if second != "relu" or not with_env else ""
    models = textwrap.dedent(MODELS).replace("{mark}", mark)
    (package / "models.py").write_text(models)
    if with_env:
        (package / "env.py").write_text(textwrap.dedent(ENV).replace("{second}", second))
    return models


@pytest.mark.parametrize("second", ["relu", "elu"])
def test_constructions_in_the_importing_files_choose_the_arm(tmp_path, second):
    models = write(tmp_path, second)
    expected = {("models.py", row) for row, _ in marked(models)}
    assert lint(tmp_path, "pkg") == expected
    assert lint(tmp_path, "pkg/models.py") == expected  # (the importing file read as a neighbour)


def test_a_class_nobody_builds_keeps_the_site(tmp_path):
    models = write(tmp_path, "relu", with_env=False)
    assert lint(tmp_path, "pkg") == {("models.py", row) for row, _ in marked(models)}
