#!/usr/bin/env python3
"""Where an in-process lint of a corpus spends its time, by phase: the libcst parse, the
file's node index, the rules' walk (their analyses included; the TML2xx activation sites
shown apart, inside it), placing the findings (``resolve_findings``), the loop-rule gate and
the project index's ``ast`` summaries (and how many files they summarized); the rest (text gates, contexts, noqa) is total minus
those.

    python benchmarks/lint_phases.py [PATH] [--all]    # default: the timm corpus of speed.py (M)

Every file is linted by ``engine.lint_source`` in this process (no start-up, no worker), in the
order the CLI lints them (``lint_order``: a file after those importing it, so that a tree another
lint parsed is taken, not parsed again), with the default rules or ``--all``. Seconds of wall time on this machine; compare phases within one
run (benchmarks/README.md, "End of the fourth session").
"""
from __future__ import annotations

import sys
import time
from pathlib import Path


def main() -> int:
    from speed import cache_dir  # the corpora speed.py extracts

    args = [a for a in sys.argv[1:] if a != "--all"]
    root = Path(args[0]) if args else cache_dir() / "M"
    if not root.is_dir():
        print(f"lint_phases: no corpus at {root} (run benchmarks/speed.py --corpus M once)", file=sys.stderr)
        return 2
    import torchmemlint.engine as engine
    import torchmemlint.tree as tree
    from torchmemlint.config import load_settings
    from torchmemlint.project import REGISTRY
    from torchmemlint.rules import all_rules

    spent: dict = {}
    calls: dict = {}

    def timed(owner, name: str, phase: str) -> None:
        original = getattr(owner, name)

        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return original(*a, **k)
            finally:
                spent[phase] = spent.get(phase, 0.0) + time.perf_counter() - start
                calls[phase] = calls.get(phase, 0) + 1

        setattr(owner, name, wrapper)

    timed(engine, "parse_module", "parse")
    timed(engine, "resolve_findings", "placing findings")
    timed(engine, "_loop_rules_may_report", "loop gate")
    timed(tree.NodeIndex, "__init__", "node index")
    timed(engine._BatchedWalker, "walk", "rules' walk")
    # (inside the rules' walk: the TML2xx activation sites; and the project index's ``ast``
    # summaries of the files not yet linted, read when a rule first asks for the project)
    import torchmemlint.analysis.activations as activations
    import torchmemlint.project as project

    timed(activations.InplaceAnalysis, "sites", "  of which activation sites")
    timed(project, "summarize", "project summaries (ast)")
    settings = load_settings(None)
    codes = frozenset(all_rules()) if "--all" in sys.argv else None
    files = sorted(str(path) for path in root.rglob("*.py"))
    from torchmemlint.lint_order import importers_first

    files = [files[number] for number in importers_first(files)]  # the CLI's order: kept trees reused
    REGISTRY.set_run(files)
    texts = [(path, Path(path).read_text(encoding="utf-8", errors="surrogateescape")) for path in files]
    start = time.perf_counter()
    for path, text in texts:
        engine.lint_source(text, path, settings, codes=codes)
    total = time.perf_counter() - start
    print(f"{len(files)} files of {root}, {'all rules' if codes else 'default rules'}: {total:.2f} s")
    inner = {phase: seconds for phase, seconds in spent.items() if phase.startswith("  ")}
    for phase, seconds in sorted(spent.items(), key=lambda item: -item[1]):
        if phase in inner:
            continue
        counted = f" ({calls[phase]} files)" if phase == "project summaries (ast)" else ""
        print(f"  {seconds:6.2f} s  {phase}{counted}")
        if phase == "rules' walk":
            for part, part_seconds in inner.items():
                print(f"  {part_seconds:6.2f} s  {part}")
    outside = sum(seconds for phase, seconds in spent.items() if phase not in inner)
    print(f"  {total - outside:6.2f} s  the rest")
    return 0


if __name__ == "__main__":
    sys.exit(main())
