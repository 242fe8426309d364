"""JSON report in Ruff's schema, so tools that read ``ruff --output-format json`` read ours."""

from __future__ import annotations

import json
from typing import Any, Dict, List

from torchmemlint.findings import Finding, Location
from torchmemlint.output import rule_url


def _location(location: Location) -> Dict[str, int]:
    return {"row": location.row, "column": location.column}


def finding_to_dict(finding: Finding) -> Dict[str, Any]:
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
        "filename": finding.filename,
        "code": finding.code,
        "message": finding.message,
        "location": _location(finding.location),
        "end_location": _location(finding.end_location),
        "fix": fix,
        "noqa_row": finding.location.row,
        "url": rule_url(finding.code) if finding.code.startswith("TML") else None,
    }


def format_json(findings: List[Finding]) -> str:
    return json.dumps([finding_to_dict(f) for f in findings], indent=2) + "\n"
