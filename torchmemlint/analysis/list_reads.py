"""How a function reads a local list of layers (``layers``, or ``self.layers`` that
``__init__`` keeps) without changing it: whether a node mentions it, is it, iterates it, tests
its size or concatenates it; and whether a loop over an iterable runs at least once. Asked by
the list orders of ``analysis/layer_lists.py``."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchmemlint.analysis.syntax import literal_number
from torchmemlint.tree import nodes_of, scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)  # not entered: their own scopes
_BINDERS = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    """``node`` mentions the local ``name``, or for ``self.layers`` (a list ``__init__`` keeps
    on ``self``) that attribute, ``self`` passed whole to a call or a method of ``self`` called."""
    if "." not in name:
        return any(n.value == name for n in nodes_of(node, cst.Name))  # type: ignore[attr-defined]
    head = name.partition(".")[0]
    if any(_is(n, name) for n in nodes_of(node, cst.Attribute)):
        return True
    calls = [c for c in nodes_of(node, cst.Call) if not (type(c.func) is cst.Name and c.func.value == "super")]  # type: ignore[attr-defined]
    return any(  # ``helper(self)``, ``self._extend()``: another function may change the list
        type(a.value) is cst.Name and a.value.value == head for c in calls for a in c.args  # type: ignore[attr-defined]
    ) or any(type(c.func) is cst.Attribute and type(c.func.value) is cst.Name and c.func.value.value == head for c in calls)  # type: ignore[attr-defined]


def _is(node: Optional[cst.CSTNode], name: str) -> bool:
    """``node`` is the local ``name``, or the attribute ``self.layers`` it names."""
    if type(node) is cst.Name:
        return node.value == name
    head, _, attr = name.partition(".")
    return type(node) is cst.Attribute and type(node.value) is cst.Name and node.value.value == head \
        and node.attr.value == attr


def _read_only(iterable: cst.BaseExpression, name: str) -> bool:
    """An iterable that reads the list ``name`` without changing it: ``name``, a slice of it,
    ``reversed(name)``, ``enumerate(name)``."""
    if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value in ("reversed", "enumerate") and len(iterable.args) == 1:
        iterable = iterable.args[0].value
    if type(iterable) is cst.Subscript and all(type(element.slice) is cst.Slice for element in iterable.slice):
        iterable = iterable.value
    return _is(iterable, name)


def _never_empty(function: cst.FunctionDef, iterable: cst.BaseExpression, depth: int = 0) -> bool:
    """A loop over ``iterable`` runs its body at least once: a list or tuple written out with
    elements, ``range(n)`` with a literal ``n >= 1``, ``enumerate``/``zip``/``reversed``/``list``
    of such, or a local every assignment of which in ``function`` is one (``conf = [[16, 2],
    [32, 2]]`` in one arm, ``raise`` in the other)."""
    if depth > 3:
        return False
    if type(iterable) in (cst.List, cst.Tuple):
        return bool(iterable.elements) and all(type(e) is cst.Element for e in iterable.elements)  # type: ignore[attr-defined]
    if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.args and not any(
        a.star or a.keyword for a in iterable.args
    ):
        name = iterable.func.value
        if name == "range" and len(iterable.args) == 1:
            count = literal_number(iterable.args[0].value)
            return count is not None and count >= 1
        if name in ("enumerate", "reversed", "list", "tuple") and len(iterable.args) == 1 or name == "zip":
            return all(_never_empty(function, a.value, depth + 1) for a in iterable.args)
        return False
    if type(iterable) is not cst.Name or any(
        p.name.value == iterable.value for p in nodes_of(function.params, cst.Param)  # type: ignore[attr-defined]
    ):
        return False
    values = []
    for node in scan(function.body, _BINDERS, _NESTED):
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [getattr(node, "target", None) or getattr(node, "name", None)]
        if any(t is not None and _mentions_name(t, iterable.value) for t in targets):
            if type(node) is not cst.Assign or len(targets) != 1 or type(targets[0]) is not cst.Name:
                return False
            values.append(node.value)  # type: ignore[attr-defined]
    return bool(values) and all(type(v) in (cst.List, cst.Tuple) and _never_empty(function, v, depth + 1) for v in values)


def _sized(test: cst.BaseExpression, name: str) -> bool:
    """Every mention of ``name`` in the test is ``len(name)`` or its truth (``if layers:``,
    ``if len(layers) > 0:``): the list is read, not changed."""
    sized = set()
    for node in nodes_of(test, cst.Call):
        if type(node.func) is cst.Name and node.func.value == "len" and len(node.args) == 1:  # type: ignore[attr-defined]
            sized.add(id(node.args[0].value))  # type: ignore[attr-defined]
    for node in nodes_of(test, cst.UnaryOperation, cst.BooleanOperation):
        for operand in (getattr(node, "expression", None), getattr(node, "left", None), getattr(node, "right", None)):
            sized.add(id(operand))
    sized.add(id(test))
    return all(id(n) in sized for n in nodes_of(test, cst.Name, cst.Attribute) if _is(n, name))


def _only_concatenated(value: cst.BaseExpression, name: str) -> bool:
    """Every mention of ``name`` in ``value`` is an operand of ``+`` (``down + [sub] + up``):
    the list is read, neither changed nor shared."""
    operands = set()
    for node in nodes_of(value, cst.BinaryOperation):
        if type(node.operator) is cst.Add:  # type: ignore[attr-defined]
            operands.update((id(node.left), id(node.right)))  # type: ignore[attr-defined]
    return all(id(n) in operands for n in nodes_of(value, cst.Name, cst.Attribute) if _is(n, name))
