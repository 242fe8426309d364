"""The order a run lints its files in (``torchmemlint/lint_order.py``) and the trees a lint
takes from another file's lint (``links.kept_tree``).

A file is linted after the project files that import it, so that when a lint followed a name
into it (and parsed it), its own lint takes that tree instead of parsing it again. The order
must not change any finding: ``test_project_rules.py`` lints the same split project through
the CLI and compares it with the pasted file; here the order itself and the reuse are checked.
"""

from __future__ import annotations

from pathlib import Path

from torchmemlint import engine
from torchmemlint.analysis import links
from torchmemlint.config import Settings
from torchmemlint.lint_order import importers_first

from test_project_rules import FILES, _write


def _paths(project: Path):
    return sorted(str(path) for path in project.rglob("*.py"))


def test_every_file_is_linted_after_the_project_files_that_import_it(tmp_path):
    project, _, _ = _write(tmp_path)
    (project / "pkg" / "cycle_a.py").write_text("from .cycle_b import B\nA = 1\n")
    (project / "pkg" / "cycle_b.py").write_text("from pkg.cycle_a import A\nB = 2\n")
    (project / "pkg" / "alone.py").write_text("import os\nimport torch.nn as nn\n")
    paths = _paths(project)
    order = importers_first(paths)
    assert sorted(order) == list(range(len(paths)))
    place = {paths[number]: rank for rank, number in enumerate(order)}

    def at(relative: str) -> int:
        return place[str(project / relative)]

    # blocks take the layers with a star import; models.py takes pkg's network absolutely
    assert at("pkg/blocks.py") < at("pkg/layers.py")
    imports = [(relative, source) for relative, source in FILES]
    checked = 0
    for relative, source in imports:
        for line in source.splitlines():
            if line.startswith("from .") and " import " in line:
                target = line.split()[1].lstrip(".")
                if (project / "pkg" / f"{target}.py").is_file() and relative.startswith("pkg/"):
                    assert at(relative) < at(f"pkg/{target}.py"), (relative, target)
                    checked += 1
    assert checked >= 3
    # files that import each other keep their order; a file nobody imports keeps its place
    assert at("pkg/cycle_a.py") < at("pkg/cycle_b.py")
    assert at("pkg/alone.py") < at("pkg/blocks.py")


def test_the_order_of_files_that_import_nothing_of_each_other_is_kept(tmp_path):
    for name in ("c.py", "a.py", "b.py"):
        (tmp_path / name).write_text("import torch\n")
    paths = [str(tmp_path / name) for name in ("c.py", "a.py", "b.py")]
    assert importers_first(paths) == [0, 1, 2]
    assert importers_first(paths[:1]) == [0] and importers_first([]) == []


def test_a_file_another_lint_followed_into_is_not_parsed_again(tmp_path, monkeypatch):
    project, _, _ = _write(tmp_path)
    net, layers = project / "pkg" / "net.py", project / "pkg" / "layers.py"
    settings = Settings(select=("ALL",))
    parsed = []
    real_parse = engine.parse_module
    monkeypatch.setattr(engine, "parse_module", lambda text: parsed.append(text) or real_parse(text))
    links._KEPT.clear()
    expected = engine.lint_source(layers.read_text(), str(layers), settings)
    assert parsed == [layers.read_text()]  # parsed by libcst for its own lint
    links._KEPT.clear()
    engine.lint_source(net.read_text(), str(net), settings)  # follows names down to layers.py
    kept = links.kept_tree(str(layers), layers.read_text())
    assert kept is not None and kept.code == layers.read_text()
    assert links.kept_tree(str(layers), layers.read_text() + "\n# edited\n") is None
    del parsed[:]
    assert engine.lint_source(layers.read_text(), str(layers), settings) == expected
    assert parsed == []
    links._KEPT.clear()
