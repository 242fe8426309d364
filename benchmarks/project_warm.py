#!/usr/bin/env python3
"""The project index on a whole corpus: a cold run that builds it, and warm runs after an edit.

    python benchmarks/project_warm.py [--corpus /tmp/tml-corpus/M] [--rounds 2] [--json OUT]

``--select ALL`` enables TML101, the rule that reads the project (``Rule.needs_project``), so
every run below builds the project index (``torchmemlint/project.py``) of the corpus. The
corpus is copied to a scratch directory first (the edits never touch it). Timed, as whole
processes (wall clock and CPU of the process and its children, ``os.wait4``), rounds
alternating:

  cold        ``torchmemlint --select ALL --cache-dir C -j 1`` with C emptied first
  parse       libcst.parse_module of every file (``speed.py --floor parse``), for the ratio
  warm        the same command again, nothing changed
  edit-text   after appending a comment to one file: its project facts are unchanged
  edit-facts  after appending a line that reads an attribute name held by classes of other
              files (``getattr(..., "<name>")``): the files whose TML101 answer may change

For each warm run, the number of files linted again is counted: the cache entries the run
rewrote (``Cache.put`` writes the entry of every file it lints, and only those). The cache key
of a file holds its bytes and, for rules that read the project, ``ProjectIndex.key_for``: an
edit re-lints the edited file and the files whose project facts it changes, nothing else.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from speed import run_once  # noqa: E402  (whole-process timing: wall, CPU, peak RSS)

EDITED = "layers/activations.py"  # the file edited (relative to the corpus's package)


def _installed(name: str) -> str:
    """The version of an installed distribution, read from its metadata (never imported)."""
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def rewritten(cache: Path, since: float) -> int:
    """Cache entries written at or after ``since``: the files the run linted (the entries
    ``<tool key>/<2 hex>/<name>.json``, not the project's module summaries beside them)."""
    return sum(
        1 for entry in cache.glob("*/*/*.json") if entry.stat().st_mtime >= since
    )


def _dependants(package: Path, edited: Path) -> list:
    """The files of ``package`` whose cache keys name ``edited``: those that import it, directly
    or through other modules (what an edit there may change for the rules that read the project)."""
    sys.path.insert(0, str(REPO))
    from torchmemlint.project import ProjectIndex

    files = sorted(str(path) for path in package.rglob("*.py"))
    index = ProjectIndex.for_files(files)
    target = str(edited.resolve())
    return [file for file in files if any(module.path == target for module in index.dependencies(file))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", default="/tmp/tml-corpus/M")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=REPO / "benchmarks/results/project_warm_M.json")
    parser.add_argument("--select", default="ALL",
                        help="rules (default ALL: TML101 too); DEFAULT: the default rules, which read the project for "
                             "names only (TML301, TML403, TML501, ...)")
    parser.add_argument("--scratch", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tml-project-warm")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    package = next(p for p in sorted(corpus.iterdir()) if p.is_dir())
    shutil.rmtree(args.scratch, ignore_errors=True)
    copy = args.scratch / "copy" / package.name
    shutil.copytree(package, copy)
    cache = args.scratch / "cache"
    env_python = sys.executable
    select = "" if args.select.upper() == "DEFAULT" else f"--select {args.select} "
    base = (f"PYTHONPATH={REPO} {env_python} -m torchmemlint check --exit-zero -j 1 {select}"
            f"--cache-dir {cache} {copy}")
    floor = f"PYTHONPATH={REPO} {env_python} {REPO / 'benchmarks/speed.py'} --floor parse {copy}"
    out = args.scratch / "out.txt"
    edited = copy / EDITED
    original = edited.read_text(encoding="utf-8")
    rounds = []
    printed: list = []
    for number in range(args.rounds):
        row = {}
        order = ["cold", "parse"] if number % 2 == 0 else ["parse", "cold"]
        for name in order:
            if name == "cold":
                shutil.rmtree(cache, ignore_errors=True)
                edited.write_text(original, encoding="utf-8")
            row[name] = run_once(base if name == "cold" else floor, out, 3600)
        since = time.time() - 0.001
        row["warm"] = run_once(base, out, 3600)
        row["warm"]["relinted"] = rewritten(cache, since)
        edited.write_text(original + "\n# edited\n", encoding="utf-8")
        since = time.time() - 0.001
        row["edit-text"] = run_once(base, out, 3600)
        row["edit-text"]["relinted"] = rewritten(cache, since)
        edited.write_text(
            original + "\n# edited\n_probe = getattr(object(), \"act1\", None)\n", encoding="utf-8"
        )
        since = time.time() - 0.001
        row["edit-facts"] = run_once(base, out, 3600)
        row["edit-facts"]["relinted"] = rewritten(cache, since)
        edited.write_text(original, encoding="utf-8")
        rounds.append(row)
        printed.append(f"round {number + 1}: " + ", ".join(
            f"{name} {row[name]['wall']:.2f}s wall {row[name]['user'] + row[name]['sys']:.2f}s cpu"
            + (f" ({row[name]['relinted']} files re-linted)" if "relinted" in row[name] else "")
            for name in row))
        print(printed[-1], flush=True)
    files = sum(1 for _ in copy.rglob("*.py"))
    dependants = _dependants(copy, edited)
    printed.append(f"the edited file ({EDITED}) and the files that import it, directly or through others "
                   f"(ProjectIndex.dependencies): {1 + len(dependants)}")
    summary = {}
    for name in rounds[0]:
        summary[name] = {
            "wall": statistics.median(r[name]["wall"] for r in rounds),
            "cpu": statistics.median(r[name]["user"] + r[name]["sys"] for r in rounds),
        }
        if "relinted" in rounds[0][name]:
            summary[name]["relinted"] = sorted({r[name]["relinted"] for r in rounds})
    ratio_wall = statistics.median(r["cold"]["wall"] / r["parse"]["wall"] for r in rounds)
    ratio_cpu = statistics.median(
        (r["cold"]["user"] + r["cold"]["sys"]) / (r["parse"]["user"] + r["parse"]["sys"]) for r in rounds
    )
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip()
    result = {
        "corpus": str(corpus), "files": files, "rounds": rounds, "summary": summary,
        "cold_over_parse_wall": ratio_wall, "cold_over_parse_cpu": ratio_cpu,
        "edited": EDITED, "edited_and_dependants": 1 + len(dependants), "select": args.select, "commit": commit, "device": "CPU", "cpus": os.cpu_count(),
        "python": platform.python_version(), "torch": _installed("torch"),
        "load_average_at_end": [round(load, 2) for load in os.getloadavg()],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    printed.append(f"{files} files; cold --select {args.select} (project index built) / libcst parse: "
                   f"{ratio_wall:.3f} wall, {ratio_cpu:.3f} CPU (median of {len(rounds)} rounds)")
    for name in ("warm", "edit-text", "edit-facts"):
        printed.append(f"{name}: {summary[name]['wall']:.2f}s wall, {summary[name]['cpu']:.2f}s CPU, "
                       f"files re-linted {summary[name]['relinted']}")
    print("\n".join(printed[len(rounds):]))
    lines = [
        f"benchmarks/project_warm.py --rounds {len(rounds)} --select {args.select} on {corpus} ({files} files), commit {commit}, "
        f"device CPU, torch {result['torch']} installed (not imported), {os.cpu_count()} CPUs shared, "
        f"load average at the end {' '.join(str(x) for x in result['load_average_at_end'])}",
        *printed,
    ]
    args.json.with_suffix(".txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"(written {args.json} and {args.json.with_suffix('.txt')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
