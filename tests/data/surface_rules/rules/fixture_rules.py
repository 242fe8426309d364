"""A test-only rule (TML991): off by default, with an int and a bool option and an unsafe fix."""

from __future__ import annotations

import libcst as cst

from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, Rule, RuleOption


class ZerosWithManyArguments(Rule):
    """Flags `torch.zeros(...)` calls with more arguments than `fixture-max-args`."""

    code = "TML991"
    name = "fixture-zeros-with-many-arguments"
    summary = "`torch.zeros` with many positional arguments (test fixture)"
    default_enabled = False
    fix_availability = FixAvailability.SOMETIMES
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
        fix = FixSpec(Applicability.UNSAFE, "Use `torch.empty`", (self.replace(node.func, "torch.empty"),))
        self.report(node, f"`torch.zeros` with {len(counted)} arguments", fix)
