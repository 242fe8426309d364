"""``# noqa`` comments: per statement (``# noqa``, ``# noqa: TML401, TML2``) and per file."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional, Tuple

from torchmemlint.findings import Finding
from torchmemlint.sourcefile import LINE_BREAK

# `# noqa` or `# noqa: CODE, CODE`; codes are prefixes (TML4 covers TML401).
_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]*(?:\s*,?\s*[A-Za-z]+[0-9]*)*))?", re.I)
_FILE_NOQA = re.compile(
    r"#\s*torchmemlint:\s*noqa(?::\s*(?P<codes>[A-Za-z]+[0-9]*(?:\s*,?\s*[A-Za-z]+[0-9]*)*))?",
    re.I,
)
ALL_CODES: FrozenSet[str] = frozenset()  # an empty code set means "every code"


@dataclass(frozen=True)
class Directives:
    by_row: Dict[int, FrozenSet[str]]
    whole_file: Optional[FrozenSet[str]]


def _codes(match: "re.Match[str]") -> FrozenSet[str]:
    codes = match.group("codes")
    if not codes:
        return ALL_CODES
    return frozenset(code.upper() for code in re.split(r"[\s,]+", codes) if code)


def _comments(text: str) -> Iterable[tokenize.TokenInfo]:
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                yield token
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return  # the parser already reported what is wrong with the file


def parse_directives(text: str) -> Directives:
    by_row: Dict[int, FrozenSet[str]] = {}
    whole_file: Optional[FrozenSet[str]] = None
    for comment in _comments(text):
        file_match = _FILE_NOQA.search(comment.string)
        if file_match:
            codes = _codes(file_match)
            if whole_file is None or not codes or not whole_file:
                # The first directive sets the codes; one without codes covers every code.
                whole_file = codes if whole_file is None else ALL_CODES
            else:
                whole_file = whole_file | codes
            continue
        match = _NOQA.search(comment.string)
        if match:
            by_row[comment.start[0]] = _codes(match)
    return Directives(by_row, whole_file)


def _covers(codes: FrozenSet[str], code: str) -> bool:
    return not codes or any(code.startswith(prefix) for prefix in codes)


def is_suppressed(finding: Finding, directives: Directives) -> bool:
    if directives.whole_file is not None and _covers(directives.whole_file, finding.code):
        return True
    rows = finding.noqa_rows or (finding.location.row,)
    return any(
        row in directives.by_row and _covers(directives.by_row[row], finding.code) for row in rows
    )


def remove_suppressed(text: str, findings: List[Finding]) -> List[Finding]:
    if not findings or "noqa" not in text.lower():
        return findings
    directives = parse_directives(text)
    return [finding for finding in findings if not is_suppressed(finding, directives)]


# -- --add-noqa: write `# noqa: CODE` on the rows that report ---------------------------------
def _physical_lines(text: str) -> List[str]:
    """The rows as Python counts them (only \\r\\n, \\r and \\n end one), with their ends."""
    lines: List[str] = []
    start = 0
    for match in LINE_BREAK.finditer(text):
        lines.append(text[start:match.end()])
        start = match.end()
    if start < len(text):
        lines.append(text[start:])
    return lines


def _blocked_rows(text: str) -> FrozenSet[int]:
    """Rows whose end a comment cannot follow: inside a string that spans lines, or continued
    by a backslash."""
    blocked = set()
    lines = [line.rstrip("\r\n") for line in _physical_lines(text)]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return frozenset(range(1, len(lines) + 1))  # a file that does not parse: no edits
    commented = set()
    for token in tokens:
        if token.type == tokenize.COMMENT:
            commented.add(token.start[0])
        elif token.type not in (tokenize.NL, tokenize.NEWLINE) and token.end[0] > token.start[0]:
            blocked.update(range(token.start[0], token.end[0]))
    for number, line in enumerate(lines, 1):
        if line.endswith("\\") and number not in commented:
            blocked.add(number)
    return frozenset(blocked)


def _with_codes(line: str, codes: FrozenSet[str]) -> Optional[str]:
    """``line`` with a ``# noqa`` for ``codes`` (merged into one it has); None: no change."""
    for token in _comments(line + "\n"):
        match = _NOQA.search(token.string)
        if match is None:
            continue
        present = _codes(match)
        if not present or all(_covers(present, code) for code in codes):
            return None
        merged = ", ".join(sorted(present | codes))
        start = token.start[1] + match.start()
        return f"{line[:start]}# noqa: {merged}{line[token.start[1] + match.end():]}"
    return f"{line.rstrip()}  # noqa: {', '.join(sorted(codes))}"


def add_noqa(text: str, findings: List[Finding], rule_codes: FrozenSet[str]) -> Tuple[str, int]:
    """``text`` with ``# noqa: CODE`` on each row that reports one of ``rule_codes``, merged
    with the codes a row's noqa already names, and the number of rows changed.

    The comment goes on the reported row, or on the next row of the finding's statement when
    the reported one ends inside a string or with a backslash. Line endings are kept.
    """
    wanted: Dict[int, FrozenSet[str]] = {}
    blocked: Optional[FrozenSet[int]] = None
    for finding in findings:
        if finding.code not in rule_codes:
            continue  # syntax and I/O errors: no noqa suppresses them
        if blocked is None:
            blocked = _blocked_rows(text)
        honoured = finding.noqa_rows or (finding.location.row,)
        candidates = [finding.location.row, *sorted(r for r in honoured if r > finding.location.row)]
        for row in candidates:
            if row in honoured and row not in blocked:
                wanted[row] = wanted.get(row, frozenset()) | {finding.code}
                break
    if not wanted:
        return text, 0
    lines = _physical_lines(text)
    changed = 0
    for row, codes in wanted.items():
        if not 1 <= row <= len(lines):
            continue
        line = lines[row - 1]
        body = line.rstrip("\r\n")
        new = _with_codes(body, codes)
        if new is not None:
            lines[row - 1] = new + line[len(body):]
            changed += 1
    return "".join(lines), changed
