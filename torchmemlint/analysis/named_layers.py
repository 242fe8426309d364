"""Layers built by name: ``getattr(torch.nn, nonlinear_activation)(**params)`` and
``ACTS[name](...)`` (``ACTS`` a module-level dict of layer classes), where the name is a
string literal or a parameter whose default is one (``nonlinear_activation="LeakyReLU"``).
Read for ``analysis/factories.py``: the name is the default where the file never calls the
function (not ``certain``: a caller elsewhere may pass another name), or what every call in
the file passes, when all agree with it."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import libcst as cst

from torchmemlint.analysis.constants import constant_text
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _scope_of, walk
from torchmemlint.tree import scan

_GETATTR = (None, "getattr", "builtins.getattr")
_MODULES = ("torch.nn",)
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def by_name(factories: Any, expr: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[
    Tuple[Union[str, cst.BaseExpression], Optional[str], bool]
]:
    """For ``getattr(torch.nn, <name>)``: (``"torch.nn.<name>"``, how, certain); for
    ``ACTS[<name>]``: (the dict's value for ``<name>``, how, certain). None otherwise."""
    qualify = factories.qualify
    if type(expr) is cst.Call:
        args = expr.args
        if (
            type(expr.func) is not cst.Name or expr.func.value != "getattr" or qualify(expr.func) not in _GETATTR
            or len(args) != 2 or any(a.keyword is not None or a.star for a in args)
            or qualify(args[0].value) not in _MODULES
        ):
            return None
        text = _text(factories, args[1].value, function)
        if text is None or not text[0][:1].isupper() or not text[0].isidentifier():
            return None
        return f"{qualify(args[0].value)}.{text[0]}", text[1], text[2]
    if type(expr) is cst.Subscript and type(expr.value) is cst.Name and len(expr.slice) == 1:
        index = expr.slice[0].slice
        if type(index) is not cst.Index:
            return None
        table = _module_dict(factories, expr.value.value)
        text = _text(factories, index.value, function)
        if table is None or text is None or text[0] not in table:
            return None
        return table[text[0]], text[1], text[2]
    return None


def _module_dict(factories: Any, name: str) -> Optional[Dict[str, cst.BaseExpression]]:
    """``NAME = {"key": value, ...}`` assigned once at module level, with literal keys."""
    factories._index()
    values = factories._module_assignments.get(name, [])
    if len(values) != 1 or type(values[0]) is not cst.Dict:
        return None
    found: Dict[str, cst.BaseExpression] = {}
    for element in values[0].elements:
        if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
            return None
        found[element.key.evaluated_value] = element.value  # type: ignore[index]
    return found


def by_name_text(factories: Any, node: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Tuple[str, Optional[str], bool]]:
    """The class name ``node`` gives a by-name lookup (``_text``): a capitalised identifier."""
    text = _text(factories, node, function)
    return text if text is not None and text[0][:1].isupper() and text[0].isidentifier() else None


def _text(factories: Any, node: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Tuple[str, Optional[str], bool]]:
    """A string literal, or a parameter of ``function`` whose default is one: (text, how, certain)."""
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return (value, None, True) if isinstance(value, str) else None
    if type(node) is not cst.Name or function is None:
        return None
    params = function.params
    param = next(
        (p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == node.value), None
    )
    if param is None or _rebound(function, node.value):
        return None
    if type(param.default) is cst.Name:  # ``nonlin: str = DEFAULT_NONLIN``, a module-level constant (``constants.py``)
        default = constant_text(factories, param.default)
    else:
        default = param.default.evaluated_value if type(param.default) is cst.SimpleString else None
    if not isinstance(default, str):
        return None
    passed = factories.passed(function, param)
    label = f"`{node.value}`"
    if passed is None:
        return None
    if not passed:
        return default, f"{label}'s default", False
    for value, _ in passed:
        if value is not None and not (type(value) is cst.SimpleString and value.evaluated_value == default):
            return None
    return default, f"{label}, as every call in this file passes it", True


def name_parameter(qualify: Callable[[cst.BaseExpression], Optional[str]], function: cst.FunctionDef) -> Optional[str]:
    """The parameter a *by-name builder* reads a layer's class name from: a function whose
    returns build ``getattr(torch.nn, <name>)`` with no arguments (``return getattr(nn,
    name)()``, or ``cls = getattr(nn, name, None)`` ... ``return cls()``, the local maybe also
    given a fallback lookup of the name), or hand back what they were given (``return name``,
    ``return name()``: an instance or a class passed instead); flexray's ``get_activation``,
    kevins-torch's ``activation_function_parser``. None for any other function."""
    if function.decorators or type(function.body) is not cst.IndentedBlock:
        return None
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    found: Optional[str] = None
    returns = [r for r in scan(function.body, (cst.Return,), _NESTED) if r.value is not None]  # type: ignore[attr-defined]
    for statement in returns:
        value = statement.value  # type: ignore[attr-defined]
        if type(value) is cst.Name and value.value in params:
            continue  # an instance handed in
        if type(value) is not cst.Call or value.args:
            return None
        func = value.func  # type: ignore[attr-defined]
        if type(func) is cst.Name and func.value in params:
            continue  # a class handed in
        named = _looked_up(qualify, function, func, params)
        if named is None or (found is not None and named != found):
            return None
        found = named
    return found


def _looked_up(qualify: Callable[[cst.BaseExpression], Optional[str]], function: cst.FunctionDef,
               func: cst.BaseExpression, params: List[str]) -> Optional[str]:
    """The parameter ``func`` is looked up by in ``torch.nn`` (``getattr(nn, name[, default])``,
    or a local every value of which is that lookup or another call of the name)."""
    values: List[cst.BaseExpression] = [func]
    if type(func) is cst.Name:
        values = [
            node.value for node in scan(function.body, (cst.Assign,), _NESTED)  # type: ignore[attr-defined]
            if any(binds(target.target, func.value) for target in node.targets)  # type: ignore[attr-defined]
        ]
    found: Optional[str] = None
    for value in values:
        if type(value) is not cst.Call or not value.args or value.args[0].star:  # type: ignore[attr-defined]
            return None
        args = value.args  # type: ignore[attr-defined]
        if type(value.func) is cst.Name and value.func.value == "getattr" and len(args) in (2, 3) and (  # type: ignore[attr-defined]
            qualify(args[0].value) in _MODULES and type(args[1].value) is cst.Name and args[1].value.value in params
        ):
            if found is not None and found != args[1].value.value:
                return None
            found = args[1].value.value
        elif not (type(args[0].value) is cst.Name and args[0].value.value in params):
            return None  # (a fallback lookup of the same name: `_case_insensitive_torch_nn_class(name)`)
    return found


def _rebound(function: cst.FunctionDef, name: str) -> bool:
    """``name`` is assigned in ``function``'s body (its parameter value may not be the default's)."""
    for node in walk(function.body):
        targets = ()
        if type(node) is cst.Assign:
            targets = tuple(t.target for t in node.targets)
        elif type(node) in (cst.AugAssign, cst.AnnAssign, cst.For):
            targets = (node.target,)  # type: ignore[attr-defined]
        if any(binds(target, name) for target in targets):
            return True
    return False


def binds(target: Optional[cst.BaseExpression], name: str) -> bool:
    """``target`` (a name, or a tuple or list of targets) binds ``name`` (``self.name`` does not)."""
    if type(target) is cst.Name:
        return target.value == name
    if type(target) in (cst.Tuple, cst.List):
        return any(binds(element.value, name) for element in target.elements)  # type: ignore[attr-defined]
    if type(target) is cst.StarredElement:
        return binds(target.value, name)  # type: ignore[attr-defined]
    return False


def star_keywords(call: cst.Call, function: Optional[cst.FunctionDef]) -> Optional[Dict[str, cst.BaseExpression]]:
    """For ``call(**params)`` where ``params`` is a parameter of ``function`` whose default is a
    dict literal with string keys (and that the function does not rebind): those keywords. An
    empty dict when the call has no ``**``; None when one is not read so."""
    found: Dict[str, cst.BaseExpression] = {}
    for arg in call.args:
        if arg.star == "*":
            return None
        if arg.star != "**":
            continue
        if type(arg.value) is not cst.Name or function is None or _rebound(function, arg.value.value):
            return None
        params = function.params
        param = next(
            (p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == arg.value.value),
            None,
        )
        if param is None or type(param.default) is not cst.Dict:
            return None
        for element in param.default.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            found[str(element.key.evaluated_value)] = element.value
    return found


def spread_inplace(call: cst.Call, function: Optional[cst.FunctionDef]) -> Tuple[Optional[Dict[str, cst.BaseExpression]], Optional[bool]]:
    """For a layer built with ``**params`` (``star_keywords``): those keywords, and its
    ``inplace`` (an explicit keyword, else the dict's, else False; None: not a literal)."""
    spread = star_keywords(call, function)
    if spread is None:
        return None, None
    given = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "inplace"), None)
    if given is None:
        given = spread.get("inplace")
    if given is None:
        return spread, False
    if type(given) is cst.Name and given.value in ("True", "False"):
        return spread, given.value == "True"
    return spread, None


