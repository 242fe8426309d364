#!/usr/bin/env python3
"""Recall and precision of TML201, TML203, TML501 and TML502 on held-out real code.

    python benchmarks/recall_rules.py [--cache DIR] [--tool PATH] [--label NAME]

The wheels of ``benchmarks/results/recall_labels.json`` (exact versions, none of them in the
corpus of ``corpus_findings.py``, and no test or rule example of this repository written from
them) are fetched with ``pip download --no-deps`` into ``<cache>/wheels`` (``--cache``, else
$TML_CORPUS_DIR, else $XDG_CACHE_HOME/tml-corpus, else /tmp/tml-corpus: ``corpus_findings.py``'s
cache) and extracted to ``<cache>/recall-rules/<name>-<version>/``. The labelled subset of files
is linted by the CLI, from the directory of each package:

    torchmemlint --select TML201,TML203,TML501,TML502 --output-format json --isolated --exit-zero --no-cache <files>

with ``PYTHONPATH=<--tool>`` (default: this checkout), so that an older commit's package
(``git archive <commit> torchmemlint | tar -x -C DIR``) can be measured the same way.

A finding on a labelled true site (same file, row and code) is a hit; a labelled site without
one is a miss. A finding anywhere else is looked up in the file's ``judged`` list (verdict
``true``: a site the labeller missed, counted as a hit and a true site; ``false``: a false
positive); one that is in neither is *unjudged* and reported as such (the precision given
counts it as false). Results: ``benchmarks/results/recall_rules.json`` under ``--label``
(default "current"), other labels kept, and a Markdown table on stdout.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_findings import cache_dir, download, extract, split_requirement  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
LABELS = REPO / "benchmarks" / "results" / "recall_labels.json"
OUT = REPO / "benchmarks" / "results" / "recall_rules.json"
CODES = ("TML201", "TML203", "TML501", "TML502")

Site = Tuple[str, int, str]  # path (package key / path in the wheel), row, code


def lint(package_dir: Path, files: List[str], tool: Path) -> List[dict]:
    command = [sys.executable, "-m", "torchmemlint", "--select", ",".join(CODES),
               "--output-format", "json", "--isolated", "--exit-zero", "--no-cache", *files]
    env = dict(os.environ, PYTHONPATH=str(tool))
    result = subprocess.run(command, cwd=package_dir, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        raise SystemExit(f"torchmemlint failed in {package_dir}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def measure(labels: dict, cache: Path, tool: Path) -> dict:
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    findings: List[Tuple[Site, str]] = []
    for key, requirement in labels["packages"].items():
        name, version = split_requirement(requirement)
        dest = cache / "recall-rules" / f"{name}-{version}"
        extract(download(requirement, wheels), dest)
        files = [path.split("/", 1)[1] for path in labels["subset"] if path.split("/", 1)[0] == key]
        missing = [f for f in files if not (dest / f).is_file()]
        if missing:
            raise SystemExit(f"{requirement}: no {missing}")
        for finding in lint(dest, files, tool):
            path = Path(finding["filename"])
            relative = path.resolve().relative_to(dest.resolve()) if path.is_absolute() else path
            site = (f"{key}/{relative.as_posix()}", finding["location"]["row"], finding["code"])
            findings.append((site, finding["message"]))
    true_sites = {(p, row, code) for p, row, code, _ in labels["true_sites"]}
    judged = {(p, row, code): verdict for p, row, code, verdict, _ in labels.get("judged", [])}
    true_sites |= {site for site, verdict in judged.items() if verdict == "true"}
    found = {site for site, _ in findings}
    rules: Dict[str, dict] = {}
    for code in CODES:
        expected = {s for s in true_sites if s[2] == code}
        reported = {s for s in found if s[2] == code}
        hits = expected & reported
        false = {s for s in reported - expected if judged.get(s) == "false"}
        unjudged = reported - expected - false
        rules[code] = {
            "true_sites": len(expected), "hits": len(hits), "findings": len(reported),
            "false_positives": len(false), "unjudged": sorted(map(list, unjudged)),
            "missed": sorted(map(list, expected - reported)),
            "recall": round(len(hits) / len(expected), 3) if expected else None,
            "precision": round(len(hits) / len(reported), 3) if reported else None,
        }
    return {"tool": str(tool), "rules": rules, "findings": sorted([list(s) + [m] for s, m in findings])}


def table(results: Dict[str, dict]) -> str:
    lines = ["| run | rule | true sites | found | findings | false | unjudged | recall | precision |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, result in results.items():
        for code, row in result["rules"].items():
            recall = "n/a" if row["recall"] is None else f"{row['recall']:.0%}"
            precision = "n/a" if row["precision"] is None else f"{row['precision']:.0%}"
            lines.append(
                f"| {label} | {code} | {row['true_sites']} | {row['hits']} | {row['findings']} | "
                f"{row['false_positives']} | {len(row['unjudged'])} | {recall} | {precision} |"
            )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache")
    parser.add_argument("--tool", default=str(REPO), help="the directory holding the torchmemlint package to run")
    parser.add_argument("--label", default="current", help="the name of this run in the results")
    args = parser.parse_args(argv)
    labels = json.loads(LABELS.read_text(encoding="utf-8"))
    tool = Path(args.tool).resolve()
    if not (tool / "torchmemlint" / "__init__.py").is_file():
        print(f"error: no torchmemlint package in {tool}", file=sys.stderr)
        return 2
    results = json.loads(OUT.read_text(encoding="utf-8")) if OUT.exists() else {}
    results[args.label] = measure(labels, cache_dir(args.cache), tool)
    OUT.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
