"""``project.summarize`` reads each module in one walk (``_nodes``, ``_statements``); these
check that it reads what ``ast.walk`` reads, in the order that decides which import wins."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

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
    monkeypatch.setattr(
        project, "summarize", lambda path, text, **kw: read.append(path) or real(path, text, **kw)
    )
    registry = project.ProjectRegistry()
    paths = [str(package / f"{name}.py") for name in ("a", "b", "c")]
    first = registry.index_for(paths[0], (package / "a.py").read_text(encoding="utf-8"))
    assert read == []  # summarized on first need
    list(first.by_path.values())
    assert sorted(read) == sorted([*paths, str(package / "__init__.py")])
    read.clear()
    second = registry.index_for(paths[1], (package / "b.py").read_text(encoding="utf-8"))
    list(second.by_path.values())
    assert read == [] and second.by_path.keys() == first.by_path.keys()
    assert registry.index_for(paths[1], (package / "b.py").read_text(encoding="utf-8")) is second
    edited = registry.index_for(paths[2], "class C:\n    def f(self):\n        return self.x\n")
    assert edited is not first
    list(edited.by_path.values())
    assert read == [str(package / "c.py")]
    summary = edited.by_path[str(package / "c.py")]
    # who reads which attribute is read only when asked (only the TML101 fix asks)
    assert not summary.reach_known and summary.classes["C"].read == frozenset()
    assert project.ensure_reach(summary).classes["C"].read == frozenset({"x"})


def test_the_import_key_summarizes_only_the_modules_the_imports_resolve_through(tmp_path, monkeypatch):
    # the default rules key a file by what it imports from the project: the index reads the
    # file and the modules its imports resolve through, not every module of the package; the
    # attribute facts (TML101) read them all
    from torchmemlint import project

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "sub" / "__init__.py").write_text("from .blocks import Block\n", encoding="utf-8")
    (package / "sub" / "blocks.py").write_text("from ..util import helper\nclass Block:\n    pass\n", encoding="utf-8")
    (package / "util.py").write_text("def helper():\n    pass\n", encoding="utf-8")
    (package / "model.py").write_text(
        "from .sub import Block\nclass Net(Block):\n    def __init__(self):\n        self.x = 1\n"
    , encoding="utf-8")
    (package / "other.py").write_text("class Other:\n    pass\n", encoding="utf-8")
    read = []
    real = project.summarize
    monkeypatch.setattr(project, "summarize", lambda path, text, **kw: read.append(path) or real(path, text, **kw))
    project._SUMMARIES.clear()
    model = str(package / "model.py")
    index = project.ProjectIndex.for_files([model])
    key = index.key_for(model, frozenset({"imports"}))
    assert sorted(read) == sorted(
        str(package / name) for name in ("model.py", "sub/__init__.py", "sub/blocks.py", "util.py")
    )
    eager = project.ProjectIndex(list(index.by_path.values()))  # every module read first
    assert eager.key_for(model, frozenset({"imports"})) == key
    assert str(package / "other.py") in read  # (read by the line above)
    read.clear()
    project._SUMMARIES.clear()
    full = project.ProjectIndex.for_files([model])
    full.key_for(model, frozenset({"attributes", "imports"}))
    assert len(read) == 6


def test_summaries_kept_in_the_cache_directory_are_read_back_only_when_authentic(tmp_path, monkeypatch):
    # a warm run summarizes only the files whose text changed; a document not signed with the
    # user's secret, or a record not of the schema, is not used (the module is summarized again)
    import hashlib
    import hmac
    import json

    from torchmemlint import project
    from torchmemlint.cache import Cache, secret_path
    from torchmemlint.config import load_settings
    from torchmemlint.engine import SUMMARY_DOCUMENT, lint_paths

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "blocks.py").write_text(
        "from torch import nn\nclass Block(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.act = nn.ReLU()\n", encoding="utf-8"
    )
    (package / "model.py").write_text(
        "from .blocks import Block\nclass Net(Block):\n    pass\n", encoding="utf-8"
    )
    files = sorted(str(path) for path in package.glob("*.py"))
    past = time.time() - 10  # saved before the runs (a run writes no entry for a file whose
    for file in files:  # project was written after it began: engine._ChangedSince)
        os.utime(file, (past, past))
    cache = Cache.open(str(tmp_path / "cache"))
    assert cache is not None
    read = []
    real = project.summarize
    monkeypatch.setattr(project, "summarize", lambda path, text, **kw: read.append(path) or real(path, text, **kw))

    def run():
        read.clear()
        project._SUMMARIES.clear()  # as a new process
        project.REGISTRY.set_run(files)
        return [(r.path, r.findings, r.error) for r in lint_paths(files, load_settings(None), 1, cache=cache)]

    cold = run()
    # a cold run compiles none of them here: the workers return the summaries read off the
    # trees they linted (project_cst), and the keys are made from those after the lint
    assert read == []
    document = tmp_path / "cache" / cache.key / f"{SUMMARY_DOCUMENT}.json"
    assert document.is_file()
    assert run() == cold and read == []
    (package / "model.py").write_text(
        "from .blocks import Block\nclass Net(Block):\n    pass  # edited\n", encoding="utf-8"
    )
    edited = run()
    assert read == [str(package / "model.py")]
    mac, _, body = document.read_bytes().partition(b"\n")
    data = json.loads(body)
    key = next(key for key in data["modules"] if key.endswith(" pkg.blocks pkg"))
    data["modules"][key]["classes"] = []  # forged: Block gone
    document.write_bytes(mac + b"\n" + json.dumps(data).encode())
    assert run() == edited and str(package / "blocks.py") in read
    data["modules"][key]["imports"] = ["not", "a", "mapping"]  # signed, but not the schema
    secret = Path(secret_path()).read_bytes().strip()
    body = json.dumps(data).encode()
    signed = hmac.new(secret, document.name.encode() + b"\0" + body, hashlib.sha256).hexdigest()
    document.write_bytes(signed.encode() + b"\n" + body)
    assert run() == edited and read == [str(package / "blocks.py")]


def test_who_reads_an_attribute_is_read_when_first_asked_also_after_the_store():
    # the index summarizes without these facts (only the TML101 fix asks for them); a stored
    # record without them is read back as such, and they are read from the text when asked
    from torchmemlint import project
    from torchmemlint.project_files import SummaryStore

    text = "import x\n\nclass A:\n    def f(self, y):\n        self.a = y.c\n        return self.b\n"
    for reach in (False, True):
        store = SummaryStore(project.ModuleSummary, project.ClassSummary)
        store.load(None)
        made = project.summarize("/p/m.py", text, reach=reach)
        assert made.reach_known is reach
        store.add(made)
        again = SummaryStore(project.ModuleSummary, project.ClassSummary)
        again.load(store.dump())
        read = again.get("/p/m.py", made.name, made.package, made.digest)
        assert read is not None and read.reach_known is reach and read.classes["A"].bases == ()
        read.text = text
        project.ensure_reach(read)
        assert read.classes["A"].assigned == {"a"} and read.classes["A"].read == {"b"}
        assert "c" in read.foreign_reads and read.reach_known
    lost = project.summarize("/p/m.py", text, reach=False)
    lost.text = None  # no text to read them from: it may read anything
    assert project.ensure_reach(lost).error is not None
