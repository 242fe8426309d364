"""The CLI run over a temporary project, as the tests of rules that read other files of the
project (and the result cache keyed by them) drive it: ``(file name, row)`` of each finding."""

from __future__ import annotations

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
