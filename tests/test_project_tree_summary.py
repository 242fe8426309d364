"""A run with the result cache reads each linted module's summary for the project index off
the libcst tree its lint parsed (``project_cst.summarize_tree``), not with a second parse;
these check that it is the summary ``ast`` gives (``project.summarize``), in the order that
decides which import wins, and that a cold run's cache keys are made from it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import libcst as cst
import pytest

import torchmemlint.project as project
from torchmemlint.project import summarize
from torchmemlint.project_cst import summarize_tree

ROOT = Path(__file__).resolve().parent.parent

SOURCE = '''
import torch.nn as nn
import a.b.c
import a.b.d as abd, os.path
from . import blocks
from .layers import *
from ..up import Thing as T; from ...far.away import (x as far_x, y)


def build():
    from .other import Conv as Layer  # read after the top-level import below: it wins
    try:
        import numpy as np
    except ImportError:
        from .fallback import np
    else:
        from .ok import okay
    finally:
        from .fin import *
    try:
        pass
    except* ValueError:
        from .group import np
    return Layer


if cond: import first_suite as suite; import second
elif other:
    from .elif_branch import suite
else:
    from .else_branch import suite, else_only
for item in range(3):
    import in_loop
else:
    import loop_else
while False:
    import in_while
else:
    from .while_else import *
with ctx() as c:
    import in_with
match command:
    case [x]:
        import in_case
    case _:
        from .default_case import suite


from .layers import Linear as Layer


@decorated
class Net(nn.Module, metaclass=Meta):
    import in_class

    def __init__(self):
        super().__init__()
        self.stem = blocks.Stem()


class Generic_(typing.Generic[T], (Base), *more, **extra):
    pass


class Plain:
    pass


class Net(pkg.models.Base):  # redefined: the later bases, the first place
    pass


async def fetch():
    import in_async


def build():
    pass


lambda: 0
'''


def _facts(summary):
    return (
        summary.name, summary.package, summary.imports, list(summary.imports), summary.star,
        [(name, klass.bases) for name, klass in summary.classes.items()], summary.functions,
        summary.error, summary.digest,
    )


def test_the_tree_summary_is_the_ast_summary():
    path = "/p/pkg/models/net.py"
    tree = summarize_tree(path, SOURCE, cst.parse_module(SOURCE))
    assert tree is not None
    assert _facts(tree) == _facts(summarize(path, SOURCE, reach=False))
    # what the order decides, read as ast.walk meets the statements
    assert tree.imports["Layer"] == "other.Conv"
    assert tree.imports["suite"] in {"first_suite", "elif_branch.suite", "else_branch.suite", "default_case.suite"}
    assert tree.star == ["layers", "while_else", "fin"]
    assert tree.imports["far_x"] == "far.away.x" and tree.imports["abd"] == "a.b.d"
    assert tree.classes["Generic_"].bases == ("typing.Generic", "Base")
    assert tree.functions == frozenset({"build", "fetch"})


@pytest.mark.slow
def test_the_tree_summary_of_every_module_of_this_repository():
    """Real code: torchmemlint's own modules and tests, package-relative names included."""
    files = sorted((ROOT / "torchmemlint").rglob("*.py")) + sorted((ROOT / "tests").glob("test_*.py"))
    assert len(files) > 100
    for file in files:
        text = file.read_text(encoding="utf-8")
        tree = summarize_tree(str(file), text, cst.parse_module(text))
        assert tree is not None and _facts(tree) == _facts(summarize(str(file), text, reach=False)), file


@pytest.mark.parametrize(
    "source", ["class Box[T]:\n    pass\n", "def first[T](items: list[T]) -> T:\n    pass\n", "if x:\n    type Alias = int\n"]
)
def test_syntax_this_python_cannot_parse_gets_no_tree_summary(source):
    """``ast`` calls such a module unreadable: the tree must not say more than it would."""
    tree = summarize_tree("/p/m.py", source, cst.parse_module(source))
    if sys.version_info < (3, 12):
        assert tree is None
        assert summarize("/p/m.py", source, reach=False).error is not None
    else:
        assert tree is not None and _facts(tree) == _facts(summarize("/p/m.py", source, reach=False))


PACKAGE = {
    "pkg/__init__.py": "from .blocks import Block\n",
    "pkg/layers.py": "import torch.nn as nn\n\n\nclass ConvBN(nn.Module):\n    pass\n",
    "pkg/blocks.py": "import torch.nn as nn\nfrom .layers import *\n\n\nclass Block(ConvBN):\n    pass\n",
    "pkg/net.py": (
        "import torch\nimport torch.nn as nn\nfrom pkg import Block\n\n\n"
        "def sample(model: Block, x):\n    out = model(x)\n    torch.save(out, 'o.pt')\n"
    ),
}


