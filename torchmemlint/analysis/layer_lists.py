"""Layers collected in a local list and spliced into ``nn.Sequential(*layers)``, and dropout
probabilities the file pins to 0.

A list is followed only where its order is certain: straight-line statements of one function
(``layers = [a, b]``, ``layers.append(c)``, ``layers += [d]``, ``layers.extend([e])``, or
``layers = helper(...)`` where ``helper`` is a function or method of this file that builds and
returns such a list). A list touched inside a loop, a branch or a ``with``, copied, sliced,
indexed or passed elsewhere before the splice stays unknown, as today."""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.syntax import block_statements, literal_number
from torchmemlint.tree import contains as holds, node_index, nodes_of, scan


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    return any(n.value == name for n in nodes_of(node, cst.Name))  # type: ignore[attr-defined]


def literal_elements(node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    if type(node) in (cst.List, cst.Tuple):
        values = []
        for element in node.elements:
            if type(element) is not cst.Element:
                return None  # `*more`
            values.append(element.value)
        return values
    return None


_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)  # not entered: their own scopes
_BINDERS = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)

Variants = List[List[cst.BaseExpression]]
MAX_VARIANTS = 16  # more possible orders than this: the list is not followed


def _product(left: Variants, right: Variants) -> Optional[Variants]:
    combined = [a + b for a in left for b in right]
    return _dedupe(combined)


def _dedupe(variants: Variants) -> Optional[Variants]:
    seen = set()
    unique: Variants = []
    for variant in variants:
        key = tuple(id(v) for v in variant)
        if key not in seen:
            seen.add(key)
            unique.append(variant)
    return unique if len(unique) <= MAX_VARIANTS else None


class _Unknown(Exception):
    """The list's contents cannot be followed here."""


