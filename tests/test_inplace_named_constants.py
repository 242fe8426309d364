"""TML201 through a string default that names a module-level constant (catenets' ``nonlin: str =
DEFAULT_NONLIN`` with ``NL = NONLIN[nonlin]``, the constant in ``constants.py``): the constant's
text, from the file's own single assignment or from the project file it is imported from
(relative or absolute import; ``analysis/constants.py``), picks the activation the table holds.
Driven through the CLI; with the result cache, editing the constants file changes the finding
on a warm run (the importer's cache entry is keyed by what it imports).

Look-alikes stay quiet: a constant that picks a ReLU, a constant assigned twice, a call of the
class that passes another key."""

from __future__ import annotations

from pathlib import Path
from typing import Set, Tuple

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

BASE = """import torch.nn as nn

{importing}

NONLIN = {{"elu": nn.ELU, "relu": nn.ReLU, "leaky_relu": nn.LeakyReLU}}


class BasicNet(nn.Module):
    def __init__(self, n_in, n_out, n_layers=2, nonlin: str = DEFAULT_NONLIN):
        super().__init__()
        NL = NONLIN[nonlin]
        layers = [nn.Linear(n_in, n_out), nn.BatchNorm1d(n_out), NL()]
        for _ in range(n_layers - 1):
            layers.extend([nn.Linear(n_out, n_out), nn.BatchNorm1d(n_out), NL()])
        self.model = nn.Sequential(*layers)

    def forward(self, x):
        return self.model(x)
"""

ROWS = {BASE.splitlines().index(line) + 1 for line in BASE.splitlines() if line.endswith("NL()]") or line.endswith("NL()])")}


def _lint(project: Path, *extra: str) -> Set[Tuple[str, int]]:
    return lint_project(project, "TML201", *extra)


def _project(root: Path, importing: str, constants: str = 'DEFAULT_NONLIN = "elu"\n', extra: str = "") -> Path:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "constants.py").write_text(constants)
    (package / "base.py").write_text(BASE.format(importing=importing) + extra)
    return root


EXPECTED = {("base.py", row) for row in ROWS}


@pytest.mark.parametrize("importing", [
    "from .constants import DEFAULT_NONLIN", "from pkg.constants import DEFAULT_NONLIN", 'DEFAULT_NONLIN = "elu"',
], ids=["relative", "absolute", "same-file"])
def test_the_constant_picks_the_elu(tmp_path, importing):
    assert len(ROWS) == 2
    assert _lint(_project(tmp_path, importing), "--no-cache") == EXPECTED


@pytest.mark.parametrize("importing, constants, extra", [
    ("from .constants import DEFAULT_NONLIN", 'DEFAULT_NONLIN = "relu"\n', ""),
    ("from .constants import DEFAULT_NONLIN", 'DEFAULT_NONLIN = "elu"\nDEFAULT_NONLIN = "relu"\n', ""),
    ('DEFAULT_NONLIN = "relu"', "", ""),
    ("from .constants import DEFAULT_NONLIN", 'DEFAULT_NONLIN = "elu"\n', '\n\nnet = BasicNet(4, 8, nonlin="relu")\n'),
], ids=["relu", "assigned-twice", "same-file-relu", "a-call-passes-relu"])
def test_look_alikes_stay_quiet(tmp_path, importing, constants, extra):
    assert _lint(_project(tmp_path, importing, constants, extra), "--no-cache") == set()


def test_editing_the_constant_changes_the_cached_finding(tmp_path):
    project = _project(tmp_path, "from .constants import DEFAULT_NONLIN", 'DEFAULT_NONLIN = "relu"\n')
    assert _lint(project) == set()
    (project / "pkg" / "constants.py").write_text('DEFAULT_NONLIN = "elu"\n')
    assert _lint(project) == EXPECTED  # warm: base.py's entry is keyed by the texts it imports
