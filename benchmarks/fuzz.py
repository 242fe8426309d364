#!/usr/bin/env python3
"""Fuzz the CLI with generated programs: no traceback, no internal error, no hang, nothing lost.

    pip install hypothesmith        # not a dependency of torchmemlint or its tests
    python benchmarks/fuzz.py [--programs 10000] [--grammar 1000] [--batch 500] [--jobs 2]
                              [--seed 0] [--timeout 600] [--json benchmarks/results/fuzz.json]

Programs, in batches of ``--batch`` files per directory, each directory linted by one CLI
process (``torchmemlint --no-cache --output-format json -j JOBS DIR``):

- *hypothesmith*: ``--grammar`` programs drawn from Python's grammar
  (``hypothesmith.from_grammar()``, a few tenths of a second each), each salted several times
  (different words, places and wrappers: distinct programs) with the words the rules look for (``nn.ReLU(inplace=True)``, ``checkpoint(...)``,
  ``softmax``, ``backward(retain_graph=True)``, ``Variable``, training loops ...), inserted
  between their statements or wrapped around them in a model class;
- *deep*: nesting too deep or expressions too long for Python or for libcst (brackets 50 to
  3,000 deep, unary and ``not`` chains, nested lambdas, calls, conditional expressions,
  ``if`` blocks up to 120 levels, sums of up to 30,000 terms, attribute chains);
- beside them in every directory, *sentinels*: good files with one known finding each (TML401),
  which must each be reported whatever their neighbours do.

Counted: processes that print a traceback, TML900 findings, processes that run past
``--timeout`` (hangs), sentinels missing from a report, and exit codes other than 0/1. Results
go to ``--json`` with the per-batch rows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Dict, List

REPO = Path(__file__).resolve().parent.parent
SENTINEL = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"
SENTINELS_PER_BATCH = 8
# The words the rules' gates and analyses look for, in the forms models use them.
SALT = [
    "import torch\n",
    "import torch.nn as nn\n",
    "import torch.nn.functional as F\n",
    "from torch.utils.checkpoint import checkpoint\n",
    "act = nn.ReLU(inplace=True)\n",
    "drop = nn.Dropout(0.1, inplace=True)\n",
    "y = checkpoint(block, x)\n",
    "p = F.softmax(scores, dim=-1)\n",
    "p = scores.softmax(-1)\n",
    "loss.backward(retain_graph=True)\n",
    "v = torch.autograd.Variable(x)\n",
    "total_loss += loss\n",
    "self.history.append(loss)\n",
    "model.eval()\n",
    "out = model(batch)\n",
    "x = torch.zeros(4, 4).cuda()\n",
    "attn = q @ k.transpose(-2, -1)\n",
]
LOOP = (
    "for batch in loader:\n"
    "    out = model(batch)\n"
    "    loss = criterion(out, batch)\n"
    "    loss.backward()\n"
    "    total += loss\n"
)
MODEL = (
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.act = nn.ReLU(inplace=True)\n"
    "    def forward(self, x):\n"
    "{body}"
    "        return checkpoint(self.act, x)\n"
)


def salted(program: str, rng: random.Random) -> str:
    lines = program.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    # at top-level statement boundaries only (lines that start in column 0 with code)
    cuts = [0] + [i for i, line in enumerate(lines) if line[:1].isalpha() or line[:1] == "_"]
    for _ in range(rng.randint(1, 4)):
        at = rng.choice(cuts)
        lines.insert(at, rng.choice(SALT + [LOOP]))
    text = "".join(lines)
    if rng.random() < 0.3:  # inside a model's forward, indented
        body = "".join("        " + line if line.strip() else line for line in text.splitlines(True))
        text = "import torch.nn as nn\n" + MODEL.format(body=body or "        pass\n")
    return text


def deep_programs(rng: random.Random) -> List[Callable[[], str]]:
    # Depths either within what Python accepts (up to 800) or far beyond it (5,000 and more):
    # in between, libcst's parse of one long line takes superlinear time (a 2,800-term sum of
    # calls on one 62 KB line: 48 s of CPU here), which would make this run hours long.
    def depth(low: int, high: int) -> int:
        if high <= 800:
            return rng.randint(low, high)
        return rng.choice([rng.randint(low, 800), rng.randint(max(low, 5000), max(high, 5000))])
    return [
        lambda: (lambda n: "x = " + "(" * n + "1" + ")" * n + "\n")(depth(50, 3000)),
        lambda: (lambda n: "x = " + "[" * n + "]" * n + "\n")(depth(50, 3000)),
        lambda: (lambda n: "x = " + "{" * n + "}" * n + "\n")(depth(50, 300)),
        lambda: (lambda n: "x = " + "-" * n + "1\n")(depth(100, 20000)),
        lambda: (lambda n: "x = " + "not " * n + "y\n")(depth(100, 5000)),
        lambda: (lambda n: "f = " + "lambda: " * n + "0\n")(depth(50, 3000)),
        lambda: (lambda n: "y = " + "f(" * n + "x" + ")" * n + "\n")(depth(50, 3000)),
        lambda: (lambda n: "y = " + "a if b else " * n + "c\n")(depth(100, 5000)),
        lambda: (lambda n: "y = " + "+".join(["1"] * n) + "\n")(depth(500, 30000)),
        lambda: (lambda n: "y = " + "**".join(["2"] * n) + "\n")(depth(100, 5000)),
        # libcst's parse time grows about quadratically with an attribute chain's length
        # (11,800 links: 42 s of CPU here; Python accepts such a chain), so chains stay short
        lambda: (lambda n: "y = x" + ".a" * n + "\n")(depth(100, 800)),
        lambda: (lambda n: "loss = " + " + ".join(["torch.softmax(x, -1)"] * n) + "\n")(
            depth(100, 8000)
        ),
        lambda: (
            lambda n: "".join(" " * i + "if x:\n" for i in range(n)) + " " * n + "y = checkpoint(f, x)\n"
        )(depth(20, 120)),
        lambda: (
            lambda n: "import torch.nn as nn\nlayers = nn.Sequential("
            + "nn.Sequential(" * n + "nn.ReLU(inplace=True)" + ")" * n + ")\n"
        )(depth(20, 400)),
    ]


def hypothesmith_programs(count: int, seed: int) -> List[str]:
    """``count`` programs from Python's grammar (hypothesmith), deterministic for a seed;
    kept in the temporary directory, since drawing them takes most of a run's time."""
    kept = Path(tempfile.gettempdir()) / f"tml-fuzz-grammar-{seed}-{count}.json"
    if kept.exists():
        return json.loads(kept.read_text(encoding="utf-8"))
    programs = _draw(count, seed)
    kept.write_text(json.dumps(programs), encoding="utf-8")
    return programs