class LayerLists:
    """Per file: what a local list holds at a given statement, and which functions return one.

    A list may be built in several ways (a branch adds a layer or not, a loop adds its layers
    0, 1 or more times): each way is one *variant*, an ordered list of element expressions.
    A loop body is taken 0, 1 and 2 times, which yields every pair of neighbours a longer
    run can have. More than ``MAX_VARIANTS`` ways, a ``break``/``continue``/``try`` around
    the list, or any other use of the name (passed to a call, indexed, copied) leave it
    unknown."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._functions: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._returns: Dict[int, Optional[Variants]] = {}

    # -- functions of the file by name (module-level functions and methods) -----------------------
    def _by_name(self) -> Dict[str, List[cst.FunctionDef]]:
        if self._functions is None:
            found: Dict[str, List[cst.FunctionDef]] = {}
            for node in nodes_of(self.module, cst.FunctionDef):
                found.setdefault(node.name.value, []).append(node)  # type: ignore[attr-defined]
            self._functions = found
        return self._functions

    # -- single-order answers (for the facets that need one order) ------------------------------
    def helper_list(self, call: cst.Call, depth: int = 0) -> Optional[List[cst.BaseExpression]]:
        """The list a same-file helper returns (``self._make_layers(...)`` / ``make_layers(...)``)."""
        return _single(self.helper_variants(call, depth))

    def contents(
        self, function: cst.FunctionDef, name: str, statement: cst.CSTNode, depth: int = 0
    ) -> Optional[List[cst.BaseExpression]]:
        """The layer expressions ``name`` holds when ``statement`` runs, when there is one order."""
        return _single(self.variants(function, name, statement, depth))

    # -- every order ------------------------------------------------------------------------------
    def helper_variants(self, call: cst.Call, depth: int = 0) -> Optional[Variants]:
        """Every list a same-file helper may return (one per ``return`` and way of building)."""
        func = call.func
        if type(func) is cst.Name:
            name = func.value
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in ("self", "cls"):
            name = func.attr.value
        else:
            return None
        candidates = self._by_name().get(name, [])
        if len(candidates) != 1 or depth > 3:
            return None  # unknown, or defined twice: which one runs is not certain
        function = candidates[0]
        key = id(function)
        if key not in self._returns:
            self._returns[key] = None  # recursion guard
            self._returns[key] = self._returned(function, depth + 1)
        return self._returns[key]

    def _returned(self, function: cst.FunctionDef, depth: int) -> Optional[Variants]:
        # last first, the order of the walk that gave them before (returns never nest)
        returns = scan(function.body, (cst.Return,), _NESTED)[::-1]
        statements = list(block_statements(function.body))
        if not returns or not statements:
            return None
        last = statements[-1]
        if not (type(last) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Return):
            return None  # may fall off the end (returns None)
        found: Variants = []
        for ret in returns:
            if ret.value is None:
                return None
            statement = _statement_of(function, ret)
            if statement is None:
                return None
            variants = self._expression(function, ret.value, statement, depth)
            if variants is None:
                return None
            found.extend(variants)
        return _dedupe(found)

    def _expression(
        self, function: cst.FunctionDef, value: cst.BaseExpression, statement: cst.CSTNode, depth: int
    ) -> Optional[Variants]:
        """The variants a returned or spliced expression stands for."""
        if type(value) is cst.Name:
            return self.variants(function, value.value, statement, depth)
        if type(value) is cst.Call:
            return self.helper_variants(value, depth)
        return self._literal(function, value, depth)

    def _literal(self, function: Optional[cst.FunctionDef], value: cst.BaseExpression, depth: int) -> Optional[Variants]:
        """``[a, b, *helper()]``: a list or tuple literal, starred helper calls expanded."""
        if type(value) not in (cst.List, cst.Tuple):
            return None
        variants: Variants = [[]]
        for element in value.elements:
            if type(element) is cst.StarredElement:
                inner = self.helper_variants(element.value, depth) if type(element.value) is cst.Call else None
                if inner is None:
                    return None
                combined = _product(variants, inner)
            else:
                combined = _product(variants, [[self._local_layer(function, element.value)]])
            if combined is None:
                return None
            variants = combined
        return variants

    def _local_layer(self, function: Optional[cst.FunctionDef], value: cst.BaseExpression) -> cst.BaseExpression:
        """``leaky`` in a list, for ``leaky = nn.LeakyReLU(0.1)`` assigned once in the function
        and used nowhere but as list elements: the constructor call."""
        if function is None or type(value) is not cst.Name:
            return value
        name = value.value
        assigned = []
        for node in scan(function.body, _BINDERS, _NESTED):  # (their order does not matter: one is kept)
            targets = (
                [t.target for t in node.targets] if type(node) is cst.Assign
                else [getattr(node, "target", None) or getattr(node, "name", None)]
            )
            if any(
                _mentions_name(t, name)
                for t in targets if t is not None
            ):
                assigned.append(node)
        if len(assigned) != 1 or type(assigned[0]) is not cst.Assign or len(assigned[0].targets) != 1:
            return value
        if type(assigned[0].value) is not cst.Call or any(
            p.name.value == name for p in nodes_of(function.params, cst.Param)  # type: ignore[attr-defined]
        ):
            return value
        # every mention: the target, or an element of a list/tuple literal
        allowed = {id(assigned[0].targets[0].target)}
        for node in scan(function.body, (cst.List, cst.Tuple), _NESTED):
            for element in node.elements:  # type: ignore[attr-defined]
                if type(element.value) is cst.Name and element.value.value == name:
                    allowed.add(id(element.value))
        mentions = [n for n in scan(function.body, (cst.Name,), _NESTED) if n.value == name]  # type: ignore[attr-defined]
        if any(id(n) not in allowed for n in mentions):
            return value
        return assigned[0].value

    def variants(
        self, function: cst.FunctionDef, name: str, statement: cst.CSTNode, depth: int = 0
    ) -> Optional[Variants]:
        """Every order of the elements ``name`` may hold when ``statement`` (in ``function``)
        runs; None when they cannot be followed."""
        if any(p.name.value == name for p in nodes_of(function.params, cst.Param)):  # type: ignore[attr-defined]
            return None
        walker = _Walk(self, function, name, statement, depth)
        try:
            walker.block(list(block_statements(function.body)), [])
        except _Unknown:
            return None
        return walker.at_target or None

    def _step(
        self, function: cst.FunctionDef, small: cst.BaseSmallStatement, name: str,
        held: Optional[Variants], depth: int,
    ) -> Optional[Variants]:
        """The variants after one small statement that mentions ``name`` (None: unknown)."""
        if type(small) in (cst.Assign, cst.AnnAssign):
            targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
            value = small.value
            if len(targets) != 1 or type(targets[0]) is not cst.Name or targets[0].value != name:
                return None
            if value is None or _mentions_name(value, name):
                return None
            if type(value) is cst.Call:
                return self.helper_variants(value, depth)
            return self._literal(function, value, depth)
        if held is None:
            return None
        if type(small) is cst.AugAssign:
            if not (type(small.target) is cst.Name and small.target.value == name):
                return None
            if type(small.operator) is not cst.AddAssign or _mentions_name(small.value, name):
                return None
            added = self._literal(function, small.value, depth)
            return _product(held, added) if added is not None else None
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            call = small.value
            func = call.func
            if not (type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == name):
                return None
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                return None
            value = call.args[0].value
            if _mentions_name(value, name):
                return None
            if func.attr.value == "append":
                return _product(held, [[self._local_layer(function, value)]])
            if func.attr.value == "extend":
                added = self._literal(function, value, depth)
                if added is None and type(value) is cst.Call:
                    added = self.helper_variants(value, depth)
                return _product(held, added) if added is not None else None
        return None


class _Walk:
    """Follows ``name`` through a function body, branch and loop by branch and loop."""

    def __init__(self, lists: LayerLists, function: cst.FunctionDef, name: str, target: cst.CSTNode, depth: int) -> None:
        self.lists = lists
        self.function = function
        self.name = name
        self.target = target
        self.depth = depth
        self.at_target: Optional[Variants] = None

    def _reached(self, held: Optional[Variants]) -> None:
        if held is None:
            raise _Unknown()
        merged = _dedupe((self.at_target or []) + held)
        if merged is None:
            raise _Unknown()
        self.at_target = merged

    def block(self, statements: List[cst.CSTNode], held: Optional[Variants]) -> Optional[Variants]:
        """Runs ``statements`` on every variant; an empty list of variants: not yet assigned."""
        for statement in statements:
            held = self.statement(statement, held)
        return held

    def statement(self, statement: cst.CSTNode, held: Optional[Variants]) -> Optional[Variants]:
        contains = statement is self.target or holds(statement, self.target)
        if statement is self.target or (contains and type(statement) is cst.SimpleStatementLine):
            self._reached(held)
            return held
        if not contains and not _mentions_name(statement, self.name):
            return held
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                if not _mentions_name(small, self.name):
                    continue
                if type(small) is cst.Return:
                    raise _Unknown()  # returned in the middle: a different list at the splice
                held = self.lists._step(self.function, small, self.name, held or None, self.depth)
                if held is None:
                    raise _Unknown()
            return held
        if type(statement) is cst.If:
            if _mentions_name(statement.test, self.name):
                raise _Unknown()
            after = self.block(list(block_statements(statement.body)), held)
            orelse = statement.orelse
            if type(orelse) is cst.If:
                other = self.statement(orelse, held)
            elif type(orelse) is cst.Else:
                other = self.block(list(block_statements(orelse.body)), held)
            else:
                other = held
            return self._union(after, other)
        if type(statement) in (cst.For, cst.While):
            header = statement.iter if type(statement) is cst.For else statement.test
            if _mentions_name(header, self.name) or statement.orelse is not None:
                raise _Unknown()
            if scan(statement.body, (cst.Break, cst.Continue), _NESTED):
                raise _Unknown()
            body = list(block_statements(statement.body))
            once = self.block(body, held)
            twice = self.block(body, once)
            return self._union(self._union(held, once), twice)
        if type(statement) is cst.With:
            return self.block(list(block_statements(statement.body)), held)
        raise _Unknown()  # try, match, nested definitions that use the name

    @staticmethod
    def _union(a: Optional[Variants], b: Optional[Variants]) -> Optional[Variants]:
        if not a or not b:
            if not a and not b:
                return a
            raise _Unknown()  # assigned on one path only
        merged = _dedupe(a + b)
        if merged is None:
            raise _Unknown()
        return merged


def _single(variants: Optional[Variants]) -> Optional[List[cst.BaseExpression]]:
    return list(variants[0]) if variants is not None and len(variants) == 1 else None


def _statement_of(function: cst.FunctionDef, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The simple statement line of ``function`` that contains ``node``."""
    for line in scan(function.body, (cst.SimpleStatementLine,), _NESTED):  # lines never nest
        if holds(line, node):
            return line
    return None


