"""The ``concise`` and ``full`` reports (Ruff's two human formats), with optional colour.

``concise``: one line per finding, ``path:row:col: CODE [*] title``, where the title is the
message's first sentence (``message_title``). ``full``: the title, the position, the source
line with a caret under the reported range, the rest of the message, and the fix's title when
there is one. Both end with the summary the ``text`` format prints.
"""

from __future__ import annotations

import textwrap
from typing import Callable, Dict, List, Optional

import click

from torchmemlint.findings import Finding
from torchmemlint.output.text import escape_control, summary

TITLE_LIMIT = 80  # the longest title before the fallback shortens it at a word boundary


def _scan_top_level(message: str, stops: str) -> List[int]:
    """Indexes of ``stops`` characters outside backticks and brackets, each followed
    by a space or the end of the message."""
    found: List[int] = []
    depth = 0
    in_code = False
    for index, char in enumerate(message):
        if char == "`":
            in_code = not in_code
        elif in_code:
            continue
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and char in stops:
            after = message[index + 1 : index + 2]
            if after in ("", " "):
                found.append(index)
    return found


def message_title(message: str) -> str:
    """The message's first sentence: the short title ``concise`` prints.

    Rules write their messages as a short first sentence (what is wrong, naming the code)
    followed by the measured detail. A message without a sentence break (an engine error) is
    its own title when it is short; a long one is cut to its first clause (up to ``:`` or
    ``;``), shortened at a word boundary when that is still longer than ``TITLE_LIMIT``.
    """
    message = " ".join(message.split())
    sentences = _scan_top_level(message, ".")
    if sentences and sentences[0] < len(message) - 1:
        return message[: sentences[0] + 1]
    if len(message) <= TITLE_LIMIT:
        return message
    clauses = _scan_top_level(message, ":;")
    title = message[: clauses[0]] if clauses else message
    if len(title) > TITLE_LIMIT:
        title = textwrap.shorten(title, TITLE_LIMIT, placeholder=" …")
    return title


def message_detail(message: str) -> str:
    """What follows the title in the message ("" when the title is all of it)."""
    message = " ".join(message.split())
    title = message_title(message)
    if title.endswith(" …") or not message.startswith(title):
        return message
    return message[len(title) :].lstrip(" :;")


# -- colour ---------------------------------------------------------------------------------
Paint = Callable[..., str]


def _plain(text: str, **_: object) -> str:
    return text


def painter(colour: bool) -> Paint:
    return click.style if colour else _plain


# -- concise ----------------------------------------------------------------------------------
def format_concise_finding(
    finding: Finding, unsafe_fixes: bool, paint: Paint = _plain, whole: bool = False
) -> str:
    """``path:row:col: CODE [*] title`` (``whole``: the whole message, the ``text`` format)."""
    colon = paint(":", fg="cyan")
    marker = f"[{paint('*', fg='cyan')}] " if finding.fix_applies(unsafe_fixes) else ""
    position = finding.position.replace(":", colon)
    message = escape_control(finding.message if whole else message_title(finding.message))
    return (
        f"{paint(escape_control(finding.filename), bold=True)}{colon}{position}"
        f"{colon} {paint(finding.code, fg='red', bold=True)} {marker}{message}"
    )


def format_concise(
    findings: List[Finding],
    unsafe_fixes: bool = False,
    fixed: int = 0,
    quiet: bool = False,
    colour: bool = False,
) -> str:
    paint = painter(colour)
    lines = [format_concise_finding(finding, unsafe_fixes, paint) for finding in findings]
    if not quiet:
        lines.append(_painted_summary(findings, unsafe_fixes, fixed, paint))
    return "".join(line + "\n" for line in lines)


def _painted_summary(findings: List[Finding], unsafe_fixes: bool, fixed: int, paint: Paint) -> str:
    return summary(findings, unsafe_fixes, fixed).replace("[*]", f"[{paint('*', fg='cyan')}]")


# -- full -------------------------------------------------------------------------------------
def _snippet(
    lines: List[str], finding: Finding, paint: Paint
) -> List[str]:
    """The reported row with one row of context either side and a caret under the range."""
    row = finding.location.row
    if not 1 <= row <= len(lines):
        return []
    first, last = max(1, row - 1), min(len(lines), row + 1)
    width = len(str(last))
    gutter = paint(" " * width + " |", fg="bright_blue", bold=True)
    out = [gutter]
    for number in range(first, last + 1):
        text = lines[number - 1].rstrip("\r\n")
        label = paint(f"{number:>{width}} |", fg="bright_blue", bold=True)
        out.append(f"{label} {text}".rstrip())
        if number == row:
            start = max(1, finding.location.column)
            end_row, end_column = finding.end_location.row, finding.end_location.column
            end = end_column if end_row == row and end_column > start else len(text) + 1
            prefix = "".join("\t" if char == "\t" else " " for char in text[: start - 1])
            carets = "^" * max(1, min(end, len(text) + 1) - start)
            out.append(f"{gutter} {prefix}{paint(carets, fg='bright_red', bold=True)}")
    out.append(gutter)
    return out


def format_full_finding(
    finding: Finding,
    unsafe_fixes: bool,
    source_lines: Optional[List[str]],
    paint: Paint = _plain,
) -> str:
    marker = f" [{paint('*', fg='bright_cyan', bold=True)}]" if finding.fix_applies(unsafe_fixes) else ""
    title = escape_control(message_title(finding.message))
    out = [f"{paint(finding.code, fg='bright_red', bold=True)}{marker} {paint(title, bold=True)}"]
    arrow = paint("-->", fg="bright_blue", bold=True)
    out.append(f" {arrow} {escape_control(finding.filename)}:{finding.position}")
    if source_lines is not None:
        out.extend(_snippet(source_lines, finding, paint))
    detail = escape_control(message_detail(finding.message))
    if detail:
        wrapped = textwrap.wrap(detail, 88, initial_indent="  = ", subsequent_indent="    ")
        out.extend(wrapped)
    if finding.fix is not None:
        help_word = paint("help", fg="bright_cyan", bold=True)
        out.append(f"{help_word}: {finding.fix.title}")
        if not finding.fix.is_safe:
            note = "This is an unsafe fix and may change runtime behavior"
            out.append(f"{paint('note', fg='bright_cyan', bold=True)}: {note}")
    return "\n".join(out) + "\n"


def format_full(
    findings: List[Finding],
    sources: Dict[str, Optional[List[str]]],
    unsafe_fixes: bool = False,
    fixed: int = 0,
    quiet: bool = False,
    colour: bool = False,
) -> str:
    """``sources`` maps each finding's filename to its lines (None: not readable)."""
    paint = painter(colour)
    blocks = [
        format_full_finding(finding, unsafe_fixes, sources.get(finding.filename), paint)
        for finding in findings
    ]
    text = "\n".join(blocks)
    if not quiet:
        text += ("\n" if blocks else "") + _painted_summary(findings, unsafe_fixes, fixed, paint)
        text += "\n"
    return text
