"""A layer a function returns through a local name: ``act = nn.ELU()`` ... ``return act``
(a factory that dispatches on a string: ``if activation == "elu": act = nn.ELU() elif ...``).
The layer is one of what the function returns when every ``return`` of the function returns
that name and the assignment reaches one of them; a call of the function that passes the
string parameter a literal the branch does not test for does not build it there."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.placing import passed
from torchmemlint.analysis.factories import parameter
from torchmemlint.tree import indexed, scan

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


def excluded(function: cst.FunctionDef, test: tuple, call: cst.Call) -> bool:
    """Whether ``call`` of ``function`` passes the tested parameter only strings other than
    the one tested (a literal, or either arm of ``a if c else b``): the branch never runs."""
    param, wanted = test
    known, _, value = passed(function, param, call)
    if not known or value is None:
        return False
    if type(value) is cst.Name:
        value = _default_of(value, call)  # `get_act(act_fn)` with `act_fn: str = "snake"` above
        if value is None:
            return False
    arms = [value.body, value.orelse] if type(value) is cst.IfExp else [value]
    if not all(type(arm) is cst.SimpleString for arm in arms):
        return False
    return all(arm.evaluated_value != wanted for arm in arms)


def _default_of(name: cst.Name, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The default of the parameter ``name`` of the function ``call`` is in, when the function
    never rebinds it: what the layer is built from in the default configuration (a caller that
    passes another value configures another model)."""
    found = indexed(call)
    if found is None:
        return None
    index, here = found
    owner = index.function_of(here)
    if owner < 0:
        return None
    function = index.order[owner]
    param = parameter(function, name.value)
    if param is None or param.default is None or any(
        type(node) is cst.Name and node.value == name.value and type(index.order[index.parent[p]]) in _BINDERS
        for p, node in ((p, index.order[p]) for p in index.positions_in(owner, (cst.Name,)))
    ):
        return None
    return param.default


# where a name is bound (the parameter rebound in the function: its default says nothing)
_BINDERS = (cst.AssignTarget, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem, cst.NamedExpr, cst.CompFor)
