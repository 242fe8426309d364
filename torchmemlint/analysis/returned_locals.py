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
    if type(table) is not cst.Dict:
        return None
    label = element.key.evaluated_value if type(element.key) is cst.SimpleString else None
    label = label if type(label) is str else None
    item = _item(index, table)
    if item is not None:
        reader, key = item
        return (key, label) if type(index.above(reader)) is cst.Return and index.function_of(index.find(reader)) == index.find(function) else None
    holder = index.above(table)
    if type(holder) is not cst.Assign or holder.value is not table or len(holder.targets) != 1:
        return None
    target = holder.targets[0].target
    if type(target) is not cst.Name or index.function_of(index.find(holder)) != index.find(function):
        return None
    if sum(1 for node in scan(function.body, (cst.Assign, cst.AugAssign, cst.AnnAssign), _NESTED) if _binds(node, target.value)) != 1:
        return None
    keys = []
    for line in _returns(function):
        value = line.body[0].value
        found = _item_of_name(value, target.value)
        if found is None:
            return None
        keys.append(found)
    if not keys or any(not key.deep_equals(keys[0]) for key in keys[1:]):
        return None
    return keys[0], label


def _item(index: Any, table: cst.Dict) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression]]:
    """``(reader, key)`` for ``{...}[key]`` / ``{...}.get(key[, default])`` read off ``table``."""
    above = index.above(table)
    if type(above) is cst.Subscript and above.value is table:
        key = _index_key(above)
        return (above, key) if key is not None else None
    if type(above) is cst.Attribute and above.value is table and above.attr.value == "get":
        call = index.above(above)
        if type(call) is cst.Call and call.func is above and 1 <= len(call.args) <= 2 and not any(a.star or a.keyword for a in call.args):
            return call, call.args[0].value
    return None


def _item_of_name(value: Optional[cst.BaseExpression], name: str) -> Optional[cst.BaseExpression]:
    """The key of ``name[key]`` / ``name.get(key[, default])``; None for anything else."""
    if type(value) is cst.Subscript and type(value.value) is cst.Name and value.value.value == name:
        return _index_key(value)
    if (
        type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "get"
        and type(value.func.value) is cst.Name and value.func.value.value == name
        and 1 <= len(value.args) <= 2 and not any(a.star or a.keyword for a in value.args)
    ):
        return value.args[0].value
    return None


def _index_key(subscript: cst.Subscript) -> Optional[cst.BaseExpression]:
    if len(subscript.slice) != 1 or type(subscript.slice[0].slice) is not cst.Index:
        return None
    return subscript.slice[0].slice.value


def _binds(node: cst.CSTNode, name: str) -> bool:
    targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[attr-defined]
    return any(type(t) is cst.Name and t.value == name for t in targets)
