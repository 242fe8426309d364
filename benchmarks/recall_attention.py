"""Recall and precision of TML601 (eager attention) on packages nobody here tuned it against.

    python benchmarks/recall_attention.py [--cache DIR] [--set tuning|heldout|both] [--out NAME]

Wheels of exact versions (``TUNING`` and ``HELDOUT`` below: packages with hand-written attention
that are in none of the other corpora) are fetched with ``pip download --no-deps`` into a cache
outside the repository (``--cache``, else $TML_CORPUS_DIR, else $XDG_CACHE_HOME/tml-corpus,
else /tmp/tml-corpus; the same cache ``corpus_findings.py`` uses) and their ``.py`` files
extracted under ``<cache>/recall/<name>-<version>/``. ``torchmemlint --select TML601`` runs on
each, and its findings are compared with ``results/recall_attention_labels.json``: sites written
down by hand, before the rule was changed, as ``[file, softmax line, product line]``. A finding on
either line of a site finds it; a finding on a line of an ``ignore`` entry (code that keeps the
weights but is not ``softmax(q·kᵀ)@v``: heads mixed after the softmax, weights sliced) counts
neither way; any other finding in a labelled file is a false positive. A package whose label has
``files`` is counted in those files only.

The tuning set was read while the rule was developed; the held-out set was labelled once and
not read again. Results: ``results/recall_attention[_<out>].json`` and ``.txt``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus_findings import cache_dir, download, extract, split_requirement  # noqa: E402

RESULTS = HERE / "results"
LABELS = RESULTS / "recall_attention_labels.json"

# the latest versions on PyPI on 2026-12-01
TUNING = (
    "vit_pytorch==1.26.14", "denoising_diffusion_pytorch==2.3.4", "perceiver_pytorch==0.11.0",
    "tab_transformer_pytorch==0.6.1", "bottleneck_transformer_pytorch==0.1.4",
    "timesformer_pytorch==0.4.1", "halonet_pytorch==0.0.5", "lambda_networks==0.4.0",
    "linear_attention_transformer==0.19.1", "performer_pytorch==1.1.4", "reformer_pytorch==1.4.4",
)
HELDOUT = (
    "alphafold2_pytorch==0.4.32", "audiolm_pytorch==2.4.0", "axial_attention==0.6.1",
    "conformer==0.3.2", "enformer_pytorch==0.8.12", "musiclm_pytorch==0.2.8",
    "segformer_pytorch==0.0.6", "transganformer==0.0.17", "uformer_pytorch==0.0.8",
    "dalle_pytorch==1.6.6", "imagen_pytorch==2.1.0", "nuwa_pytorch==0.7.8",
    "memorizing_transformers_pytorch==0.4.1", "se3_transformer_pytorch==0.9.0",
    "sinkhorn_transformer==0.11.4", "routing_transformer==1.6.1",
)


def lint(dest: Path, files: Sequence[str], jobs: int) -> List[dict]:
    command = [sys.executable, "-m", "torchmemlint", "--select", "TML601", "--isolated", "--exit-zero",
               "--no-cache", "-j", str(jobs), "--output-format", "json", *files]
    run = subprocess.run(command, cwd=dest, capture_output=True, text=True)
    if run.returncode != 0 or "Traceback" in run.stderr:
        raise SystemExit("torchmemlint failed in %s:\n%s" % (dest, run.stderr[-2000:]))
    return json.loads(run.stdout or "[]")


def _path(finding: dict, dest: Path) -> str:
    path = Path(finding["filename"])
    return str(path.relative_to(dest) if path.is_absolute() else path)


def _line(finding: dict) -> int:
    return int(finding["location"]["row"])


def score(label: dict, findings: Sequence[dict], dest: Path) -> dict:
    sites = [tuple(site[:3]) for site in label["sites"]]
    ignored = [(entry[0], entry[1], entry[2]) for entry in label.get("ignore", [])]
    counted_files = set(label.get("files") or [])
    found, false_positives, ignored_hits = set(), [], []
    fixable = 0
    for finding in findings:
        path, line = _path(finding, dest), _line(finding)
        if counted_files and path not in counted_files:
            continue
        hit = [s for s in sites if s[0] == path and line in (s[1], s[2])]
        if hit:
            found.add(hit[0])
            fixable += bool(finding.get("fix"))
            continue
        if any(e[0] == path and e[1] <= line <= e[2] for e in ignored):
            ignored_hits.append("%s:%d" % (path, line))
            continue
        false_positives.append("%s:%d" % (path, line))
    missed = ["%s:%d" % (s[0], s[2]) for s in sites if s not in found]
    return {"sites": len(sites), "found": len(found), "with_fix": fixable, "missed": missed,
            "false_positives": false_positives, "ignored_hits": ignored_hits}


def ratio(a: int, b: int) -> str:
    return "n/a" if b == 0 else "%.1f %%" % (100.0 * a / b)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", help="wheel cache (default: see the module doc)")
    parser.add_argument("--set", choices=("tuning", "heldout", "both"), default="both")
    parser.add_argument("--out", default="", help="suffix of the result files (e.g. 'before')")
    parser.add_argument("--jobs", "-j", type=int, default=1)
    args = parser.parse_args(argv)
    labels = json.loads(LABELS.read_text())
    cache = cache_dir(args.cache)
    (cache / "wheels").mkdir(parents=True, exist_ok=True)
    chosen = {"tuning": ("tuning",), "heldout": ("heldout",), "both": ("tuning", "heldout")}[args.set]
    result: Dict[str, dict] = {}
    lines = []
    for part in chosen:
        totals = {"sites": 0, "found": 0, "with_fix": 0, "false_positives": 0}
        packages = {}
        for requirement in (TUNING if part == "tuning" else HELDOUT):
            label = labels[part][requirement]
            wheel = download(requirement, cache / "wheels")
            name, version = split_requirement(requirement)
            dest = cache / "recall" / f"{name}-{version}"
            extract(wheel, dest)
            files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*.py"))
            scored = score(label, lint(dest, files, args.jobs), dest)
            packages[requirement] = scored
            for key in ("sites", "found", "with_fix"):
                totals[key] += scored[key]
            totals["false_positives"] += len(scored["false_positives"])
            lines.append("%-40s %-8s sites %2d found %2d (with fix %2d) false positives %d%s%s" % (
                requirement, part, scored["sites"], scored["found"], scored["with_fix"],
                len(scored["false_positives"]),
                ("  missed: " + ", ".join(scored["missed"])) if scored["missed"] else "",
                ("  FP: " + ", ".join(scored["false_positives"])) if scored["false_positives"] else ""))
        findings = totals["found"] + totals["false_positives"]
        totals["recall"] = ratio(totals["found"], totals["sites"])
        totals["precision"] = ratio(totals["found"], findings)
        result[part] = {"totals": totals, "packages": packages}
        lines.append("%s: recall %s (%d of %d sites), precision %s (%d of %d findings), %d with a fix" % (
            part, totals["recall"], totals["found"], totals["sites"], totals["precision"],
            totals["found"], findings, totals["with_fix"]))
    text = "\n".join(lines) + "\n"
    print(text, end="")
    suffix = ("_" + args.out) if args.out else ""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"recall_attention{suffix}.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / f"recall_attention{suffix}.txt").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
