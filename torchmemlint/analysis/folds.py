"""A value folded into itself by arithmetic: what the assignment adds to the value it carries.

``total = total + loss``, ``x = 0.9 * x + 0.1 * eps`` (a moving average, a sampler's update),
``mean = (n * mean + k * loss) / (n + k)`` (a running mean), ``acc = acc + a + b``: the target
is read once among the operands of an arithmetic expression (``+ - * /``, a unary minus,
parentheses) and an addition on the way down to it (a subtraction too, beside one) brings in other terms. Those
terms (``loss``, ``0.1 * eps``, ``k * loss``, ``b`` and ``a``) are what the target keeps from
this assignment into the next (TML502 asks whether one of them carries a graph). Scaling the
carried value alone (``x = x * 0.5``) or reading it elsewhere (``acc = f(acc) + out``, twice)
is no fold.
"""

from __future__ import annotations

from typing import List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import walk

_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)
_ADDING = (cst.Add, cst.Subtract)


def added_terms(target: str, value: Optional[cst.BaseExpression]) -> Optional[Tuple[cst.BaseExpression, ...]]:
    """The terms ``value`` adds to ``target`` (outermost first); None when it is no fold of it."""
    if type(value) is not cst.BinaryOperation:
        return None
    path: List[Tuple[cst.BaseExpression, bool]] = []  # (operation, whether the target is on its left)
    node: cst.BaseExpression = value  # type: ignore[assignment]
    while dotted_name(node) != target:
        if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
            node = node.expression
            continue
        if type(node) is not cst.BinaryOperation or type(node.operator) not in _ARITHMETIC:
            return None
        on_left, on_right = _holds(node.left, target), _holds(node.right, target)
        if on_left == on_right:  # in neither operand or in both: not a single fold
            return None
        path.append((node, on_left))
        node = node.left if on_left else node.right
    if not any(type(operation.operator) is cst.Add for operation, _ in path):  # type: ignore[attr-defined]
        return None  # (the loop gates count an addition: ``leak_gate``, ``loop_facts``)
    terms = tuple(
        operation.right if on_left else operation.left  # type: ignore[attr-defined]
        for operation, on_left in path
        if type(operation.operator) in _ADDING  # type: ignore[attr-defined]
    )
    return terms or None


def _holds(node: cst.BaseExpression, target: str) -> bool:
    """Whether ``target`` (a name or a dotted attribute) is read anywhere in ``node``."""
    return any(type(inner) in (cst.Name, cst.Attribute) and dotted_name(inner) == target for inner in walk(node))


def assigned_terms(event) -> Optional[Tuple[cst.BaseExpression, ...]]:
    """``added_terms`` of an assignment event (``autograd.AssignEvent``) to one target."""
    if event.augmented or len(event.targets) != 1:
        return None
    return added_terms(event.targets[0], event.value)
