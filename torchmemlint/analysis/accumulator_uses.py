"""Where an accumulator's value is read, for the TML502 `.item()` fix: every read is one a
float or a list of floats would serve as well (``uses_allow``)."""

from __future__ import annotations

from typing import List, Sequence, Set

import libcst as cst

from torchmemlint.analysis.autograd import (
    FIXED_TYPE_CALLS, LOGGING_METHODS, Scope, _target_names, TYPE_FOLLOWING_CALLS,
    TYPE_FOLLOWING_MODULES,
)
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import children


# -- uses of an accumulator (for the `.item()` fix) -----------------------------------------


def _float_use(label: str) -> bool:
    kind, _, name = label.partition(":")
    if kind == "arg":
        return name in FIXED_TYPE_CALLS or (
            "." in name and name.rsplit(".", 1)[-1] in LOGGING_METHODS
        )
    return kind in ("test", "format")


def _list_use(label: str) -> bool:
    kind, _, name = label.partition(":")
    if kind == "receiver":
        return name in ("append", "clear")
    return _float_use(label)


_PASS_THROUGH = (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.BooleanOperation)


def uses_allow(scope: Scope, name: str, allowed, depth: int = 0) -> bool:
    """Every read of `name` in the scope is one `allowed` accepts (names derived by assignment
    from it are checked the same way, one level deep)."""
    labels: List[str] = []
    derived: Set[str] = set()
    body = scope.node.body
    statements = body if isinstance(body, Sequence) else body.body
    for statement in statements:
        _scan_statement(statement, name, labels, derived)
    if not all(allowed(label) for label in labels):
        return False
    if depth == 0:
        return all(uses_allow(scope, other, allowed, 1) for other in derived - {name})
    return not derived - {name}


def _scan_statement(node: cst.CSTNode, name: str, labels: List[str], derived: Set[str]) -> None:
    if type(node) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
        return
    if type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign):
        value = node.value
        if value is None:
            return
        before = len(labels)
        _scan(value, name, "assign", labels)
        if "assign" in labels[before:]:
            # read into another name (`avg = total / n`): that name's uses are checked instead
            assigned = type(node) is cst.Assign
            targets = [t.target for t in node.targets] if assigned else [node.target]
            for target in targets:
                derived.update(_target_names(target))
            labels[before:] = [label for label in labels[before:] if label != "assign"]
        return
    if type(node) in (cst.Return, cst.Yield):
        if node.value is not None:
            _scan(node.value, name, "return", labels)
        return
    if type(node) in (cst.If, cst.While):
        _scan(node.test, name, "test", labels)
        for child in children(node):
            if child is not node.test:
                _scan_statement(child, name, labels, derived)
        return
    if type(node) is cst.Expr:
        _scan(node.value, name, "expr", labels)
        return
    if isinstance(node, cst.BaseExpression):
        _scan(node, name, "escape", labels)
        return
    for child in children(node):
        _scan_statement(child, name, labels, derived)


def _scan(node: cst.CSTNode, name: str, label: str, labels: List[str]) -> None:
    if type(node) is cst.Lambda:
        return
    if type(node) in (cst.Name, cst.Attribute):
        dotted = dotted_name(node)
        if dotted == name:
            labels.append(label)
            return
        if type(node) is cst.Attribute:
            _scan(node.value, name, f"receiver:{node.attr.value}", labels)
        return
    if type(node) is cst.Call:
        callee = dotted_name(node.func) or (
            f".{node.func.attr.value}" if type(node.func) is cst.Attribute else "?"
        )
        _scan(node.func, name, "callee", labels)
        following = callee in TYPE_FOLLOWING_CALLS or callee.startswith(TYPE_FOLLOWING_MODULES)
        for arg in node.args:
            _scan(arg.value, name, label if following else f"arg:{callee}", labels)
        return
    if type(node) in (cst.FormattedString, cst.FormattedStringExpression):
        label = "format"
    elif not isinstance(node, _PASS_THROUGH + (cst.IfExp,)):
        label = "escape"
    for child in children(node):
        _scan(child, name, label, labels)


