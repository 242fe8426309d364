"""Which module list a called module is an element of: ``self.convs[i](x)``, ``bn =
self.bns[i]`` then ``bn(x)``, a loop over ``self.convs`` (also through ``zip`` / ``enumerate`` or
a slice), the name bound at a position of each row (``for conv, act in self.layers``). Read from
the value graph of the calling function; ``module_lists.ModuleLists`` says what the list holds."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import _is_self

_DEPTH = 4  # (how deep zips, enumerates and nested rows are followed)


def listed_attribute(func: cst.BaseExpression, callee: Any, self_name: Optional[str], qualify) -> Optional[str]:
    """For the module called by ``func`` (its value ``callee`` in the value graph, or None):
    ``convs`` when it is an element of ``self.convs`` (``self.convs[i]``, a loop variable over
    ``self.convs``, or over ``zip(self.a, self.convs)`` / ``enumerate(self.convs)``)."""
    node = listed_node(func, callee, self_name, qualify)
    return node.attr.value if node is not None else None


def listed_row(func: cst.BaseExpression, callee: Any, self_name: Optional[str]) -> Optional[Tuple[str, Tuple[int, ...]]]:
    """``("layers", path)`` when ``func`` is the name bound at ``path`` of ``for a, (b, c) in
    self.layers`` (``callee``: its value in the value graph): a module of each row."""
    if type(func) is not cst.Name or callee is None:
        return None
    path: List[int] = []
    value = callee
    while value.op == "element" and value.info.get("index") is not None and value.inputs and len(path) <= _DEPTH:
        path.append(value.info["index"])
        value = value.inputs[0]
    if not path or value.op != "element" or value.info.get("index") is not None or not value.inputs:
        return None
    node = value.inputs[0].node
    if type(node) is cst.Attribute and _is_self(node.value, self_name):
        return node.attr.value, tuple(reversed(path))
    return None


def listed_node(func: cst.BaseExpression, callee: Any, self_name: Optional[str], qualify) -> Optional[cst.Attribute]:
    """The ``self.convs`` (its node) that the module called by ``func`` is an element of
    (see ``listed_attribute``; also a loop over a slice of it, ``self.convs[1:]``)."""
    if type(func) is cst.Subscript:
        base = func.value
        if type(base) is cst.Attribute and _is_self(base.value, self_name):
            return base
        return None
    if type(func) is cst.Name and callee is not None and callee.op == "index" and type(callee.node) is cst.Subscript:
        return listed_node(callee.node, None, self_name, qualify)  # ``bn = self.bns[i]`` ... ``bn(x)``
    node = _loop_source(func, callee, qualify)
    if type(node) is cst.Attribute and _is_self(node.value, self_name):
        return node
    return None


def nested_listed(func: cst.BaseExpression, callee: Any, self_name: Optional[str], qualify, lookup) -> Optional[str]:
    """``convs`` when the module called by ``func`` is an element of an element of the module
    list ``self.convs`` (``for band, stack in zip(bands, self.convs): for layer in stack:``);
    ``lookup``: the value of a name where the function reads it."""
    node = _loop_source(func, callee, qualify)
    inner = lookup(node) if type(node) is cst.Name else None
    outer = listed_node(node, inner, self_name, qualify) if inner is not None else None  # type: ignore[arg-type]
    return outer.attr.value if outer is not None else None


def _loop_source(func: cst.BaseExpression, callee: Any, qualify) -> Optional[cst.BaseExpression]:
    """The expression whose elements a loop binds to the name ``func`` (``callee``: its value),
    through ``zip``/``enumerate`` and a slice (``self.convs[1:]``)."""
    if type(func) is not cst.Name or callee is None or callee.op != "element":
        return None
    indices: List[int] = []  # ``for i, (conv, norm) in enumerate(zip(...))``: conv is [1][0]
    value = callee
    while value.op == "element" and value.info.get("index") is not None and len(indices) < _DEPTH:
        indices.append(value.info["index"])
        value = value.inputs[0] if value.inputs else None
        if value is None:
            return None
    if value.op != "element" or value.info.get("index") is not None or not value.inputs:
        return None
    node = value.inputs[0].node  # what the loop iterates
    for index in reversed(indices):
        node = _zipped(node, index, qualify)
        if node is None:
            return None
    if type(node) is cst.Subscript and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Slice:
        node = node.value  # ``for layer in self.convs[1:]``: some of its elements
    return node


def _zipped(node: Any, index: int, qualify) -> Optional[cst.BaseExpression]:
    """What position ``index`` of an element of ``zip(a, b)`` / ``enumerate(a)`` iterates."""
    if type(node) is not cst.Call:
        return None
    name = qualify(node.func)
    if name is None and type(node.func) is cst.Name:
        name = node.func.value
    args = [a.value for a in node.args if a.keyword is None and not a.star]
    if name in ("zip", "builtins.zip") and index < len(args):
        return args[index]
    if name in ("enumerate", "builtins.enumerate") and index == 1 and args:
        return args[0]
    return None
