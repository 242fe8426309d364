"""What a value is chosen to be by constant keys (``ChosenFunctions.leaves``), for the TML2xx
sites: the activation function a configured name chooses (``analysis/activations.py``:
``self.activation_fn = get_activation_fn(activation)`` with ``def __init__(...,
activation="ELU")`` and ``def get_activation_fn(name): return {"ReLU": F.relu, "ELU":
F.elu}.get(name, F.elu)``, later ``self.activation_fn(x)``; also a local, ``fn = ACTS[act]``,
and a plain alias, ``self.act = F.elu``), and the layer class one chooses
(``analysis/factories.py``'s ``_chosen``: ``act = get_activation(activation)`` returning
``{"lrelu": nn.LeakyReLU, ...}[name]``).

A value is followed through: a local the function binds once (a parameter rebound once from
itself, ``activation = get_activation(activation)``, through that value); ``self.x`` that
``__init__`` assigns once; a lookup of a literal dict (local, or bound once at module level) by
a constant key, ``table[key]`` or ``table.get(key, default)`` (by a key not known: every
entry); a call of a module-level function of the file, or of another project file, that returns
one expression besides ``None``, its parameters bound to the call's constant arguments. A key
is constant when it is a literal, or a parameter whose literal default no call of the function
in this file changes (``analysis/factories.py``'s ``passed``: an argument of another literal,
one that cannot be read, or a call that cannot be read, and the key is not known). What is not
known gives None: the site is then not read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.factories import _is_none, _local_values, _param, assigned_values, parameter, single_local_value
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import walk
from torchmemlint.tree import scan

_DEPTH = 4

# (the expression a chain of choices ends at, its function, that function's parameters bound
# to constants, how a key chose it, the file analysis it is written in)
Leaf = Tuple[cst.BaseExpression, Optional[cst.FunctionDef], Dict[str, str], Optional[str], Any]


def _chose(found: Optional[List[Leaf]], how: Optional[str]) -> Optional[List[Leaf]]:
    """``found`` with ``how`` as the reason where nothing deeper chose a leaf."""
    if found is None or how is None:
        return found
    return [leaf if leaf[3] is not None else (leaf[0], leaf[1], leaf[2], how, leaf[4]) for leaf in found]


@dataclass(frozen=True)
class Choice:
    """A torch function (qualified) and, when a configured key chose it, how (for messages)."""

    qualified: str
    chosen_by: Optional[str] = None  # "`activation`'s default 'ELU'"


class ChosenFunctions:
    """The names (``self.x`` attributes and locals) of a file that may hold a chosen function,
    and what one holds."""

    def __init__(self, file: Any, functions: FrozenSet[str]) -> None:
        self.file, self.functions = file, functions
        module = file.module
        top: Dict[str, Any] = {}
        tables: Dict[str, Any] = {}
        for statement in module.body:
            if type(statement) is cst.FunctionDef:
                name = statement.name.value
                top[name] = None if name in top else statement
            elif type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                        name = small.targets[0].target.value
                        tables[name] = small.value if name not in tables and type(small.value) is cst.Dict else None
        self._top = {name: node for name, node in top.items() if node is not None}
        self._tables = {name: node for name, node in tables.items() if node is not None}
        names = set()
        index = file.index
        # parameters whose default is one of the functions (``activation=F.leaky_relu``)
        self._defaulted = frozenset(
            node.name.value for node in index.of_types(0, (cst.Param,))  # type: ignore[attr-defined]
            if node.default is not None and type(node.default) in (cst.Name, cst.Attribute)  # type: ignore[attr-defined]
            and file.qualify(node.default) in functions  # type: ignore[attr-defined]
        )
        for here in index.positions(cst.Assign):
            node = index.order[here]
            if self._candidate(node.value):  # type: ignore[attr-defined]
                for target in node.targets:  # type: ignore[attr-defined]
                    target = target.target
                    if type(target) is cst.Attribute and type(target.value) is cst.Name:
                        names.add(target.attr.value)
                    elif type(target) is cst.Name:
                        names.add(target.value)
        self.names: FrozenSet[str] = frozenset(names)

    def _candidate(self, value: cst.BaseExpression) -> bool:
        """A cheap syntactic test of a value that may be a chosen function."""
        if type(value) is cst.Subscript:
            return True
        if type(value) is cst.Call:
            func = value.func
            return (type(func) is cst.Attribute and func.attr.value == "get") or (type(func) is cst.Name and func.value in self._top)
        if type(value) is cst.Name and value.value in self._defaulted:
            return True
        return type(value) in (cst.Name, cst.Attribute) and self.file.qualify(value) in self.functions

    def value(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], bound: Dict[str, str], depth: int = 0) -> Optional[Choice]:
        """The torch function ``expr`` (in ``function``, its parameters ``bound`` to constants)
        holds; None: not known, or not one of ``functions``."""
        found = self.leaf(expr, function, bound, depth)
        if found is None:
            return None
        node, where, inner, how, file = found
        if type(node) not in (cst.Name, cst.Attribute):
            return None
        qualified = file.qualify(node)
        if qualified in self.functions:
            return Choice(qualified, how)
        if (
            file is self.file and qualified is None and type(node) is cst.Name and where is not None
            and node.value not in inner and node.value in self._defaulted
            and (param := parameter(where, node.value)) is not None
        ):
            return self._defaulted_parameter(where, param, depth)
        return None

    def leaf(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], bound: Dict[str, str], depth: int = 0) -> Optional[Leaf]:
        """The one leaf of ``leaves`` (None: none, or several)."""
        found = self.leaves(expr, function, bound, depth)
        return found[0] if found is not None and len(found) == 1 else None

    def leaves(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], bound: Dict[str, str], depth: int = 0) -> Optional[List[Leaf]]:
        """What ``expr`` (in ``function``, its parameters ``bound`` to constants) is chosen to
        be by constant keys: a local bound once, a lookup of a literal dict by a constant key
        (by a key not known: every entry) and a call of a one-``return`` function of the file
        (or of another project file) are followed; following stops at anything else, which is
        a leaf: ``(leaf, its function, its bound parameters, how a key chose it, the file
        analysis it is in)``. A parameter rebound once from itself (``activation =
        get_activation(activation)``) is followed through that value, its own reads there the
        parameter. None: a lookup of a table not known, or too deep."""
        if depth > _DEPTH:
            return None
        kind = type(expr)
        here = [(expr, function, bound, None, self.file)]
        if kind is cst.Name and function is not None and expr.value not in bound and self.file.qualify(expr) is None:  # type: ignore[attr-defined]
            name = expr.value  # type: ignore[attr-defined]
            local = single_local_value(function, name)
            if local is None:
                local = self._rebinding(function, name)
                if local is not None:
                    entry = self.constant(expr, function, bound, entry=True)
                    if entry is None:
                        return None
                    return _chose(self.leaves(local, function, {**bound, name: entry[0]}, depth + 1), entry[1])
            return self.leaves(local, function, bound, depth + 1) if local is not None else here
        if kind is cst.Subscript:
            elements = expr.slice  # type: ignore[attr-defined]
            if len(elements) != 1 or type(elements[0].slice) is not cst.Index:
                return here
            return self._lookup(expr.value, elements[0].slice.value, None, function, bound, depth)  # type: ignore[attr-defined]
        if kind is not cst.Call or any(arg.star or arg.keyword is not None for arg in expr.args):  # type: ignore[attr-defined]
            return here
        func, args = expr.func, expr.args  # type: ignore[attr-defined]
        if type(func) is cst.Attribute and func.attr.value == "get" and 1 <= len(args) <= 2:
            return self._lookup(func.value, args[0].value, args[1].value if len(args) == 2 else None, function, bound, depth)
        if type(func) is cst.Name and func.value in self._top and self.file.qualify(func) is None:
            return self._returned(self, self._top[func.value], args, function, bound, depth)
        foreign = self._foreign_function(func)
        if foreign is not None:
            return self._returned(*foreign, args, function, bound, depth)
        return here

    def _rebinding(self, function: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
        """The one value a parameter ``name`` is rebound to, when that value reads the parameter
        itself (``activation = get_activation(activation)``: a lookup of what was passed)."""
        if _param(function, name) is None:
            return None
        values = assigned_values(function, name)
        if len(values) != 1 or len(_local_values(function, name)) != 1:
            return None
        reads = any(type(node) is cst.Name and node.value == name for node in walk(values[0]))
        return values[0] if reads else None

    def _foreign_function(self, func: cst.BaseExpression) -> Optional[Tuple["ChosenFunctions", cst.FunctionDef]]:
        """The chooser of another project file and its top-level function ``func`` names
        (``from ..utils import get_activation``)."""
        links = getattr(self.file, "links", None)
        dotted = dotted_name(func) if links is not None else None
        if dotted is None or (self.file.qualify(func) or "").startswith(("torch.", "builtins.")):
            return None
        found = links.definition(dotted, "function", package=True)
        if found is None:
            return None
        analysis, node = found
        if node not in analysis.module.body:
            return None
        return analysis.choices, node

    def _defaulted_parameter(self, function: cst.FunctionDef, param: cst.Param, depth: int) -> Optional[Choice]:
        """A parameter defaulting to one of the functions (``activation=F.leaky_relu``) that every
        call of its function in this file leaves out or gives the same function (none: the
        default; a caller elsewhere may pass another, so the site is never edited)."""
        if param.default is None:
            return None
        default = self.value(param.default, None, {}, depth + 1)
        passed = self.file.factories.passed(function, param)
        if default is None or passed is None:
            return None
        for given, caller in passed:
            if given is not None:
                found = self.value(given, caller, {}, depth + 1)
                if found is None or found.qualified != default.qualified:
                    return None  # a call chooses another function, or one not known
        return Choice(default.qualified, f"`{param.name.value}`'s default")

    def _lookup(self, table, key, default, function, bound, depth) -> Optional[List[Leaf]]:
        """``table[key]`` / ``table.get(key, default)`` of a literal dict by a constant key; by
        a key not known, every entry (and the default)."""
        entries = self._table(table, function)
        if entries is None:
            return None
        constant = self.constant(key, function, bound)
        if constant is None:
            found: List[Leaf] = []
            for value in [*entries.values(), *([default] if default is not None else [])]:
                more = self.leaves(value, function, bound, depth + 1)
                if more is None:
                    return None
                found.extend(more)
            return found
        value = entries.get(constant[0], default)
        if value is None:
            return None  # (a missing key: a KeyError, or None from ``.get``)
        return _chose(self.leaves(value, function, bound, depth + 1), constant[1])

    def _table(self, node: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Dict[Any, cst.BaseExpression]]:
        if type(node) is cst.Name:
            local = single_local_value(function, node.value) if function is not None else None
            node = local if local is not None else self._tables.get(node.value)  # type: ignore[assignment]
        if type(node) is not cst.Dict:
            return None
        entries: Dict[Any, cst.BaseExpression] = {}
        for element in node.elements:
            if type(element) is not cst.DictElement or type(element.key) not in (cst.SimpleString, cst.Integer):
                return None
            key = element.key  # (an integer key, ``{1: nn.Conv1d, 2: nn.Conv2d}``, is never a string's)
            entries[str(key.evaluated_value) if type(key) is cst.SimpleString else ("int", key.evaluated_value)] = element.value
        return entries

    def _returned(self, chooser: "ChosenFunctions", callee: cst.FunctionDef, args, function, bound, depth) -> Optional[List[Leaf]]:
        """What a call of ``callee`` (one ``return`` of a value besides those of None; a
        function of ``chooser``'s file) returns, its parameters bound to the call's constant
        arguments."""
        returns = [  # (``if name is None: return``; not the returns of nested functions or classes)
            node for node in scan(callee.body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda))
            if node.value is not None and not _is_none(node.value)  # type: ignore[attr-defined]
        ]
        if len(returns) != 1:
            return None
        params = [*callee.params.posonly_params, *callee.params.params]
        if len(args) > len(params):
            return None
        inner: Dict[str, str] = {}
        how = None
        for param, arg in zip(params, args):
            constant = self.constant(arg.value, function, bound)
            if constant is not None:
                inner[param.name.value] = constant[0]
                how = how or constant[1]
        return _chose(chooser.leaves(returns[0].value, callee, inner, depth + 1), how)

    def constant(self, node: cst.BaseExpression, function: Optional[cst.FunctionDef], bound: Dict[str, str], depth: int = 0, entry: bool = False):
        """``(value, how)`` of a string key: a literal; a bound parameter; a parameter of
        ``function`` that every call of it in this file leaves at its literal default or gives
        the same constant (followed into the callers' own parameters; ``entry``: the value it
        enters with, also where the function rebinds it later); ``self.x`` that ``__init__``
        assigns once a constant."""
        if depth > 2 * _DEPTH:
            return None
        if type(node) is cst.SimpleString:
            value = node.evaluated_value
            return (value, f"{node.value}") if isinstance(value, str) else None
        if type(node) is cst.Attribute and type(node.value) is cst.Name and function is not None:
            model = self._model_of(function)
            if model is None or node.value.value != model.self_name(function):
                return None
            assignment = model.single_assignment(node.attr.value)
            return self.constant(assignment.value, assignment.method, {}, depth + 1) if assignment is not None else None
        if type(node) is not cst.Name:
            return None
        if node.value in bound:
            return bound[node.value], None
        param = (_param if entry else parameter)(function, node.value) if function is not None else None
        if param is None:
            return None
        default = None
        if param.default is not None:
            if type(param.default) is not cst.SimpleString or not isinstance(param.default.evaluated_value, str):
                return None
            default = str(param.default.evaluated_value)
        passed = self.file.factories.passed(function, param)
        if passed is None:
            return None
        values = set() if default is None else {default}
        for given, caller in passed:
            if given is None:
                continue  # left at the default (none: not a call Python accepts)
            found = self.constant(given, caller, {}, depth + 1)
            if found is None:
                return None  # what this call chooses is not known
            values.add(found[0])
        if len(values) != 1:
            return None  # calls of this file choose differently
        (value,) = values
        return value, f"`{node.value}`'s default {param.default.value}" if default is not None else f"what every call passes for `{node.value}`, {value!r}"

    def _model_of(self, function: cst.FunctionDef):
        """The class model of the class ``function`` is a method of (None: not a method)."""
        index = self.file.index
        here = index.find(function)
        inside = index.scope[here] if here is not None else -1
        owner = index.order[inside] if inside >= 0 else None
        return self.file.class_model(owner) if type(owner) is cst.ClassDef else None
