#!/usr/bin/env python3
"""Two commits of torchmemlint timed in one run, interleaved: which one lints faster here.

    python benchmarks/speed_ab.py BASE [HEAD] [--corpus /tmp/tml-corpus/M] [--rounds 3] [--select ALL]

Each commit's ``torchmemlint/`` is extracted with ``git archive`` into a scratch directory and
byte-compiled (as pip install does); every round runs, in an order that alternates, for each
commit: the default rules without the cache (``--no-cache``) and with an emptied cache
(``cold``), and libcst's parse of every file once (``speed.py --floor parse``). Whole processes
are timed (``speed.run_once``: CPU of the process and its children); the ratios are CPU time
over the parse of the same round, medians over the rounds. On a shared machine only ratios
from one run compare.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import io
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from speed import run_once  # noqa: E402


def extract(commit: str, into: Path) -> str:
    """``torchmemlint/`` of ``commit`` under ``into``, byte-compiled; the commit's short name."""
    short = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", commit],
                           capture_output=True, text=True, check=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", commit, "torchmemlint"],
                             capture_output=True, check=True).stdout
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into / "torchmemlint")], check=True)
    return short


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("head", nargs="?", default="HEAD")
    parser.add_argument("--corpus", default="/tmp/tml-corpus/M")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--select", help="the rules both commits run (e.g. ALL); default: their default rules")
    parser.add_argument("--scratch", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "tml-speed-ab")
    args = parser.parse_args()
    corpus = Path(args.corpus)
    root = next(p for p in sorted(corpus.iterdir()) if p.is_dir())
    names = {}
    for label, commit in (("base", args.base), ("head", args.head)):
        names[label] = extract(commit, args.scratch / label)
    out = args.scratch / "out.txt"
    python = sys.executable
    commands = {}
    for label in ("base", "head"):
        env = f"PYTHONPATH={args.scratch / label}"
        cache = args.scratch / f"cache-{label}"
        lint = f"cd /tmp && {env} {python} -m torchmemlint check --exit-zero -j 1"
        lint += f" --select {args.select}" if args.select else ""
        commands[f"{label}-default"] = (f"{lint} --no-cache {root}", None)
        commands[f"{label}-cold"] = (f"{lint} --cache-dir {cache} {root}", cache)
    commands["parse"] = (f"{python} {REPO / 'benchmarks/speed.py'} --floor parse {root}", None)
    names_order = list(commands)
    rounds = []
    for number in range(args.rounds):
        order = names_order if number % 2 == 0 else list(reversed(names_order))
        row = {}
        for name in order:
            command, cache = commands[name]
            if cache is not None:
                shutil.rmtree(cache, ignore_errors=True)
            timed = run_once(command, out, 3600)
            if timed["rc"] != 0:
                print(f"{name}: exit {timed['rc']}: {out.read_text()[-500:]}", file=sys.stderr)
                return 1
            row[name] = timed["user"] + timed["sys"]
        rounds.append(row)
        print(f"round {number + 1}: " + ", ".join(f"{k} {v:.2f}s" for k, v in row.items()), flush=True)
    print(f"{root} ({sum(1 for _ in root.rglob('*.py'))} files), base {names['base']}, head {names['head']}, "
          f"{args.rounds} rounds, rules {args.select or 'default'}, CPU seconds, {os.cpu_count()} CPUs shared, load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for name in names_order:
        if name == "parse":
            continue
        ratios = [r[name] / r["parse"] for r in rounds]
        each = ", ".join(f"{ratio:.3f}" for ratio in ratios)
        print(f"  {name:14s} median {statistics.median(r[name] for r in rounds):6.2f}s CPU, "
              f"/ parse {statistics.median(ratios):.3f} (per round: {each})")
    print(f"  parse          median {statistics.median(r['parse'] for r in rounds):6.2f}s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
