"""Report formats: each turns a run's findings into the text to print."""

from __future__ import annotations

DOCS_URL = "https://github.com/torchmemlint/torchmemlint/blob/main/docs/rules.md"


def rule_url(code: str) -> str:
    """Where a rule's documentation lives (docs/rules.md is generated from the rules)."""
    return f"{DOCS_URL}#{code.lower()}"
