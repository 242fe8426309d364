"""Which arm of ``__init__`` built what a method runs: a flag kept on ``self`` (``self.outermost
= outermost``, the parameter never rebound) and tested around a call in another method (``if
self.outermost: return self.model(x)`` / ``else: return torch.cat([x, self.model(x)], 1)``)
ties the call to the arms of ``__init__``'s ``if outermost:`` that can have run. Where the
module is ``nn.Sequential(*model)`` of a list built in those arms (pix2pix's
``UnetSkipConnectionBlock``), or Sequentials splicing such lists among other modules, one per
arm of an ``if`` (``nn.Sequential(*down, sub_module, *up)`` / ``nn.Sequential(*down, *up)``),
the layers that may come first are read with the parameter's truth fixed
(``LayerLists.order(..., assume=...)``). Asked by the activation sites
(``analysis/activations.py``) for a layer first in a Sequential attribute."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.factories import parameter
from torchmemlint.analysis.syntax import block_statements
from torchmemlint.tree import contains

SEQUENTIAL = "torch.nn.Sequential"


def may_come_first(file: Any, model: Any, attribute: str, layer: cst.Call, method: cst.FunctionDef,
                   statement: Optional[cst.CSTNode]) -> bool:
    """Whether the layer ``layer`` builds may be the first module ``self.<attribute>`` runs
    where ``method`` calls it (at ``statement``): False only when the flags tested around the
    call fix arms of ``__init__`` in which the list spliced into it never starts with it."""
    init = model.init
    assignments = model.assignments.get(attribute, [])
    if init is None or statement is None or not assignments or any(a.method is not init for a in assignments):
        return True
    for assignment in assignments:  # ``if sub_module is not None: self.model = nn.Sequential(*down, sub_module, *up)``, ``else:`` ...
        value = assignment.value
        if type(value) is not cst.Call or file.resolver.constructor(value) != SEQUENTIAL or not value.args:
            return True
    assume: Dict[str, bool] = {}
    for flag, truth in _tests(list(block_statements(method.body)), statement, model.self_name(method)):
        kept = _kept_parameter(model, init, flag)
        if kept is not None and assume.get(kept, truth) == truth:
            assume[kept] = truth
    if not assume or file.resolver.lists is None:
        return True
    return any(_may_lead(file, init, assignment, layer, assume) for assignment in assignments)


def _may_lead(file: Any, init: cst.FunctionDef, assignment: Any, layer: cst.Call, assume: Dict[str, bool]) -> bool:
    """Whether ``layer`` may be the first module of the ``nn.Sequential(...)`` ``assignment``
    builds, with the parameters' truth ``assume``: its arguments in turn, a list spliced in
    (``*down``) by the orders it may hold, the next argument counted too when that list may be
    empty; a constructor call written there other than ``layer`` comes first; anything else
    (a name, a factory's call) may be it."""
    for arg in assignment.value.args:
        if arg.keyword is not None or arg.star == "**":
            return True
        if arg.star == "*":
            if type(arg.value) is not cst.Name:
                return True
            order = file.resolver.lists.order(init, arg.value.value, assignment.statement, assume=assume)
            if order is None or any(element is layer for element in order.first):
                return True
            if not order.nullable:
                return False
            continue
        return arg.value is layer or type(arg.value) is not cst.Call or file.resolver.constructor(arg.value) is None
    return False


def _tests(statements: List[cst.CSTNode], target: cst.CSTNode, self_name: Optional[str]) -> List[Tuple[str, bool]]:
    """The ``self.<flag>`` tests (``if self.flag:``, ``if not self.flag:``, their ``elif``/
    ``else``) around ``target`` among ``statements``, each with the truth it has there."""
    for statement in statements:
        if statement is target:
            return []
        if not contains(statement, target):
            continue
        if type(statement) is cst.If:
            return _arm(statement, target, self_name)
        found: List[Tuple[str, bool]] = []
        for suite in (getattr(statement, "body", None), getattr(statement, "orelse", None)):
            if isinstance(suite, (cst.IndentedBlock, cst.SimpleStatementSuite)) and contains(suite, target):
                found = _tests(list(block_statements(suite)), target, self_name)
            elif isinstance(suite, cst.Else) and contains(suite, target):
                found = _tests(list(block_statements(suite.body)), target, self_name)
        return found  # (a loop's or a ``with``'s body: no flag of its own)
    return []


def _arm(statement: cst.If, target: cst.CSTNode, self_name: Optional[str]) -> List[Tuple[str, bool]]:
    flag = _flag(statement.test, self_name)
    if contains(statement.body, target):
        inner = _tests(list(block_statements(statement.body)), target, self_name)
        return ([(flag[0], flag[1])] if flag else []) + inner
    orelse = statement.orelse
    if contains(statement.test, target) or orelse is None:
        return []
    outer = [(flag[0], not flag[1])] if flag else []
    if type(orelse) is cst.If:
        return outer + _arm(orelse, target, self_name)
    return outer + _tests(list(block_statements(orelse.body)), target, self_name)


def _flag(test: cst.BaseExpression, self_name: Optional[str]) -> Optional[Tuple[str, bool]]:
    """``("outermost", True)`` for ``self.outermost``, ``False`` for ``not self.outermost``."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _flag(test.expression, self_name)
        return (inner[0], not inner[1]) if inner else None
    if type(test) is cst.Attribute and type(test.value) is cst.Name and test.value.value == self_name:
        return test.attr.value, True
    return None


def _kept_parameter(model: Any, init: cst.FunctionDef, flag: str) -> Optional[str]:
    """``outermost`` when ``self.<flag> = outermost`` is the one assignment of the attribute,
    in ``__init__``, of a parameter of it that it never rebinds."""
    assignments = model.assignments.get(flag, [])
    if len(assignments) != 1 or assignments[0].method is not init or not assignments[0].single_target:
        return None
    value = assignments[0].value
    if type(value) is not cst.Name or parameter(init, value.value) is None:
        return None
    return value.value
