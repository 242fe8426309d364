"""What keys a ``**mapping`` spread into a call can hold, beyond the dicts built beside the call
(``analysis/scripts.call_keywords``): a dict held by an attribute of ``self`` that ``__init__``
builds (and fills, maybe under ``if``s), and ``dataclasses.asdict(x)`` of an instance of a
same-file dataclass whose fields and defaults the file shows.

A parameter that defaults to None and is replaced by a default when the caller passes nothing
(``kwargs or {}``, ``s if s is not None else Strategy()``) is read as that default: what the
call gets when the caller passes nothing. A parameter without that default is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import Scope
from torchmemlint.analysis.scripts import apply_dict_writes, call_keywords, dict_display
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import nodes_of

Keywords = Dict[str, cst.BaseExpression]
DATACLASS = "dataclasses.dataclass"
ASDICT = "dataclasses.asdict"
DEFAULT_PATH = "is not passed"


@dataclass(frozen=True)
class SpreadKeywords:
    """The keywords a call passes, ``**`` mappings read; ``through`` says how a value was
    reached when it was not written in the call's own function (None: it was)."""

    keywords: Keywords
    through: Optional[str]

    @property
    def assumed_default(self) -> bool:
        """Read on the path where the caller passes nothing: what it passes may differ."""
        return self.through is not None and DEFAULT_PATH in self.through


def spread_keywords(call: cst.Call, scope: Scope, module: cst.Module) -> Optional[SpreadKeywords]:
    """The keywords of ``call`` with every ``**`` mapping read; None when one cannot be."""
    plain = call_keywords(call, scope)
    if plain is not None:
        return SpreadKeywords(plain, None)
    found: Keywords = {}
    through: Optional[str] = None
    for arg in call.args:
        if arg.star == "**":
            read = _mapping(arg.value, call, scope, module)
            if read is None:
                return None
            found.update(read[0])
            through = through or read[1]
        elif arg.keyword is not None:
            found[arg.keyword.value] = arg.value
    return SpreadKeywords(found, through)


Read = Optional[Tuple[Keywords, Optional[str]]]  # the keys, and how they were reached


def _mapping(value: cst.BaseExpression, call: cst.Call, scope: Scope, module: cst.Module) -> Read:
    if type(value) is cst.Call:
        return _initial(value, scope, module)
    if type(value) is cst.Attribute and type(value.value) is cst.Name:
        return _self_attribute(value, scope, module)
    if type(value) is not cst.Name:
        return None
    events = [event for event in scope.assigns if value.value in event.targets]
    seq = next((event.seq for event in scope.calls if event.node is call), None)
    if len(events) != 1 or events[0].augmented or events[0].unpacked or seq is None or events[0].seq > seq:
        return None
    if events[0].value is None:
        return None
    read = _initial(events[0].value, scope, module)
    if read is None:
        return None
    found = dict(read[0])
    if not apply_dict_writes(found, value.value, scope, after=events[0].seq):
        return None
    return found, read[1]


def _self_attribute(value: cst.Attribute, scope: Scope, module: cst.Module) -> Read:
    """``self.kwargs`` in a method: the dict ``__init__`` assigns it (once), filled there; any
    other method that writes it makes it unknown."""
    function = scope.function
    owner = scope.owner
    if function is None or owner is None:
        return None
    params = [*function.params.posonly_params, *function.params.params]
    if not params or params[0].name.value != value.value.value:  # type: ignore[attr-defined]
        return None
    init: Optional[Scope] = None
    for method in owner.methods:
        if method.name == "__init__":
            init = method
    if init is None or init.function is None:
        return None
    init_params = [*init.function.params.posonly_params, *init.function.params.params]
    if not init_params:
        return None
    attribute = value.attr.value
    name = "%s.%s" % (init_params[0].name.value, attribute)
    events = [event for event in init.assigns if name in event.targets]
    if len(events) != 1 or events[0].augmented or events[0].unpacked or events[0].value is None:
        return None
    read = _initial(events[0].value, init, module)
    if read is None:
        return None
    found = dict(read[0])
    if not apply_dict_writes(found, name, init, after=events[0].seq):
        return None
    for method in owner.methods:
        if method is init or method.function is None:
            continue
        method_params = [*method.function.params.posonly_params, *method.function.params.params]
        if not method_params:
            continue
        other = "%s.%s" % (method_params[0].name.value, attribute)
        if _writes(other, method):
            return None
    through = "`%s`, built in `__init__`" % dotted_name(value)
    return found, through if read[1] is None else "%s as %s" % (through, read[1])


def _writes(name: str, scope: Scope) -> bool:
    """Whether ``scope`` rebinds ``name`` or writes into it."""
    if any(name in event.targets for event in scope.assigns):
        return True
    probe: Keywords = {}
    return not apply_dict_writes(probe, name, scope, after=-1) or bool(probe) or _deletes(name, scope)


def _deletes(name: str, scope: Scope) -> bool:
    for statement in nodes_of(scope.node, cst.Del):
        target = statement.target
        if type(target) is cst.Subscript and dotted_name(target.value) == name:
            return True
    return any(event.func == "%s.pop" % name for event in scope.calls)


