"""SARIF 2.1.0 report, for code-scanning dashboards: rule metadata, results and their fixes."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Type
from urllib.parse import quote

from torchmemlint import __version__
from torchmemlint.findings import Edit, Finding
from torchmemlint.docs import fix_summary
from torchmemlint.output import DOCS_URL, rule_url
from torchmemlint.rules import all_rules
from torchmemlint.rules.base import Rule

SCHEMA_URI = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SOURCE_ROOT = "%SRCROOT%"

# Findings that are not rules: the file could not be parsed or read.
ENGINE_ERRORS = {
    "E999": ("syntax-error", "The file does not parse, so no rule could check it."),
    "E902": ("io-error", "The file could not be read or decoded."),
    "TML900": ("internal-error", "A rule raised on this file; the other rules still ran."),
}


def level_for(code: str) -> str:
    """How serious a finding is, in SARIF's words (the LSP and GitHub outputs map these).

    A file that cannot be checked is an error; a default rule is a warning; an opt-in rule
    (off unless selected) is a note, because its findings are advice rather than a defect.
    """
    rule = all_rules().get(code)
    if rule is None:
        return "error"
    return "warning" if rule.default_enabled else "note"


def _rule_descriptor(rule: Type[Rule]) -> Dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "help": {"text": rule.documentation(), "markdown": rule.documentation()},
        "helpUri": rule_url(rule.code),
        "defaultConfiguration": {"enabled": rule.default_enabled, "level": level_for(rule.code)},
        # fixAvailability: as the rule declares it; fix: what its cases get (the docs' column).
        "properties": {"fixAvailability": rule.fix_availability.value, "fix": fix_summary(rule)},
    }


def _error_descriptor(code: str) -> Dict[str, Any]:
    name, description = ENGINE_ERRORS[code]
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": description},
        "defaultConfiguration": {"enabled": True, "level": "error"},
    }


def _artifact_location(filename: str) -> Dict[str, Any]:
    relative = os.path.normpath(filename)
    if os.path.isabs(relative) or relative.split(os.sep)[0] == os.pardir:
        return {"uri": Path(os.path.abspath(filename)).as_uri()}
    # Relative to the directory the linter ran in, which code-scanning takes as the checkout.
    return {"uri": quote(Path(relative).as_posix()), "uriBaseId": SOURCE_ROOT}


def _region(start_row: int, start_column: int, end_row: int, end_column: int) -> Dict[str, int]:
    return {
        "startLine": start_row,
        "startColumn": start_column,
        "endLine": end_row,
        "endColumn": end_column,
    }


def _replacement(edit: Edit) -> Dict[str, Any]:
    start, end = edit.location, edit.end_location
    return {
        "deletedRegion": _region(start.row, start.column, end.row, end.column),
        "insertedContent": {"text": edit.content},
    }


def _result(finding: Finding, rule_index: Dict[str, int]) -> Dict[str, Any]:
    start, end = finding.location, finding.end_location
    artifact = _artifact_location(finding.filename)
    result: Dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": rule_index[finding.code],
        "level": level_for(finding.code),
        "message": {"text": finding.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(start.row, start.column, end.row, end.column),
                }
            }
        ],
    }
    if finding.fix is not None:
        result["fixes"] = [
            {
                "description": {"text": finding.fix.title},
                "artifactChanges": [
                    {
                        "artifactLocation": artifact,
                        "replacements": [_replacement(edit) for edit in finding.fix.edits],
                    }
                ],
                "properties": {"applicability": finding.fix.applicability.value},
            }
        ]
    return result


def format_sarif(findings: List[Finding]) -> str:
    descriptors = [_rule_descriptor(rule) for rule in all_rules().values()]
    descriptors += [_error_descriptor(code) for code in sorted(ENGINE_ERRORS)]
    rule_index = {descriptor["id"]: index for index, descriptor in enumerate(descriptors)}
    run: Dict[str, Any] = {
        "tool": {
            "driver": {
                "name": "torchmemlint",
                "version": __version__,
                "semanticVersion": __version__,
                "informationUri": DOCS_URL,
                "rules": descriptors,
            }
        },
        # Our columns count characters (code points), not SARIF's default UTF-16 units.
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": {SOURCE_ROOT: {"uri": Path(os.getcwd()).as_uri() + "/"}},
        "results": [_result(finding, rule_index) for finding in findings],
    }
    report = {"$schema": SCHEMA_URI, "version": "2.1.0", "runs": [run]}
    return json.dumps(report, indent=2) + "\n"
