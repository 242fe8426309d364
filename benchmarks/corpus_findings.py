#!/usr/bin/env python3
"""Lint pinned real packages with every rule; record what torchmemlint says and whether it crashes.

    python benchmarks/corpus_findings.py [--only timm,monai] [--cache DIR] [--jobs 2]

Wheels of exact versions (``PACKAGES``) are fetched with ``pip download --no-deps`` into a cache
outside the repository: ``--cache``, else $TML_CORPUS_DIR, else $XDG_CACHE_HOME/tml-corpus, else
/tmp/tml-corpus (the layout of ../shared/bench/corpus.py and benchmarks/speed.py: wheels in
``<cache>/wheels``, reused when present). Every ``.py`` member of a wheel (its ``*.dist-info`` and
``*.data`` directories aside) is extracted, raw bytes, into ``<cache>/findings/<name>-<version>/``.
No third-party code enters the repository.

Each package is linted by the CLI, one process tree per package, from its extraction directory:

    torchmemlint --select ALL -j 2 --output-format json --isolated --exit-zero <top-level entries>

A run *crashes* when it exits with a code other than 0 or 1, prints a traceback on stderr, or does
not print a JSON list. A crash loses every finding of that package, so the script then finds the
files that crash (the engine run in-process on each file the CLI's own discovery lints, as a fast
locator), lints all the other files with the same command in one run and each suspect on its own,
records every file whose CLI run crashes with the end of its stderr, and keeps the findings of all
the other files (marked ``recovered`` in the results). Should the locator miss a crash, the
remaining files are bisected.

``--judged-table`` lints nothing: it prints the Markdown table of the hand-judged default-rule
findings (results/corpus_judgments.json against the results), as benchmarks/README.md shows it.

Results (``--only`` replaces those packages and keeps the others):
  benchmarks/results/corpus_findings.json  tool commit, versions, rule table, per package: files,
                                           lines, per-rule counts, crashed runs and crashing files
                                           with their stderr, and every finding
  benchmarks/results/corpus_findings.txt   one finding a line: package/path:row:col: CODE message
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import hashlib
import subprocess
import sys
import tarfile
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"
JSON_OUT = RESULTS / "corpus_findings.json"
TXT_OUT = RESULTS / "corpus_findings.txt"
JUDGED = RESULTS / "corpus_judgments.json"  # hand-judged verdict of every default-rule finding

# name -> exact requirement. The first four are the versions the speed benchmark and
# ../shared/bench/corpus.py pin (their wheels are shared through the cache); the others are the
# latest on PyPI on 2026-11-30. open_clip_torch and torchdistill are packages issue 12 quotes.
PACKAGES: Dict[str, str] = {
    "timm": "timm==1.0.31",
    "segmentation_models_pytorch": "segmentation_models_pytorch==0.6.0",
    "torchvision": "torchvision==0.29.1",
    "transformers": "transformers==5.24.0",
    "diffusers": "diffusers==0.42.1",
    "kornia": "kornia==0.9.0",
    "monai": "monai==1.6.1",
    "ultralytics": "ultralytics==8.4.190",
    "lightning": "lightning==2.6.6",
    "open_clip_torch": "open_clip_torch==3.3.0",
    "torchdistill": "torchdistill==1.1.5",
}

TRACEBACK = "Traceback (most recent call last)"
RUN_TIMEOUT_S = 3600
STDERR_KEEP = 4000  # characters of stderr kept per crash


# -- cache ---------------------------------------------------------------------------------------
def cache_dir(arg: Optional[str]) -> Path:
    if arg:
        return Path(arg)
    if os.environ.get("TML_CORPUS_DIR"):
        return Path(os.environ["TML_CORPUS_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "tml-corpus"
    return Path("/tmp/tml-corpus")


def split_requirement(requirement: str) -> Tuple[str, str]:
    """``"open-clip_torch==3.3.0"`` -> ``("open_clip_torch", "3.3.0")`` (the wheel's spelling)."""
    name, sep, version = requirement.partition("==")
    if not sep or not name or not version:
        raise ValueError(f"not an exact requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "_", name.strip()), version.strip()


def find_wheel(wheels: Path, requirement: str) -> Optional[Path]:
    """The wheel of ``requirement`` in ``wheels``, its name compared normalised (an old wheel
    keeps the project's own spelling: ``murel.bootstrap.pytorch-0.0.0-py3-none-any.whl``)."""
    name, version = split_requirement(requirement)
    hits = sorted(
        p for p in wheels.glob("*.whl")
        if p.name.count("-") >= 2 and split_requirement("==".join(p.name.split("-")[:2]))[0].lower() == name.lower()
        and p.name.split("-")[1] == version
    )
    return hits[0] if hits else None


def download(requirement: str, wheels: Path) -> Path:
    wheel = find_wheel(wheels, requirement)
    if wheel is None:
        # (only the wheel's .py files are read, never installed: a wheel asking for a newer Python is fine)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                   "--python-version", "3.11", "--ignore-requires-python", "-d", str(wheels), requirement]
        print("+", " ".join(command), file=sys.stderr)
        subprocess.run(command, check=True)
        wheel = find_wheel(wheels, requirement)
    if wheel is None:
        raise SystemExit(f"no wheel for {requirement} after pip download")
    return wheel


def find_sdist(archives: Path, requirement: str) -> Optional[Path]:
    """The source distribution of ``requirement`` in ``archives``."""
    hits = [path for path in sorted(archives.glob("*")) if find_sdist_name(path.name, requirement)]
    return hits[0] if hits else None


def sdist_links(name: str, index: str = "https://pypi.org/simple") -> Dict[str, Tuple[str, str]]:
    """The files of a project on a PEP 503 index page: file name -> (address, sha256)."""
    url = f"{index}/{re.sub(r'[-_.]+', '-', name).lower()}/"
    print("+ GET", url, file=sys.stderr)
    with urllib.request.urlopen(url, timeout=60) as response:
        page = response.read().decode("utf-8", "replace")
    links = {}
    for address, filename in re.findall(r'<a href="([^"]+)"[^>]*>([^<]+)</a>', page):
        address = address.replace("&amp;", "&")
        location, _, fragment = address.partition("#sha256=")
        links[filename.strip()] = (location, fragment)
    return links


def download_sdist(requirement: str, archives: Path) -> Path:
    """The source distribution (sdist) of an exact requirement, for a package that publishes no
    wheel: fetched as PyPI's simple index lists it, its sha256 checked, never built or installed
    (``pip download`` of an sdist runs its build backend to read its metadata)."""
    found = find_sdist(archives, requirement)
    if found is not None:
        return found
    name, version = split_requirement(requirement)
    archives.mkdir(parents=True, exist_ok=True)
    for filename, (address, digest) in sorted(sdist_links(name).items()):
        if not find_sdist_name(filename, requirement):
            continue
        with urllib.request.urlopen(address, timeout=180) as response:
            data = response.read()
        if not digest or hashlib.sha256(data).hexdigest() != digest:
            raise SystemExit(f"{requirement}: the sdist's sha256 differs from the index's")
        target = archives / filename
        target.write_bytes(data)
        return target
    raise SystemExit(f"no sdist for {requirement} on PyPI")


def find_sdist_name(filename: str, requirement: str) -> bool:
    """Whether ``filename`` is the sdist of ``requirement`` (``name-version.tar.gz`` / ``.zip``,
    the name compared normalised)."""
    name, version = split_requirement(requirement)
    stem = filename[: -len(".tar.gz")] if filename.endswith(".tar.gz") else filename[: -len(".zip")] if filename.endswith(".zip") else None
    if not stem or "-" not in stem:
        return False
    project, _, found = stem.rpartition("-")
    return found == version and re.sub(r"[-_.]+", "_", project).lower() == name.lower()


def is_source_member(name: str) -> bool:
    """A ``.py`` file of the package itself, not of its ``.dist-info`` / ``.data`` metadata."""
    if not name.endswith(".py") or name.endswith("/"):
        return False
    top = name.split("/", 1)[0]
    return not top.endswith((".dist-info", ".data"))


def extract(wheel: Path, dest: Path) -> None:
    stamp = dest / ".complete"
    if stamp.exists() and stamp.read_text() == wheel.name:
        return
    if dest.exists():
        subprocess.run(["rm", "-rf", str(dest)], check=True)
    dest.mkdir(parents=True)
    if wheel.name.endswith(".whl"):
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if is_source_member(info.filename):
                    archive.extract(info, dest)  # raw bytes: encodings, BOMs, CRLF kept
    else:
        extract_sdist(wheel, dest)
    stamp.write_text(wheel.name)


def extract_sdist(sdist: Path, dest: Path) -> None:
    """The ``.py`` files of a source distribution, its top directory (``name-version/``) taken
    off so that paths read as a wheel's (``package/module.py``); ``*.egg-info`` left out, and
    nothing outside ``dest`` written (no absolute paths, ``..``, links or devices)."""

    def members():
        if sdist.name.endswith(".zip"):
            with zipfile.ZipFile(sdist) as archive:
                for info in archive.infolist():
                    if not info.is_dir():
                        yield info.filename, lambda info=info, archive=archive: archive.read(info)
        else:
            with tarfile.open(sdist, "r:*") as archive:
                for info in archive:
                    if info.isfile():
                        yield info.name, lambda info=info, archive=archive: archive.extractfile(info).read()

    for name, read in members():
        parts = name.replace("\\", "/").split("/")[1:]  # below the top directory
        if not parts or not parts[-1].endswith(".py") or any(p in ("", ".", "..") for p in parts):
            continue
        if any(p.endswith(".egg-info") for p in parts):
            continue
        target = dest.joinpath(*parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(read())  # raw bytes: encodings, BOMs, CRLF kept


def top_level(dest: Path) -> List[str]:
    return sorted(p.name for p in dest.iterdir() if not p.name.startswith("."))


# -- running the linter --------------------------------------------------------------------------
def lint_command(jobs: int) -> List[str]:
    return [sys.executable, "-m", "torchmemlint", "--select", "ALL", "-j", str(jobs),
            "--output-format", "json", "--isolated", "--exit-zero"]


def classify_run(returncode: int, stdout: str, stderr: str) -> Tuple[Optional[list], Optional[str]]:
    """``(findings, None)`` for a clean run, ``(None, reason)`` for a crashed one.

    A crash: an exit code other than 0 or 1, a traceback on stderr, or stdout that is not the
    JSON list of findings. (With ``--exit-zero`` a clean run exits 0; 1 is tolerated as
    "findings exist" in case the flag is dropped.)
    """
    reasons = []
    if returncode not in (0, 1):
        reasons.append(f"exit code {returncode}")
    if TRACEBACK in stderr:
        reasons.append("traceback on stderr")
    findings = None
    try:
        parsed = json.loads(stdout)
        if isinstance(parsed, list) and all(isinstance(f, dict) for f in parsed):
            findings = parsed
        else:
            reasons.append("stdout is JSON but not a list of findings")
    except ValueError:
        reasons.append("stdout is not JSON" if stdout.strip() else "no output")
    if reasons:
        return None, "; ".join(reasons)
    return findings, None


def last_error_line(stderr: str) -> str:
    """The exception line that closes a traceback (``AttributeError: ...``), else the last line."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for line in reversed(lines):
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*", line):
            return line.strip()
    return lines[-1].strip() if lines else ""


def run_lint(paths: Sequence[str], cwd: Path, jobs: int) -> dict:
    command = lint_command(jobs) + list(paths)
    started = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        returncode, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as error:
        returncode, stdout, stderr = -9, "", f"timed out after {error.timeout} s"
    findings, crash = classify_run(returncode, stdout, stderr)
    for finding in findings or ():  # the JSON names files absolutely (Ruff's schema); keep them short
        if os.path.isabs(finding.get("filename", "")):
            finding["filename"] = Path(os.path.relpath(finding["filename"], cwd)).as_posix()
    return {"returncode": returncode, "seconds": round(time.monotonic() - started, 2),
            "findings": findings, "crash": crash, "stderr": stderr}


def bisect_crashes(files: List[str], cwd: Path, jobs: int, first: Optional[dict] = None,
                   runner=run_lint) -> Tuple[list, list, int]:
    """Lint ``files``; where a run crashes, split it until the single crashing files are known.

    Returns (findings of the files that do not crash, [crash records], number of runs).
    ``first`` is an already-made run over all of ``files``.
    """
    result = first if first is not None else runner(files, cwd, jobs)
    runs = 0 if first is not None else 1
    if result["crash"] is None:
        return result["findings"], [], runs
    if len(files) == 1:
        stderr = result["stderr"]
        return [], [{"file": files[0], "returncode": result["returncode"],
                     "reason": result["crash"], "error": last_error_line(stderr),
                     "stderr_tail": stderr[-STDERR_KEEP:]}], runs
    middle = len(files) // 2
    findings, crashes = [], []
    for half in (files[:middle], files[middle:]):
        got, crashed, n = bisect_crashes(half, cwd, jobs, runner=runner)
        findings += got
        crashes += crashed
        runs += n
    return findings, crashes, runs


def _probe_one(path: str) -> Optional[str]:
    """Lint one file in this process with every rule; the exception it raises, if any."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_path

    try:
        lint_path(path, Settings(select=("ALL",)))
    except Exception as error:  # noqa: BLE001 - any rule error is what we look for
        return f"{type(error).__name__}: {error}"
    return None


def probe_files(files: Sequence[str], cwd: Path, jobs: int) -> Dict[str, str]:
    """``{file: exception}`` for the files whose in-process lint raises (a fast locator)."""
    import multiprocessing

    here = os.getcwd()
    os.chdir(cwd)
    try:
        methods = multiprocessing.get_all_start_methods()
        context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
        with context.Pool(jobs) as pool:
            errors = pool.map(_probe_one, list(files), chunksize=8)
    finally:
        os.chdir(here)
    return {f: e for f, e in zip(files, errors) if e is not None}


def recover(files: List[str], cwd: Path, jobs: int, runner=run_lint,
            prober=probe_files) -> Tuple[list, list, int]:
    """After a crashed run: the findings of the files that do not crash, and the crashing files.

    The engine is first run in this process on every file to find the ones that raise (one
    pass instead of a bisection's many); the CLI then lints all the others in one run and
    each suspect on its own, so every recorded crash is a crash of the CLI. Anything the
    probe misses (a crash outside the per-file lint) falls back to bisection.
    Returns (findings, [crash records], number of CLI runs).
    """
    suspects = prober(files, cwd, jobs)
    others = [f for f in files if f not in suspects]
    findings, crashes, runs = [], [], 0
    if others:
        findings, crashes, runs = bisect_crashes(others, cwd, jobs, runner=runner)
    for path in files:
        if path in suspects:
            got, crashed, n = bisect_crashes([path], cwd, jobs, runner=runner)
            findings += got
            crashes += crashed
            runs += n
    return findings, crashes, runs


def discovered_files(dest: Path, entries: Sequence[str]) -> List[str]:
    """The files ``torchmemlint --isolated ENTRIES`` lints from ``dest`` (its own discovery)."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import discover

    here = os.getcwd()
    os.chdir(dest)
    try:
        files, _errors = discover(list(entries), Settings())
    finally:
        os.chdir(here)
    return files


def count_lines(dest: Path, files: Sequence[str]) -> int:
    lines = 0
    for name in files:
        data = (dest / name).read_bytes()
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return lines


# -- summarising ---------------------------------------------------------------------------------
def compact(finding: dict) -> list:
    """A finding of the JSON report as ``[path, row, column, code, message]``."""
    location = finding.get("location") or {}
    return [finding["filename"], location.get("row"), location.get("column"),
            finding["code"], finding["message"]]


def rule_counts(findings: Sequence[Sequence]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for row in findings:
        counts[row[3]] = counts.get(row[3], 0) + 1
    return dict(sorted(counts.items()))


def parse_rule_table(text: str) -> Dict[str, dict]:
    """``torchmemlint rule --all`` -> ``{code: {"name": ..., "default": bool, "fix": ...}}``."""
    rules = {}
    for line in text.splitlines():
        match = re.fullmatch(r"(TML\d{3})\s+(\S+)\s+(on|off)\s+(\S.*?)\s*", line)
        if match:
            code, name, default, fix = match.groups()
            rules[code] = {"name": name, "default": default == "on", "fix": fix}
    return rules


def finding_line(package: str, row: Sequence) -> str:
    path, line, column, code, message = row
    return f"{package}/{path}:{line}:{column}: {code} {message}"


def totals(packages: Dict[str, dict], rules: Dict[str, dict]) -> dict:
    counts: Dict[str, int] = {}
    for result in packages.values():
        for code, n in result["counts"].items():
            counts[code] = counts.get(code, 0) + n
    default = {c: n for c, n in counts.items() if rules.get(c, {}).get("default")}
    return {
        "packages": len(packages),
        "files": sum(r["files"] for r in packages.values()),
        "lines": sum(r["lines"] for r in packages.values()),
        "crashed_runs": sorted(p for p, r in packages.items() if r["run"]["crash"]),
        "crashing_files": sum(len(r["crashes"]) for r in packages.values()),
        "counts": dict(sorted(counts.items())),
        "default_rule_findings": sum(default.values()),
        "all_findings": sum(counts.values()),
    }


def finding_key(package: str, row: Sequence) -> str:
    """``package/path:row:col CODE``: how a judged finding is named in corpus_judgments.json."""
    return f"{package}/{row[0]}:{row[1]}:{row[2]} {row[3]}"


def default_rule_findings(result: dict) -> List[str]:
    on = {code for code, rule in result["rules"].items() if rule["default"]}
    return [finding_key(package, row) for package, data in sorted(result["packages"].items())
            for row in data["findings"] if row[3] in on]


def judged_table(result: dict, judgments: Sequence[dict]) -> str:
    """The Markdown precision summary and table of every default-rule finding, with its verdict.

    Raises ``ValueError`` when a default-rule finding has no verdict or a verdict names a
    finding the results do not have (the judgments are out of date).
    """
    by_key = {j["finding"]: j for j in judgments}
    wanted = default_rule_findings(result)
    missing = [k for k in wanted if k not in by_key]
    stale = [k for k in by_key if k not in set(wanted)]
    if missing or stale:
        raise ValueError(f"judgments out of date: {len(missing)} finding(s) not judged "
                         f"{missing[:3]}, {len(stale)} judged finding(s) gone {stale[:3]}")
    per_rule: Dict[str, Dict[str, int]] = {}
    for key in wanted:
        code = key.rsplit(" ", 1)[1]
        verdict = by_key[key]["verdict"]
        if verdict not in ("true", "false", "debatable"):
            raise ValueError(f"{key}: verdict {verdict!r} is not true/false/debatable")
        per_rule.setdefault(code, {"true": 0, "false": 0, "debatable": 0})[verdict] += 1

    def precision(c: Dict[str, int]) -> str:
        n = sum(c.values())
        return f"{100 * c['true'] / n:.1f} %" if n else "-"

    lines = ["| rule | findings | true | false | debatable | precision |",
             "|---|---:|---:|---:|---:|---:|"]
    total = {"true": 0, "false": 0, "debatable": 0}
    for code, c in sorted(per_rule.items()):
        lines.append(f"| {code} | {sum(c.values())} | {c['true']} | {c['false']} "
                     f"| {c['debatable']} | {precision(c)} |")
        for v in total:
            total[v] += c[v]
    lines.append(f"| all default rules | {sum(total.values())} | {total['true']} "
                 f"| {total['false']} | {total['debatable']} | {precision(total)} |")
    lines += ["", "| finding (package/path:row:col code) | verdict | reason |", "|---|---|---|"]
    for key in wanted:
        j = by_key[key]
        note = ""
        if j["verdict"] != "true" and j.get("issue12"):
            note = " *(issue 12)*" if j["issue12"] is True else f" *(issue 12, {j['issue12']})*"
        lines.append(f"| `{key}` | {j['verdict']} | {j['reason'].replace('|', '/')}{note} |")
    return "\n".join(lines) + "\n"


def git_commit() -> dict:
    def git(*args: str) -> str:
        proc = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
        return proc.stdout.strip()

    return {"commit": git("rev-parse", "HEAD"),
            "dirty_sources": bool(git("status", "--porcelain", "--", "torchmemlint"))}


# -- main ----------------------------------------------------------------------------------------
def lint_package(name: str, requirement: str, cache: Path, jobs: int) -> dict:
    wheel = download(requirement, cache / "wheels")
    _, version = split_requirement(requirement)
    dest = cache / "findings" / f"{name}-{version}"
    extract(wheel, dest)
    entries = top_level(dest)
    files = discovered_files(dest, entries)
    print(f"{name}: {len(files)} files in {dest}", file=sys.stderr)
    first = run_lint(entries, dest, jobs)
    run = {"returncode": first["returncode"], "seconds": first["seconds"], "crash": first["crash"],
           "stderr_tail": first["stderr"][-STDERR_KEEP:] if first["crash"] else ""}
    if first["crash"] is None:
        raw, crashes, recovery_runs = first["findings"], [], 0
    else:
        print(f"{name}: the run crashed ({first['crash']}); locating the files among {len(files)}",
              file=sys.stderr)
        raw, crashes, recovery_runs = recover(files, dest, jobs)
        for crash in crashes:
            print(f"{name}: crash in {crash['file']}: {crash['error']}", file=sys.stderr)
    findings = sorted((compact(f) for f in raw), key=lambda r: (r[0], r[1] or 0, r[2] or 0, r[3]))
    return {
        "requirement": requirement,
        "wheel": wheel.name,
        "root": str(dest),
        "entries": entries,
        "files": len(files),
        "lines": count_lines(dest, files),
        "run": run,
        "recovered": first["crash"] is not None,
        "recovery_runs": recovery_runs,
        "crashes": crashes,
        "counts": rule_counts(findings),
        "findings": findings,
    }


def write_results(result: dict) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    JSON_OUT.write_text(json.dumps(result, indent=1) + "\n")
    lines = []
    for package, data in sorted(result["packages"].items()):
        lines += [finding_line(package, row) for row in data["findings"]]
        lines += [f"{package}/{c['file']}: CRASH {c['error']}" for c in data["crashes"]]
    TXT_OUT.write_text("\n".join(lines) + ("\n" if lines else ""))


def print_table(result: dict) -> None:
    rules = result["rules"]
    codes = sorted({c for p in result["packages"].values() for c in p["counts"]})
    print(f"{'package':28} {'files':>6} {'lines':>8} {'crash':>5} "
          + " ".join(f"{c[-3:] if c.startswith('TML') else c:>4}" for c in codes))
    for name, data in sorted(result["packages"].items()):
        print(f"{name:28} {data['files']:6d} {data['lines']:8d} {len(data['crashes']):5d} "
              + " ".join(f"{data['counts'].get(c, 0):4d}" for c in codes))
    total = result["totals"]
    print(f"{'total':28} {total['files']:6d} {total['lines']:8d} {total['crashing_files']:5d} "
          + " ".join(f"{total['counts'].get(c, 0):4d}" for c in codes))
    on = " ".join(c for c, r in sorted(rules.items()) if r["default"])
    print(f"default rules: {on}")
    print(f"findings of default rules: {total['default_rule_findings']}; all rules: "
          f"{total['all_findings']}; crashed runs: {', '.join(total['crashed_runs']) or 'none'}")
    print(f"(written {JSON_OUT.relative_to(REPO)} and {TXT_OUT.relative_to(REPO)})")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only",
                        help=f"comma-separated packages (default all: {','.join(PACKAGES)})")
    parser.add_argument("--cache", help="wheel and extraction cache (default: see above)")
    parser.add_argument("--jobs", "-j", type=int, default=2, help="torchmemlint -j (default 2)")
    parser.add_argument("--judged-table", action="store_true",
                        help=f"lint nothing: print the Markdown table of {JUDGED.name} against the "
                             f"results (the README's 'Findings on real code' table)")
    args = parser.parse_args(argv)
    if args.judged_table:
        try:
            print(judged_table(json.loads(JSON_OUT.read_text()),
                               json.loads(JUDGED.read_text())["judgments"]), end="")
        except (OSError, ValueError, KeyError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 1
        return 0

    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else list(PACKAGES)
    unknown = [n for n in names if n not in PACKAGES]
    if unknown or not names:
        parser.error(f"--only: unknown package(s) {', '.join(unknown) or '(none given)'}; "
                     f"known: {', '.join(PACKAGES)}")
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    cache = cache_dir(args.cache)
    (cache / "wheels").mkdir(parents=True, exist_ok=True)

    rule_table = subprocess.run([sys.executable, "-m", "torchmemlint", "rule", "--all"],
                                capture_output=True, text=True, check=True).stdout
    rules = parse_rule_table(rule_table)
    previous: Dict[str, dict] = {}
    if args.only and JSON_OUT.exists():
        try:
            previous = json.loads(JSON_OUT.read_text()).get("packages", {})
        except ValueError:
            previous = {}
    packages = {n: previous[n] for n in PACKAGES if n in previous and n not in names}
    for name in names:
        packages[name] = lint_package(name, PACKAGES[name], cache, args.jobs)
        packages[name]["measured"] = datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds")
        packages[name]["commit"] = git_commit()["commit"]
    packages = dict(sorted(packages.items()))

    from torchmemlint import __version__ as tml_version

    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    result = {
        "tool": {**git_commit(), "torchmemlint": tml_version,
                 "python": platform.python_version(), "machine": platform.machine(),
                 "cpus": os.cpu_count(),
                 "date": now},
        "command": " ".join(["torchmemlint", *lint_command(args.jobs)[3:], "<top-level entries>"]),
        "cache": str(cache),
        "rules": rules,
        "packages": packages,
    }
    result["totals"] = totals(packages, rules)
    write_results(result)
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
