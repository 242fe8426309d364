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
from torchmemlint.analysis.flag_importers import constructions_elsewhere
from torchmemlint.tree import indexed, scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_DEPTH = 4  # callers followed for a parameter's strings


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


def excluded(function: cst.FunctionDef, test: tuple, call: cst.Call, file: Any = None) -> bool:
    """Whether ``call`` of ``function`` passes the tested parameter only strings other than
    the one tested (a literal, or either arm of ``a if c else b``): the branch never runs. A
    parameter of the calling function stands for its default (``get_act(act_fn)`` with
    ``act_fn: str = "snake"`` above) or, without one, for what every construction passes it,
    in ``file`` and in the files importing its class (``_strings``)."""
    param, wanted, fold = test
    known, _, value = passed(function, param, call)
    if not known or value is None:
        return False
    if type(value) is cst.Name:
        default = _default_of(value, call)
        strings = _strings([default], None, 0) if default is not None else _passed_strings(file, value, call)
    else:
        strings = _strings([value], None, 0)
    return bool(strings) and all(fold(text) != wanted for text in strings)  # type: ignore[union-attr]


def _strings(values: List[Optional[cst.BaseExpression]], file: Any, depth: int, caller: Optional[cst.FunctionDef] = None) -> Optional[set]:
    """The strings ``values`` may be (literals, either arm of ``a if c else b``, a parameter of
    ``caller`` read through its own constructions); None when one is not known."""
    found: set = set()
    for value in values:
        arms = [value.body, value.orelse] if type(value) is cst.IfExp else [value]
        for arm in arms:
            if type(arm) is cst.SimpleString:
                found.add(str(arm.evaluated_value))
                continue
            inner = _parameter_strings(file, caller, arm, depth + 1) if type(arm) is cst.Name and file is not None else None
            if inner is None:
                return None
            found |= inner
    return found


def _passed_strings(file: Any, name: cst.Name, call: cst.Call) -> Optional[set]:
    """For ``name``, a parameter without a default of the function ``call`` is in (a class's
    ``__init__``: ``ResnetModel(..., act)`` building ``get_act_fn(act)``), the strings its
    calls pass it."""
    found = indexed(call)
    if file is None or found is None:
        return None
    index, here = found
    owner = index.function_of(here)
    return _parameter_strings(file, index.order[owner], name, 0) if owner >= 0 else None


def _parameter_strings(file: Any, caller: Optional[cst.FunctionDef], name: cst.Name, depth: int) -> Optional[set]:
    """What the calls of ``caller`` (in ``file``, and for an ``__init__`` also in the files
    importing its class) pass its parameter ``name``, never rebound, as strings; None when a
    call cannot be read, passes something else, leaves it at a default, or there is none."""
    param = parameter(caller, name.value) if caller is not None and depth < _DEPTH else None
    if param is None or param.default is not None:
        return None
    here = file.factories.passed(caller, param)
    if here is None:
        return None
    sites = [(file, value, function) for value, function in here]
    if not sites and caller.name.value == "__init__":
        sites = constructions_elsewhere(file, caller, param) or []
    if not sites or any(value is None for _, value, _ in sites):
        return None
    found: set = set()
    for theirs, value, function in sites:
        inner = _strings([value], theirs, depth, function)
        if inner is None:
            return None
        found |= inner
    return found


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
