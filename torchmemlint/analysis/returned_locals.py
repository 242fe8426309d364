"""A layer a function returns through a local name: ``act = nn.ELU()`` ... ``return act``
(a factory that dispatches on a string: ``if activation == "elu": act = nn.ELU() elif ...``).
The layer is one of what the function returns when every ``return`` of the function returns
that name and the assignment reaches one of them (which calls of the function take the
branch that builds it: ``analysis/factory_arms.py``)."""

from __future__ import annotations

from typing import Any, List

import libcst as cst

from torchmemlint.tree import scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def returned_local(flow: Any, function: cst.FunctionDef, statement: Any, call: cst.Call) -> bool:
    """Whether ``statement`` (``name = call``) binds what ``function`` returns: every return
    of the function is ``return name`` and the assignment reaches one of them."""
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

