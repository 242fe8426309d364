"""Human-readable report: ``path:row:col: CODE [*] message`` and a summary."""

from __future__ import annotations

import re
from collections import Counter
from typing import List

from torchmemlint.findings import Finding


# C0 and C1 control characters, DEL, and the Unicode line and paragraph separators: shown
# escaped, so that no text in a report (a message, a file name) can move the cursor, recolour
# the terminal or start a line of its own.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def escape_control(text: str) -> str:
    """``text`` with every control character written as a Python escape (``\\x1b``)."""
    return _CONTROL.sub(lambda match: repr(match.group())[1:-1], text)


def format_finding(finding: Finding, unsafe_fixes: bool) -> str:
    marker = "[*] " if finding.fix_applies(unsafe_fixes) else ""
    filename, message = escape_control(finding.filename), escape_control(finding.message)
    return f"{filename}:{finding.position}: {finding.code} {marker}{message}"


def format_text(
    findings: List[Finding], unsafe_fixes: bool = False, fixed: int = 0, quiet: bool = False
) -> str:
    """One line per finding with the whole message; the summary unless ``quiet`` (-q)."""
    lines = [format_finding(finding, unsafe_fixes) for finding in findings]
    if not quiet:
        lines.append(summary(findings, unsafe_fixes, fixed))
    return "".join(line + "\n" for line in lines)


def summary(findings: List[Finding], unsafe_fixes: bool, fixed: int) -> str:
    count = len(findings)
    if count == 0:
        return f"Fixed {fixed} finding{_s(fixed)}; none remain." if fixed else "All checks passed!"
    head = f"Found {count + fixed} finding{_s(count + fixed)}"
    head += f" ({fixed} fixed, {count} remaining)." if fixed else "."
    fixable = sum(1 for f in findings if f.fix_applies(unsafe_fixes))
    hidden = sum(1 for f in findings if f.fix is not None and not f.fix_applies(unsafe_fixes))
    parts = []
    if fixable:
        option = "--fix --unsafe-fixes" if unsafe_fixes else "--fix"
        parts.append(f"[*] {fixable} fixable with `{option}`")
    if hidden:
        parts.append(f"{hidden} more with `--unsafe-fixes`")
    return head + ("\n" + "; ".join(parts) + "." if parts else "")


def format_statistics(findings: List[Finding], unsafe_fixes: bool) -> str:
    from torchmemlint.rules import all_rules

    registry = all_rules()
    counts = Counter(finding.code for finding in findings)
    fixable = {f.code for f in findings if f.fix_applies(unsafe_fixes)}
    lines = []
    for code, count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        name = registry[code].name if code in registry else "io-or-syntax-error"
        marker = "[*]" if code in fixable else "[ ]"
        lines.append(f"{count:5d}\t{code}\t{marker} {name}")
    return "\n".join(lines) + ("\n" if lines else "")


def _s(count: int) -> str:
    return "" if count == 1 else "s"
