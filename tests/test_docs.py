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


def test_the_fix_column_is_what_the_rules_examples_get():
    from torchmemlint.docs import fix_cases, fix_summary
    from torchmemlint.rules import all_rules
    from torchmemlint.rules.base import FixAvailability

    for code, rule in all_rules().items():
        cases = fix_cases(rule)
        assert sum(cases.values()) >= len(rule.INVALID), code  # every example was linted
        # The declared availability agrees with what the examples get.
        if rule.fix_availability is FixAvailability.ALWAYS:
            assert not cases["none"], f"{code} says 'always' but an example gets no fix"
        if rule.fix_availability is FixAvailability.NONE:
            assert set(cases) == {"none"}, f"{code} says 'none' but an example gets a fix"
        summary = fix_summary(rule)
        assert ("unsafe" in summary) == bool(cases["unsafe"]), code
        assert ("safe" in summary.replace("unsafe", "")) == bool(cases["safe"]), code
    # The two the issue found wrong ("always"): TML401's fix is never safe; TML201's only in
    # some cases (LeakyReLU/RReLU with a literal non-negative slope).
    rules = all_rules()
    assert fix_summary(rules["TML401"]) == "unsafe"
    assert fix_summary(rules["TML201"]) == "safe or unsafe"
