"""Names a file gets through ``from .core import *`` of another project module, itself
star-importing the module that imports torch (fastai v1's ``layers.py`` -> ``torch_core`` ->
``imports/torch.py``): ``torch``, ``F`` and ``nn`` are torch's there, so the file gets the
findings the same code has with the imports written in it (``analysis/star_names.py``).

Look-alikes: a star-imported module that binds ``F`` to something else (a project's own
``F``) leaves the file's ``F.softmax`` unknown, and a name the file binds itself wins over
the star import. A module of the project named in full (``from torchfusion.gan.layers.layers
import *``) gives its torch names and its own classes too (``Linear``, an ``nn.Linear`` of the
project: what it makes is fresh), through a second such import as well; a name the file assigns
itself is its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts the CLI

IMPORTS = """
import torch, torch.nn.functional as F
from torch import nn
"""

CORE = """
from .imports import *


def listify(x):
    return list(x)
"""

BODY = """

class SelfAttention(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.query = nn.Conv1d(n, n // 8, 1)
        self.key = nn.Conv1d(n, n // 8, 1)
        self.value = nn.Conv1d(n, n, 1)

    def forward(self, x):
        f, g, h = self.query(x), self.key(x), self.value(x)
        beta = F.softmax(torch.bmm(f.permute(0, 2, 1).contiguous(), g), dim=1)
        return torch.bmm(h, beta) + x


class Block(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(n, n, 3), nn.BatchNorm2d(n), nn.LeakyReLU(0.2), nn.Conv2d(n, n, 3))

    def forward(self, x):
        return self.body(x)
"""


def _lint(paths) -> list:
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--exit-zero",
         "--select", "TML201,TML601", "--output-format", "json", *map(str, paths)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _rows(findings, name):
    return sorted((f["location"]["row"], f["code"]) for f in findings if Path(f["filename"]).name == name)


def _package(root: Path, imports: str, head: str) -> Path:
    package = root / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "imports.py").write_text(textwrap.dedent(imports))
    (package / "core.py").write_text(textwrap.dedent(CORE))
    (package / "layers.py").write_text(head + BODY)
    return package


def test_names_through_two_star_imports_are_torch_s(tmp_path):
    package = _package(tmp_path / "a", IMPORTS, "from .core import *\n")
    pasted = tmp_path / "pasted.py"
    pasted.write_text("import torch, torch.nn.functional as F; from torch import nn\n" + BODY)  # one line, as the star import
    found = _rows(_lint([package]), "layers.py")
    assert found == _rows(_lint([pasted]), "pasted.py")
    assert {code for _, code in found} == {"TML201", "TML601"}


def test_look_alikes(tmp_path):
    own_f = IMPORTS.replace("torch.nn.functional as F", "torch.nn.functional as tf") + "\nfrom .functions import F\n"
    package = _package(tmp_path / "b", own_f, "from .core import *\n")
    (package / "functions.py").write_text("class F:\n    @staticmethod\n    def softmax(x, dim):\n        return x\n")
    assert _rows(_lint([package]), "layers.py") == [(20, "TML201")]  # F is the project's: no softmax
    shadowed = _package(tmp_path / "c", IMPORTS, "from .core import *\nfrom .mine import nn\n")
    (shadowed / "mine.py").write_text("nn = None\n")
    assert _rows(_lint([shadowed]), "layers.py") == [(15, "TML601")]  # the file's own nn wins


def test_the_project_module_named_in_full(tmp_path):
    # ``from torchfusion.gan.layers.layers import *`` (torchfusion's applications): the
    # project's module named from the package down, itself star-importing another by its full name
    package = _package(tmp_path / "d", IMPORTS, "from pkg.core import *\n")
    (package / "core.py").write_text(textwrap.dedent(CORE).replace("from .imports import *", "from pkg.imports import *"))
    found = _rows(_lint([package]), "layers.py")
    assert (20, "TML201") in found  # (the attention's TML601 is not found this way yet: see benchmarks/README.md)
    outside = _package(tmp_path / "e", IMPORTS, "from torchvision.models import *\n")
    assert _rows(_lint([outside]), "layers.py") == []  # (a library's module: its names are not read)


LINEAR = """
import torch.nn as nn


class Linear(nn.Linear):
    def __init__(self, in_features, out_features, bias=True, init=None):
        super(Linear, self).__init__(in_features, out_features, bias)
        if init is not None:
            init(self.weight)
"""

GENERATOR = """
import torch
{imports}


class MLPGenerator(nn.Module):
    def __init__(self, latent, hidden, out):
        super().__init__()
        layers = [Linear(latent, hidden), nn.LeakyReLU(0.2)]
        layers += [Linear(hidden, out), nn.Tanh()]
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        return self.net(z)
"""


def test_a_project_class_through_a_star_import_of_its_package(tmp_path):
    # torchfusion's applications: ``from torchfusion.gan.layers.layers import *`` brings the
    # project's own ``Linear`` (an ``nn.Linear`` with an initialiser): what it makes is fresh
    root = tmp_path / "f"
    package = root / "gan"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "layers.py").write_text(textwrap.dedent(LINEAR))
    (package / "layers_star.py").write_text("from gan.layers import *\n")
    for name, imports in {
        "named": "import torch.nn as nn\nfrom gan.layers import Linear",
        "star": "from gan.layers import *",
        "star_of_star": "from gan.layers_star import *",
        "relative": "from .layers import *",
    }.items():
        (package / f"{name}.py").write_text(textwrap.dedent(GENERATOR).format(imports=imports))
    found = _lint([package])
    for name in ("named", "star", "star_of_star", "relative"):
        assert [code for _, code in _rows(found, f"{name}.py")] == ["TML201"], name
    # a class the file defines itself under that name, not the project's: what it makes is not known
    (package / "own.py").write_text(textwrap.dedent(GENERATOR).format(imports="from gan.layers import *\n\nLinear = make_linear"))
    assert _rows(_lint([package]), "own.py") == []
