"""A loop's counter, for the orders a list built in the loop may hold (``layer_lists.py``).

``for i in range(n)`` (or ``range(0, n)``, ``for i, x in enumerate(xs)`` without a start)
counts from 0: in its first round a test ``if i > 0:`` (``i != 0``, ``i >= 1``, ``i``) is false,
in every later round true. An MLP builder that puts its activation before each layer but the
first (``if i > 0: layers.append(act)``; ``layers.append(nn.Linear(...))``) never starts its
``nn.Sequential`` with the activation."""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.tree import scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def counter(loop: cst.CSTNode) -> Optional[str]:
    """The name that counts the rounds of ``loop`` from 0, when it has one."""
    if type(loop) is not cst.For:
        return None
    iterable, target = loop.iter, loop.target
    if type(iterable) is not cst.Call or type(iterable.func) is not cst.Name or any(a.star or a.keyword for a in iterable.args):
        return None
    if iterable.func.value == "range" and type(target) is cst.Name:
        starts_at_zero = len(iterable.args) == 1 or (
            len(iterable.args) == 2 and type(iterable.args[0].value) is cst.Integer and iterable.args[0].value.value == "0"
        )
        return target.value if starts_at_zero else None
    if iterable.func.value == "enumerate" and len(iterable.args) == 1 and type(target) in (cst.Tuple, cst.List):
        elements = target.elements  # type: ignore[attr-defined]
        first = elements[0].value if elements and type(elements[0]) is cst.Element else None
        return first.value if type(first) is cst.Name else None
    return None


def tested(body: List[cst.CSTNode], name: str) -> bool:
    """An ``if`` of ``body`` tests ``name`` as a counter (see ``counter_truth``)."""
    return any(
        counter_truth(statement.test, {name: True}) is not None  # type: ignore[attr-defined]
        for part in body for statement in scan(part, (cst.If,), _NESTED)
    )


def counter_truth(test: cst.BaseExpression, assume: Dict[str, bool]) -> Optional[bool]:
    """``i > 0``, ``i != 0``, ``i >= 1``, ``0 < i`` (true when ``i`` is), ``i == 0`` (when it is
    not), for a counter ``i`` whose truth ``assume`` holds; None otherwise."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    left, comparison = test.left, test.comparisons[0]
    right, operator = comparison.comparator, type(comparison.operator)
    if type(left) is cst.Integer and type(right) is cst.Name and operator is cst.LessThan:
        left, right, operator = right, left, cst.GreaterThan  # ``0 < i``
    if type(left) is not cst.Name or type(right) is not cst.Integer or left.value not in assume:
        return None
    truthy, bound = assume[left.value], right.value
    if (operator in (cst.GreaterThan, cst.NotEqual) and bound == "0") or (operator is cst.GreaterThanEqual and bound == "1"):
        return truthy
    if operator is cst.Equal and bound == "0":
        return not truthy
    return None
