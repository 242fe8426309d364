"""Report formats: each turns a run's findings into the text to print."""

from __future__ import annotations

DOCS_URL = "https://github.com/torchmemlint/torchmemlint/blob/main/docs/rules.md"


def rule_anchor(code: str) -> str:
    """The heading anchor of a rule in docs/rules.md ("TML201: name" -> "tml201-name")."""
    from torchmemlint.rules import all_rules

    rule = all_rules().get(code)
    return f"{code.lower()}-{rule.name}" if rule else code.lower()


def rule_url(code: str) -> str:
    """Where a rule's documentation lives (docs/rules.md is generated from the rules)."""
    return f"{DOCS_URL}#{rule_anchor(code)}"
