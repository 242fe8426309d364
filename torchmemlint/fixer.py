"""Apply fixes to source text: non-overlapping fixes per pass, until none remain."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, List, Sequence, Tuple

import libcst as cst

from torchmemlint.findings import Edit, Finding, Location
from torchmemlint.sourcefile import newline_of

MAX_PASSES = 10
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


class FixError(Exception):
    """The fixed text does not parse; nothing is written."""


@dataclass
class FixResult:
    text: str
    fixed: List[Finding]  # findings whose fix was applied, over all passes
    remaining: List[Finding]  # findings left after the last pass


def _line_starts(text: str) -> List[int]:
    return [0] + [match.end() for match in _LINE_BREAK.finditer(text)]


def _offset(starts: List[int], location: Location) -> int:
    return starts[location.row - 1] + location.column - 1


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits; newlines inside edits follow the file's line ending."""
    newline = newline_of(text)
    starts = _line_starts(text)
    spans = sorted(
        ((_offset(starts, e.location), _offset(starts, e.end_location), e.content) for e in edits),
        reverse=True,
    )
    for start, end, content in spans:
        content = _LINE_BREAK.sub(newline, content)  # code from libcst may carry \r\n already
        text = text[:start] + content + text[end:]
    return text


def _span(finding: Finding, starts: List[int]) -> Tuple[int, int]:
    """The text a fix claims: its edits and the flagged code itself.

    Claiming the flagged range keeps two fixes for the same code (adding an argument to a
    call that another fix unwraps) out of one pass; the next pass re-lints the result.
    """
    assert finding.fix is not None
    offsets = [
        (_offset(starts, e.location), _offset(starts, e.end_location)) for e in finding.fix.edits
    ]
    offsets.append((_offset(starts, finding.location), _offset(starts, finding.end_location)))
    return min(start for start, _ in offsets), max(end for _, end in offsets)


def select_non_overlapping(text: str, findings: Sequence[Finding]) -> List[Finding]:
    """Fixes whose edits do not touch each other; the rest wait for the next pass."""
    starts = _line_starts(text)
    chosen: List[Finding] = []
    taken: List[Tuple[int, int]] = []
    for finding in findings:
        start, end = _span(finding, starts)
        if any(start <= other_end and other_start <= end for other_start, other_end in taken):
            continue
        chosen.append(finding)
        taken.append((start, end))
    return chosen


def fix_text(
    text: str, lint: Callable[[str], List[Finding]], unsafe_fixes: bool
) -> FixResult:
    """Lint, apply the applicable fixes, and repeat on the result until nothing changes."""
    fixed: List[Finding] = []
    findings = lint(text)
    for _ in range(MAX_PASSES):
        applicable = [f for f in findings if f.fix_applies(unsafe_fixes)]
        if not applicable:
            break
        chosen = select_non_overlapping(text, applicable)
        new_text = apply_edits(text, [edit for f in chosen for edit in f.fix.edits])  # type: ignore[union-attr]
        if new_text == text:
            break
        try:
            cst.parse_module(new_text)
        except cst.ParserSyntaxError as error:
            codes = ", ".join(sorted({f.code for f in chosen}))
            raise FixError(f"fixing {codes} would produce invalid code ({error.message})") from None
        text = new_text
        fixed.extend(chosen)
        findings = lint(text)
    return FixResult(text, fixed, findings)
