"""Arithmetic written as a call: ``torch.mul(s, m)``, ``torch.div(s, d)``, ``s.sub(m)``,
``s.true_divide(d)``, ``s.sub_(m)``. The value graph (``values.py``) reads each as the operator it
is (``s * m``, ``s / d``, ``s - m``, ``s -= m``), so that a question asking for a scale or an
added mask (``attention.py``) finds it however the code spells it.

Only the plain two-operand forms are read so: a call with ``alpha=`` (``a + alpha * b``),
``rounding_mode=`` (a floor or truncating division), ``out=`` or a star stays a call of unknown
effect (``s.add_(m, alpha=2)`` is no ``s += m``: read as one, TML601's fix took ``m`` for the mask).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

# the call's name -> the operator (``cst`` operator class name) it computes
OPERATORS = {
    "mul": "Multiply", "multiply": "Multiply",
    "div": "Divide", "divide": "Divide", "true_divide": "Divide",
    "add": "Add", "sub": "Subtract", "subtract": "Subtract",
}
# ``s.mul_(c)``, ``s.sub_(m)``: the in-place forms (the receiver is then the result)
IN_PLACE = {name + "_": operator for name, operator in OPERATORS.items()}

Operands = Tuple[str, Any, Any, cst.BaseExpression, cst.BaseExpression]


def arithmetic_call(
    node: cst.Call, name: str, receiver: Optional[Any], positional: List[Any], keywords: Dict[str, Any],
) -> Optional[Operands]:
    """``(operator, left, right, left node, right node)`` of ``torch.<name>(a, b)`` (``receiver``
    None; ``input=``/``other=`` also) or ``receiver.<name>(b)`` (``other=`` also) for a name of
    ``OPERATORS``; the values are the graph's (``positional``, ``keywords``: the call's
    arguments read); None for any other call or argument."""
    operator = OPERATORS.get(name)
    if operator is None or any(arg.star for arg in node.args):
        return None
    slots = ("other",) if receiver is not None else ("input", "other")
    free = slots[len(positional):]
    if len(positional) > len(slots) or set(keywords) != set(free):
        return None  # (``alpha=``, ``rounding_mode=``, ``out=``, or not two operands)
    named = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
    values = ([receiver] if receiver is not None else []) + list(positional) + [keywords[slot] for slot in free]
    spelled = ([node.func.value] if receiver is not None else []) + [  # type: ignore[attr-defined]
        arg.value for arg in node.args if arg.keyword is None
    ] + [named[slot] for slot in free]
    return operator, values[0], values[1], spelled[0], spelled[1]


def in_place_step(method: str, node: cst.Call, positional: List[Any], keywords: Dict[str, Any]) -> Optional[Tuple[str, Dict[str, Any]]]:
    """``(op, info)`` of ``s.<method>(x)`` for a method of ``IN_PLACE`` given one operand and no
    keyword: ``scale`` (``factor``, ``divide``) or ``add`` (``other``, ``subtract``), else None."""
    operator = IN_PLACE.get(method)
    if operator is None or len(positional) != 1 or keywords or node.args[0].star:
        return None
    if operator in ("Add", "Subtract"):
        return "add", {"other": node.args[0].value, "subtract": operator == "Subtract"}
    return "scale", {"divide": operator == "Divide", "factor": node.args[0].value}
