"""Apply fixes to source text: non-overlapping fixes per pass, until none remain."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.findings import Edit, Finding, Location
from torchmemlint.sourcefile import LINE_BREAK, line_starts, newline_of
from torchmemlint.tree import parse_module

MAX_PASSES = 10


class FixError(Exception):
    """The fixed text does not parse; nothing is written."""


@dataclass
class FixResult:
    text: str
    fixed: List[Finding]  # findings whose fix was applied, over all passes
    remaining: List[Finding]  # findings left after the last pass


def _offset(starts: List[int], location: Location) -> int:
    return starts[location.row - 1] + location.column - 1


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply non-overlapping edits; newlines inside edits follow the file's line ending."""
    newline = newline_of(text)
    starts = line_starts(text)
    spans = sorted(
        ((_offset(starts, e.location), _offset(starts, e.end_location), e.content) for e in edits),
        reverse=True,
    )
    for start, end, content in spans:
        content = LINE_BREAK.sub(newline, content)  # code from libcst may carry \r\n already
        text = text[:start] + content + text[end:]
    return text


def has_overlaps(
    text: str, edits: Sequence[Edit], starts: Optional[List[int]] = None
) -> bool:
    """Whether two edits of one fix replace overlapping text (a nested or repeated use).

    ``starts``: the text's line start offsets, when the caller has them already.
    """
    if len(edits) < 2:
        return False
    starts = starts if starts is not None else line_starts(text)
    spans = sorted((_offset(starts, e.location), _offset(starts, e.end_location)) for e in edits)
    return any(spans[i][1] > spans[i + 1][0] for i in range(len(spans) - 1))


class _Node:
    """An edit in offsets, with the edits nested inside the text it replaces."""

    __slots__ = ("start", "end", "content", "inner")

    def __init__(self, start: int, end: int, content: str) -> None:
        self.start, self.end, self.content = start, end, content
        self.inner: List["_Node"] = []


def compose_edits(
    text: str, edits: Sequence[Edit], starts: Optional[List[int]] = None
) -> Optional[Tuple[Edit, ...]]:
    """One fix's edits without overlaps: an edit inside another is applied to its content.

    A rule that rewrites every use of a name writes each use's replacement from the original
    code, so in ``self.act(self.conv2(self.act(x)))`` the outer replacement still contains
    the inner ``self.act(x)``, and the inner edit replaces text inside the outer one. The inner
    edit is rebased onto the outer content where that content keeps the inner text verbatim
    (an alignment of the original and the replacement), recursively. None when edits overlap
    partially, or an inner edit's text does not survive in the outer content: such a fix is
    not offered rather than applied wrongly.
    """
    starts = starts if starts is not None else line_starts(text)
    if not has_overlaps(text, edits, starts):
        return tuple(edits)
    nodes = sorted(
        (_Node(_offset(starts, e.location), _offset(starts, e.end_location), e.content)
         for e in edits),
        key=lambda node: (node.start, -node.end),
    )
    top: List[_Node] = []
    stack: List[_Node] = []
    for node in nodes:
        while stack and not _inside(node, stack[-1]):
            if node.start < stack[-1].end and stack[-1].start < node.end:
                return None  # partial overlap
            stack.pop()
        (stack[-1].inner if stack else top).append(node)
        stack.append(node)
    composed = []
    for node in top:
        content = _compose(text, node)
        if content is None:
            return None
        composed.append((node.start, node.end, content))
    return tuple(
        Edit(content, _location(starts, start), _location(starts, end))
        for start, end, content in composed
    )


def _inside(node: _Node, outer: _Node) -> bool:
    """Strictly within the text ``outer`` replaces (an insertion at its edge is beside it)."""
    if node.start == node.end and node.start in (outer.start, outer.end):
        return False
    return outer.start <= node.start and node.end <= outer.end and outer.end > outer.start


def _compose(text: str, node: _Node) -> Optional[str]:
    if not node.inner:
        return node.content
    original = text[node.start : node.end]
    blocks = [
        (i1, i2, j1)
        for tag, i1, i2, j1, _ in difflib.SequenceMatcher(
            None, original, node.content, autojunk=False
        ).get_opcodes()
        if tag == "equal"
    ]
    spans = []
    for inner in node.inner:
        content = _compose(text, inner)
        if content is None:
            return None
        start, end = inner.start - node.start, inner.end - node.start
        block = next((b for b in blocks if b[0] <= start and end <= b[1]), None)
        if block is None:
            return None  # the outer replacement no longer holds the inner edit's text
        i1, _, j1 = block
        spans.append((j1 + start - i1, j1 + end - i1, content))
    result = node.content
    for start, end, content in sorted(spans, reverse=True):
        result = result[:start] + content + result[end:]
    return result


def _location(starts: List[int], offset: int) -> Location:
    low, high = 0, len(starts) - 1
    while low < high:  # the last line starting at or before offset
        middle = (low + high + 1) // 2
        if starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return Location(low + 1, offset - starts[low] + 1)


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
    """Fixes whose edits do not touch each other; the rest wait for the next pass.

    A fix whose edits are those of a fix already chosen (several findings that one
    `torch.no_grad()` covers) is chosen with it: its edits are applied once (``apply_edits``).
    """
    starts = line_starts(text)
    chosen: List[Finding] = []
    taken: List[Tuple[int, int]] = []
    same: Set[Tuple[Edit, ...]] = set()
    for finding in findings:
        assert finding.fix is not None
        if finding.fix.edits in same:
            chosen.append(finding)
            continue
        start, end = _span(finding, starts)
        if any(start <= other_end and other_start <= end for other_start, other_end in taken):
            continue
        chosen.append(finding)
        taken.append((start, end))
        same.add(finding.fix.edits)
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
        edits = dict.fromkeys(edit for f in chosen for edit in f.fix.edits)  # type: ignore[union-attr]
        new_text = apply_edits(text, list(edits))
        if new_text == text:
            break
        error = _parse_error(new_text)
        if error is not None:
            codes = ", ".join(sorted({f.code for f in chosen}))
            raise FixError(f"fixing {codes} would produce invalid code ({error})")
        text = new_text
        fixed.extend(chosen)
        findings = lint(text)
    return FixResult(text, fixed, findings)


def _parse_error(text: str) -> Optional[str]:
    try:
        parse_module(text)
    except cst.ParserSyntaxError as error:
        return str(error.message)
    return None
