"""A layer a function returns through a local name: ``act = nn.ELU()`` ... ``return act``
(a factory that dispatches on a string: ``if activation == "elu": act = nn.ELU() elif ...``).
The layer is one of what the function returns when every ``return`` of the function returns
that name and the assignment reaches one of them (which calls of the function take the
branch that builds it: ``analysis/factory_arms.py``).

Or through a table the function returns an item of: ``mapping = {"elu": nn.ELU(), "relu":
nn.ReLU()}`` ... ``return mapping[name]`` (also ``return {...}[name]``, ``mapping.get(name)``):
each entry is returned when the key is its label (``table_entry``; the calls that pass another
key never build it there: ``analysis/factory_arms.py`` reads the entry as ``name == "elu"``)."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.factories import assigned_values
from torchmemlint.tree import scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def returned_local(flow: Any, function: cst.FunctionDef, statement: Any, call: cst.Call, index: Any = None) -> bool:
    """Whether ``statement`` (``name = call``) binds what ``function`` returns: every return
    of the function is ``return name`` and the assignment reaches one of them; or, given the
    file's ``index``, whether ``call`` is an entry of a table the function returns an item of
    (``table_entry``)."""
    if index is not None and table_entry(index, function, call) is not None:
        return True
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return False
    small = statement.body[0]
    if type(small) is not cst.Assign or len(small.targets) != 1 or small.value is not call:
        return False
    target = small.targets[0].target
    if type(target) is not cst.Name:
        return False
    here = flow.statement_index(statement)
    lines = _returns(function)
    if here is None or not lines:
        return False
    reached = False
    for line in lines:
        value = line.body[0].value
        if type(value) is not cst.Name or value.value != target.value:
            return False
        index = flow.statement_index(line)
        if index is None:
            return False
        reached = reached or any(d.index == here for d in flow.definitions(target.value, index))
    return reached


def _returns(function: cst.FunctionDef) -> List[cst.SimpleStatementLine]:
    found = []
    for line in scan(function.body, (cst.SimpleStatementLine,), _NESTED, strict=True):
        if any(type(small) is cst.Return for small in line.body):  # type: ignore[attr-defined]
            if len(line.body) != 1:  # type: ignore[attr-defined]
                return []
            found.append(line)
    return found  # type: ignore[return-value]



def table_entry(index: Any, function: cst.FunctionDef, call: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, Optional[str]]]:
    """``(key, label)`` when ``call`` is the value of the entry ``label`` (None: not a literal
    string) of a dict literal ``function`` returns an item of by ``key``: ``return {...}[key]``,
    ``return {...}.get(key)``, or the dict bound once to a local every ``return`` of the
    function returns an item of by the same key (``mapping[name]``)."""
    element = index.above(call)
    if type(element) is not cst.DictElement or element.value is not call:
        return None
    table = index.above(element)
    if type(table) is not cst.Dict or index.function_of(index.find(table)) != index.find(function):
        return None
    label = element.key.evaluated_value if type(element.key) is cst.SimpleString else None
    label = label if type(label) is str else None
    holder = index.above(table)
    reader = index.above(holder) if type(holder) is cst.Attribute else holder  # (``{...}.get(key)``)
    item = _item(reader)
    if item is not None and item[0] is table:
        return (item[1], label) if type(index.above(reader)) is cst.Return else None
    if type(holder) is not cst.Assign or len(holder.targets) != 1 or type(holder.targets[0].target) is not cst.Name:
        return None
    name = holder.targets[0].target.value
    if len(assigned_values(function, name)) != 1:
        return None
    items = [_item(line.body[0].value) for line in _returns(function)]
    if not items or any(i is None or type(i[0]) is not cst.Name or i[0].value != name for i in items):
        return None
    key = items[0][1]  # type: ignore[index]
    return (key, label) if all(i[1].deep_equals(key) for i in items) else None  # type: ignore[index]


def _item(value: Optional[cst.CSTNode]) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``(container, key)`` of ``container[key]`` or ``container.get(key[, default])``."""
    if type(value) is cst.Subscript and len(value.slice) == 1 and type(value.slice[0].slice) is cst.Index:
        return value.value, value.slice[0].slice.value
    if (
        type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "get"
        and 1 <= len(value.args) <= 2 and not any(a.star or a.keyword for a in value.args)
    ):
        return value.func.value, value.args[0].value
    return None
