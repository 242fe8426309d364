"""JSON report with the keys and meanings of ``ruff check --output-format json`` (Ruff 0.17).

One object per finding: ``cell`` (null for a Python file; in a notebook the cell, 1-based
among all cells, and then rows are within that cell, as Ruff's), ``code``,
``end_location``, ``filename`` (absolute, as Ruff's; ``-`` for unnamed standard input),
``fix`` (null, or ``applicability`` "safe"/"unsafe", ``message`` and ``edits`` with
``content``, ``location`` and ``end_location``), ``location``, ``message``, ``name`` (the
rule's name; ``syntax-error`` for E999, ``io-error`` for E902), ``noqa_row`` (the reported
row, where a `# noqa` is honoured by every surface; null for E999/E902, which no noqa
suppresses), ``severity`` (``error`` for a file that cannot be checked, ``warning`` for a rule
on by default, ``info`` for an opt-in rule: the levels the editor shows) and ``url``. Rows and
columns are 1-based; columns count characters.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List

from torchmemlint.findings import Finding, Location
from torchmemlint.output import rule_url
from torchmemlint.rules import all_rules

RUFF_KEYS = (
    "cell", "code", "end_location", "filename", "fix", "location", "message", "name", "noqa_row",
    "severity", "url",
)
_NAMES = {"E999": "syntax-error", "E902": "io-error"}


def _location(location: Location) -> Dict[str, int]:
    return {"row": location.row, "column": location.column}


def _filename(filename: str) -> str:
    return filename if filename == "-" else os.path.abspath(filename)


def finding_to_dict(finding: Finding) -> Dict[str, Any]:
    rule = all_rules().get(finding.code)
    fix = None
    if finding.fix is not None:
        fix = {
            "applicability": finding.fix.applicability.value,
            "message": finding.fix.title,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(edit.location),
                    "end_location": _location(edit.end_location),
                }
                for edit in finding.fix.edits
            ],
        }
    return {
        "cell": finding.cell,
        "code": finding.code,
        "end_location": _location(finding.end_location),
        "filename": _filename(finding.filename),
        "fix": fix,
        "location": _location(finding.location),
        "message": finding.message,
        "name": rule.name if rule is not None else _NAMES.get(finding.code, finding.code.lower()),
        "noqa_row": finding.location.row if rule is not None else None,
        "severity": _severity(rule),
        "url": rule_url(finding.code) if rule is not None else None,
    }


def _severity(rule: Any) -> str:
    if rule is None:
        return "error"
    return "warning" if rule.default_enabled else "info"


def format_json(findings: List[Finding]) -> str:
    return json.dumps([finding_to_dict(f) for f in findings], indent=2) + "\n"
