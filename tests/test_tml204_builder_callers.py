"""TML204 where the dropout's probability reaches the class through builder functions that pass
their ``**kwargs`` on (ArcFace's ``iresnet50(**kwargs)`` -> ``_iresnet(..., **kwargs)`` ->
``IResNet(block, layers, **kwargs)``, ``dropout_keep_prob=0`` the class's default) and the calls
of the builders are in another file of the project (``arcface.py``: ``iresnet50(dropout_keep_prob=0.5)``):
what those calls pass is read there (``factories._passed_elsewhere``). A ``**kwargs`` holds no
position among a call's arguments. Driven through the CLI; with the result cache, editing the
importer's call changes the finding on a warm run.

Look-alikes stay quiet: importers that pass 0 or nothing (the default, 0, drops nothing)."""

from __future__ import annotations

from pathlib import Path
from typing import Set, Tuple

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

IRESNET = """import torch.nn as nn


class IResNet(nn.Module):
    def __init__(self, block, layers, dropout_keep_prob=0, embedding_size=512):
        super().__init__()
        self.fc = nn.Linear(512, embedding_size)
        self.dropout = nn.Dropout(p=dropout_keep_prob, inplace=True)

    def forward(self, x):
        return self.fc(self.dropout(x))


def _iresnet(arch, block, layers, pretrained, **kwargs):
    return IResNet(block, layers, **kwargs)


def iresnet50(pretrained=False, **kwargs):
    return _iresnet("iresnet50", None, [3, 4, 14, 3], pretrained, **kwargs)
"""

ARCFACE = """import torch.nn as nn

from .iresnet import iresnet50


class Arcface(nn.Module):
    def __init__(self, embedding_size=512):
        super().__init__()
        self.arcface = iresnet50(dropout_keep_prob={p}, embedding_size=embedding_size)
"""

ROW = IRESNET.splitlines().index("        self.dropout = nn.Dropout(p=dropout_keep_prob, inplace=True)") + 1


def _lint(project: Path, *extra: str) -> Set[Tuple[str, int]]:
    return lint_project(project, "TML204", *extra)


def _project(root: Path, arcface: str) -> Path:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "iresnet.py").write_text(IRESNET)
    (package / "arcface.py").write_text(arcface)
    return root


def test_an_importer_passing_a_probability_through_the_builders_makes_the_dropout_drop(tmp_path):
    assert _lint(_project(tmp_path, ARCFACE.format(p="0.5")), "--no-cache") == {("iresnet.py", ROW)}


@pytest.mark.parametrize("arcface", [ARCFACE.format(p="0"), ARCFACE.replace("dropout_keep_prob={p}, ", "")],
                         ids=["passes-zero", "passes-nothing"])
def test_importers_leaving_it_at_zero_stay_quiet(tmp_path, arcface):
    assert _lint(_project(tmp_path, arcface), "--no-cache") == set()


def test_editing_the_importer_changes_the_cached_finding(tmp_path):
    project = _project(tmp_path, ARCFACE.format(p="0"))
    assert _lint(project) == set()
    (project / "pkg" / "arcface.py").write_text(ARCFACE.format(p="0.5"))
    assert _lint(project) == {("iresnet.py", ROW)}  # warm: the entry is keyed by its importers' texts
