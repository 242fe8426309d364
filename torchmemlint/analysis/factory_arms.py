"""Does a call of a factory take the arm that returns a layer? A factory of the file chooses by
a string parameter (splifft's ``get_act``)::

    def get_act(act_type):
        if act_type == "gelu":
            return nn.GELU()
        elif act_type.startswith("elu"):
            return nn.ELU()

and ``get_act("gelu")``, ``get_act(cfg.act_type)`` with ``cfg: MDX23CParams`` whose field
``act_type: str = "gelu"`` in the file, or ``get_act(act_type)`` where every construction of
the enclosing class passes such a value, never take the ``nn.ELU()`` arm: the layer is not
built at that call (``Placement.off``). The arms are the ``if``/``elif`` tests around the
``return`` (and the tests of earlier ``if``s of the same block whose arm returns or raises),
read on the factory's parameters: ``p == "x"``, ``!=``, ``in``/``not in`` a literal tuple,
``p.startswith``/``endswith``, ``"x" in p``, ``p.lower()``, ``not``/``and``/``or``. The values a
parameter may have: literals the call passes; a parameter's literal default with what the calls
shown pass it (a call passing what cannot be read configures another model), or for one
without a default what every call passes (its constructions elsewhere included), a few calls
deep; a field default of a config class of the file (constructions of that class in the file
passing that field count too). Anything else may be any value: the arm may be taken."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.factories import _param, assigned_values, parameter
from torchmemlint.analysis.module_flow import _case_fold, case_folded
from torchmemlint.analysis.placing import passed
from torchmemlint.analysis.returned_locals import table_entry

_DEPTH = 3
_UNKNOWN = None  # a test or a value that cannot be read


def arm_not_taken(file: Any, factory: cst.FunctionDef, construction: cst.CSTNode, call: cst.Call, home: Any = None) -> bool:
    """Whether ``call`` (a call in ``file`` of ``factory``, a function or method of ``home``:
    ``file`` itself, or another file of the project that defines it) cannot take the arm of
    ``factory`` that builds ``construction``."""
    home = file if home is None else home
    index = home.index
    if index.find(construction) is None or file.index.find(call) is None or index.find(factory) is None:
        return False
    here = file.index.function_of(file.index.find(call))
    caller = file.index.order[here] if here >= 0 else None
    for name, tests in _tests_by_name(index, factory, construction).items():
        param, fold = parameter(factory, name), _same
        if param is None and _param(factory, name) is not None:  # ``act = act.upper()`` first
            param, fold = _param(factory, name), _case_fold(factory, name)
        elif param is None:  # ``activation_lower = activation.lower()``, a local of its own
            param, fold = _folded_local(factory, name)
        known, arg, value = passed(factory, param, call) if param is not None and fold is not None else (False, None, None)
        if home is not file and arg is None and type(value) is not cst.SimpleString:
            known = False  # (a default of another file, read there)
        found = _values(file, value, caller, 0) if known and value is not None else _UNKNOWN
        if found is not None and _excludes(tests, name, {fold(text) for text in found}):
            return True  # no value the parameter may have at this call takes the arm
    return False


def never_built(file: Any, function: cst.FunctionDef, construction: cst.CSTNode) -> bool:
    """Whether no value the parameters of ``function`` may have (its calls', its defaults, its
    class's constructions for ``__init__``) takes the arm of ``function`` that builds
    ``construction``: pyhealth's ``elif activation == "leaky_relu": self.activation =
    nn.LeakyReLU()`` with ``activation: str = "relu"`` and no construction passing another."""
    index = file.index
    if index.find(construction) is None or index.find(function) is None:
        return False
    for name, tests in _tests_by_name(index, function, construction).items():
        param = parameter(function, name)
        default = param.default if param is not None else None
        if type(default) is cst.SimpleString and not _excludes(tests, name, {default.evaluated_value}):
            continue  # (the default takes the arm, and always counts: no construction need be read)
        possible = _parameter_values(file, function, name, 0) if param is not None else _UNKNOWN
        if possible is not None and _excludes(tests, name, possible):
            return True
    return False


def _folded_local(function: cst.FunctionDef, name: str) -> Tuple[Optional[cst.Param], Any]:
    """``(parameter, fold)`` for a local bound once, to a case fold of a parameter the function
    never rebinds (``activation_lower = activation.lower()``); ``(None, None)`` otherwise."""
    values = assigned_values(function, name)
    folded = case_folded(values[0]) if len(values) == 1 else None
    param = parameter(function, folded[0]) if folded is not None else None
    if param is None or assigned_values(function, param.name.value):
        return None, None
    return param, folded[1]  # type: ignore[index]


def _tests_by_name(index: Any, function: cst.FunctionDef, construction: cst.CSTNode) -> Dict[str, List[Tuple[cst.BaseExpression, bool]]]:
    """The tests on the way to ``construction`` that read one name, and read it as a string
    (``if batch_norm:``, ``if self.x``: not read), by that name."""
    by_name: Dict[str, List[Tuple[cst.BaseExpression, bool]]] = {}
    for test, truth in _conditions(index, function, construction):
        read = _names_read(test)
        if len(read) == 1:
            by_name.setdefault(next(iter(read)), []).append((test, truth))
    return {name: tests for name, tests in by_name.items() if _string_tested(tests, name)}


def _excludes(tests: List[Tuple[cst.BaseExpression, bool]], name: str, values: Any) -> bool:
    """Whether, for every one of ``values`` of ``name``, one of ``tests`` surely fails."""
    return all(any(_holds(test, name, value) is (not truth) for test, truth in tests) for value in values)


def _string_tested(tests: List[Tuple[cst.BaseExpression, bool]], name: str) -> bool:
    """Whether one of ``tests`` reads ``name`` as a string (``_holds`` answers for a string)."""
    return any(_holds(test, name, "\0") is not None for test, _ in tests)


def _conditions(index: Any, factory: cst.FunctionDef, construction: cst.CSTNode) -> List[Tuple[cst.BaseExpression, bool]]:
    """The tests (with the truth each needs) that control must pass to reach ``construction``
    from the start of ``factory``."""
    path = index.ancestors(index.find(construction))
    start = path.index(index.find(factory)) if index.find(factory) in path else None
    if start is None:
        return []
    found: List[Tuple[cst.BaseExpression, bool]] = []
    entry = table_entry(index, factory, construction)
    if entry is not None and entry[1] is not None:  # ``return {"elu": nn.ELU(), ...}[name]``: ``name == "elu"``
        found.append((cst.Comparison(entry[0], [cst.ComparisonTarget(cst.Equal(), cst.SimpleString(repr(entry[1])))]), True))
    order = index.order
    for up, down in zip(path[start:], path[start + 1:]):
        node, child = order[up], order[down]
        if type(node) in (cst.FunctionDef, cst.ClassDef, cst.Lambda) and node is not factory:
            return []  # (a nested definition: runs on its own calls)
        if type(node) is cst.If:
            if child is node.body:
                found.append((node.test, True))
            elif child is node.orelse:
                found.append((node.test, False))
        elif type(node) is cst.IndentedBlock:
            for statement in node.body:
                if statement is child:
                    break
                if type(statement) is cst.If and statement.orelse is None and _leaves(statement.body):
                    found.append((statement.test, False))  # ``if p == "x": return ...`` before it
    return found


def _leaves(block: cst.BaseSuite) -> bool:
    body = getattr(block, "body", ())
    last = body[-1] if body else None
    if type(last) is cst.SimpleStatementLine:
        return any(type(small) in (cst.Return, cst.Raise) for small in last.body)
    return False


def _names_read(node: cst.CSTNode) -> Set[str]:
    """The names ``node`` reads (not an attribute's or a keyword's name)."""
    if type(node) is cst.Name:
        return set() if node.value in ("True", "False", "None") else {node.value}
    if type(node) is cst.Attribute:
        return _names_read(node.value)
    if type(node) is cst.Arg:
        return _names_read(node.value)
    found: Set[str] = set()
    for child in node.children:
        found |= _names_read(child)
    return found


def _same(text: str) -> str:
    return text


def _values(file: Any, value: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[FrozenSet[str]]:
    """The strings ``value`` (read in ``function``) may be; None when not known."""
    if type(value) is cst.SimpleString:
        text = value.evaluated_value
        return frozenset({text}) if type(text) is str else _UNKNOWN
    if type(value) is cst.IfExp:  # ``"elu" if deep else "relu"``: either
        body, orelse = _values(file, value.body, function, depth), _values(file, value.orelse, function, depth)
        return body | orelse if body is not None and orelse is not None else _UNKNOWN
    if depth >= _DEPTH or function is None:
        return _UNKNOWN
    if type(value) is cst.Name:
        return _parameter_values(file, function, value.value, depth)
    if type(value) is cst.Attribute and type(value.value) is cst.Name:
        found = _field_default(file, function, value.value.value, value.attr.value)
        return found if found is not None else _held_parameter(file, function, value, depth)
    return _UNKNOWN


def _held_parameter(file: Any, function: cst.FunctionDef, value: cst.Attribute, depth: int) -> Optional[FrozenSet[str]]:
    """``self.<attribute>`` read in a method, where the class sets it once, in ``__init__`` (or a
    method it calls once), to one of that method's parameters (``self._activation = activation``):
    the strings that parameter may be."""
    params = function.params.params
    if not params or params[0].name.value != value.value.value:  # type: ignore[attr-defined]
        return _UNKNOWN
    here = file.index.find(function)
    owner = file.index.order[file.index.scope[here]] if here is not None and file.index.scope[here] >= 0 else None
    if type(owner) is not cst.ClassDef:
        return _UNKNOWN
    assignment = file.class_model(owner).single_assignment(value.attr.value)
    held = assignment.value if assignment is not None else None
    if type(held) is not cst.Name or parameter(assignment.method, held.value) is None:
        return _UNKNOWN
    return _parameter_values(file, assignment.method, held.value, depth + 1)


def _parameter_values(file: Any, function: cst.FunctionDef, name: str, depth: int) -> Optional[FrozenSet[str]]:
    param = parameter(function, name)
    if param is None or assigned_values(function, name):
        return _UNKNOWN
    passed = file.factories.passed(function, param)
    if passed is None:
        return _UNKNOWN
    sites = [(file, value, caller) for value, caller in passed]
    if function.name.value == "__init__":
        from torchmemlint.analysis.flag_importers import constructions_elsewhere  # (it reads the factories)

        elsewhere = constructions_elsewhere(file, function, param)
        if elsewhere is None:
            return _UNKNOWN
        sites.extend(elsewhere)  # (read in the file that constructs it)
    default = param.default
    if type(default) is cst.SimpleString and type(default.evaluated_value) is str:
        # a literal default is what a construction the project does not show gets (a config, a
        # ``from_pretrained``, a user); to it, the strings the constructions shown pass (one
        # passing what cannot be read configures another model)
        found = {default.evaluated_value}
        for theirs, value, caller in sites:
            these = _values(theirs, value, caller, depth + 1) if value is not None else None
            found |= these or set()
        return frozenset(found)
    if not sites or default is not None:
        return _UNKNOWN  # (no default and no call: any value; a default that is not a string)
    found = set()
    for theirs, value, caller in sites:
        these = _values(theirs, value, caller, depth + 1) if value is not None else None
        if these is None:
            return _UNKNOWN
        found |= these
    return frozenset(found)


def _field_default(file: Any, function: cst.FunctionDef, holder: str, field: str) -> Optional[FrozenSet[str]]:
    """``cfg.<field>`` where ``cfg`` is a parameter of ``function`` annotated with a class of the
    file (or of another project file it imports: allin1's ``from ..config import Config``) that
    gives ``field`` a literal default (``act_type: str = "gelu"``), with the values the file's
    constructions of that class pass for it."""
    param = parameter(function, holder)
    if param is None or param.annotation is None or assigned_values(function, holder):
        return _UNKNOWN
    annotation = param.annotation.annotation
    if type(annotation) is not cst.Name:
        return _UNKNOWN
    classdef = next((s for s in file.module.body if type(s) is cst.ClassDef and s.name.value == annotation.value), None)
    if classdef is None and file.links is not None:  # ``from ..config import Config``: a class of another project file
        found = file.links.definition(annotation.value, "class", package=True)
        classdef = found[1] if found is not None else None
    if type(classdef) is not cst.ClassDef or type(classdef.body) is not cst.IndentedBlock:
        return _UNKNOWN
    default: Optional[cst.BaseExpression] = None
    for statement in classdef.body.body:
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if type(small) is cst.AnnAssign and type(small.target) is cst.Name and small.target.value == field:
                    default = small.value
        elif type(statement) is cst.FunctionDef and statement.name.value == field:
            return _UNKNOWN  # (a property of that name)
    if type(default) is not cst.SimpleString or type(default.evaluated_value) is not str:
        return _UNKNOWN
    found = {default.evaluated_value}
    for here in file.index.positions(cst.Call):
        call = file.index.order[here]
        if type(call.func) is cst.Name and call.func.value == classdef.name.value:
            for arg in call.args:
                if arg.star == "**" or (arg.keyword is not None and arg.keyword.value == field):
                    if type(arg.value) is not cst.SimpleString or type(arg.value.evaluated_value) is not str:
                        return _UNKNOWN
                    found.add(arg.value.evaluated_value)
            if any(arg.keyword is None and not arg.star for arg in call.args):
                return _UNKNOWN  # (positional: not matched to the fields here)
    return frozenset(found)


def _holds(test: cst.BaseExpression, name: str, value: str) -> Optional[bool]:
    """Whether ``test`` holds when the parameter ``name`` is ``value``; None when not known."""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _holds(test.expression, name, value)
        return None if inner is None else not inner
    if type(test) is cst.BooleanOperation:
        left, right = _holds(test.left, name, value), _holds(test.right, name, value)
        if type(test.operator) is cst.And:
            return False if left is False or right is False else (True if left and right else None)
        return True if left is True or right is True else (False if left is False and right is False else None)
    if type(test) is cst.Call and type(test.func) is cst.Attribute and test.func.attr.value in ("startswith", "endswith"):
        subject = _subject(test.func.value, name, value)
        strings = _strings(test.args[0].value) if len(test.args) == 1 and not test.args[0].keyword else None
        if subject is None or strings is None:
            return None
        method = str.startswith if test.func.attr.value == "startswith" else str.endswith
        return any(method(subject, s) for s in strings)
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        operator = type(test.comparisons[0].operator)
        left, right = test.left, test.comparisons[0].comparator
        if operator in (cst.Equal, cst.NotEqual):
            subject, other = _subject(left, name, value), _strings(right)
            if subject is None:
                subject, other = _subject(right, name, value), _strings(left)
            if subject is None or other is None or len(other) != 1:
                return None
            return (subject == other[0]) is (operator is cst.Equal)
        if operator in (cst.In, cst.NotIn):
            subject, options = _subject(left, name, value), _strings(right)
            if subject is not None and options is not None:
                return (subject in options) is (operator is cst.In)
            word, container = _strings(left), _subject(right, name, value)
            if word is not None and len(word) == 1 and container is not None:
                return (word[0] in container) is (operator is cst.In)
    return None


def _subject(node: cst.BaseExpression, name: str, value: str) -> Optional[str]:
    """``value`` when ``node`` reads the parameter (``p``, ``p.lower()``, ``p.upper()``)."""
    if type(node) is cst.Name and node.value == name:
        return value
    if (
        type(node) is cst.Call and not node.args and type(node.func) is cst.Attribute
        and node.func.attr.value in ("lower", "upper", "strip", "casefold")
    ):
        inner = _subject(node.func.value, name, value)
        if inner is None:
            return None
        return {"lower": str.lower, "upper": str.upper, "strip": str.strip, "casefold": str.casefold}[node.func.attr.value](inner)
    return None


def _strings(node: cst.BaseExpression) -> Optional[Tuple[str, ...]]:
    """The strings a literal string, or a tuple, list or set of them, holds."""
    if type(node) is cst.SimpleString:
        text = node.evaluated_value
        return (text,) if type(text) is str else None
    if type(node) in (cst.Tuple, cst.List, cst.Set):
        found = []
        for element in node.elements:  # type: ignore[attr-defined]
            if type(element) is not cst.Element or type(element.value) is not cst.SimpleString:
                return None
            text = element.value.evaluated_value
            if type(text) is not str:
                return None
            found.append(text)
        return tuple(found)
    return None
