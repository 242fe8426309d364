"""What a function binds a name to: its parameter of that name, every value assigned to it in
the body (not in nested functions), the one value a local is ever given. Read by the layer
factories (``analysis/factories.py``, which re-exports these) and most analyses that follow a
local to what it holds."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.syntax import walk
from torchmemlint.tree import scan


def _assigned(small: cst.CSTNode):
    if type(small) is cst.Assign:
        for target in small.targets:
            if type(target.target) is cst.Name:
                yield target.target.value, small.value
    elif type(small) is cst.AnnAssign and small.value is not None and type(small.target) is cst.Name:
        yield small.target.value, small.value


def _param(function: cst.FunctionDef, name: str) -> Optional[cst.Param]:
    params = function.params
    for param in [*params.posonly_params, *params.params, *params.kwonly_params]:
        if param.name.value == name:
            return param
    return None


def _local_values(function: cst.FunctionDef, name: str) -> List[cst.BaseExpression]:
    """Every value assigned to ``name`` in ``function`` (not in nested functions); a name also
    bound by a loop, ``with``, augmented assignment or import is given as two values."""
    values: List[cst.BaseExpression] = []
    for child in scan(function.body, _BINDERS, _NESTED, strict=True):
        if type(child) is cst.Assign or type(child) is cst.AnnAssign:
            for target, value in _assigned(child):
                if target == name:
                    values.append(value)
        elif any(type(n) is cst.Name and n.value == name for n in _targets(child)):
            values.extend([child, child])  # type: ignore[list-item]
    return values


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_BINDERS = (cst.Assign, cst.AnnAssign, cst.AugAssign, cst.For, cst.AsName, cst.NamedExpr)


def _targets(node: cst.CSTNode):
    if type(node) is cst.AugAssign:
        return walk(node.target)
    if type(node) is cst.For:
        return walk(node.target)
    if type(node) is cst.AsName:
        return walk(node.name)
    if type(node) is cst.NamedExpr:
        return walk(node.target)
    return ()


def _rebound(function: cst.FunctionDef, name: str) -> bool:
    return bool(_local_values(function, name))


def single_local_value(function: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    """The one value the local ``name`` of ``function`` is ever given (None for a parameter, or
    a name bound twice, by a loop, ``with``, an augmented assignment or unpacking)."""
    if _param(function, name) is not None:
        return None
    values = _local_values(function, name)
    if len(values) != 1 or len(assigned_values(function, name)) != 1:  # (``a, name = ...``)
        return None
    return values[0]


def assigned_values(function: cst.FunctionDef, name: str) -> List[cst.BaseExpression]:
    """What ``name`` is assigned in ``function`` (not in nested functions), also where it is
    one of several targets unpacked from a call (``self.norm_name, norm = build(...)``: the
    call is given)."""
    values: List[cst.BaseExpression] = []
    for child in scan(function.body, (cst.Assign, cst.AnnAssign), _NESTED, strict=True):
        if type(child) is cst.AnnAssign:  # ``layers: "OrderedDict[str, nn.Module]" = OrderedDict()``
            if child.value is not None and type(child.target) is cst.Name and child.target.value == name:
                values.append(child.value)
            continue
        for target in child.targets:  # type: ignore[attr-defined]
            node = target.target
            if type(node) is cst.Name and node.value == name:
                values.append(child.value)  # type: ignore[attr-defined]
            elif type(node) in (cst.Tuple, cst.List) and any(
                type(element.value) is cst.Name and element.value.value == name for element in node.elements
            ):
                values.append(child.value)  # type: ignore[attr-defined]
    return values


def parameter(function: cst.FunctionDef, name: str) -> Optional[cst.Param]:
    """The parameter ``name`` of ``function``, when it is not rebound in its body."""
    param = _param(function, name)
    return None if param is None or _rebound(function, name) else param