def _draw(count: int, seed: int) -> List[str]:
    import hypothesmith
    from hypothesis import HealthCheck, Phase, given, seed as hypothesis_seed, settings

    found: List[str] = []

    @hypothesis_seed(seed)
    @settings(
        max_examples=count, database=None, phases=[Phase.generate], deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(hypothesmith.from_grammar())
    def collect(program: str) -> None:
        found.append(program)

    collect()
    return found


def lint(directory: Path, jobs: int, timeout: float) -> Dict[str, object]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCHMEMLINT")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    command = [sys.executable, "-m", "torchmemlint", "--no-cache", "--output-format", "json",
               "-j", str(jobs), str(directory)]
    started = time.monotonic()
    try:
        result = subprocess.run(command, capture_output=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"hang": True, "seconds": round(time.monotonic() - started, 1)}
    seconds = round(time.monotonic() - started, 1)
    stderr = result.stderr.decode("utf-8", "replace")
    try:
        findings = json.loads(result.stdout)
    except ValueError:
        findings = None
    return {
        "hang": False,
        "seconds": seconds,
        "returncode": result.returncode,
        "traceback": "Traceback" in stderr or "Traceback" in result.stdout.decode("utf-8", "replace"),
        "stderr": stderr[-2000:],
        "findings": findings,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=10_000)
    parser.add_argument("--grammar", type=int, default=1000,
                        help="distinct hypothesmith programs, each salted into several")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--deep-share", type=float, default=0.2, help="share of deep programs")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", default=str(REPO / "benchmarks" / "results" / "fuzz.json"))
    args = parser.parse_args()

    rng = random.Random(args.seed)
    deep_count = int(args.programs * args.deep_share)
    began = time.monotonic()
    salted_count = args.programs - deep_count
    grammar = hypothesmith_programs(min(args.grammar, salted_count), args.seed)
    generated_in = time.monotonic() - began
    deep = deep_programs(rng)
    programs = [("hypothesmith", salted(grammar[i % len(grammar)], rng)) for i in range(salted_count)]
    programs += [("deep", rng.choice(deep)()) for _ in range(deep_count)]
    rng.shuffle(programs)

    totals: Counter = Counter()
    codes: Counter = Counter()
    rows = []
    examples: Dict[str, List[str]] = {"traceback": [], "TML900": [], "missing": []}
    workspace = Path(tempfile.mkdtemp(prefix="tml-fuzz-"))
    try:
        for start in range(0, len(programs), args.batch):
            batch = programs[start : start + args.batch]
            directory = workspace / f"batch_{start // args.batch:03d}"
            directory.mkdir()
            kinds = {}
            for index, (kind, text) in enumerate(batch):
                name = f"p{index:04d}.py"
                (directory / name).write_text(text, encoding="utf-8", errors="surrogatepass")
                kinds[name] = kind
            sentinels = [f"sentinel_{i}.py" for i in range(SENTINELS_PER_BATCH)]
            for name in sentinels:
                (directory / name).write_text(SENTINEL)
            outcome = lint(directory, args.jobs, args.timeout)
            totals["programs"] += len(batch)
            totals["processes"] += 1
            for kind in kinds.values():
                totals[f"programs_{kind}"] += 1
            row = {"batch": start // args.batch, "files": len(batch) + len(sentinels),
                   "seconds": outcome["seconds"]}
            if outcome["hang"]:
                totals["hangs"] += 1
                row["hang"] = True
                rows.append(row)
                continue
            row["returncode"] = outcome["returncode"]
            if outcome["returncode"] not in (0, 1):
                totals["bad_exit"] += 1
            if outcome["traceback"]:
                totals["tracebacks"] += 1
                examples["traceback"].append(outcome["stderr"])
            findings = outcome["findings"] or []
            if outcome["findings"] is None:
                totals["unreadable_reports"] += 1
            reported = {}
            for finding in findings:
                name = os.path.basename(finding["filename"])
                reported.setdefault(name, []).append(finding)
                codes[finding["code"]] += 1
                if finding["code"] == "TML900":
                    totals["TML900"] += 1
                    examples["TML900"].append(f"{kinds.get(name)}: {finding['message']}")
            for name in sentinels:
                if [f["code"] for f in reported.get(name, [])] != ["TML401"]:
                    totals["sentinels_missing"] += 1
                    examples["missing"].append(f"batch {row['batch']}: {name}")
            totals["sentinels"] += len(sentinels)
            bad = sum(1 for name in kinds if any(f["code"] in ("E999", "E902") for f in reported.get(name, [])))
            row["files_with_E999_or_E902"] = bad
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(workspace, ignore_errors=True)

    report = {
        "command": " ".join(["python", "benchmarks/fuzz.py", *sys.argv[1:]]),
        "python": sys.version.split()[0],
        "seed": args.seed,
        "grammar_programs": len(grammar),
        "batch": args.batch,
        "jobs": args.jobs,
        "timeout_seconds": args.timeout,
        "generation_seconds": round(generated_in, 1),
        "total_seconds": round(time.monotonic() - began, 1),
        "totals": dict(sorted(totals.items())),
        "codes": dict(sorted(codes.items())),
        "examples": {key: value[:10] for key, value in examples.items()},
        "batches": rows,
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("totals", "codes", "total_seconds")}, indent=1))
    failed = totals["tracebacks"] or totals["TML900"] or totals["hangs"] or totals["sentinels_missing"]
    sys.exit(1 if failed or totals["bad_exit"] or totals["unreadable_reports"] else 0)


if __name__ == "__main__":
    main()
