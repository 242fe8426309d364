"""The activation function a configured name chooses, for the TML2xx sites
(``analysis/activations.py``): ``self.activation_fn = get_activation_fn(activation)`` with
``def __init__(..., activation="ELU")`` and ``def get_activation_fn(name): return {"ReLU":
F.relu, "ELU": F.elu}.get(name, F.elu)``, later ``self.activation_fn(x)``; also a local
(``fn = ACTS[act]``; ``fn(h)``) and a plain alias (``self.act = F.elu``).

A value is followed to a torch function through: a name or attribute that qualifies to one; a
local the function binds once; ``self.x`` that ``__init__`` assigns once; a lookup of a
literal dict (local, or bound once at module level) by a constant key, ``table[key]`` or
``table.get(key, default)``; a call of a module-level function of the file that returns one
expression, its parameters bound to the call's constant arguments. A key is constant when it
is a literal, or a parameter whose literal default no call of the function in this file
changes (``analysis/factories.py``'s ``passed``: an argument of another literal, one that
cannot be read, or a call that cannot be read, and the key is not known). What is not known
gives None: the site is then not read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, Optional

import libcst as cst

from torchmemlint.analysis.factories import parameter, single_local_value

_DEPTH = 4


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
        if depth > _DEPTH:
            return None
        kind = type(expr)
        if kind in (cst.Name, cst.Attribute):
            qualified = self.file.qualify(expr)
            if qualified in self.functions:
                return Choice(qualified)
            if kind is cst.Name and function is not None and expr.value not in bound:  # type: ignore[attr-defined]
                if expr.value in self._defaulted and (param := parameter(function, expr.value)) is not None:  # type: ignore[attr-defined]
                    return self._defaulted_parameter(function, param, depth)
                local = single_local_value(function, expr.value)  # type: ignore[attr-defined]
                return self.value(local, function, bound, depth + 1) if local is not None else None
            return None
        if kind is cst.Subscript:
            elements = expr.slice  # type: ignore[attr-defined]
            if len(elements) != 1 or type(elements[0].slice) is not cst.Index:
                return None
            return self._lookup(expr.value, elements[0].slice.value, None, function, bound, depth)  # type: ignore[attr-defined]
        if kind is not cst.Call or any(arg.star or arg.keyword is not None for arg in expr.args):  # type: ignore[attr-defined]
            return None
        func, args = expr.func, expr.args  # type: ignore[attr-defined]
        if type(func) is cst.Attribute and func.attr.value == "get" and 1 <= len(args) <= 2:
            return self._lookup(func.value, args[0].value, args[1].value if len(args) == 2 else None, function, bound, depth)
        if type(func) is cst.Name and func.value in self._top and self.file.qualify(func) is None:
            return self._returned(self._top[func.value], args, function, bound, depth)
        return None

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

    def _lookup(self, table, key, default, function, bound, depth) -> Optional[Choice]:
        """``table[key]`` / ``table.get(key, default)`` of a literal dict by a constant key."""
        entries = self._table(table, function)
        constant = self.constant(key, function, bound)
        if entries is None or constant is None:
            return None
        value = entries.get(constant[0], default)
        if value is None:
            return None  # (a missing key: a KeyError, or None from ``.get``)
        found = self.value(value, function, bound, depth + 1)
        return Choice(found.qualified, found.chosen_by or constant[1]) if found is not None else None

    def _table(self, node: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Dict[str, cst.BaseExpression]]:
        if type(node) is cst.Name:
            local = single_local_value(function, node.value) if function is not None else None
            node = local if local is not None else self._tables.get(node.value)  # type: ignore[assignment]
        if type(node) is not cst.Dict:
            return None
        entries: Dict[str, cst.BaseExpression] = {}
        for element in node.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            entries[str(element.key.evaluated_value)] = element.value
        return entries

    def _returned(self, callee: cst.FunctionDef, args, function, bound, depth) -> Optional[Choice]:
        """What a call of ``callee`` (one ``return`` of a value) returns, its parameters bound
        to the call's constant arguments."""
        returns = [node for node in _returns(callee.body)]
        if len(returns) != 1 or returns[0].value is None:
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
        found = self.value(returns[0].value, callee, inner, depth + 1)
        if found is None:
            return None
        return Choice(found.qualified, found.chosen_by or how) if found.chosen_by or how else found

    def constant(self, node: cst.BaseExpression, function: Optional[cst.FunctionDef], bound: Dict[str, str], depth: int = 0):
        """``(value, how)`` of a string key: a literal; a bound parameter; a parameter of
        ``function`` that every call of it in this file leaves at its literal default or gives
        the same constant (followed into the callers' own parameters); ``self.x`` that
        ``__init__`` assigns once a constant."""
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
        param = parameter(function, node.value) if function is not None else None
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


def _returns(node: cst.CSTNode):
    """The ``return`` statements of a function body (not of nested functions or classes)."""
    for child in node.children:
        if type(child) in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if type(child) is cst.Return:
            yield child
        else:
            yield from _returns(child)
