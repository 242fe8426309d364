"""What calling a name may call (``possible_callees``, asked by ``stems.py``): the name or
attribute itself, or the constructors a dict literal or the function's assignments give it
(kept apart from ``factories.py``, which stays under 800 lines)."""

from __future__ import annotations

from typing import Callable, List, Optional

import libcst as cst

from torchmemlint.analysis.factories import _MAX_DEPTH, assigned_values


def possible_callees(
    func: cst.BaseExpression,
    qualify: Callable[[cst.BaseExpression], Optional[str]],
    module: cst.Module,
    function: Optional[cst.FunctionDef] = None,
    depth: int = 0,
) -> Optional[List[str]]:
    """The qualified names of what calling ``func`` may call: a name or attribute itself, a
    value picked from a dict literal of constructors (``{"r18": resnet18, "r50":
    models.resnet50}[name]``, also a module-level constant dict or a name assigned it once),
    or ``getattr(torchvision.models, name)`` (``"torchvision.models."``, ending in a dot, when
    the attribute's name is not a string literal). None when one of them is not known."""
    if depth > _MAX_DEPTH:
        return None
    if type(func) in (cst.Name, cst.Attribute):
        qualified = qualify(func)
        if qualified is not None:
            return [qualified]
        if type(func) is cst.Name:
            values = assigned_values(function, func.value) if function is not None else []
            if not values:
                values = [
                    small.value
                    for statement in module.body if type(statement) is cst.SimpleStatementLine
                    for small in statement.body
                    if type(small) is cst.Assign and len(small.targets) == 1
                    and type(small.targets[0].target) is cst.Name and small.targets[0].target.value == func.value
                ]
            if len(values) == 1:
                return possible_callees(values[0], qualify, module, function, depth + 1)
        return None
    if type(func) is cst.Subscript:
        table = func.value
        namespace = _namespace(table, qualify)
        if namespace is not None:  # `torchvision.models.__dict__[name]`: `getattr` by another name
            key = func.slice[0].slice if len(func.slice) == 1 else None
            key = key.value if type(key) is cst.Index else None
            if key is None:
                return None
            return [f"{namespace}.{key.evaluated_value}" if type(key) is cst.SimpleString else f"{namespace}."]
        if type(table) is cst.Name:
            found = [
                small.value
                for statement in module.body if type(statement) is cst.SimpleStatementLine
                for small in statement.body
                if type(small) is cst.Assign and len(small.targets) == 1
                and type(small.targets[0].target) is cst.Name and small.targets[0].target.value == table.value
            ]
            if function is not None and assigned_values(function, table.value):
                found = assigned_values(function, table.value)
            table = found[0] if len(found) == 1 else None
        if type(table) is not cst.Dict or not table.elements:
            return None
        names: List[str] = []
        for element in table.elements:
            if type(element) is not cst.DictElement:
                return None
            inner = possible_callees(element.value, qualify, module, None, depth + 1)
            if inner is None:
                return None
            names.extend(inner)
        return names
    if type(func) is cst.Call and type(func.func) is cst.Name and func.func.value == "getattr" and len(func.args) == 2:
        owner = qualify(func.args[0].value)
        name = func.args[1].value
        if owner is None:
            return None
        return [f"{owner}.{name.evaluated_value}" if type(name) is cst.SimpleString else f"{owner}."]
    return None


def _namespace(node: cst.BaseExpression, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[str]:
    """``torchvision.models`` for ``torchvision.models.__dict__`` or ``vars(torchvision.models)``."""
    if type(node) is cst.Attribute and node.attr.value == "__dict__":
        return qualify(node.value)
    if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "vars" and len(node.args) == 1:
        return qualify(node.args[0].value)
    return None
