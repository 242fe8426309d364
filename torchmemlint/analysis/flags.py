"""Is a test of an ``if`` true only while a flag is set that is off unless a caller turns it on?

``if self.flash:`` where ``__init__`` is the only method that sets ``self.flash``, to its
parameter ``flash`` (not rebound there) whose default is ``False``, or to ``False`` itself; or
``if use_flash:`` on a parameter of the function itself defaulting to ``False``; or ``if
config.SDPA_enabled:`` on a module-level instance of a class of the file whose ``__init__``
sets the flag ``False`` and nothing else in the file sets it; and no call of this file passes
the parameter anything but ``False`` (``Factories.passed``: every call of the class or
function, none unreadable; a class subclassed in the file is not read; a module's ``forward``
through the attributes holding its instances, ``forward_calls.py``), or passes a parameter of
the calling function that is off so itself (``Attend(flash=flash)`` in ``Attention.__init__(self,
flash=False)``), or the caller's own ``self.<flag>`` that its class sets off so
(``FullAttention(output_attention=self.output_attention)`` after ``self.output_attention =
False``); a class its own file never builds is off unless every construction in the
files importing it turns the flag on (``flag_importers.py``). A local the test reads is followed in the value graph: ``flash =
default(flash, self.flash)`` runs the same-file helper, whose ``val if exists(val) else d``
is an ``if`` between a parameter defaulting to ``None`` (the caller's value, when one is
given) and the flag: off when the flag is. A flag from a call (timm's ``self.fused_attn =
use_fused_attn()``), a flag defaulting to ``True`` or ``None`` itself, a property, or a value
set in another method is not known to be off, but transformers' ``output_attentions``
configuration flag is (``PretrainedConfig`` defaults it to ``False``), where the file's models
take those configurations or a configuration class of the file defaults it to ``False``; a caller's name is read in its own value graph (``output_attentions
if output_attentions is not None else self.config.output_attentions``). ``not`` and ``and`` are read as
``analysis/fallback.py`` reads the autograd tests. The ``else`` of a flag on by default (``if
self.double:`` with ``double=True``, no call of the file passing anything else) is read the same
way: it runs only when a caller turns the flag off. ``self.life_gate is not None`` needs a flag off
by default when the class sets the attribute to ``None`` and, only in such an arm, to something
else; code past ``if self.life_gate is None: return ...`` runs only then (``flag_test``).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.factories import _param, assigned_values, parameter
from torchmemlint.analysis.flag_importers import may_turn_on, turned_on
from torchmemlint.analysis.forward_calls import forward_passed, passed_elsewhere
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import literal_bool
from torchmemlint.tree import path_to, walk

# Flags of transformers' ``PretrainedConfig`` that default to ``False`` (its documentation:
# ``output_attentions (bool, optional, defaults to False)``); a model reads them as
# ``self.config.output_attentions`` when its caller passes ``None``.
CONFIG_FLAGS_OFF = frozenset({"output_attentions"})
CALLERS = 6  # how many constructors a flag is followed up through (``Transformer(flash)`` -> ``Block`` -> ``Attention`` -> ``Attend``)


def off_by_default(graph: Any, test: cst.BaseExpression, truth: bool) -> bool:
    """Does ``test`` being ``truth`` in ``graph``'s function (``FunctionValues``) need a flag
    that is off unless a caller turns it on?"""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return off_by_default(graph, test.expression, not truth)
    if type(test) is cst.BooleanOperation and (type(test.operator) is cst.And) == truth:  # both must be ``truth``
        return off_by_default(graph, test.left, truth) or off_by_default(graph, test.right, truth)
    chosen = _chosen_off(graph, test, truth)
    if chosen is not None:  # ``if backend == "auto":`` with ``backend="vanilla"``
        return chosen
    compared = _none_test(test)
    if compared is not None:  # ``if self.life_gate is None: return ...``
        attribute, is_not = compared
        flag = _own_flag(graph.function, attribute) if graph.classdef is not None else None
        return truth == is_not and flag is not None and _built_behind_flag(graph, flag)
    if not truth:
        return _on_by_default(graph, test)
    function = graph.function
    if type(test) is cst.Name:
        if parameter(function, test.value) is not None or not assigned_values(function, test.value):
            return _default_false(graph, function, test.value)
        read = graph.names.get(id(test))  # ``flash = default(flash, self.flash)``: what the name holds
        return read is not None and _value_off(graph, read, 0)
    if type(test) is not cst.Attribute or type(test.value) is not cst.Name:
        return False
    if _module_instance_off(graph, function, test.value.value, test.attr.value):
        return True  # ``if config.SDPA_enabled:`` with ``config = Config()`` at module level
    if graph.classdef is None or _own_flag(function, test) is None:
        return False  # not ``self.<flag>`` of a plain method
    return _attribute_off(graph, test.attr.value)


def _chosen_off(graph: Any, test: cst.BaseExpression, truth: bool) -> Optional[bool]:
    """``name == "text"`` (or ``!=``), ``name`` a parameter of the function not rebound there whose
    default is a string (or ``self.<name>``, set once in the class from such a parameter): does the test come out ``truth`` only when a caller passes another string
    than the default? (True: no call of the file passes it one that does; None: no such test.)"""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1 or type(test.left) not in (cst.Name, cst.Attribute):
        return None
    target = test.comparisons[0]
    if type(target.operator) not in (cst.Equal, cst.NotEqual) or type(target.comparator) is not cst.SimpleString:
        return None
    function = graph.function
    if type(test.left) is cst.Attribute:  # ``self.cost_type == "average"``, set once from ``cost_type="smooth"``
        flag = _own_flag(function, test.left) if graph.classdef is not None else None
        assignment = graph.file.analysis.class_model(graph.classdef).single_assignment(flag) if flag else None
        if assignment is None or type(assignment.value) is not cst.Name:
            return None
        function, name = assignment.method, assignment.value.value
    else:
        name = test.left.value
    param = parameter(function, name)
    if param is None or type(param.default) is not cst.SimpleString or assigned_values(function, name):
        return None
    equal = type(target.operator) is cst.Equal
    if ((param.default.evaluated_value == target.comparator.evaluated_value) == equal) == truth:
        return False  # the default already takes this arm
    passed = graph.file.analysis.factories.passed(function, param)
    return passed is not None and all(
        value is None or type(value) is cst.SimpleString and ((value.evaluated_value == target.comparator.evaluated_value) == equal) != truth
        for value, _ in passed
    )


def _none_test(test: cst.BaseExpression) -> Optional[Tuple[cst.BaseExpression, bool]]:
    """``x is None`` -> (x, False); ``x is not None`` -> (x, True)."""
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    target = test.comparisons[0]
    if type(target.operator) not in (cst.Is, cst.IsNot) or not _is_none(target.comparator):
        return None
    return test.left, type(target.operator) is cst.IsNot


def _built_behind_flag(graph: Any, attribute: str) -> bool:
    """``self.<attribute>`` is set only while the class is built, to ``None`` and, in an arm
    that runs only behind a flag off by default, to something else (``self.life_gate =
    nn.Sequential(...)`` under ``if birth_death:``, ``birth_death=False``), no construction in
    another file may turn on (``strict_flag_test``)."""
    model = graph.file.analysis.class_model(graph.classdef)
    found = model.assignments.get(attribute, [])
    if not found or not all(model.builds(assignment.method) for assignment in found):
        return False
    built = [assignment for assignment in found if not _is_none(assignment.value)]
    return len(built) < len(found) and all(
        strict_flag_test(graph.file.analysis.values(assignment.method), assignment.statement) is not None
        for assignment in built
    )


def _own_flag(method: cst.FunctionDef, node: cst.BaseExpression) -> Optional[str]:
    """``flag`` when ``node`` is ``self.<flag>`` in ``method``, a plain method (no decorator)
    whose first parameter is ``self``."""
    params = [*method.params.posonly_params, *method.params.params]
    if type(node) is not cst.Attribute or type(node.value) is not cst.Name or not params or method.decorators:
        return None
    return node.attr.value if node.value.value == params[0].name.value else None


def _on_by_default(graph: Any, test: cst.BaseExpression) -> bool:
    """Is ``test`` a flag that is on unless a caller turns it off (so that its ``else`` runs only
    then): a parameter of the function, or ``self.<flag>`` set once in ``__init__`` to one or to
    ``True``, whose default is ``True`` and that no call of the file passes anything else
    (rlprop's ``if self.double:`` with ``double=True``)?"""
    function = graph.function
    if type(test) is cst.Name:
        return not assigned_values(function, test.value) and _left_true(graph, function, test.value)
    flag = _own_flag(function, test)
    if graph.classdef is None or flag is None:
        return False
    assignment = graph.file.analysis.class_model(graph.classdef).single_assignment(flag)
    if assignment is None:
        return False
    value = assignment.value
    return literal_bool(value) is True or (type(value) is cst.Name and _left_true(graph, assignment.method, value.value))


def _left_true(graph: Any, function: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``function`` defaulting to ``True`` that every call of the file
    leaves so (passes nothing, or ``True``), with at least one call or none at all."""
    param = parameter(function, name)
    if param is None or literal_bool(param.default) is not True:
        return False
    passed = forward_passed(graph, function, param) if function.name.value == "forward" else graph.file.analysis.factories.passed(function, param)
    return passed is not None and all(value is None or literal_bool(value) is True for value, _ in passed)


def turned_off(graph: Any, test: cst.BaseExpression, truth: bool) -> bool:
    """Does some call of this file give the flag that ``test`` reads the value that makes it
    not ``truth``, so that the other arm runs in those instances: ``self.use_sdpa = use_sdpa``
    with ``use_sdpa=True`` the default, and ``TransformerBlock(config, use_sdpa=False)`` passed
    down to ``Attention(config, use_sdpa=use_sdpa)`` (followed through ``CALLERS`` callers)?"""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return turned_off(graph, test.expression, not truth)
    function = graph.function
    if type(test) is cst.Name and parameter(function, test.value) is not None and not assigned_values(function, test.value):
        return _passes(graph, function, test.value, not truth)
    params = [*function.params.posonly_params, *function.params.params]
    if type(test) is not cst.Attribute or type(test.value) is not cst.Name or graph.classdef is None or not params:
        return False
    if test.value.value != params[0].name.value:
        return False
    assignment = graph.file.analysis.class_model(graph.classdef).single_assignment(test.attr.value)
    if assignment is None or type(assignment.value) is not cst.Name:
        return False
    return _passes(graph, assignment.method, assignment.value.value, not truth)


def _passes(graph: Any, function: cst.FunctionDef, name: str, wanted: bool, depth: int = 0) -> bool:
    """Does a call of ``function`` in this file pass its parameter ``name`` the literal
    ``wanted``, or a parameter of the calling function that a call of that one passes so?"""
    param: Optional[cst.Param] = parameter(function, name)
    if param is None or assigned_values(function, name):
        return False
    passed = graph.file.analysis.factories.passed(function, param)
    for value, caller in passed or ():
        if value is not None and literal_bool(value) is wanted:
            return True
        if type(value) is cst.Name and caller is not None and depth < CALLERS and _passes(graph, caller, value.value, wanted, depth + 1):
            return True
    return False


def _attribute_off(graph: Any, flag: str) -> bool:
    """``self.<flag>`` is set once, in ``__init__``, to ``False`` or to a parameter that is off
    unless a caller turns it on."""
    model = graph.file.analysis.class_model(graph.classdef)
    assignment = model.single_assignment(flag)
    if assignment is None:
        return False
    value = assignment.value
    if literal_bool(value) is False:
        return True
    if type(value) is cst.Attribute and type(value.value) is cst.Name and value.attr.value in CONFIG_FLAGS_OFF:
        # ``self.output_attentions = config.output_attentions`` (pytorch-transformers' models)
        config = value.value.value
        return "config" in config.lower() and parameter(assignment.method, config) is not None and _model_configuration(graph.file.analysis, value.attr.value)
    return type(value) is cst.Name and _default_false(graph, assignment.method, value.value)


def _own_attribute_off(graph: Any, caller: cst.FunctionDef, value: cst.Attribute) -> bool:
    """``value`` is ``self.<flag>`` in the method ``caller``, and its class sets that flag off
    unless a caller turns it on (``_attribute_off``)."""
    flag = _own_flag(caller, value)
    if flag is None:
        return False
    other = graph.file.analysis.values(caller)
    return other.classdef is not None and _attribute_off(other, flag)


def _value_off(graph: Any, value: Any, depth: int) -> bool:
    """Is ``value`` (of ``graph``'s value graph) off unless a caller turns it on: ``self.<flag>``
    off so (``_attribute_off``), a parameter defaulting to ``False`` no call sets, the result of
    a same-file helper run with them, an ``if`` between them; a parameter defaulting to ``None``
    as one arm of an ``if`` whose other arm is off (lucidrains' ``default(flash, self.flash)``,
    ``flash if flash is not None else self.flash``: the caller's value when it gives one, else
    the attribute)."""
    if depth > 6:
        return False
    if value.op == "helper" and value.info.get("helper") is not None and value.inputs:
        return _value_off(graph, value.inputs[0], depth + 1)
    if value.op == "attribute":  # ``self.<flag>`` (values.py makes only those attributes)
        return graph.classdef is not None and _attribute_off(graph, value.info["name"])
    if value.op == "argument" and value.function is graph.function:  # the value it was called with: a rebinding after does not matter
        param = _param(graph.function, value.info["name"])
        return param is not None and literal_bool(param.default) is False and _unset(graph, graph.function, param)
    if value.op == "member" and value.info["name"] in CONFIG_FLAGS_OFF and _library_config(graph, value):
        return True  # ``self.config.output_attentions``: transformers' configurations default it to False
    if value.op != "join" or not value.inputs:
        return False
    unset = [arm for arm in value.inputs if arm.op == "argument" and arm.function is graph.function and _default_none(graph, arm.info["name"])]
    rest = [arm for arm in value.inputs if all(arm is not other for other in unset)]
    return bool(rest) and all(_value_off(graph, arm, depth + 1) for arm in rest)


def _default_none(graph: Any, name: str) -> bool:
    """``name`` is a parameter of the function defaulting to ``None`` (its argument's value:
    rebound after, ``flash = default(flash, self.flash)``), and no call of the function in this
    file passes anything but ``None`` or ``False``."""
    param = _param(graph.function, name)
    return param is not None and type(param.default) is cst.Name and param.default.value == "None" and _unset(graph, graph.function, param)


def _default_false(graph: Any, function: cst.FunctionDef, name: str, depth: int = 0) -> bool:
    """``name`` is a parameter of ``function``, not rebound there, defaulting to ``False`` (or
    without a default, given by every call of the file, at least one), and every call of
    ``function`` in this file leaves it so: passes ``False``, or a parameter of the
    calling function that is off so itself (``Attend(flash=flash)`` in ``Attention.__init__(self,
    flash=False)``, followed through ``CALLERS`` callers)."""
    param: Optional[cst.Param] = parameter(function, name)
    if param is not None and param.default is None and param.star == "":
        return _unset(graph, function, param, depth, required=True)  # (TransUNet's ``vis``, given by every caller)
    if param is None or literal_bool(param.default) is not False:
        return False
    return _unset(graph, function, param, depth)


_UNSETTING: Set[Tuple[int, int]] = set()  # (function, parameter) being read: a cycle of callers is not off


def _unset(graph: Any, function: cst.FunctionDef, param: cst.Param, depth: int = 0, required: bool = False) -> bool:
    """``_read_unset``, guarded: a chain of callers that comes back to this parameter is not off."""
    key = (id(function), id(param))
    if key in _UNSETTING or len(_UNSETTING) > 4 * CALLERS:
        return False
    _UNSETTING.add(key)
    try:
        return _read_unset(graph, function, param, depth, required)
    finally:
        _UNSETTING.discard(key)


def _read_unset(graph: Any, function: cst.FunctionDef, param: cst.Param, depth: int = 0, required: bool = False) -> bool:
    """No call of ``function`` in this file passes ``param`` anything but ``None``, ``False`` or
    a parameter of its caller that is off unless a caller turns it on; a module's ``forward``
    through the calls of the attributes that hold its class's instances (``forward_calls``)."""
    if function.name.value == "forward":
        passed = forward_passed(graph, function, param)
    else:
        passed = graph.file.analysis.factories.passed(function, param)
    if passed is None or (required and not passed):
        return False  # (a parameter without a default: off only when the file's calls, at least one, give it off)
    gated = 0  # calls that turn it on only while their own flag is on
    for value, caller in passed:
        if value is None and required:
            return False  # (not found among the call's arguments: given by a ``**kwargs``)
        if value is None or literal_bool(value) is False or _is_none(value):
            continue
        if type(value) is cst.Name and caller is not None and depth < CALLERS and (
            _default_false(graph, caller, value.value, depth + 1) or _name_off(graph, caller, value, depth + 1, _is_none(param.default))
        ):
            continue
        if type(value) is cst.Attribute and caller is not None and _own_attribute_off(graph, caller, value):
            continue  # ``FullAttention(output_attention=self.output_attention)``, ``self.output_attention = False``
        if caller is not None and depth < CALLERS and flag_test(graph.file.analysis.values(caller), value) is not None:
            gated += 1  # ``if return_attn: self.attn(x, return_attn=True)``: only while the caller's own flag is on
            continue
        return False
    if passed and gated == len(passed):
        return False  # every call turns it on: whenever the function runs, the flag is set
    if not passed and function.name.value == "__init__":
        if _STRICT.get():
            return not may_turn_on(graph.file.analysis, function, param)  # (``strict_flag_test``)
        if turned_on(graph.file.analysis, function, param, depth):
            return False  # built only in other files of the project, each turning it on (``flag_importers.py``)
    if function.name.value == "forward" and any(  # (a call in another file turning it on keeps what it gates)
        value is not None and literal_bool(value) is not False and not _is_none(value)
        for value, _ in passed_elsewhere(graph, function, param)
    ):
        return False
    return True


_STRICT: ContextVar[bool] = ContextVar("strict_flags", default=False)  # a construction in another file that may turn the flag on keeps it on


def strict_flag_test(graph: Any, statement: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """``flag_test``, where a class built only in other files of the project is off only when
    none of its constructions there may turn the flag on (passes anything but ``False`` or
    ``None``): what runs in no configuration the project builds, not only by default."""
    token = _STRICT.set(True)
    try:
        return flag_test(graph, statement)
    finally:
        _STRICT.reset(token)


def flag_test(graph: Any, statement: cst.CSTNode) -> Optional[cst.BaseExpression]:
    """The test of an ``if`` around ``statement`` (any node of ``graph``'s function) whose arm
    holding it runs only behind a flag off by default."""
    path = path_to(graph.function, statement) or []
    for outer, inner in zip(path, path[1:]):
        if type(outer) is cst.If and inner is not outer.test:
            if off_by_default(graph, outer.test, inner is outer.body):
                return outer.test
        if type(outer) is cst.IndentedBlock:  # past ``if <test>: return ...``: runs only while ``test`` is false
            for sibling in outer.body:
                if sibling is inner:
                    break
                if type(sibling) is cst.If and sibling.orelse is None and _exits(sibling.body) and off_by_default(graph, sibling.test, False):
                    return sibling.test
    return None


def _exits(suite: cst.BaseSuite) -> bool:
    last = suite.body[-1] if type(suite) is cst.IndentedBlock and suite.body else suite
    return type(last) in (cst.SimpleStatementLine, cst.SimpleStatementSuite) and bool(last.body) and type(last.body[-1]) in (cst.Return, cst.Raise)


def _name_off(graph: Any, caller: cst.FunctionDef, name: cst.Name, depth: int, none_is_default: bool = False) -> bool:
    """Is what the name ``name`` of ``caller`` holds there off unless a caller turns it on, read
    in ``caller``'s value graph: ``output_attentions = output_attentions if output_attentions is
    not None else self.config.output_attentions`` (a parameter defaulting to ``None``, else the
    configuration's flag), then passed on (``_value_off``)?"""
    other = graph.file.analysis.values(caller)
    value = other.names.get(id(name))
    if none_is_default and value is not None and value.op == "argument" and value.function is caller:
        # ``self.bert(x, output_attentions=output_attentions)``, both defaulting to ``None``: the
        # callee's own default, unless a caller of ``caller`` gives it something
        own = _param(caller, value.info["name"])
        if own is not None and _is_none(own.default):
            return _unset(other, caller, own, depth)
    if value is None:  # read in a closure of ``caller`` (``def custom_forward(*inputs): return module(*inputs, output_attentions)``)
        param = parameter(caller, name.value)
        if param is not None and not assigned_values(caller, name.value):
            return literal_bool(param.default) is False and _unset(other, caller, param, depth)
        path = path_to(caller, name) or []
        nested = next((node for node in path[1:] if type(node) is cst.FunctionDef), None)  # (the closure's factory, defined in ``caller``)
        if nested is None or _bound_after(graph.file.analysis.index, caller, nested, name.value):
            return False  # (the closure runs later: a binding after its ``def`` may be what it reads)
        defined = [v for v in other.values if v.op == "function" and v.info.get("define") is nested]
        value = defined[0].info["scope"].get(name.value) if len(defined) == 1 else None  # what the name held where it was defined
        if value is None:
            return False
    return _value_off(other, value, depth)


def _bound_after(index: Any, function: cst.FunctionDef, nested: cst.FunctionDef, name: str) -> bool:
    """``function`` binds ``name`` after the ``def`` of ``nested`` (in source order)."""
    start = index.find(nested)
    for node in walk(function.body):
        if type(node) in (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
            if any(type(n) is cst.Name and n.value == name for t in targets for n in (t, *walk(t))) and (index.find(node) or 0) > (start or 0):
                return True
    return False


def _is_none(default: Optional[cst.BaseExpression]) -> bool:
    return type(default) is cst.Name and default.value == "None"


def _library_config(graph: Any, value: Any) -> bool:
    """``value`` reads a flag of ``self.config`` or of a parameter ``config`` in a file whose
    models take transformers' configurations (``PretrainedConfig``, which every model
    configuration derives from)."""
    base = value.inputs[0] if value.inputs else None
    if base is None or base.op not in ("attribute", "argument") or base.info.get("name") != "config":
        return False
    return _model_configuration(graph.file.analysis, value.info["name"])


def _model_configuration(analysis: Any, flag: str) -> bool:
    """The file's models take transformers' configurations: it imports transformers, or a
    configuration module of its own package as transformers names them (``from
    .configuration_bert import BertConfig``: pytorch-transformers, a model copied with its config);
    and nothing in the file turns ``flag`` on (``BertConfig(output_attentions=True)``,
    ``config.output_attentions = True``, ``setattr(config, "output_attentions", True)``)."""
    if _turned_on_in_file(analysis, flag):
        return False
    if "PretrainedConfig" in analysis.bindings.names:
        return True  # (imported from wherever the package keeps it: pytorch-transformers' modeling_utils)
    if _own_configuration_off(analysis, flag):
        return True  # (a configuration class of the file, transformers' style: ``output_attentions: bool = False``)
    for qualified in analysis.bindings.names.values():
        if qualified is not None and (qualified == "transformers" or qualified.startswith("transformers.")):
            return True
    return any(
        type(small) is cst.ImportFrom and small.relative and small.module is not None and (dotted_name(small.module) or "").rsplit(".", 1)[-1].startswith("configuration_")
        for statement in analysis.module.body if type(statement) is cst.SimpleStatementLine for small in statement.body
    )


def _own_configuration_off(analysis: Any, flag: str) -> bool:
    """The file defines a configuration class (its name ends in ``Config``) whose class body
    gives ``flag`` the default ``False`` (a dataclass field ``output_attentions: bool = False``
    or a class attribute), and no class of the file gives it another default."""
    found = False
    for classdef in analysis.callables.classes.values():
        for statement in classdef.body.body if type(classdef.body) is cst.IndentedBlock else ():
            if type(statement) is not cst.SimpleStatementLine:
                continue
            for small in statement.body:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.target.value == flag:
                    value = small.value
                elif type(small) is cst.Assign and any(type(t.target) is cst.Name and t.target.value == flag for t in small.targets):
                    value = small.value
                else:
                    continue
                if value is None or literal_bool(value) is not False:
                    return False
                found = found or classdef.name.value.endswith("Config")
    return found


def _turned_on_in_file(analysis: Any, flag: str) -> bool:
    """A statement of the file sets a configuration's ``flag`` to anything but ``False``/``None``:
    a keyword of a call (``BertConfig(output_attentions=True)``), an assignment to an attribute of
    that name other than ``self.<flag> = config.<flag>``, a ``setattr`` naming it."""
    index = analysis.index
    off = lambda v: literal_bool(v) is False or _is_none(v)  # noqa: E731
    for at in index.positions(cst.Arg):
        arg = index.order[at]
        if arg.keyword is not None and arg.keyword.value == flag and not off(arg.value) and not (type(arg.value) is cst.Name and arg.value.value == flag):
            call = index.order[index.parent[at]]
            if type(call) is cst.Call and (dotted_name(call.func) or "").endswith("Config"):
                return True
        if arg.keyword is None and type(arg.value) is cst.SimpleString and arg.value.value.strip("'\"") == flag:
            call = index.order[index.parent[at]]
            if type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == "setattr":
                return True
    for at in index.positions(cst.Assign):
        assign = index.order[at]
        for target in assign.targets:
            if type(target.target) is cst.Attribute and target.target.attr.value == flag and not off(assign.value):
                value = assign.value
                if not (type(value) is cst.Attribute and value.attr.value == flag):
                    return True
    return False


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
