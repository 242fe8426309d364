"""``project.summarize`` reads each module in one walk (``_nodes``, ``_statements``); these
check that it reads what ``ast.walk`` reads, in the order that decides which import wins."""

from __future__ import annotations

import ast

from torchmemlint.project import _nodes, _statements, summarize

SOURCE = '''
import torch.nn as nn
from . import blocks
from .layers import *


def build():
    from .other import Conv as Layer  # read after the top-level import below: it wins
    try:
        import numpy as np
    except ImportError:
        from .fallback import np
    return Layer


from .layers import Linear as Layer


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = blocks.Stem()
        self.relu = nn.ReLU()
        del self.extra

    def forward(self, x):
        def inner(y):
            return self.head(y)
        getattr(self, "relu")
        return inner(self.stem(x)).features_only
'''


def test_summary_reads_imports_classes_and_names():
    summary = summarize("/p/pkg/models/net.py", SOURCE)
    assert summary.imports["Layer"] == "other.Conv"  # (outside a package: no package part)
    assert summary.imports["np"] == "fallback.np"
    assert summary.star == ["layers"]
    net = summary.classes["Net"]
    assert net.bases == ("nn.Module",)
    assert net.assigned == frozenset({"stem", "relu"})
    assert net.read == frozenset({"extra", "head", "stem"})
    assert "Stem" not in summary.foreign_reads  # read on an imported module
    assert "features_only" in summary.foreign_reads and summary.ordered_walk
    assert "relu" in summary.strings


def test_the_walkers_meet_what_ast_walk_meets():
    tree = ast.parse(SOURCE)
    assert sorted(map(id, _nodes(tree))) == sorted(map(id, ast.walk(tree)))
    imports = (ast.Import, ast.ImportFrom)
    assert [n for n in _statements(tree) if isinstance(n, imports)] == [
        n for n in ast.walk(tree) if isinstance(n, imports)
    ]


def test_one_file_at_a_time_shares_the_index_and_rereads_only_what_changed(tmp_path, monkeypatch):
    # flake8 and --stdin-filename lint one file at a time, with its text: the text on disk is
    # no override, and each module is summarized once; a changed buffer summarizes that file
    # again and no other
    from torchmemlint import project

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    for name in ("a", "b", "c"):
        (package / f"{name}.py").write_text(f"class {name.upper()}:\n    pass\n", encoding="utf-8")
    read = []
    real = project.summarize
    monkeypatch.setattr(project, "summarize", lambda path, text: read.append(path) or real(path, text))
    registry = project.ProjectRegistry()
    paths = [str(package / f"{name}.py") for name in ("a", "b", "c")]
    first = registry.index_for(paths[0], (package / "a.py").read_text(encoding="utf-8"))
    assert sorted(read) == sorted([*paths, str(package / "__init__.py")])
    read.clear()
    second = registry.index_for(paths[1], (package / "b.py").read_text(encoding="utf-8"))
    assert read == [] and second.by_path.keys() == first.by_path.keys()
    assert registry.index_for(paths[1], (package / "b.py").read_text(encoding="utf-8")) is second
    edited = registry.index_for(paths[2], "class C:\n    def f(self):\n        return self.x\n")
    assert edited is not first
    assert read == [str(package / "c.py")]
    assert edited.by_path[str(package / "c.py")].classes["C"].read == frozenset({"x"})
