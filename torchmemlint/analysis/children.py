"""Sub-modules taken apart and put back together: ``nn.Sequential(*list(resnet.children())[:3])``
(the children of a known ResNet, or of a class of this file, in registration order) and a
local Sequential used as an element of another (``stem = nn.Sequential(...)``,
``stem[0] = nn.Conv2d(...)``, ``self.net = nn.Sequential(stem, body)``)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import block_statements, literal_number, walk
from torchmemlint.analysis.vocabulary import TIMM_RESNET_CHILDREN, TORCHVISION_RESNET_CHILDREN

_NOT_MODULES = frozenset({"int", "float", "str", "bool", "list", "tuple", "dict", "set", "len", "getattr", "range"})
_RESNETS = ("resnet", "resnext", "wide_resnet")


class Children:
    """Per file: the order of a module's children, and local Sequentials used as elements."""

    def __init__(self, module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self.module = module
        self.qualify = qualify
        self._classes: Optional[Dict[str, List[cst.ClassDef]]] = None

    def _class(self, name: str) -> Optional[cst.ClassDef]:
        if self._classes is None:
            self._classes = {}
            for node in walk(self.module):
                if type(node) is cst.ClassDef:
                    self._classes.setdefault(node.name.value, []).append(node)
        found = self._classes.get(name, [])
        return found[0] if len(found) == 1 else None

    # -- list(x.children())[a:b] --------------------------------------------------------------
    def sliced(
        self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]
    ) -> Optional[Tuple[str, List[str]]]:
        """``(base, names)`` for ``list(base.children())[a:b]`` (or without the slice) when the
        children of ``base`` are known; None otherwise."""
        lower = upper = None
        if type(expr) is cst.Subscript:
            if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Slice:
                return None
            bounds = expr.slice[0].slice
            if bounds.step is not None:
                return None
            lower, upper = bounds.lower, bounds.upper
            expr = expr.value
        if type(expr) is cst.Call and type(expr.func) is cst.Name and expr.func.value == "list":
            if len(expr.args) != 1:
                return None
            expr = expr.args[0].value
        if not (
            type(expr) is cst.Call and not expr.args and type(expr.func) is cst.Attribute
            and expr.func.attr.value == "children"
        ):
            return None
        base = expr.func.value
        base_name = dotted_name(base)
        order = self.order(base, function)
        if base_name is None or order is None:
            return None
        start = _bound(lower, 0, len(order))
        stop = _bound(upper, len(order), len(order))
        if start is None or stop is None:
            return None
        return base_name, list(order[start:stop])

    def order(self, base: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Tuple[str, ...]]:
        """The children of ``base`` in registration order, when ``base`` is a local name built
        once by a known ResNet factory or by a class of this file."""
        if function is None or type(base) is not cst.Name:
            return None
        values = _assigned_values(function, base.value)
        if len(values) != 1 or type(values[0]) is not cst.Call:
            return None
        call = values[0]
        qualified = self.qualify(call.func)
        if qualified is not None:
            return _known_order(qualified, call)
        if type(call.func) is cst.Name:
            classdef = self._class(call.func.value)
            return _class_order(classdef) if classdef is not None else None
        return None

    # -- a local Sequential used as an element ---------------------------------------------------
    def local_sequential(
        self, function: Optional[cst.FunctionDef], name: str, statement: Optional[cst.CSTNode],
        is_sequential: Callable[[cst.BaseExpression], bool],
    ) -> Optional[Tuple[cst.Call, Dict[int, cst.BaseExpression]]]:
        """``(call, replaced)`` for a name assigned once, at the top of ``function``, to
        ``nn.Sequential(...)`` and otherwise only indexed by literal positions it is given
        (``stem[0] = conv``), all before ``statement``; None when anything else touches it."""
        if function is None or statement is None:
            return None
        tops = list(block_statements(function.body))
        use_index = next(
            (i for i, top in enumerate(tops) if top is statement or any(n is statement for n in walk(top))),
            None,
        )
        if use_index is None:
            return None
        call: Optional[cst.Call] = None
        replaced: Dict[int, cst.BaseExpression] = {}
        for index, top in enumerate(tops):
            if not any(type(n) is cst.Name and n.value == name for n in walk(top)):
                continue
            if index == use_index:
                continue
            if index > use_index or type(top) is not cst.SimpleStatementLine or len(top.body) != 1:
                return None
            small = top.body[0]
            if type(small) is not cst.Assign or len(small.targets) != 1:
                return None
            target = small.targets[0].target
            if type(target) is cst.Name and target.value == name and call is None:
                if type(small.value) is not cst.Call or not is_sequential(small.value):
                    return None
                call = small.value
                continue
            position = _literal_index(target, name)
            if position is None or call is None or any(
                type(n) is cst.Name and n.value == name for n in walk(small.value)
            ):
                return None
            replaced[position] = small.value
        if call is None:
            return None
        # the use itself: the name as a plain element, once
        uses = [n for n in walk(tops[use_index]) if type(n) is cst.Name and n.value == name]
        return (call, replaced) if len(uses) == 1 else None


