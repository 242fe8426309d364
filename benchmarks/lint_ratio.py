#!/usr/bin/env python3
"""A default (or ``--all``) lint of a corpus against libcst's parse of the same files, file by
file in one process, in CPU time: the ratio that ``speed.py``'s targets are set on, without
start-up, and steadier on a loaded machine than whole runs (each file's parse and lint are
timed back to back, so a change of load hits both).

    python benchmarks/lint_ratio.py /tmp/tml-corpus/M --reps 2
    python benchmarks/lint_ratio.py /tmp/tml-corpus/M --root /tmp/old-checkout --all

``--root DIR`` lints with the torchmemlint package under DIR (another checkout: compare two
versions by running both, side by side or alternately). Files are linted in the order the CLI
lints them (``lint_order.importers_first``). Prints, per repetition: parse seconds, lint
seconds, lint / parse, findings.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--root", help="the directory holding the torchmemlint package to time")
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="every rule (--select ALL)")
    args = parser.parse_args()
    if args.root:
        root = str(Path(args.root).resolve())
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
        sys.path.insert(0, root)
    import libcst

    import torchmemlint
    import torchmemlint.engine as engine
    from torchmemlint.config import load_settings
    from torchmemlint.lint_order import importers_first
    from torchmemlint.project import REGISTRY
    from torchmemlint.rules import all_rules

    if args.root and not torchmemlint.__file__.startswith(root):
        raise SystemExit(f"torchmemlint imported from {torchmemlint.__file__}, not {root}")
    settings = load_settings(None)
    codes = frozenset(all_rules()) if args.all else None
    files = sorted(str(path) for path in Path(args.corpus).rglob("*.py"))
    texts = [
        (path, Path(path).read_text(encoding="utf-8", errors="surrogateescape"))
        for path in (files[number] for number in importers_first(files))
    ]
    clock = time.process_time
    for _ in range(args.reps):
        REGISTRY.set_run(files)
        parse = lint = 0.0
        found = 0
        for path, text in texts:
            collecting = gc.isenabled()
            gc.disable()  # as the engine parses
            start = clock()
            libcst.parse_module(text)
            parse += clock() - start
            if collecting:
                gc.enable()
            start = clock()
            found += len(engine.lint_source(text, path, settings, codes=codes))
            lint += clock() - start
        print(f"parse {parse:.3f} s  lint {lint:.3f} s  lint/parse {lint / parse:.4f}  findings {found}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
