"""``# noqa`` comments: per statement (``# noqa``, ``# noqa: TML401, TML2``) and per file."""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Optional

from torchmemlint.findings import Finding

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