class FunctionAliases:
    """Names bound to an activation function (``act = F.leaky_relu``, at module level or in a
    function): once in their scope, to a name that qualifies to one of ``functions``."""

    def __init__(self, file: Any, functions: Any) -> None:
        index = file.index
        order = index.order
        self.file = file
        # (position of the function, or -1 for the module) -> name -> qualified values bound
        self._bound: Dict[Tuple[int, str], list] = {}
        names = set()
        for here in index.positions(cst.Assign):
            node = order[here]
            scope = index.function_of(here)
            for target in node.targets:  # type: ignore[attr-defined]
                if type(target.target) is not cst.Name:
                    continue
                value = node.value  # type: ignore[attr-defined]
                qualified = file.qualify(value) if type(value) in (cst.Name, cst.Attribute) else None
                self._bound.setdefault((scope, target.target.value), []).append(qualified)
                if qualified in functions:
                    names.add(target.target.value)
        self.names = frozenset(names)
        self.functions = functions

    def resolve(self, func: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[str]:
        """What ``func`` (a name) stands for: the activation function it is bound to, once,
        in ``function`` (or, not bound there, at module level)."""
        if type(func) is not cst.Name or func.value not in self.names:
            return None
        scopes = []
        if function is not None:
            here = self.file.index.find(function)
            if here is not None:
                scopes.append(here)
        scopes.append(-1)
        for scope in scopes:
            bound = self._bound.get((scope, func.value))
            if bound is None:
                if scope >= 0 and _param_named(function, func.value):
                    return None  # a parameter of the function
                continue
            if len(bound) != 1 or bound[0] not in self.functions or (scope >= 0 and _rebound_elsewhere(function, func.value)):
                return None
            return bound[0]
        return None


def _param_named(function: Optional[cst.FunctionDef], name: str) -> bool:
    if function is None:
        return False
    params = function.params
    return any(p.name.value == name for p in (*params.posonly_params, *params.params, *params.kwonly_params))


def _rebound_elsewhere(function: Optional[cst.FunctionDef], name: str) -> bool:
    """``name`` is also a parameter, a loop target or an augmented assignment in ``function``."""
    if function is None:
        return False
    if _param_named(function, name):
        return True
    for node in walk(function.body):
        if type(node) in (cst.AugAssign, cst.For) and binds(node.target, name):  # type: ignore[attr-defined]
            return True
    return False


def stored_values(file: Any, classdef: cst.ClassDef, attribute: str, depth: int = 0) -> Optional[
    List[Tuple[cst.BaseExpression, cst.FunctionDef]]
]:
    """Every value ``classdef`` gives ``self.<attribute>`` in any of its methods, each with its
    method (``self.base_model = {"resnet18": resnet18, ...}[name]`` in ``__init__``, built
    later by ``self.encoder = self.base_model(**kw)``); when the class assigns none, those of
    the first base class of the same file that does. None when no class here assigns it."""
    found = file.class_model(classdef).assignments.get(attribute)
    if found:
        return [(assignment.value, assignment.method) for assignment in found]
    for base in classdef.bases if depth < 4 else ():
        name = dotted_name(base.value)
        parent = file.callables.classes.get(name) if name else None
        inherited = stored_values(file, parent, attribute, depth + 1) if parent is not None else None
        if inherited:
            return inherited
    return None


def method_qualify(file: Any, function: cst.FunctionDef) -> Callable[[cst.BaseExpression], Optional[str]]:
    """Qualified names as ``function``'s own scope binds them (its imports, its parameters),
    for a value read from another method (``from torchvision.models import resnet18`` in
    ``__init__``, the dict built there read in a subclass)."""
    return _scope_of(function, file.bindings).qualify
