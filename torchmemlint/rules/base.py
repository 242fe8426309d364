"""The rule API: a rule is a small class that visits one parsed file and reports findings.

A rule defines ``visit_<Node>`` / ``leave_<Node>`` methods (libcst node class names); the engine
runs every enabled rule in one batched traversal. Each rule carries its documentation in its
docstring (Ruff's sections); its VALID / INVALID examples live in
``tests/rule_examples/<code>.py`` (Ruff's convention), which the test suite runs. The
``VALID``/``INVALID`` class attributes stay for rules defined outside this package.
"""

from __future__ import annotations

import enum
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, FrozenSet, List, Optional, Sequence, Tuple

import libcst as cst


from torchmemlint.context import FileContext, FixSpec, NodeEdit

__all__ = [
    "FileContext", "FixAvailability", "FixSpec", "Invalid", "NodeEdit", "Rule", "RuleOption",
    "rule_methods",
]


class FixAvailability(str, enum.Enum):
    NONE = "none"
    SOMETIMES = "sometimes"
    ALWAYS = "always"


@dataclass(frozen=True)
class RuleOption:
    """A per-rule setting, read from ``[tool.torchmemlint.options]`` (kebab-case name)."""

    name: str
    type: type
    default: Any
    help: str


@dataclass(frozen=True)
class Invalid:
    """An INVALID example: the code must produce a finding of the rule.

    ``fixed`` is the source after applying the fix (safe and unsafe); None means no fix.
    ``line``/``column`` pin the 1-based start of the first finding when given.
    """

    code: str
    fixed: Optional[str] = None
    line: Optional[int] = None
    column: Optional[int] = None
    options: Tuple[Tuple[str, Any], ...] = ()


class Rule:
    """Base class of all rules. Subclasses set the class attributes and visit methods."""

    code: ClassVar[str]
    name: ClassVar[str]  # kebab-case, shown by `torchmemlint rule`
    summary: ClassVar[str]  # one line
    default_enabled: ClassVar[bool] = True
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    # The applicabilities this rule's fixes can have ("safe", "unsafe"); the docs' "fix"
    # column is rendered from it and tests/test_docs.py checks it against the examples.
    fix_applicability: ClassVar[Tuple[str, ...]] = ()
    options: ClassVar[Sequence[RuleOption]] = ()
    # The text gate: groups of words, of which the file's text must hold at least one word of
    # every group for the rule to be able to report (a name the rule needs written in the file:
    # `checkpoint`, `softmax`, `retain_graph`). The engine runs a rule only on files that pass
    # its gate, and parses a file only when some enabled rule passes. Empty: every file.
    # tests/test_gates.py checks every gate against the rule's examples and the fixtures.
    needs: ClassVar[Tuple[Tuple[str, ...], ...]] = ()
    # Rules read torch code: a file that never says "torch" is skipped unless the rule can
    # report without it (TML602: a transformers training script need not name torch).
    needs_torch: ClassVar[bool] = True
    # The rule asks ``context.project`` (other files of the project): the result cache then
    # keys a file's findings by the project facts it may depend on (``ProjectIndex.key_for``).
    needs_project: ClassVar[bool] = False
    # Which project facts (``ProjectIndex.key_for``): "attributes" (who reaches a class's
    # attributes: TML101's fix) and/or "imports" (the project modules the file imports).
    project_facts: ClassVar[FrozenSet[str]] = frozenset({"attributes", "imports"})
    VALID: ClassVar[Sequence[str]] = ()
    INVALID: ClassVar[Sequence[Invalid]] = ()

    def __init__(self, context: "FileContext") -> None:
        self.context = context

    @classmethod
    def may_apply(cls, text: str) -> bool:
        """False only when ``text`` cannot hold a finding of this rule (``needs``,
        ``needs_torch``)."""
        if cls.needs_torch and "torch" not in text:
            return False
        return all(any(word in text for word in group) for group in cls.needs)

    @classmethod
    def may_apply_at(cls, text: str, path: Optional[str]) -> bool:
        """``may_apply``, for the file at ``path`` (None: not known), which a rule that follows
        names into other files of the project may also ask about (what the engine calls)."""
        return cls.may_apply(text)

    # -- helpers for subclasses -------------------------------------------------------------
    def report(
        self,
        node: cst.CSTNode,
        message: str,
        fix: Optional[FixSpec] = None,
    ) -> None:
        self.context.report(self.code, node, message, fix)

    def option(self, name: str) -> Any:
        return self.context.option_value(name)

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.context.qualify(node)

    def code_for(self, node: cst.CSTNode) -> str:
        return self.context.module.code_for_node(node)

    def replace(self, node: cst.CSTNode, new: "cst.CSTNode | str") -> NodeEdit:
        content = new if isinstance(new, str) else self.code_for(new)
        return NodeEdit(node, content, "replace")

    # -- documentation ------------------------------------------------------------------------
    @classmethod
    def documentation(cls) -> str:
        return textwrap.dedent(cls.__doc__ or "").strip()


def rule_methods(rule: Rule) -> Dict[str, List[Callable[[cst.CSTNode], Any]]]:
    """``{"visit_Call": [bound method], ...}`` for the visit/leave methods a rule defines."""
    methods: Dict[str, List[Callable[[cst.CSTNode], Any]]] = {}
    for attribute in dir(type(rule)):
        if attribute.startswith(("visit_", "leave_")) and callable(getattr(rule, attribute)):
            methods.setdefault(attribute, []).append(getattr(rule, attribute))
    return methods