# -- dropout probabilities ----------------------------------------------------------------------------------
def zero_probability(
    module: cst.Module,
    function: Optional[cst.FunctionDef],
    owner: Optional[cst.ClassDef],
    value: cst.BaseExpression,
    factories=None,
    depth: int = 0,
) -> bool:
    """Whether the dropout probability ``value`` is 0 here: a literal 0, or a parameter of
    ``function`` whose default is 0 and that every call of it in this file (at least one)
    leaves out or passes as 0, or passes down from the caller's own such parameter
    (``Block(dim, drop=drop_rate)`` in a model whose ``drop_rate=0.`` is never changed).
    For ``__init__`` the calls are those of the class's name."""
    number = literal_number(value)
    if number is not None:
        return number == 0
    if function is None or type(value) is not cst.Name or depth > 4:
        return False
    params = function.params
    positional = [*params.posonly_params, *params.params]
    param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == value.value), None)
    if param is None or param.default is None or literal_number(param.default) != 0:
        return False
    if _rebound(function, value.value):
        return False
    passed = factories.passed(function, param) if factories is not None else None
    if not passed:
        return False  # not read, or called from elsewhere: the probability is not known here
    for given, caller in passed:
        if given is None or literal_number(given) == 0:
            continue
        if caller is not None and zero_probability(module, caller, None, given, factories, depth + 1):
            continue
        return False
    return True


