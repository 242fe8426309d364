"""GitHub Actions workflow commands: each finding becomes an annotation on the pull request."""

from __future__ import annotations

from typing import List

from torchmemlint.findings import Finding
from torchmemlint.output.sarif import level_for
from torchmemlint.output.text import escape_control

# SARIF levels to the three annotation commands GitHub knows.
_COMMANDS = {"error": "error", "warning": "warning", "note": "notice"}


def _escape_data(text: str) -> str:
    # GitHub's own escapes first, then every other control character written as a Python
    # escape (`\x1b`): a log line must not move the cursor or recolour the terminal either.
    return escape_control(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_annotation(finding: Finding) -> str:
    start, end = finding.location, finding.end_location
    properties = ",".join(
        [
            f"title={_escape_property(f'torchmemlint ({finding.code})')}",
            f"file={_escape_property(finding.filename)}",
            f"line={start.row}",
            f"col={start.column}",
            f"endLine={end.row}",
            f"endColumn={end.column}",
        ]
    )
    message = f"{finding.filename}:{start.row}:{start.column}: {finding.code} {finding.message}"
    return f"::{_COMMANDS[level_for(finding.code)]} {properties}::{_escape_data(message)}"


def format_github(findings: List[Finding]) -> str:
    return "".join(format_annotation(finding) + "\n" for finding in findings)
