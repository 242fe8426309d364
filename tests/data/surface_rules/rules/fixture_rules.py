"""Test-only rules for the surface tests, whatever fixes the real rules offer at the time.

TML990 is on by default and has a safe fix; TML991 is off by default, has an int and a bool
option and an unsafe fix.
"""

from __future__ import annotations

import libcst as cst

from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, Rule, RuleOption


class VariableWrapper(Rule):
    """Flags `torch.autograd.Variable(x)`, which returns `x` itself since torch 0.4."""

    code = "TML990"
    name = "fixture-variable-wrapper"
    summary = "`Variable(x)` is `x` (test fixture)"
    fix_availability = FixAvailability.SOMETIMES

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualify(node.func) != "torch.autograd.Variable":
            return
        if len(node.args) != 1 or node.args[0].keyword is not None or node.args[0].star:
            return
        edit = self.replace(node, node.args[0].value)
        fix = FixSpec(Applicability.SAFE, "Use the tensor", (edit,))
        self.report(node, "`Variable(x)` returns `x`", fix)


class ZerosWithManyArguments(Rule):
    """Flags `torch.zeros(...)` calls with more arguments than `fixture-max-args`."""

    code = "TML991"
    name = "fixture-zeros-with-many-arguments"
    summary = "`torch.zeros` with many arguments (test fixture)"
    default_enabled = False
    fix_availability = FixAvailability.ALWAYS
    options = (
        RuleOption("fixture-max-args", int, 1, "Positional arguments allowed."),
        RuleOption("fixture-count-keywords", bool, False, "Count keyword arguments too."),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualify(node.func) != "torch.zeros":
            return
        counted = [arg for arg in node.args if not arg.star]
        if not self.option("fixture-count-keywords"):
            counted = [arg for arg in counted if arg.keyword is None]
        if len(counted) <= self.option("fixture-max-args"):
            return
        edit = self.replace(node.func, "torch.empty")
        fix = FixSpec(Applicability.UNSAFE, "Use `torch.empty`", (edit,))
        self.report(node, f"`torch.zeros` with {len(counted)} arguments", fix)