def _rebound(function: cst.FunctionDef, name: str) -> bool:
    for node in nodes_of(function.body, cst.Assign, cst.AugAssign, cst.AnnAssign):
        targets = (
            [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        )
        if any(type(t) is cst.Name and t.value == name for t in targets):
            return True
    return False



def splices(module: cst.Module):
    """Every call with a ``*arg`` in the file, with the function and statement it is in (from
    the file's shared index: the calls, then the lines and functions above the few spliced)."""
    found = []
    index = node_index(module)
    order, parent = index.order, index.parent
    for here in index.positions(cst.Call):
        node = order[here]
        if not any(arg.star == "*" for arg in node.args):  # type: ignore[attr-defined]
            continue
        above = parent[here]
        while above >= 0:  # the innermost statement line; none when a function comes first
            above_type = type(order[above])
            if above_type is cst.SimpleStatementLine or above_type is cst.FunctionDef:
                break
            above = parent[above]
        if above < 0 or type(order[above]) is not cst.SimpleStatementLine:
            continue
        function = index.function_of(here)
        found.append((node, order[function] if function >= 0 else None, order[above]))
    return found


def enclosing_definitions(
    module: cst.Module, target: cst.CSTNode
) -> "tuple[Optional[cst.FunctionDef], Optional[cst.ClassDef]]":
    """The innermost function containing ``target`` and the class that function is directly in."""
    index = node_index(module)
    here = index.find(target)
    if here is None:
        return None, None
    order = index.order
    function = here if type(target) is cst.FunctionDef else index.function_of(here)
    if function < 0:
        return None, None
    owner = index.scope[function]
    return order[function], order[owner] if owner >= 0 and type(order[owner]) is cst.ClassDef else None  # type: ignore[return-value]
