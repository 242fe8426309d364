"""What ``check`` prints, chosen as Ruff chooses it: the format, colour, and the fix summaries.

The default format: ``--output-format``, else ``$TORCHMEMLINT_OUTPUT_FORMAT``, else the
``output-format`` key of the configuration that governs the working directory, else ``full``
when the report goes to a terminal and ``text`` (one line per finding, the whole message)
when it goes to a pipe or a file, so scripts, hooks and CI logs that read
``path:row:col: CODE message`` lines keep working (as ``ls`` prints columns only to a terminal).
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import fields, replace
from typing import Dict, FrozenSet, IO, Iterable, List, Optional, Sequence, Tuple

from torchmemlint.findings import Finding
from torchmemlint.output.github import format_github
from torchmemlint.output.json import format_json
from torchmemlint.output.junit import format_junit
from torchmemlint.output.pretty import (
    format_concise,
    format_concise_finding,
    format_full,
    painter,
)
from torchmemlint.output.sarif import format_sarif
from torchmemlint.output.text import format_statistics, format_text, summary
from torchmemlint.rules import all_rules

HUMAN_FORMATS = ("full", "concise", "text")
COLOR_CHOICES = ("auto", "always", "never")


def default_format(configured: Optional[str], stream: IO[str], output_file: Optional[str]) -> str:
    if configured:
        return configured
    return "full" if output_file is None and _isatty(stream) else "text"


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def use_colour(choice: str, stream: IO[str], output_file: Optional[str]) -> bool:
    """``--color``: ``always``/``never`` as said; ``auto`` colours a terminal unless
    ``NO_COLOR`` is set (non-empty), and a pipe too when ``FORCE_COLOR`` is set; never a
    report file."""
    if choice != "auto":
        return choice == "always"
    if output_file is not None:
        return False  # a report file gets no escape codes unless --color always
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return _isatty(stream)


def without_unfixable(findings: Iterable[Finding], fixable: FrozenSet[str]) -> List[Finding]:
    """``fixable``/``unfixable``: a rule that may not be fixed reports without its fix (as
    Ruff: no ``[*]``, nothing for --fix to apply, ``"fix": null`` in JSON)."""
    return [
        finding if finding.fix is None or finding.code in fixable else replace(finding, fix=None)
        for finding in findings
    ]


def format_report(
    output_format: str,
    findings: List[Finding],
    *,
    unsafe_fixes: bool,
    fixed: int,
    statistics: bool,
    quiet: bool,
    colour: bool,
    sources: Dict[str, Optional[List[str]]],
    fix_listing: str = "",
) -> str:
    """The report; ``fix_listing`` (--show-fixes) goes before a human format's summary."""
    if output_format == "json":
        return format_json(findings)
    if output_format == "sarif":
        return format_sarif(findings)
    if output_format == "github":
        return format_github(findings)
    if output_format == "junit":
        return format_junit(findings)
    if statistics:
        return format_statistics(findings, unsafe_fixes)
    if output_format == "concise":
        body = format_concise(findings, unsafe_fixes, fixed, True, colour)
    elif output_format == "full":
        body = format_full(findings, sources, unsafe_fixes, fixed, True, colour)
    elif colour:
        body = "".join(
            format_concise_finding(finding, unsafe_fixes, painter(True), whole=True) + "\n"
            for finding in findings
        )
    else:
        body = format_text(findings, unsafe_fixes, fixed, True)
    if quiet:
        return body
    if fix_listing:
        body += ("\n" if body else "") + fix_listing + "\n"
    elif output_format == "full" and body:
        body += "\n"
    paint = painter(colour)
    tail = summary(findings, unsafe_fixes, fixed).replace("[*]", f"[{paint('*', fg='cyan')}]")
    return body + tail + "\n"


def fix_summary(fixed_by_file: Sequence[Tuple[str, Sequence[str]]]) -> str:
    """``--show-fixes``: what ``--fix`` changed, per file and rule (Ruff's listing)."""
    registry = all_rules()
    files = [(path, codes) for path, codes in fixed_by_file if codes]
    total = sum(len(codes) for _, codes in files)
    if not total:
        return ""
    lines = [f"Fixed {total} finding{'' if total == 1 else 's'}:"]
    for path, codes in sorted(files):
        lines.append(f"- {path}:")
        for code, count in sorted(Counter(codes).items()):
            name = registry[code].name if code in registry else code
            lines.append(f"    {count} × {code} ({name})")
    return "\n".join(lines) + "\n"


def fix_only_summary(fixed: int, hidden_unsafe: int) -> str:
    """``--fix-only``'s one line (the remaining findings are not reported)."""
    word = "more fix" if fixed else "fix"
    more = (
        f" ({hidden_unsafe} {word}{'' if hidden_unsafe == 1 else 'es'} available with "
        "`--unsafe-fixes`)"
        if hidden_unsafe
        else ""
    )
    if fixed:
        return f"Fixed {fixed} finding{'' if fixed == 1 else 's'}{more}.\n"
    return f"No findings fixed{more}.\n"


def show_settings(path: str, settings: object) -> str:
    """``--show-settings``: the resolved settings of one file, a ``key = value`` per line."""
    from torchmemlint.config import Settings

    assert isinstance(settings, Settings)
    lines = [f"Resolved settings for: {os.path.abspath(path)}"]
    lines.append(f"Settings path: {settings.config_path or '(none: the defaults)'}")
    for field in fields(settings):
        if field.name == "config_path":
            continue
        value = getattr(settings, field.name)
        if field.name == "root":
            value = os.path.abspath(value)
        lines.append(f"{field.name.replace('_', '-')} = {_show(value)}")
    lines.append(f"rules = {_show(tuple(sorted(settings.codes_for_file(path))))}")
    lines.append(f"fixable-rules = {_show(tuple(sorted(settings.fixable_codes())))}")
    return "\n".join(lines) + "\n"


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
