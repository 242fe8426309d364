"""The documentation as a user reads it: each rule's `## Example` fires the rule when pasted into
a file and linted with `--select CODE` (the real CLI), each `## Use instead` block parses and
stays quiet; and no document points at material outside this repository."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from torchmemlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _section_blocks(documentation: str, title: str):
    match = re.search(rf"^## {re.escape(title)}[ \t]*\n(.*?)(?=^## |\Z)", documentation, re.M | re.S)
    return _BLOCK.findall(match.group(1)) if match else []


def test_section_extraction_finds_each_block():
    doc = "## Example\n```python\nx = 1\n```\ntext\n## Use instead\n```python\ny = 2\n```\n"
    assert _section_blocks(doc, "Example") == ["x = 1\n"]
    assert _section_blocks(doc, "Use instead") == ["y = 2\n"]
    assert _section_blocks(doc, "Measured") == []


def _lint(directory: Path, code: str):
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--no-cache", "--isolated", "--select", code,
         "--output-format", "json", "."],
        cwd=directory, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


@pytest.mark.slow  # one CLI run per rule
@pytest.mark.parametrize("rule", list(all_rules().values()), ids=lambda rule: rule.code)
def test_example_fires_and_use_instead_is_quiet(rule, tmp_path):
    documentation = rule.documentation()
    examples = _section_blocks(documentation, "Example")
    alternatives = _section_blocks(documentation, "Use instead")
    assert examples, f"{rule.code}: no python block under ## Example"
    for index, block in enumerate(examples):
        (tmp_path / f"example_{index}.py").write_text(block)
    for index, block in enumerate(alternatives):
        compile(block, f"{rule.code} Use instead {index}", "exec")  # a SyntaxError fails here
        (tmp_path / f"use_instead_{index}.py").write_text(block)
    findings = _lint(tmp_path, rule.code)
    by_file = {}
    for finding in findings:
        by_file.setdefault(Path(finding["filename"]).name, []).append(finding["code"])
    for index in range(len(examples)):
        assert rule.code in by_file.get(f"example_{index}.py", []), (
            f"{rule.code}'s Example does not fire its rule: {by_file}"
        )
    for index in range(len(alternatives)):
        assert by_file.get(f"use_instead_{index}.py", []) == [], (
            f"{rule.code}'s Use instead is not quiet: {by_file}"
        )


# What a user of this repository does not have: the project's internal notes and tracker.
FORBIDDEN = re.compile(
    r"memory-facts|§\s*\d|\bissues? \d+|seed post|\bthe seed\b|/work/|\.\./shared|shared/bench",
    re.I,
)


def _documents():
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for path in paths:
        yield str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")
    for rule in all_rules().values():
        yield f"{rule.code} docstring", rule.documentation()


def test_forbidden_pattern_matches_what_it_must():
    for text in ("memory-facts table row 7", "§3.5", "issue 11", "Issue 14", "seed post 002",
                 "the seed's batch", "/work/shared/bench/corpus.py", "../shared/x"):
        assert FORBIDDEN.search(text), text
    for text in ("an issue tracker", "seed 0", "torch.manual_seed(0)", "shared analysis"):
        assert not FORBIDDEN.search(text), text


@pytest.mark.parametrize("name, text", list(_documents()), ids=lambda value: value if len(value) < 40 else "")
def test_documents_point_at_nothing_outside_the_repository(name, text):
    hits = [
        f"line {text.count(chr(10), 0, match.start()) + 1}: {match.group(0)!r}"
        for match in FORBIDDEN.finditer(text)
    ]
    assert not hits, f"{name} cites material outside this repository: {hits}"
