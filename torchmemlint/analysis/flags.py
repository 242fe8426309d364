"""Is a test of an ``if`` true only while a flag is set that is off unless a caller turns it on?

``if self.flash:`` where ``__init__`` is the only method that sets ``self.flash``, to its
parameter ``flash`` (not rebound there) whose default is ``False``, or to ``False`` itself; or
``if use_flash:`` on a parameter of the function itself (not a ``forward``) defaulting to
``False``; and no call of
this file passes the parameter anything but ``False`` (``Factories.passed``: every call of the
class or function, none unreadable; a class subclassed in the file is not read). A flag from a
call (timm's ``self.fused_attn = use_fused_attn()``), a default of ``True`` or ``None``, a
property, or a value set in another method is not known to be off. ``not`` and ``and`` are read
as ``analysis/fallback.py`` reads the autograd tests.
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.factories import parameter
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
    if type(test) is not cst.Attribute or type(test.value) is not cst.Name or graph.classdef is None:
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

