#!/usr/bin/env python3
"""Time the position pass (``positions.resolve_findings``) of this tree against the one of an
earlier commit, on the same reports, alternating in one process.

    python benchmarks/positions_bench.py --against 70fdbb4 --corpus /tmp/tml-corpus/M
    python benchmarks/positions_bench.py --against 70fdbb4 --dense 5000

Every file of the corpus (or one generated findings-dense file, ``speed.dense_model``) is
linted once with ``--select ALL``; the reports handed to ``resolve_findings`` are kept, then
both versions turn them into findings ``--passes`` times, alternating. The findings must be
equal; the mean seconds a pass are printed. The earlier version is read with ``git show
REV:torchmemlint/positions.py`` (it must be a commit where the file exists, 70fdbb4 or later).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from torchmemlint import engine, positions  # noqa: E402
from torchmemlint.config import Settings  # noqa: E402
from torchmemlint.rules import all_rules  # noqa: E402


def _load(revision: str):
    source = subprocess.run(
        ["git", "show", f"{revision}:torchmemlint/positions.py"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "positions_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("positions_before", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", required=True, help="the earlier commit")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--corpus", type=Path, help="a directory of .py files")
    group.add_argument("--dense", type=int, metavar="LINES", help="a generated dense file")
    parser.add_argument("--passes", type=int, default=3)
    args = parser.parse_args()
    before = _load(args.against)
    if args.dense:
        import speed

        sources = [("dense.py", speed.dense_model(args.dense))]
    else:
        sources = [(str(p), p.read_text(encoding="utf-8", errors="replace"))
                   for p in sorted(args.corpus.rglob("*.py"))]
    reports = []
    real = engine.resolve_findings
    engine.resolve_findings = lambda *call: reports.append(call) or real(*call)
    codes = frozenset(all_rules())
    for name, text in sources:
        engine.lint_source(text, name, Settings(), codes)
    engine.resolve_findings = real
    then = now = 0.0
    for _ in range(args.passes):
        for call in reports:
            start = time.perf_counter()
            old = before.resolve_findings(*call)
            then += time.perf_counter() - start
            start = time.perf_counter()
            new = positions.resolve_findings(*call)
            now += time.perf_counter() - start
            assert old == new, call[1]
    print(f"{len(reports)} files with findings; resolve_findings a pass: "
          f"{args.against} {then / args.passes:.3f} s, this tree {now / args.passes:.3f} s "
          "(identical findings)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
