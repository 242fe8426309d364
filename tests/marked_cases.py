"""Test cases written as small files whose expected findings are marked in the code.

A row that must give a finding ends with ``# expect: TML201`` (and, where the fix matters,
``fix=safe``, ``fix=unsafe`` or ``fix=none``); every other row must give none. The CLI runs
once, as a subprocess, over all the cases of a test module (``lint_cases``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, Mapping, Optional, Set, Tuple

MARKER = re.compile(r"#\s*expect:\s*(TML\d{3})")
FIX = re.compile(r"#\s*expect:\s*TML\d{3}\s+fix=(\w+)")

# per case: (row, code) of each finding -> its fix's applicability (None: no fix)
Found = Dict[Tuple[int, str], Optional[str]]


def marked(source: str) -> Set[Tuple[int, str]]:
    """The (row, code) pairs ``source`` marks with ``# expect: CODE``."""
    lines = textwrap.dedent(source).splitlines()
    return {(row, m.group(1)) for row, line in enumerate(lines, start=1) for m in [MARKER.search(line)] if m}


def marked_fixes(source: str) -> Dict[int, Optional[str]]:
    """The rows marked ``fix=...``, with the applicability they expect (None: ``fix=none``)."""
    lines = textwrap.dedent(source).splitlines()
    return {
        row: (None if m.group(1) == "none" else m.group(1))
        for row, line in enumerate(lines, start=1) for m in [FIX.search(line)] if m
    }


def fix_at(found: Found, row: int) -> Optional[str]:
    """The applicability of the fix of the one finding on ``row``."""
    (applicability,) = [fix for (at, _), fix in found.items() if at == row]
    return applicability


def lint_cases(folder: Path, cases: Mapping[str, str], select: str, isolated: bool = True) -> Dict[str, Found]:
    """Write each case to ``folder/<name>.py`` and lint them all in one CLI run."""
    for name, source in cases.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    command = [sys.executable, "-m", "torchmemlint", "check", str(folder), "--no-cache", "--exit-zero",
               "--select", select, "--output-format", "json"]
    if isolated:
        command.append("--isolated")
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found: Dict[str, Found] = {name: {} for name in cases}
    for finding in json.loads(result.stdout):
        fix = finding["fix"]
        key = (finding["location"]["row"], finding["code"])
        found[Path(finding["filename"]).stem][key] = fix["applicability"] if fix else None
    return found


def lint_in_process(source: str, codes) -> Found:
    """The findings of ``source`` (one case, dedented) for ``codes``, linted in this process:
    ``(row, code)`` -> the applicability of the fix (None: none)."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source

    findings = lint_source(textwrap.dedent(source), "case.py", Settings(select=tuple(codes)))
    return {(f.location.row, f.code): (f.fix.applicability.value if f.fix else None) for f in findings}


def project_findings(root: Path, select: str) -> Set[Tuple[str, int]]:
    """``(file name, row)`` of each finding of one CLI run over the project at ``root`` (its
    own directory: the paths given define the project)."""
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", select, "--output-format", "json",
         "--exit-zero", "--no-cache", "."],
        capture_output=True, text=True, cwd=root, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    return {(Path(f["filename"]).name, f["location"]["row"]) for f in json.loads(result.stdout)}


def write_package(root: Path, files: Mapping[str, str]) -> None:
    """Write each ``relative path -> source`` (dedented) under ``root``, every folder on the way
    a package (an empty ``__init__.py``)."""
    for relative, source in files.items():
        path = root / relative
        folder = path.parent
        while folder != root and not (folder / "__init__.py").exists():
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "__init__.py").write_text("")
            folder = folder.parent
        path.write_text(textwrap.dedent(source), encoding="utf-8")