def _bound(node: Optional[cst.BaseExpression], default: int, length: int) -> Optional[int]:
    if node is None:
        return default
    number = literal_number(node)
    if number is None or number != int(number):
        return None
    value = int(number)
    return max(0, length + value) if value < 0 else min(value, length)


def _literal_index(target: cst.BaseExpression, name: str) -> Optional[int]:
    if not (type(target) is cst.Subscript and type(target.value) is cst.Name and target.value.value == name):
        return None
    if len(target.slice) != 1 or type(target.slice[0].slice) is not cst.Index:
        return None
    number = literal_number(target.slice[0].slice.value)
    return int(number) if number is not None and number >= 0 and number == int(number) else None


def _assigned_values(function: cst.FunctionDef, name: str) -> List[cst.BaseExpression]:
    values: List[cst.BaseExpression] = []
    for node in walk(function.body):
        if type(node) is cst.Assign:
            for target in node.targets:
                if any(type(n) is cst.Name and n.value == name for n in walk(target.target)):
                    values.append(node.value if type(target.target) is cst.Name else target.target)
        elif type(node) in (cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName):
            inner = getattr(node, "target", None) or getattr(node, "name", None)
            if inner is not None and any(type(n) is cst.Name and n.value == name for n in walk(inner)):
                values.extend([node, node])  # type: ignore[list-item]
    if any(type(p) is cst.Param and p.name.value == name for p in walk(function.params)):
        values.append(function.params)  # type: ignore[arg-type]
    return values


def _known_order(qualified: str, call: cst.Call) -> Optional[Tuple[str, ...]]:
    package, _, function = qualified.rpartition(".")
    if qualified in ("timm.create_model", "timm.models.create_model") and call.args:
        name = call.args[0].value
        if type(name) is cst.SimpleString and str(name.evaluated_value).startswith(_RESNETS):
            return TIMM_RESNET_CHILDREN
        return None
    if package.startswith("torchvision.models") and (function.startswith(_RESNETS) or function == "ResNet"):
        return TORCHVISION_RESNET_CHILDREN
    if package.startswith("timm.models") and (function.startswith(_RESNETS) or function == "ResNet"):
        return TIMM_RESNET_CHILDREN
    return None


def _class_order(classdef: cst.ClassDef) -> Optional[Tuple[str, ...]]:
    """``self.x = <call>`` of ``__init__``, first assignment of each, in order; None when a
    module may be registered elsewhere (in a branch, a loop, by a base class of this file)."""
    init = next(
        (s for s in block_statements(classdef.body) if type(s) is cst.FunctionDef and s.name.value == "__init__"),
        None,
    )
    if init is None:
        return None
    params = [*init.params.posonly_params, *init.params.params]
    if not params:
        return None
    self_name = params[0].name.value
    names: List[str] = []
    for top in block_statements(init.body):
        if type(top) is not cst.SimpleStatementLine:
            for node in walk(top):
                if type(node) is cst.Assign and type(node.value) is cst.Call and any(
                    type(t.target) is cst.Attribute and type(t.target.value) is cst.Name
                    and t.target.value.value == self_name
                    for t in node.targets
                ):
                    return None  # a module registered in a branch or a loop
            continue
        for small in top.body:
            if type(small) is not cst.Assign or type(small.value) is not cst.Call:
                continue
            func = small.value.func
            if type(func) is cst.Name and func.value in _NOT_MODULES:
                continue
            for target in small.targets:
                node = target.target
                if (
                    type(node) is cst.Attribute and type(node.value) is cst.Name
                    and node.value.value == self_name and node.attr.value not in names
                ):
                    names.append(node.attr.value)
    return tuple(names) if names else None
