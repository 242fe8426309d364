"""Property: every fix of every rule applies on nested and repeated forms of its examples.

Seeds are the rules' INVALID examples that have a fix. From each, forms are generated the way
real code repeats and nests calls: a call that a fix rewrites is nested in itself (``f(a)`` ->
``f(f(a))``), its statement is repeated, and both. For each form, all fixes are applied
(``--unsafe-fixes``, passes as the CLI does) with the rule alone and with every rule selected;
the result must parse, no applicable fix may be left, and the rule whose fixes were applied must
report nothing more where it had fixes to offer.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Dict, List, Set, Tuple

import libcst as cst
import pytest
from libcst.metadata import MetadataWrapper, PositionProvider

from torchmemlint.config import Settings
from torchmemlint.engine import INTERNAL_ERROR, lint_source
from torchmemlint.findings import Finding
from torchmemlint.fixer import apply_edits, compose_edits, fix_text, has_overlaps
from torchmemlint.rules import all_rules
from torchmemlint.rules.base import FixAvailability

from rule_examples import examples

ISSUE_MODEL = textwrap.dedent(
    """\
    import torch
    from torch import nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 8, 3)
            self.conv2 = nn.Conv2d(8, 8, 3)
            self._act = nn.ReLU()

        def forward(self, x):
            return self._act(self.conv2(self._act(self.conv1(x))))
    """
)


def fixable_seeds() -> List[Tuple[str, str, Tuple]]:
    seeds = []
    for code, rule in all_rules().items():
        if rule.fix_availability is FixAvailability.NONE:
            continue
        for example in examples(rule.code).invalid:
            if example.fixed is not None:
                seeds.append((code, example.code, example.options))
    return seeds


def settings_for(codes, options=()) -> Tuple[Settings, frozenset]:
    settings = Settings(select=tuple(codes), options=tuple(options))
    return settings, settings.enabled_codes()


def _edited_ranges(text: str, findings: List[Finding]) -> List[Tuple[int, int, int, int]]:
    ranges = []
    for finding in findings:
        if finding.fix is not None:
            for edit in finding.fix.edits:
                ranges.append((edit.location.row, edit.location.column,
                               edit.end_location.row, edit.end_location.column))
    return ranges


def variants(text: str, findings: List[Finding]) -> Dict[str, str]:
    """Nested and repeated forms of the calls and statements the fixes touch."""
    module = cst.parse_module(text)
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    edited = _edited_ranges(text, findings)

    def touched(node: cst.CSTNode) -> bool:
        where = positions[node]
        start = (where.start.line, where.start.column + 1)
        end = (where.end.line, where.end.column + 1)
        return any(
            (row, col) <= start and end <= (end_row, end_col)
            or start <= (row, col) and (end_row, end_col) <= end
            for row, col, end_row, end_col in edited
        )

    def nestable(node: cst.Call) -> bool:
        if node.args:  # f(a, ...) -> f(f(a, ...), ...)
            return node.args[0].keyword is None and not node.args[0].star
        return isinstance(node.func, cst.Attribute)  # x.m() -> x.m().m()

    calls = [
        node for node in positions if isinstance(node, cst.Call) and nestable(node) and touched(node)
    ]
    lines = [
        node for node in positions
        if isinstance(node, cst.SimpleStatementLine) and touched(node)
        and not any(isinstance(s, (cst.Import, cst.ImportFrom)) for s in node.body)
    ]

    class Nest(cst.CSTTransformer):
        def __init__(self, chosen) -> None:
            super().__init__()
            self.chosen = chosen

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            if not any(original is call for call in self.chosen):
                return updated
            if updated.args:
                first = updated.args[0].with_changes(value=updated)
                return updated.with_changes(args=(first, *updated.args[1:]))
            func = updated.func
            assert isinstance(func, cst.Attribute)
            return updated.with_changes(func=func.with_changes(value=updated))

    class Repeat(cst.CSTTransformer):
        def _repeat(self, body):
            out = []
            for statement in body:
                out.append(statement)
                if any(statement is line for line in lines):
                    out.append(statement)
            return out

        def leave_IndentedBlock(self, original, updated):
            return updated.with_changes(body=self._repeat(updated.body))

        def leave_Module(self, original, updated):
            return updated.with_changes(body=self._repeat(updated.body))

    forms = {}
    if calls:
        forms["nested"] = module.visit(Nest(calls)).code  # every touched call at once
        for index, call in enumerate(calls):  # and each alone
            forms[f"nested-{index}"] = module.visit(Nest([call])).code
    if lines:
        repeated = module.visit(Repeat())
        forms["repeated"] = repeated.code
    return forms


def nested_and_repeated(text: str, findings: List[Finding]) -> Dict[str, str]:
    forms = variants(text, findings)
    seen = set()
    for name in [name for name in forms if name.startswith("nested")]:
        # Repeat the statements of the nested form (found again in its own tree).
        nested = forms[name]
        if nested in seen:  # the same text as another nested form: its repeats are there
            continue
        seen.add(nested)
        again = variants(nested, lint_source(nested, "model.py", *settings_for(["ALL"])))
        if "repeated" in again:
            forms[f"{name}+repeated"] = again["repeated"]
    return forms


def check_fixes_apply(text: str, codes: List[str], options=()) -> Set[str]:
    """Apply all fixes; assert the property; return the codes whose fixes were applied."""
    settings, enabled = settings_for(codes, options)

    def lint(source: str) -> List[Finding]:
        return lint_source(source, "model.py", settings, enabled)

    before = lint(text)
    assert not [f for f in before if f.code == INTERNAL_ERROR], before
    result = fix_text(text, lint, unsafe_fixes=True)  # raises FixError if a fix breaks code
    cst.parse_module(result.text)
    left = [f for f in result.remaining if f.fix_applies(True)]
    assert not left, f"fixes left unapplied: {left}\n--- after fixing ---\n{result.text}"
    fixed_codes = {f.code for f in result.fixed}
    offered = {f.code for f in before if f.fix is not None}
    unfixable_before = {(f.code, f.message) for f in before if f.fix is None}
    still = [
        f for f in result.remaining
        if f.code in fixed_codes & offered and (f.code, f.message) not in unfixable_before
    ]
    assert not still, f"not clean of {sorted(fixed_codes)}: {still}\n---\n{result.text}"
    return fixed_codes


SEEDS = fixable_seeds()


def test_there_are_seeds_for_every_rule_with_a_fix():
    with_fix = {c for c, r in all_rules().items() if r.fix_availability is not FixAvailability.NONE}
    assert {code for code, _, _ in SEEDS} == with_fix


@pytest.mark.slow
@pytest.mark.parametrize(
    "code, seed, options", SEEDS, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(SEEDS)]
)
def test_every_fix_applies_on_nested_and_repeated_forms(code, seed, options):
    settings, enabled = settings_for([code], options)
    findings = lint_source(seed, "model.py", settings, enabled)
    assert any(f.code == code and f.fix is not None for f in findings)
    forms = {"seed": seed, **nested_and_repeated(seed, findings)}
    assert len(forms) > 1, "no nested or repeated form could be made"
    distinct: Dict[str, str] = {}  # one check per text: many forms come out the same (about 44 %)
    for name, form in forms.items():
        distinct.setdefault(form, name)
    applied = 0
    for form in distinct:
        for codes in ([code], ["ALL"]):
            fixed = check_fixes_apply(form, codes, options)
            applied += code in fixed
    assert applied, f"{code}'s fix never applied on {sorted(forms)}"


def test_the_issue_case_nested_stateless_activation():
    """`self._act(self.conv2(self._act(self.conv1(x))))`: TML101's fix rewrites both uses."""
    settings, enabled = settings_for(["TML101"])
    [finding] = lint_source(ISSUE_MODEL, "model.py", settings, enabled)
    assert finding.fix is not None and not has_overlaps(ISSUE_MODEL, finding.fix.edits)
    result = fix_text(
        ISSUE_MODEL, lambda s: lint_source(s, "model.py", settings, enabled), unsafe_fixes=True
    )
    assert "return nn.functional.relu(self.conv2(nn.functional.relu(self.conv1(x))))" in result.text
    assert "self._act" not in result.text
    assert [f.code for f in result.fixed] == ["TML101"] and not result.remaining


