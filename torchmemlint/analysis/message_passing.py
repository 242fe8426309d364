"""What ``self.propagate(...)`` makes in a project's own PyTorch Geometric layer.

A subclass of PyG's ``MessagePassing`` runs ``message`` on every edge, then ``aggregate`` (a
scatter of the messages onto the nodes, by the ``aggr`` its ``__init__`` hands to
``MessagePassing.__init__``: ``"add"`` when none is given), then ``update`` (the aggregate
unchanged unless the class overrides it). A sum or a mean scatter keeps nothing of its result for
backward (the mean divides by counts, which are not the result), so the result is a fresh
tensor: an activation on it may run in place. A ``max``/``min`` scatter's backward compares its
result with the messages (it saves the result), and any other ``aggr`` (a list, an
``Aggregation`` module, a name this file cannot read) is not known; nor is a class that overrides
``aggregate``, ``update`` or ``message_and_aggregate``, or whose ``aggr`` a caller may pass
(``**kwargs`` handed on, or a parameter) where the construction is not the one being followed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchmemlint.analysis.syntax import argument, has_star_args

if TYPE_CHECKING:
    from torchmemlint.analysis.file import FileAnalysis

MESSAGE_PASSING = frozenset({
    "torch_geometric.nn.MessagePassing",
    "torch_geometric.nn.conv.MessagePassing",
    "torch_geometric.nn.conv.message_passing.MessagePassing",
})
# ``aggr`` strings whose scatter keeps nothing of its result (PyG's names and their aliases)
_FRESH_AGGREGATIONS = frozenset({"add", "sum", "mean"})
_OVERRIDDEN = frozenset({"aggregate", "update", "message_and_aggregate"})


def aggregates_freshly(file: "FileAnalysis", classdef: cst.ClassDef, built_by: Optional[cst.Call]) -> bool:
    """Whether ``self.propagate(...)`` in ``classdef`` (a direct subclass of ``MessagePassing``)
    returns a sum or mean aggregation, for the module ``built_by`` constructs (None: not known)."""
    if not any(file.resolver.qualify(base.value) in MESSAGE_PASSING for base in classdef.bases):
        return False
    methods = {s.name.value: s for s in classdef.body.body if type(s) is cst.FunctionDef}
    if _OVERRIDDEN & methods.keys():
        return False
    init = methods.get("__init__")
    if init is None:  # ``MessagePassing.__init__`` with what the construction passes
        return built_by is not None and _fresh(_passed(built_by, 0))
    base_call = _base_init(file, init)
    if base_call is None:
        return False
    given = argument(base_call, 0, "aggr")
    if given is not None:
        value = given.value
        if type(value) is cst.Name:  # ``aggr=aggr``: the ``__init__``'s parameter
            return _parameter_fresh(init, value.value, built_by)
        return _fresh(value)
    if has_star_args(base_call):  # ``**kwargs`` handed on: ``aggr`` unless the construction leaves it out
        return built_by is not None and not has_star_args(built_by) and argument(built_by, None, "aggr") is None
    return True  # ``MessagePassing``'s default, ``"add"``


def _base_init(file: "FileAnalysis", init: cst.FunctionDef) -> Optional[cst.Call]:
    """``super().__init__(...)``, ``super(C, self).__init__(...)`` or ``MessagePassing.__init__(self, ...)``
    among the top-level statements of ``__init__``."""
    for statement in init.body.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            call = small.value if type(small) is cst.Expr else None
            if type(call) is not cst.Call or type(call.func) is not cst.Attribute or call.func.attr.value != "__init__":
                continue
            owner = call.func.value
            if type(owner) is cst.Call and type(owner.func) is cst.Name and owner.func.value == "super":
                return call
            if file.resolver.qualify(owner) in MESSAGE_PASSING and call.args:  # ``MessagePassing.__init__(self, aggr="mean")``
                return call.with_changes(args=call.args[1:])
    return None


def _parameter_fresh(init: cst.FunctionDef, name: str, built_by: Optional[cst.Call]) -> bool:
    params = list(init.params.params)
    position = next((i for i, p in enumerate(params) if p.name.value == name), None)
    if position is None or built_by is None or has_star_args(built_by):
        return False
    passed = argument(built_by, position - 1, name)
    if passed is not None:
        return _fresh(passed.value)
    default = params[position].default
    return default is not None and _fresh(default)


def _passed(call: cst.Call, position: int) -> Optional[cst.BaseExpression]:
    if has_star_args(call):
        return cst.Name("unknown")
    found = argument(call, position, "aggr")
    return None if found is None else found.value


def _fresh(value: Optional[cst.BaseExpression]) -> bool:
    """``"add"``/``"sum"``/``"mean"`` (None: not given, ``MessagePassing``'s ``"add"``)."""
    if value is None:
        return True
    return type(value) is cst.SimpleString and value.evaluated_value in _FRESH_AGGREGATIONS
