"""Test-only rules that raise, for the isolation tests (tests/test_isolation.py).

TML995 raises in ``visit_Call`` on a call to ``explode()`` (the way a rule bug looks: an
``AttributeError`` on a node of an unexpected type) and otherwise reports every ``boom()`` call.
TML996 and TML997 both need the shared analysis ``crash-fixture.analysis``, which raises when the
file mentions ``analysis_bomb``; TML998 reports every ``marker()`` call and needs nothing shared.
All are on by default so the tests need no selection.
"""

from __future__ import annotations

import libcst as cst

from torchmemlint.rules.base import Rule


def _callee(node: cst.Call) -> str:
    return node.func.value if isinstance(node.func, cst.Name) else ""


class RaisesOnExplode(Rule):
    """Raises on `explode()`, reports `boom()` (test fixture)."""

    code = "TML995"
    name = "fixture-raises-on-explode"
    summary = "raises on `explode()` (test fixture)"

    def visit_Call(self, node: cst.Call) -> None:
        if _callee(node) == "explode":
            # The bug TML405 had: a Name taken for a str ("'Name' object has no attribute").
            node.func.endswith("x")  # type: ignore[union-attr]
        if _callee(node) == "boom":
            self.report(node, "`boom()` called (fixture)")


def _analysis(module: cst.Module) -> int:
    if "analysis_bomb" in module.code:
        raise KeyError("analysis_bomb")
    return len(module.body)


class NeedsAnalysisOne(Rule):
    """Reports `needs_one()` calls after building the shared analysis (test fixture)."""

    code = "TML996"
    name = "fixture-needs-analysis-one"
    summary = "needs the shared analysis (test fixture)"

    def visit_Call(self, node: cst.Call) -> None:
        if _callee(node) == "needs_one":
            self.context.shared("crash-fixture.analysis", lambda: _analysis(self.context.module))
            self.report(node, "`needs_one()` called (fixture)")


class NeedsAnalysisTwo(Rule):
    """Reports `needs_two()` calls after building the shared analysis (test fixture)."""

    code = "TML997"
    name = "fixture-needs-analysis-two"
    summary = "needs the shared analysis (test fixture)"

    def visit_Call(self, node: cst.Call) -> None:
        if _callee(node) == "needs_two":
            self.context.shared("crash-fixture.analysis", lambda: _analysis(self.context.module))
            self.report(node, "`needs_two()` called (fixture)")


class ReportsMarker(Rule):
    """Reports every `marker()` call (test fixture)."""

    code = "TML998"
    name = "fixture-reports-marker"
    summary = "reports `marker()` (test fixture)"

    def visit_Call(self, node: cst.Call) -> None:
        if _callee(node) == "marker":
            self.report(node, "`marker()` called (fixture)")
