#!/usr/bin/env python3
"""What Python's cyclic garbage collector does during a lint: how many collections run, how
many objects they free (objects only a collection can free: reference cycles) and how long
they take, while every file of a corpus is linted in this process with the default rules.

    python benchmarks/gc_cycles.py [PATH]        # default: the timm corpus of speed.py (M)

``lint_source`` switches the collector off for each file; what a file's lint leaves in
reference cycles is collected later, by the collections that allocations trigger. An analysis
that keeps a cycle alive holds the file's whole tree until then (benchmarks/README.md,
"Garbage collection"). The numbers are CPU-bound and vary with the machine; compare them
between commits in one session (``PYTHONPATH=<a checkout of another commit>`` lints with it).
"""
from __future__ import annotations

import gc
import sys
import time
from pathlib import Path


def main() -> int:
    from speed import cache_dir  # the corpora speed.py extracts

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else cache_dir() / "M"
    if not root.is_dir():
        print(f"gc_cycles: no corpus at {root} (run benchmarks/speed.py --corpus M once)", file=sys.stderr)
        return 2
    from torchmemlint import engine
    from torchmemlint.config import load_settings
    from torchmemlint.project import REGISTRY

    settings = load_settings(None)
    files = sorted(str(path) for path in root.rglob("*.py"))
    REGISTRY.set_run(files)
    texts = [(path, Path(path).read_text(encoding="utf-8", errors="surrogateescape")) for path in files]
    stats = {"collections": 0, "freed": 0, "seconds": 0.0}
    started = []

    def watch(phase: str, info: dict) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        else:
            stats["collections"] += 1
            stats["freed"] += info["collected"]
            stats["seconds"] += time.perf_counter() - started.pop()

    gc.collect()
    gc.callbacks.append(watch)
    begin = time.perf_counter()
    for path, text in texts:
        engine.lint_source(text, path, settings)
    total = time.perf_counter() - begin
    # what no collection has freed yet is freed by a later one: collected here, counted too
    gc.collect()
    gc.callbacks.remove(watch)
    print(
        f"{len(files)} files of {root}: lint {total:.2f} s; {stats['collections']} collections "
        f"(the last one after the lint) freed {stats['freed']:,} objects in {stats['seconds']:.2f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