def _write(root: Path) -> list:
    """The package, saved ten seconds ago (a run does not store the entry of a file whose
    project changed while it ran: ``engine._ChangedSince``)."""
    past = time.time() - 10
    for name, text in PACKAGE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
        os.utime(root / name, (past, past))
    return [str(root / name) for name in PACKAGE]


def test_a_cold_run_keys_its_entries_with_the_summaries_the_workers_read(tmp_path, monkeypatch):
    """No module is compiled with ``ast`` in the main process of a cold run: the workers'
    trees give the summaries; the entries written are the ones a warm run finds, and the
    summaries document holds every linted module."""
    from torchmemlint.cache import Cache
    from torchmemlint.config import load_settings
    from torchmemlint.engine import SUMMARY_DOCUMENT, lint_paths
    from torchmemlint.project import REGISTRY

    files = _write(tmp_path)
    settings = load_settings(None).with_overrides(select=("TML403", "TML501"))  # rules that read the project
    cache = Cache.open(str(tmp_path / "cache"))
    assert cache is not None
    made = []
    real = project.summarize
    monkeypatch.setattr(project, "summarize", lambda *a, **k: made.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(project, "_SUMMARIES", {})
    REGISTRY.set_run(files)
    cold = lint_paths(files, settings, 1, cache=cache)
    assert made == []  # the main process summarized nothing itself
    stored = cache.get_document(SUMMARY_DOCUMENT)
    assert sorted(key.split()[1] for key in stored["modules"]) == ["pkg", "pkg.blocks", "pkg.layers", "pkg.net"]
    entries = sorted((tmp_path / "cache").glob("*/*/*.json"))
    assert len(entries) == len(files)
    stamps = {entry: entry.stat().st_mtime_ns for entry in entries}
    monkeypatch.setattr(project, "_SUMMARIES", {})
    REGISTRY.set_run(files)
    warm = lint_paths(files, settings, 1, cache=cache)
    assert [r.findings for r in warm] == [r.findings for r in cold]
    assert made == []  # every summary came from the document
    assert {entry: entry.stat().st_mtime_ns for entry in entries} == stamps  # all hits


def test_no_entry_for_a_file_whose_project_changed_during_the_run(tmp_path, monkeypatch):
    """``pkg/blocks.py`` is written while the run lints (its time stamp is after the run
    began): the files whose keys name it (itself aside: its bytes are checked) get no entry,
    since their findings may come from the text before; ``pkg/layers.py``, which imports
    nothing of the project, gets one."""
    from torchmemlint.cache import Cache
    from torchmemlint.config import load_settings
    from torchmemlint.engine import lint_paths
    from torchmemlint.project import REGISTRY

    files = _write(tmp_path)
    future = time.time() + 60
    os.utime(tmp_path / "pkg" / "blocks.py", (future, future))
    settings = load_settings(None).with_overrides(select=("TML403", "TML501"))
    cache = Cache.open(str(tmp_path / "cache"))
    monkeypatch.setattr(project, "_SUMMARIES", {})
    REGISTRY.set_run(files)
    lint_paths(files, settings, 1, cache=cache)
    written = {
        path for path in files
        if cache.holds(cache.entry_path(path, settings, settings.codes_for_file(path), False))
    }
    assert written == {str(tmp_path / "pkg" / "layers.py"), str(tmp_path / "pkg" / "blocks.py")}


def test_an_offered_summary_does_not_replace_a_kept_one_that_holds_more():
    """A worker's summary (names only) of a text whose stored record also says who reads
    which attribute (a ``--select ALL`` run read that) leaves the record as it is; for a text
    with no record it is used."""
    from torchmemlint.project_files import SummaryStore

    text = "import x\n\nclass A:\n    def f(self, y):\n        self.a = y.c\n"
    earlier = SummaryStore(project.ModuleSummary, project.ClassSummary)
    earlier.load(None)
    earlier.add(summarize("/p/m.py", text, reach=True))
    store = SummaryStore(project.ModuleSummary, project.ClassSummary)
    store.load(earlier.dump())
    made = summarize_tree("/p/m.py", text, cst.parse_module(text))
    store.offer(*store.record_of(made))
    kept = store.get("/p/m.py", made.name, made.package, made.digest)
    assert kept is not None and kept.reach_known and kept.classes["A"].assigned == {"a"}
    other = "import z\n"
    fresh = summarize_tree("/p/n.py", other, cst.parse_module(other))
    store.offer(*store.record_of(fresh))
    got = store.get("/p/n.py", fresh.name, fresh.package, fresh.digest)
    assert got is not None and got.imports == {"z": "z"} and not got.reach_known
