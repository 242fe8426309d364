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
