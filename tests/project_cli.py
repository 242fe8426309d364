"""The CLI run over a temporary project, as the tests of rules that read other files of the
project (and the result cache keyed by them) drive it: ``(file name, row)`` of each finding;
the rows one rule reports in a file, and a (fixed) file loaded as a module to train it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import List, Set, Tuple


def lint_project(project: Path, code: str, *extra: str) -> Set[Tuple[str, int]]:
    """``torchmemlint check --select <code> --output-format json --exit-zero <extra> .`` from
    ``project``: the rows of ``code``'s findings, by the name of their file."""
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", code, "--output-format", "json",
         "--exit-zero", *extra, "."],
        capture_output=True, text=True, cwd=project, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    found: List[dict] = json.loads(result.stdout)
    return {(Path(f["filename"]).name, f["location"]["row"]) for f in found if f["code"] == code}


def rule_run(code: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``torchmemlint check --isolated --no-cache --select <code> <args>`` from ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", code, *args],
        cwd=cwd, capture_output=True, text=True,
    )


def rule_rows(output: str, code: str) -> List[int]:
    """The rows of ``code``'s findings in the CLI's default output, sorted."""
    return sorted(int(line.split(":")[1]) for line in output.splitlines() if ":" in line and code in line)


def load_module(path: Path, name: str):
    """The file ``path`` imported as the module ``name`` (a fixed copy, to train it)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module