def _initial(value: cst.BaseExpression, scope: Scope, module: cst.Module) -> Read:
    """The keys a dict-valued expression holds: a display, ``dict(...)``, ``asdict(instance)``,
    or a None-defaulted parameter's default (``kwargs or {}``)."""
    default = _default_path(value, scope)
    if default is not None:
        read = _initial(default[1], scope, module)
        if read is None:
            return None
        return read[0], read[1] or "the default used when `%s` %s" % (default[0], DEFAULT_PATH)
    display = dict_display(value)
    if display is not None:
        return display, None
    if type(value) is cst.Call and len(value.args) == 1 and not value.args[0].keyword and not value.args[0].star:
        func = value.func
        if type(func) in (cst.Name, cst.Attribute) and scope.bindings.qualify(func) == ASDICT:
            return _instance(value.args[0].value, scope, module)
    return None


def _instance(value: cst.BaseExpression, scope: Scope, module: cst.Module) -> Read:
    """The fields of a dataclass instance: ``C(...)``, or a name bound once to one (maybe as a
    None-defaulted parameter's default)."""
    through: Optional[str] = None
    if type(value) is cst.Name:
        events = [event for event in scope.assigns if value.value in event.targets]
        if len(events) == 1 and not events[0].augmented and not events[0].unpacked and events[0].value is not None:
            value = events[0].value
        default = _default_path(value, scope)
        if default is not None:
            through = "when `%s` %s" % (default[0], DEFAULT_PATH)
            value = default[1]
    if type(value) is not cst.Call or type(value.func) is not cst.Name:
        return None
    fields = _dataclass_fields(module, value.func.value, scope)
    if fields is None:
        return None
    found = dict(fields)
    names = list(fields)
    for position, arg in enumerate(value.args):
        if arg.star:
            return None
        if arg.keyword is not None:
            found[arg.keyword.value] = arg.value
        elif position < len(names):
            found[names[position]] = arg.value
        else:
            return None
    what = "the fields of `%s`" % value.func.value
    return found, what if through is None else "%s, %s" % (what, through)


def _dataclass_fields(module: cst.Module, name: str, scope: Scope, depth: int = 0) -> Optional[Keywords]:
    """Field -> default of the module-level ``@dataclass`` class ``name`` and its same-file
    dataclass bases; a field without a readable default maps to its annotation (no literal)."""
    if depth > 8:
        return None
    classdef = next(
        (s for s in module.body if type(s) is cst.ClassDef and s.name.value == name), None
    )
    if classdef is None or not _is_dataclass(classdef, scope):
        return None
    found: Keywords = {}
    for base in classdef.bases:
        if base.keyword is not None or type(base.value) is not cst.Name:
            return None
        if base.value.value == "object":
            continue
        inherited = _dataclass_fields(module, base.value.value, scope, depth + 1)
        if inherited is None:
            return None
        found.update(inherited)
    for statement in classdef.body.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.AnnAssign or type(small.target) is not cst.Name:
                continue
            annotation = dotted_name(small.annotation.annotation) or ""
            if annotation.rsplit(".", 1)[-1] == "ClassVar":
                continue
            found[small.target.value] = _field_default(small)
    return found


def _field_default(statement: cst.AnnAssign) -> cst.BaseExpression:
    value = statement.value
    if value is None:
        return statement.annotation.annotation
    if type(value) is cst.Call and dotted_name(value.func) in ("field", "dataclasses.field"):
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "default":
                return arg.value
        return value
    return value


def _is_dataclass(classdef: cst.ClassDef, scope: Scope) -> bool:
    for decorator in classdef.decorators:
        expr = decorator.decorator
        if type(expr) is cst.Call:
            expr = expr.func
        if type(expr) in (cst.Name, cst.Attribute) and scope.bindings.qualify(expr) == DATACLASS:
            return True
    return False


def _default_path(value: cst.BaseExpression, scope: Scope) -> Optional[Tuple[str, cst.BaseExpression]]:
    """``(parameter, default)`` for ``p or D``, ``p if p is not None else D`` and ``D if p is
    None else p``, where ``p`` is a parameter of the scope's function that defaults to None."""
    if type(value) is cst.BooleanOperation and type(value.operator) is cst.Or:
        if _none_parameter(value.left, scope):
            return value.left.value, value.right  # type: ignore[attr-defined]
        return None
    if type(value) is not cst.IfExp:
        return None
    test = value.test
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    right = comparison.comparator
    if not (type(right) is cst.Name and right.value == "None" and _none_parameter(test.left, scope)):
        return None
    parameter = test.left.value  # type: ignore[attr-defined]
    operator = type(comparison.operator)
    if operator is cst.IsNot and _names(value.body, parameter):
        return parameter, value.orelse
    if operator is cst.Is and _names(value.orelse, parameter):
        return parameter, value.body
    return None


def _names(node: cst.BaseExpression, name: str) -> bool:
    return type(node) is cst.Name and node.value == name


def _none_parameter(node: cst.BaseExpression, scope: Scope) -> bool:
    if type(node) is not cst.Name:
        return False
    for param in scope.params():
        if param.name.value == node.value:
            default = param.default
            return type(default) is cst.Name and default.value == "None"
    return False
