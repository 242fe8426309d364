"""The generated rule docs and the README's rule table are current."""

from __future__ import annotations

import re
from pathlib import Path

from torchmemlint.docs import rule_table, rules_markdown

ROOT = Path(__file__).resolve().parent.parent


def test_docs_rules_md_is_generated_from_the_rules():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == rules_markdown(), "run: torchmemlint rule --markdown > docs/rules.md"


def test_readme_rule_table_is_current():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(r"<!-- rules -->\n(.*?)<!-- /rules -->", readme, re.S)
    assert match, "README lacks the <!-- rules --> block"
    assert match.group(1) == rule_table()
