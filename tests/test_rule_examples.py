"""Every rule's VALID / INVALID examples (tests/rule_examples/<code>.py), run through the real
engine and fixer."""

from __future__ import annotations

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.fixer import fix_text
from torchmemlint.rules import all_rules

from rule_examples import HERE, examples

CASES_VALID = [
    pytest.param(rule, index, code, id=f"{rule.code}-valid-{index}")
    for rule in all_rules().values()
    for index, code in enumerate(examples(rule.code).valid)
]
CASES_INVALID = [
    pytest.param(rule, index, case, id=f"{rule.code}-invalid-{index}")
    for rule in all_rules().values()
    for index, case in enumerate(examples(rule.code).invalid)
]


def _settings(rule, options=()):
    return Settings(select=(rule.code,), options=tuple(options))


@pytest.mark.parametrize("rule, index, code", CASES_VALID)
def test_valid_examples_give_no_finding(rule, index, code):
    findings = lint_source(code, "example.py", _settings(rule))
    assert findings == [], [f.message for f in findings]


@pytest.mark.parametrize("rule, index, case", CASES_INVALID)
def test_invalid_examples_give_a_finding_and_their_fix(rule, index, case):
    settings = _settings(rule, case.options)
    findings = lint_source(case.code, "example.py", settings)
    assert findings, "expected a finding"
    assert {f.code for f in findings} == {rule.code}
    first = findings[0]
    if case.line is not None:
        assert first.location.row == case.line
    if case.column is not None:
        assert first.location.column == case.column
    if case.fixed is None:
        assert all(f.fix is None for f in findings)
        return
    result = fix_text(case.code, lambda text: lint_source(text, "example.py", settings), True)
    assert result.text == case.fixed
    assert all(f.fix is None for f in result.remaining)


@pytest.mark.parametrize("rule", list(all_rules().values()), ids=lambda r: r.code)
def test_rule_is_documented_and_exemplified(rule):
    docs = rule.documentation()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Fix safety", "## Measured"):
        assert section in docs, f"{rule.code} docs lack {section}"
    assert examples(rule.code).valid and examples(rule.code).invalid, f"add tests/rule_examples/{rule.code.lower()}.py"
    assert not rule.VALID and not rule.INVALID, "examples live in tests/rule_examples/, not on the rule"
    assert rule.name == rule.name.lower() and " " not in rule.name


def test_every_example_file_belongs_to_a_rule():
    codes = {code.lower() for code in all_rules()}
    files = {path.stem for path in HERE.glob("tml*.py")}
    assert files <= codes, files - codes
