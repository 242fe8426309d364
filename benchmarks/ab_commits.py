#!/usr/bin/env python3
"""Whole ``torchmemlint`` processes of an earlier commit against this working tree, alternated.

    python benchmarks/ab_commits.py 5ad4369 --corpus /tmp/tml-corpus/M --rounds 4
    python benchmarks/ab_commits.py HEAD~3 --corpus some/dir -- --select ALL

The revision is checked out into a temporary git worktree; both versions run as
``python -c ...`` with this venv's packages (libcst, click ...), each importing torchmemlint
from its own tree (the editable install's import hook is removed for that), with
``--no-cache --exit-zero -j 1 CORPUS`` and the extra arguments. Rounds alternate which runs
first. Prints the wall seconds of every run, the medians, and the median over rounds of
this tree's time / the revision's; both outputs must be equal (the same findings), else it
stops. For one change's speed on a noisy machine: ``speed.py`` compares against fixed floors,
this compares two versions of torchmemlint itself.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RUN = (
    "import sys; "
    "sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in repr(f).lower()]; "
    "sys.path.insert(0, {root!r}); "
    "import torchmemlint; "
    "assert torchmemlint.__file__.startswith({root!r}), torchmemlint.__file__; "
    "from torchmemlint.cli import main; "
    "sys.argv = ['torchmemlint', '--no-cache', '--exit-zero', '-j', '1', {corpus!r}, *{extra!r}]; "
    "main()"
)


def run(root: Path, corpus: str, extra) -> tuple:
    code = RUN.format(root=str(root), corpus=corpus, extra=list(extra))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{root}: exit {done.returncode}: {done.stderr[-1000:]}")
    return seconds, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision")
    parser.add_argument("--corpus", required=True)
    parser.add_argument("--rounds", type=int, default=4)
    args, extra = parser.parse_known_args()  # more torchmemlint arguments, after --
    args.extra = extra[1:] if extra[:1] == ["--"] else extra
    with tempfile.TemporaryDirectory() as scratch:
        before = Path(scratch) / "before"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "-q", str(before), args.revision],
            cwd=REPO, check=True,
        )
        try:
            roots = {"before": before, "now": REPO}
            times = {"before": [], "now": []}
            for round_ in range(args.rounds):
                order = ["before", "now"] if round_ % 2 == 0 else ["now", "before"]
                outputs = {}
                for name in order:
                    seconds, outputs[name] = run(roots[name], args.corpus, args.extra)
                    times[name].append(seconds)
                    print(f"round {round_ + 1} {name:6s} {seconds:7.2f} s", flush=True)
                if outputs["before"] != outputs["now"]:
                    raise SystemExit("the outputs differ: not the same findings")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(before)], cwd=REPO)
    ratio = statistics.median(n / b for n, b in zip(times["now"], times["before"]))
    print(
        f"{args.revision}: median {statistics.median(times['before']):.2f} s; this tree: "
        f"median {statistics.median(times['now']):.2f} s; now / before, median over rounds: "
        f"{ratio:.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
