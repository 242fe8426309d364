"""Is a test of an ``if`` true only while a flag is set that is off unless a caller turns it on?

``if self.flash:`` where ``__init__`` is the only method that sets ``self.flash``, to its
parameter ``flash`` (not rebound there) whose default is ``False``, or to ``False`` itself; or
``if use_flash:`` on a parameter of the function itself (not a ``forward``) defaulting to
``False``; or ``if config.SDPA_enabled:`` on a module-level instance of a class of the file
whose ``__init__`` sets the flag ``False`` and nothing else in the file sets it; and no call of
this file passes the parameter anything but ``False`` (``Factories.passed``: every call of the
class or function, none unreadable; a class subclassed in the file is not read). A flag from a
call (timm's ``self.fused_attn = use_fused_attn()``), a default of ``True`` or ``None``, a
property, or a value set in another method is not known to be off. ``not`` and ``and`` are read
as ``analysis/fallback.py`` reads the autograd tests.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.factories import _param, assigned_values, parameter
from torchmemlint.analysis.syntax import literal_bool


def off_by_default(graph: Any, test: cst.BaseExpression, truth: bool) -> bool:
    """Does ``test`` being ``truth`` in ``graph``'s function (``FunctionValues``) need a flag
    that is off unless a caller turns it on?"""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return off_by_default(graph, test.expression, not truth)
    if type(test) is cst.BooleanOperation and (type(test.operator) is cst.And) == truth:  # both must be ``truth``
        return off_by_default(graph, test.left, truth) or off_by_default(graph, test.right, truth)
    if not truth:
        return False
    function = graph.function
    if type(test) is cst.Name:  # (a module's ``forward`` is called through ``__call__``: not read)
        return function.name.value != "forward" and _default_false(graph, function, test.value)
    if type(test) is not cst.Attribute or type(test.value) is not cst.Name:
        return False
    if _module_instance_off(graph, function, test.value.value, test.attr.value):
        return True  # ``if config.SDPA_enabled:`` with ``config = Config()`` at module level
    if graph.classdef is None:
        return False
    params = [*function.params.posonly_params, *function.params.params]
    if not params or test.value.value != params[0].name.value or function.decorators:
        return False  # not ``self.<flag>`` of a plain method
    model = graph.file.analysis.class_model(graph.classdef)
    assignment = model.single_assignment(test.attr.value)
    if assignment is None:
        return False
    value = assignment.value
    if literal_bool(value) is False:
        return True
    return type(value) is cst.Name and _default_false(graph, assignment.method, value.value)


def _default_false(graph: Any, function: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``function``, not rebound there, defaulting to ``False``, and
    every call of ``function`` in this file leaves it so."""
    param: Optional[cst.Param] = parameter(function, name)
    if param is None or literal_bool(param.default) is not False:
        return False
    passed = graph.file.analysis.factories.passed(function, param)
    return passed is not None and all(value is None or literal_bool(value) is False for value, _ in passed)



def _module_instance_off(graph: Any, function: cst.FunctionDef, name: str, flag: str) -> bool:
    """``name`` is not bound in ``function`` and is bound once, at module level, to an instance
    of a class of this file (``config = Config()``) whose ``__init__`` is the only method that
    sets ``self.<flag>``, to ``False``; no other statement of the file assigns a ``<flag>``
    attribute (``config.SDPA_enabled = True``)."""
    analysis = graph.file.analysis
    if _param(function, name) is not None or assigned_values(function, name):
        return False
    values = [
        small.value for statement in analysis.module.body if type(statement) is cst.SimpleStatementLine
        for small in statement.body if type(small) is cst.Assign
        and any(type(t.target) is cst.Name and t.target.value == name for t in small.targets)
    ]
    if len(values) != 1 or type(values[0]) is not cst.Call or type(values[0].func) is not cst.Name:
        return False
    classdef = analysis.callables.classes.get(values[0].func.value)
    if classdef is None or analysis.bindings.qualify(values[0].func) is not None:
        return False
    assignment = analysis.class_model(classdef).single_assignment(flag)
    if assignment is None or assignment.method.name.value != "__init__" or literal_bool(assignment.value) is not False:
        return False
    index = analysis.index
    writes = 0
    for here in (*index.positions(cst.Assign), *index.positions(cst.AugAssign), *index.positions(cst.AnnAssign)):
        node = index.order[here]
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[attr-defined]
        writes += sum(1 for t in targets if type(t) is cst.Attribute and t.attr.value == flag)
    return writes == 1
