#!/usr/bin/env python3
"""What one lint run does besides linting: garbage collection, second parses, ``ast`` summaries.

    python benchmarks/run_internals.py [--corpus-dir DIR] [--path-order] [--cache] [--select CODES]

Runs ``torchmemlint --exit-zero -j 1`` in this process (the worker's function called for every
file in turn, with ``pool.between_items`` after each file, as a worker child does; ``--no-cache``
unless ``--cache``, which uses a fresh cache directory: a cold run) and prints:

* the cyclic garbage collector's collections per generation and the CPU seconds they took
  (``gc.callbacks``);
* the project files parsed with libcst a second time, to follow names into them
  (``links.ProjectLinks.analysis_of``), and the linted files whose lint took such a tree instead
  of parsing (``links.kept_tree``): counts and bytes;
* the project files summarized with ``ast`` before their own lint (``project.summarize``
  without a tree): count and bytes;
* the libcst parses and the node indexes built (``tree.NodeIndex``: one per parsed tree when
  each analysis keeps its own, more when an index is dropped and built again).

``--path-order`` lints the files in the order of their paths instead of ``lint_order``'s.
The default directory is timm's extraction by ``speed.py --corpus M`` (``/tmp/tml-corpus/M/timm``).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from torchmemlint import engine, pool, project, tree  # noqa: E402
from torchmemlint.analysis import links  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus-dir", default="/tmp/tml-corpus/M/timm")
    parser.add_argument("--path-order", action="store_true", help="lint in the order of the paths")
    parser.add_argument("--cache", action="store_true", help="a cold run with a fresh cache directory")
    parser.add_argument("--select", help="rule codes (default: the default rules)")
    args = parser.parse_args()
    if not os.path.isdir(args.corpus_dir):
        print(f"error: {args.corpus_dir} is not a directory (fetch it: python benchmarks/speed.py --corpus M)",
              file=sys.stderr)
        return 2

    counts = {"summaries": [0, 0], "follow": [0, 0], "kept": [0, 0], "parses": [0], "indexes": [0]}
    summarize = project.summarize

    def counted_summarize(path, text, reach=True, tree=None):
        if tree is None:
            counts["summaries"][0] += 1
            counts["summaries"][1] += len(text.encode("utf-8", "surrogatepass"))
        return summarize(path, text, reach, tree)

    analysis_of = links.ProjectLinks.analysis_of

    def counted_analysis_of(self, path, digest):
        if (os.path.abspath(path), digest) not in links._KEPT:
            counts["follow"][0] += 1
            counts["follow"][1] += os.path.getsize(path)
        return analysis_of(self, path, digest)

    kept_tree = engine.kept_tree

    def counted_kept_tree(path, text):
        found = kept_tree(path, text)
        if found is not None:
            counts["kept"][0] += 1
            counts["kept"][1] += len(text.encode("utf-8", "surrogatepass"))
        return found

    def in_process(function, items, extra, jobs, on_death):
        results = []
        for item in items:
            results.append(function(item, *extra))
            pool.between_items()
        return results

    parse_module, index_init = tree.parse_module, tree.NodeIndex.__init__

    def counted_parse(*a, **k):
        counts["parses"][0] += 1
        return parse_module(*a, **k)

    def counted_index(self, *a, **k):
        counts["indexes"][0] += 1
        index_init(self, *a, **k)

    engine.parse_module = links.parse_module = counted_parse  # (both import it by name)
    tree.NodeIndex.__init__ = counted_index
    project.summarize = counted_summarize
    links.ProjectLinks.analysis_of = counted_analysis_of
    engine.kept_tree = counted_kept_tree
    engine.run_isolated = in_process
    if args.path_order:
        engine.importers_first = lambda files: list(range(len(files)))

    collections: dict = {}
    started = [0.0]

    def on_collection(phase, info):
        if phase == "start":
            started[0] = time.process_time()
        else:
            done = collections.setdefault(info["generation"], [0, 0.0])
            done[0] += 1
            done[1] += time.process_time() - started[0]

    from torchmemlint.__main__ import run

    with tempfile.TemporaryDirectory() as scratch:
        argv = ["torchmemlint", "--exit-zero", "-j", "1"]
        argv += ["--cache-dir", scratch] if args.cache else ["--no-cache"]
        argv += ["--select", args.select] if args.select else []
        sys.argv = argv + [args.corpus_dir]
        gc.callbacks.append(on_collection)
        begun = time.process_time()
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                run()
        except SystemExit:
            pass
        finally:
            gc.callbacks.remove(on_collection)
            gc.unfreeze()
        total = time.process_time() - begun
    order = "path order" if args.path_order else "lint_order"
    print(f"{args.corpus_dir}, {order}, {'cold cache' if args.cache else 'no cache'}: {total:.2f} s CPU in all")
    for generation in sorted(collections):
        number, seconds = collections[generation]
        print(f"  collections of generation {generation}: {number}, {seconds:.3f} s CPU")
    print(f"  second libcst parses to follow names: {counts['follow'][0]} files, {counts['follow'][1] / 1e3:.0f} KB")
    print(f"  of which a linted file's own lint took the tree: {counts['kept'][0]} files, {counts['kept'][1] / 1e3:.0f} KB")
    print(f"  files summarized with ast before their lint: {counts['summaries'][0]}, {counts['summaries'][1] / 1e6:.2f} MB")
    print(f"  libcst parses: {counts['parses'][0]}; node indexes built: {counts['indexes'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