@pytest.mark.slow
def test_the_issue_case_through_the_cli(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(ISSUE_MODEL)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--select", "ALL", "--fix",
         "--unsafe-fixes", "model.py"],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )
    assert "E902" not in result.stdout and "Traceback" not in result.stderr, result.stdout
    fixed = path.read_text()
    assert "self._act" not in fixed
    cst.parse_module(fixed)
    assert result.returncode == 0, result.stdout


def test_compose_edits_nests_and_refuses_what_it_cannot_place():
    from torchmemlint.findings import Edit, Location as L

    text = "y = a(b(a(c)))\n"
    outer = Edit("A(b(a(c)))", L(1, 5), L(1, 15))
    inner = Edit("A(c)", L(1, 9), L(1, 13))
    composed = compose_edits(text, [outer, inner])
    assert composed is not None and apply_edits(text, composed) == "y = A(b(A(c)))\n"
    # The outer replacement dropped the inner text: no place for the inner edit.
    assert compose_edits(text, [Edit("z", L(1, 5), L(1, 15)), inner]) is None
    # Partial overlap.
    assert compose_edits(text, [Edit("q", L(1, 5), L(1, 10)), Edit("r", L(1, 9), L(1, 13))]) is None
    # Disjoint edits pass through unchanged; an insertion at an edge is beside, not inside.
    beside = [Edit("#", L(1, 5), L(1, 5)), outer]
    assert compose_edits(text, beside) == tuple(beside)
