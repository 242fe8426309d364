#!/usr/bin/env python3
"""The project index's module summaries read off libcst's tree (``project_cst.summarize_tree``,
what a run with the cache keys its entries with) against those read with ``ast``
(``project.summarize(..., reach=False)``), on every ``.py`` file under the directories given.

    python benchmarks/tree_summaries.py DIR [DIR ...]

Compared: module name and package, imports (and their order), star imports, classes and their
bases, functions, the error and the text's digest. A file libcst cannot parse is skipped; one
the tree reader declines (syntax newer than this Python) is counted. Prints each difference,
then the counts and the CPU time of the tree reader (the parse not counted).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from torchmemlint.project import summarize  # noqa: E402
from torchmemlint.project_cst import summarize_tree  # noqa: E402
from torchmemlint.tree import parse_module  # noqa: E402


def facts(summary):
    return (summary.name, summary.package, summary.imports, list(summary.imports), summary.star,
            [(name, klass.bases) for name, klass in summary.classes.items()], summary.functions,
            summary.error, summary.digest)


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    files = differ = declined = skipped = 0
    spent = 0.0
    for root in sys.argv[1:]:
        for path in sorted(Path(root).rglob("*.py")):
            try:
                text = path.read_text(encoding="utf-8")
                module = parse_module(text)
            except Exception:  # unreadable, or libcst cannot parse it: no lint tree to read
                skipped += 1
                continue
            files += 1
            start = time.process_time()
            tree = summarize_tree(str(path), text, module)
            spent += time.process_time() - start
            if tree is None:
                declined += 1
                continue
            expected = facts(summarize(str(path), text, reach=False))
            if facts(tree) != expected:
                differ += 1
                print(f"differs: {path}")
    print(f"{files} files under {' '.join(sys.argv[1:])}: {differ} differ, {declined} declined, "
          f"{skipped} not parsed by libcst; tree summaries {spent:.2f} s of CPU")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
