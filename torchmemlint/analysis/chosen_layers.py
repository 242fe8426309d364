"""A layer kept on ``self`` as one of several a constructor chooses between:

    self.act = nn.LeakyReLU(0.1) if leaky else nn.ReLU()
    self.activation_function = {"ReLU": nn.ReLU(), "lrel": nn.LeakyReLU(0.1)}[activation]

Each construction in such a choice (an ``Arm``) is the attribute's layer when its arm is taken.
``arm_of`` finds the arm a construction sits in; ``arm_off`` says whether that arm is taken only
when a caller asks for it and none does: an ``if`` arm behind a flag off by default
(``flags.off_by_default``); an arm of ``key == "lrelu"`` and a table entry whose key is neither
the literal the code compares or subscripts with, nor the default of the constructor parameter it subscripts with (directly or through
``self.<attribute> = <parameter>``), nor a value a construction of the class passes for that
parameter, in its file or in the files importing it (a value that is not a literal, or a
construction that cannot be read, may be any key: the entry is taken).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.factories import assigned_values, parameter


@dataclass(frozen=True)
class Arm:
    """Where a construction sits in the value that chooses it: under ``test`` being ``truth``
    (an ``if`` expression), or as the entry ``label`` of a table subscripted by ``key``."""

    test: Optional[cst.BaseExpression] = None
    truth: bool = True
    key: Optional[cst.BaseExpression] = None
    label: Optional[str] = None  # the entry's literal key; None: not a string literal


def arm_of(value: cst.BaseExpression, node: cst.BaseExpression) -> Optional[List[Arm]]:
    """The arms, outermost first, that lead from ``value`` to ``node``; ``[]`` when ``value`` is
    ``node``; None when ``node`` is not one of the values ``value`` may be."""
    if value is node:
        return []
    if type(value) is cst.IfExp:
        for arm, truth in ((value.body, True), (value.orelse, False)):
            inner = arm_of(arm, node)
            if inner is not None:
                return [Arm(test=value.test, truth=truth), *inner]
        return None
    if type(value) is cst.Subscript and type(value.value) is cst.Dict and len(value.slice) == 1:
        index = value.slice[0].slice
        if type(index) is not cst.Index:
            return None
        for element in value.value.elements:
            if type(element) is not cst.DictElement:
                continue
            inner = arm_of(element.value, node)
            if inner is not None:
                label = element.key.evaluated_value if type(element.key) is cst.SimpleString else None
                return [Arm(key=index.value, label=label if type(label) is str else None), *inner]
    return None


def arm_off(analysis: Any, model: Any, method: cst.FunctionDef, arms: List[Arm]) -> bool:
    """Is one of ``arms`` (of a value built in ``method`` of ``model``'s class, ``__init__`` or a
    method it calls once) taken only when a caller asks for it, and none does?"""
    from torchmemlint.analysis.flags import off_by_default  # flags reads the factories, which read this module's users

    for arm in arms:
        if arm.test is not None:
            compared = _string_test(arm.test)
            if compared is not None:  # ``nn.LeakyReLU() if act == "lrelu" else nn.ReLU()``: a table of two
                key, label, equal = compared
                if arm.truth == equal and _entry_off(analysis, model, method, key, label):
                    return True
            elif off_by_default(analysis.values(method), arm.test, arm.truth):
                return True
        elif arm.label is not None and _entry_off(analysis, model, method, arm.key, arm.label):
            return True
    return False


def _string_test(test: cst.BaseExpression):
    """``(key, "lrelu", True)`` for ``key == "lrelu"`` (``False`` for ``!=``), either side."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    if type(comparison.operator) not in (cst.Equal, cst.NotEqual):
        return None
    left, right = test.left, comparison.comparator
    if type(left) is cst.SimpleString:
        left, right = right, left
    if type(right) is not cst.SimpleString or type(right.evaluated_value) is not str:
        return None
    return left, right.evaluated_value, type(comparison.operator) is cst.Equal


def _entry_off(analysis: Any, model: Any, method: cst.FunctionDef, key: cst.BaseExpression, label: str) -> bool:
    if type(key) is cst.SimpleString:
        return key.evaluated_value != label
    name = _parameter_name(model, method, key)
    if name is None:
        return False
    function, param = name
    default = param.default
    if default is None or type(default) is not cst.SimpleString:
        return False  # (no literal default: any key)
    if default.evaluated_value == label:
        return False
    passed = analysis.factories.passed(function, param)
    if passed is None:
        return False
    values = [value for value, _ in passed]
    if function.name.value == "__init__":
        from torchmemlint.analysis.flag_importers import constructions_elsewhere

        elsewhere = constructions_elsewhere(analysis, function, param)
        if elsewhere is None:
            return False
        values.extend(value for _, value, _ in elsewhere)
    return all(value is None or (type(value) is cst.SimpleString and value.evaluated_value != label) for value in values)


def _parameter_name(model: Any, method: cst.FunctionDef, key: cst.BaseExpression):
    """``(function, parameter)`` when ``key`` is a parameter of ``method`` not rebound there, or
    ``self.<attribute>`` set once, in ``__init__``, to such a parameter of it."""
    if type(key) is cst.Name:
        param = parameter(method, key.value)
        return (method, param) if param is not None and not assigned_values(method, key.value) else None
    if type(key) is not cst.Attribute or type(key.value) is not cst.Name or key.value.value != "self":
        return None
    assignment = model.single_assignment(key.attr.value)
    if assignment is None or type(assignment.value) is not cst.Name:
        return None
    param = parameter(assignment.method, assignment.value.value)
    if param is None or assigned_values(assignment.method, assignment.value.value):
        return None
    return assignment.method, param
