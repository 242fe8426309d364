"""Layers collected in a local list and spliced into ``nn.Sequential(*layers)`` (the dropout
probabilities a file pins to 0 are read in ``dropout_probabilities.py``).

A list is followed through the statements of one function, up to the splice (a local, or
``self.proj`` that ``__init__`` fills and splices, ``self.proj = nn.Sequential(*self.proj)``;
``layers = [a, b]`` or ``nn.ModuleList([a, b])``, ``layers.append(c)``, ``layers += [d]``, ``layers.extend(helper())``,
``layers = layers[1:]``, ``layers[0] = e``, or ``layers = helper(...)`` where ``helper`` is a
function or method of this file that builds and returns such a list), in branches and loops
(a loop over a list written out runs at least once); what it may hold is an
``Order``: a successor relation over all the orders, never an enumeration of them. A list
copied, indexed otherwise or passed elsewhere before the splice stays unknown."""

from __future__ import annotations

from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

import libcst as cst

from torchmemlint.analysis.list_reads import _is, _mentions_name, _never_empty, _only_concatenated, _read_only, _sized
from torchmemlint.analysis.loop_counters import counter, counter_truth, tested
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import block_statements, literal_number
from torchmemlint.tree import contains as holds, node_index, nodes_of, scan


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
_MODULE_LISTS = frozenset({"nn.ModuleList", "torch.nn.ModuleList", "ModuleList"})
_SIMPLE = (cst.SimpleStatementLine, cst.SimpleStatementSuite)
_BINDERS = (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.AsName, cst.NamedExpr)


class Order:
    """Every order a list may hold, as a successor relation (no enumeration, so no cap).

    Which elements may come first, which may come last, which may directly follow which, and
    whether the list may be empty. Elements are keys: expression nodes (by identity) in
    ``LayerLists``, ``Part`` values in ``Resolver.sequential_order``. Built by concatenation,
    union (a branch) and a loop's fixpoint, every pair in the relation is a neighbourhood some
    order has (each source position is its own element); dropping or replacing the first
    element (``rep = rep[1:]``, ``rep[0] = ...``) may keep a pair no order has any more,
    never lose one."""

    __slots__ = ("items", "first", "last", "pairs", "nullable")

    def __init__(self, items: Dict[Any, None], first: FrozenSet[Any], last: FrozenSet[Any],
                 pairs: FrozenSet[Tuple[Any, Any]], nullable: bool) -> None:
        self.items = items  # every element, in the order first met
        self.first = first
        self.last = last
        self.pairs = pairs
        self.nullable = nullable

    @classmethod
    def empty(cls) -> "Order":
        return cls({}, frozenset(), frozenset(), frozenset(), True)

    @classmethod
    def sequence(cls, elements: Sequence[Any]) -> "Order":
        order = cls.empty()
        for element in elements:
            order = order.then(cls.of(element))
        return order

    @classmethod
    def of(cls, element: Any) -> "Order":
        return cls({element: None}, frozenset((element,)), frozenset((element,)), frozenset(), False)

    def then(self, other: "Order") -> "Order":
        """This list followed by ``other``."""
        return Order(
            {**self.items, **other.items},
            self.first | other.first if self.nullable else self.first,
            other.last | self.last if other.nullable else other.last,
            self.pairs | other.pairs | frozenset((a, b) for a in self.last for b in other.first),
            self.nullable and other.nullable,
        )

    def union(self, other: "Order") -> "Order":
        """Either list (two arms of a branch)."""
        return Order(
            {**self.items, **other.items}, self.first | other.first, self.last | other.last,
            self.pairs | other.pairs, self.nullable or other.nullable,
        )

    def drop_first(self) -> "Order":
        """``rep = rep[1:]``."""
        first = frozenset(b for a, b in self.pairs if a in self.first)
        single = bool(self.first & self.last)  # a one-element order becomes empty
        return self._reachable(first, self.last, self.nullable or single)

    def drop_last(self) -> "Order":
        """``layers.pop()``, ``layers = layers[:-1]``, ``del layers[-1]`` (popping an empty
        list raises: the orders that remain are the non-empty ones, shortened)."""
        last = frozenset(a for a, b in self.pairs if b in self.last)
        single = bool(self.first & self.last)
        before: Dict[Any, List[Any]] = {}
        for a, b in self.pairs:
            before.setdefault(b, []).append(a)
        seen = set(last)
        todo = list(last)
        while todo:
            for a in before.get(todo.pop(), ()):
                if a not in seen:
                    seen.add(a)
                    todo.append(a)
        return Order(
            {k: None for k in self.items if k in seen}, frozenset(k for k in self.first if k in seen), last,
            frozenset((a, b) for a, b in self.pairs if a in seen and b in seen), single,
        )

    def trimmed(self, cut: Any) -> Optional["Order"]:
        """``layers[2:]`` / ``layers[:-2]`` (a ``slice`` from ``_index``); None for another cut."""
        if type(cut) is not slice or cut.step is not None or (cut.start is None) == (cut.stop is None):
            return None
        order = self
        for _ in range(cut.start if cut.start is not None else -cut.stop):
            order = order.drop_first() if cut.start is not None else order.drop_last()
        return order

    def replace_first(self, element: Any) -> "Order":
        """``rep[0] = element`` (an empty list raises there: the result is never empty)."""
        after = frozenset(b for a, b in self.pairs if a in self.first)
        last = self.last | {element} if self.first & self.last else self.last
        pairs = self.pairs | frozenset((element, b) for b in after)
        grown = Order({element: None, **self.items}, frozenset((element,)), last, pairs, False)
        return grown._reachable(grown.first, last, False)

    def _reachable(self, first: FrozenSet[Any], last: FrozenSet[Any], nullable: bool) -> "Order":
        """The elements a path from ``first`` reaches, and the relation among them."""
        successors: Dict[Any, List[Any]] = {}
        for a, b in self.pairs:
            successors.setdefault(a, []).append(b)
        seen = set(first)
        todo = list(first)
        while todo:
            for b in successors.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return Order(
            {k: None for k in self.items if k in seen}, first, frozenset(k for k in last if k in seen),
            frozenset((a, b) for a, b in self.pairs if a in seen), nullable,
        )

    def substitute(self, inner: Callable[[Any], "Order"]) -> Optional["Order"]:
        """Every element replaced by the order ``inner`` gives for it (a nested Sequential
        flattened); None when one of those may be empty."""
        parts = {element: inner(element) for element in self.items}
        if any(part.nullable for part in parts.values()):
            return None
        items: Dict[Any, None] = {}
        pairs = set()
        for part in parts.values():
            items.update(part.items)
            pairs |= part.pairs
        for a, b in self.pairs:
            pairs.update((x, y) for x in parts[a].last for y in parts[b].first)
        return Order(
            items, frozenset(x for e in self.first for x in parts[e].first),
            frozenset(x for e in self.last for x in parts[e].last), frozenset(pairs), self.nullable,
        )

    def predecessors(self, element: Any) -> List[Any]:
        return [a for a in self.items if (a, element) in self.pairs]

    def single(self) -> Optional[List[Any]]:
        """The one order, when the relation allows only one; None otherwise."""
        if not self.items:
            return [] if self.nullable else None
        if self.nullable or len(self.first) != 1 or len(self.last) != 1:
            return None
        successors: Dict[Any, List[Any]] = {}
        for a, b in self.pairs:
            successors.setdefault(a, []).append(b)
        path = [next(iter(self.first))]
        while True:
            following = successors.get(path[-1], [])
            if not following:
                break
            if len(following) != 1 or following[0] in path:
                return None
            path.append(following[0])
        return path if len(path) == len(self.items) and path[-1] in self.last else None

    def _key(self):
        return (frozenset(self.items), self.first, self.last, self.pairs, self.nullable)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Order) and self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]


class _Unknown(Exception):
    """The list's contents cannot be followed here."""


class _Reached(Exception):
    """The statement asked about was reached outside any loop (or its outermost loop is done)."""


def either_order(value: cst.BaseExpression, depth: int = 0) -> Order:
    """The element ``value`` of a Sequential: ``nn.BatchNorm2d(c) if i else nn.Identity()`` is
    either arm (a branch of the order), any other value itself."""
    if type(value) is cst.IfExp and depth < 4:
        return either_order(value.body, depth + 1).union(either_order(value.orelse, depth + 1))
    return Order.of(value)


_OTHER = Order.empty()  # (by identity: the name was given a value that is not a list known here)
_ENDED = Order.empty()  # (by identity: the path raised, ``else: raise ValueError(...)``; no order goes on from it)


class LayerLists:
    """Per file: what a local list holds at a given statement, and which functions return one.

    A list may be built in several ways (a branch adds a layer or not, a loop adds its layers
    0, 1 or more times): the answer is an ``Order``, which layers may come first and which
    may directly follow which, over all of them. A loop is run to a fixpoint. A
    ``break``/``continue``/``try`` around the list, or any other use of the name (passed to a
    call, indexed otherwise, copied) leave it unknown."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._functions: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._returns: Dict[int, Optional[Order]] = {}
        self._assume: Dict[str, bool] = {}  # (``order``'s: the truth of names its ``if`` tests read)

    # -- functions of the file by name (module-level functions and methods) -----------------------
    def _by_name(self) -> Dict[str, List[cst.FunctionDef]]:
        if self._functions is None:
            found: Dict[str, List[cst.FunctionDef]] = {}
            for node in nodes_of(self.module, cst.FunctionDef):
                found.setdefault(node.name.value, []).append(node)  # type: ignore[attr-defined]
            self._functions = found
        return self._functions

    def helper_order(self, call: cst.Call, depth: int = 0) -> Optional[Order]:
        """Every list a same-file helper may return (``self._make_layers(...)`` / ``make_layers(...)``);
        torch's ``nn.ModuleList()`` / ``nn.ModuleList([a, b])`` holds its list (its elements in order)."""
        func = call.func
        if dotted_name(func) in _MODULE_LISTS and len(call.args) <= 1 and all(arg.keyword is None and not arg.star for arg in call.args):
            return self._literal(None, call.args[0].value, depth) if call.args else Order.empty()
        if type(func) is cst.Name and func.value == "list" and "list" not in self._by_name() and len(call.args) <= 1 \
                and all(arg.keyword is None and not arg.star for arg in call.args):  # `list()`, `list((a, b))`
            return self._literal(None, call.args[0].value, depth) if call.args else Order.empty()
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
            assumed, self._assume = self._assume, {}  # (another function: its own names)
            try:
                self._returns[key] = self._returned(function, depth + 1)
            finally:
                self._assume = assumed
        return self._returns[key]

    def _returned(self, function: cst.FunctionDef, depth: int) -> Optional[Order]:
        returns = scan(function.body, (cst.Return,), _NESTED)
        statements = list(block_statements(function.body))
        if not returns or not statements:
            return None
        last = statements[-1]
        if not (type(last) is cst.SimpleStatementLine and type(last.body[-1]) is cst.Return):
            return None  # may fall off the end (returns None)
        found: Optional[Order] = None
        for ret in returns:
            if ret.value is None:
                return None
            statement = _statement_of(function, ret)
            if statement is None:
                return None
            order = self._expression(function, ret.value, statement, depth)
            if order is None:
                return None
            found = order if found is None else found.union(order)
        return found

    def _expression(
        self, function: cst.FunctionDef, value: cst.BaseExpression, statement: cst.CSTNode, depth: int
    ) -> Optional[Order]:
        """The orders a returned or spliced expression stands for."""
        if type(value) is cst.Name:
            return self.order(function, value.value, statement, depth)
        if type(value) is cst.Call:
            return self.helper_order(value, depth)
        return self._literal(function, value, depth)

    def _literal(self, function: Optional[cst.FunctionDef], value: cst.BaseExpression, depth: int) -> Optional[Order]:
        """``[a, b, *helper()]``: a list or tuple literal, starred helper calls expanded."""
        if type(value) not in (cst.List, cst.Tuple):
            return None
        order = Order.empty()
        for element in value.elements:
            if type(element) is cst.StarredElement:
                inner = self.helper_order(element.value, depth) if type(element.value) is cst.Call else None
                if inner is None:
                    return None
                order = order.then(inner)
            else:
                order = order.then(Order.of(self._local_layer(function, element.value)))
        return order

    def _concatenated(self, function: cst.FunctionDef, value: cst.BaseExpression, depth: int) -> Optional[Order]:
        """``down + [submodule] + up``: a new list, each operand's orders in turn (a local list
        as it is where this statement runs, a literal, a helper's list). A bare ``model = down``
        is not read so: the two names would hold one list that later calls may change."""
        if type(value) is cst.BinaryOperation:
            if type(value.operator) is not cst.Add:
                return None
            left = self._concatenated(function, value.left, depth)
            right = self._concatenated(function, value.right, depth) if left is not None else None
            return left.then(right) if right is not None else None
        if type(value) is cst.Name:
            statement = _statement_of(function, value)
            if statement is None or depth >= _CONCATENATED_DEPTH:
                return None
            return self.order(function, value.value, statement, depth + 1)
        if type(value) is cst.Call:
            return self.helper_order(value, depth)
        return self._literal(function, value, depth)

    def _added(self, function: cst.FunctionDef, value: cst.BaseExpression, depth: int) -> Optional[Order]:
        """What ``+= value`` / ``.extend(value)`` adds: a literal, or a helper's list."""
        if type(value) is cst.Call:
            return self.helper_order(value, depth)
        return self._literal(function, value, depth)
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
        # (``linear = spectral_norm(linear)`` after it: the same module, its weight reparametrised)
        wrapped = [node for node in assigned if _rewrapped(node, name)]
        assigned = [node for node in assigned if not _rewrapped(node, name)]
        if len(assigned) != 1 or type(assigned[0]) is not cst.Assign or len(assigned[0].targets) != 1:
            return value
        if type(assigned[0].value) is not cst.Call or any(
            p.name.value == name for p in nodes_of(function.params, cst.Param)  # type: ignore[attr-defined]
        ):
            return value
        # every mention: the target, an element of a list/tuple literal or of an append, or a
        # test of whether it is None (``norm = make_norm(kind)``; ``if norm is not None:
        # layers.append(norm)``: a None is never placed)
        allowed = {id(assigned[0].targets[0].target)}
        for node in wrapped:
            allowed.update((id(node.targets[0].target), id(node.value.args[0].value)))  # type: ignore[attr-defined]
        for node in scan(function.body, (cst.List, cst.Tuple, cst.Call, cst.Comparison, cst.If), _NESTED):
            kind = type(node)
            if kind in (cst.List, cst.Tuple):
                candidates = [element.value for element in node.elements]  # type: ignore[attr-defined]
            elif kind is cst.Call:
                func = node.func  # type: ignore[attr-defined]
                appended = type(func) is cst.Attribute and func.attr.value == "append" and len(node.args) == 1  # type: ignore[attr-defined]
                candidates = [node.args[0].value] if appended else []  # type: ignore[attr-defined]
            elif kind is cst.Comparison:
                targets = node.comparisons  # type: ignore[attr-defined]
                none_test = len(targets) == 1 and type(targets[0].operator) in (cst.Is, cst.IsNot) and (
                    type(targets[0].comparator) is cst.Name and targets[0].comparator.value == "None"
                )
                candidates = [node.left] if none_test else []  # type: ignore[attr-defined]
            else:
                candidates = [node.test]  # type: ignore[attr-defined]
            allowed.update(id(c) for c in candidates if type(c) is cst.Name and c.value == name)
        mentions = [n for n in scan(function.body, (cst.Name,), _NESTED) if n.value == name]  # type: ignore[attr-defined]
        if any(id(n) not in allowed for n in mentions):
            return value
        return assigned[0].value

    def order(
        self, function: cst.FunctionDef, name: str, statement: cst.CSTNode, depth: int = 0,
        assume: Optional[Dict[str, bool]] = None,
    ) -> Optional[Order]:
        """Every order of the elements ``name`` may hold when ``statement`` (in ``function``)
        runs; None when they cannot be followed. ``assume``: the truth of parameters of
        ``function`` (never rebound there), so that ``if outermost:`` takes one arm only."""
        if any(p.name.value == name for p in nodes_of(function.params, cst.Param)):  # type: ignore[attr-defined]
            return None
        assumed = self._assume
        if assume is not None:
            self._assume = assume
        walker = _Walk(self, function, name, statement, depth)
        try:
            walker.block(list(block_statements(function.body)), None)
        except _Unknown:
            return None
        except _Reached:
            pass
        finally:
            self._assume = assumed
        return walker.at_target

    def _step(
        self, function: cst.FunctionDef, small: cst.BaseSmallStatement, name: str,
        held: Optional[Order], depth: int,
    ) -> Optional[Order]:
        """The orders after one small statement that mentions ``name`` (None: unknown)."""
        if type(small) in (cst.Assign, cst.AnnAssign):
            targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
            value = small.value
            if len(targets) != 1 or value is None:
                return None
            target = targets[0]
            if type(target) is cst.Subscript:  # `rep[0] = nn.ReLU()`
                if held is None or _index(target, name) != 0 or _mentions_name(value, name):
                    return None
                return held.replace_first(self._local_layer(function, value))
            if not _is(target, name):
                # `model = down + [sub]` copies the elements of `down` into a new list
                return held if type(target) is cst.Name and _only_concatenated(value, name) else None
            if _mentions_name(value, name):
                trimmed = held.trimmed(_index(value, name)) if held is not None else None
                if trimmed is not None:  # `rep = rep[1:]`, `layers = layers[:-1]`
                    return trimmed
                if held is not None and type(value) is cst.BinaryOperation and type(value.operator) is cst.Add \
                        and _is(value.left, name) \
                        and not _mentions_name(value.right, name):  # `layers = layers + [...]`
                    added = self._added(function, value.right, depth)
                    return held.then(added) if added is not None else None
                return None
            if type(value) is cst.Call:
                found = self.helper_order(value, depth)
            elif type(value) is cst.BinaryOperation:
                found = self._concatenated(function, value, depth)
            else:
                found = self._literal(function, value, depth)
            # (another value, ``self.proj = nn.Linear(...)`` in another arm: no list known there)
            return found if found is not None else _OTHER
        if held is None:
            return None
        if type(small) is cst.AugAssign:
            if not _is(small.target, name):
                return None
            if type(small.operator) is not cst.AddAssign or _mentions_name(small.value, name):
                return None
            added = self._added(function, small.value, depth)
            return held.then(added) if added is not None else None
        if type(small) is cst.Del and type(small.target) is cst.Subscript and _index(small.target, name) == -1:
            return held.drop_last()  # `del layers[-1]`
        if type(small) is cst.Expr and type(small.value) is cst.Call:
            call = small.value
            func = call.func
            if not (type(func) is cst.Attribute and _is(func.value, name)):
                return None
            if func.attr.value == "pop" and len(call.args) <= 1 and all(a.keyword is None and not a.star for a in call.args):
                where = literal_number(call.args[0].value) if call.args else -1  # `layers.pop(-1)`, `.pop(0)`
                return held.drop_last() if where == -1 else held.drop_first() if where == 0 else None
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                return None
            value = call.args[0].value
            if _mentions_name(value, name):
                return None
            if func.attr.value == "append":
                return held.then(Order.of(self._local_layer(function, value)))
            if func.attr.value == "extend":
                added = self._added(function, value, depth)
                return held.then(added) if added is not None else None
        return None


_CONCATENATED_DEPTH = 4  # lists made of lists made of lists ... followed this deep
_LOOP_ROUNDS = 64  # a loop's fixpoint is reached in a few rounds; this only bounds a bug


class _Walk:
    """Follows ``name`` through a function body, branch and loop by branch and loop. ``None``
    is "not assigned yet"; what cannot be followed raises ``_Unknown``."""

    def __init__(self, lists: LayerLists, function: cst.FunctionDef, name: str, target: cst.CSTNode, depth: int) -> None:
        self.lists = lists
        self.function = function
        self.name = name
        self.target = target
        self.depth = depth
        self.at_target: Optional[Order] = None
        self.loops = 0  # loops around the statement being walked

    def _reached(self, held: Optional[Order]) -> None:
        if held is None:
            raise _Unknown()
        self.at_target = held if self.at_target is None else self.at_target.union(held)
        if not self.loops:
            raise _Reached()  # (run once: what follows it, or the other arms, cannot change it)

    def block(self, statements: List[cst.CSTNode], held: Optional[Order]) -> Optional[Order]:
        for statement in statements:
            held = self.statement(statement, held)
            if held is _ENDED:
                break
        return held

    def statement(self, statement: cst.CSTNode, held: Optional[Order]) -> Optional[Order]:
        contains = statement is self.target or holds(statement, self.target)
        if statement is self.target or (contains and type(statement) in _SIMPLE):
            self._reached(held)
            return held
        if type(statement) in _SIMPLE and not contains and any(type(small) in (cst.Raise, cst.Return) for small in statement.body):
            if not _mentions_name(statement, self.name):
                return _ENDED  # (``else: raise ValueError(mode)``: no order goes on along this path)
        if not contains and not _mentions_name(statement, self.name):
            return held
        if type(statement) in _SIMPLE:  # (a line, or the body of ``if act: layers += [nn.ELU()]``)
            for small in statement.body:
                if not _mentions_name(small, self.name):
                    continue
                if type(small) is cst.Return:
                    raise _Unknown()  # returned in the middle: a different list at the splice
                held = self.lists._step(self.function, small, self.name, held, self.depth)
                if held is None:
                    raise _Unknown()
                if held is _OTHER:
                    held = None  # (as if not assigned yet: any use but a new list is unknown)
            return held
        if type(statement) is cst.If:
            if _mentions_name(statement.test, self.name) and not _sized(statement.test, self.name):
                raise _Unknown()
            known = _truth(statement.test, self.lists._assume)
            orelse = statement.orelse
            if known is True:  # (``if outermost:`` with ``outermost`` assumed true)
                return self.block(list(block_statements(statement.body)), held)
            if known is False or (contains and orelse is not None and holds(orelse, self.target)):  # (the target runs in the other arm only)
                return self.statement(orelse, held) if type(orelse) is cst.If else (
                    self.block(list(block_statements(orelse.body)), held) if type(orelse) is cst.Else else held
                )
            after = self.block(list(block_statements(statement.body)), held)
            if type(orelse) is cst.If:
                other = self.statement(orelse, held)
            elif type(orelse) is cst.Else:
                other = self.block(list(block_statements(orelse.body)), held)
            else:
                other = held
            return self._union(after, other)
        if type(statement) in (cst.For, cst.While):
            header = statement.iter if type(statement) is cst.For else statement.test
            if (
                type(statement) is cst.For and not contains and _read_only(header, self.name)
                and not _mentions_name(statement.body, self.name) and statement.orelse is None
            ):
                return held  # ``for l in layers[::-1]: if hasattr(l, "out_channels"): ...``: read, not changed
            if _mentions_name(header, self.name) or statement.orelse is not None:
                raise _Unknown()
            if scan(statement.body, (cst.Break, cst.Continue), _NESTED + (cst.For, cst.While)) or any(
                loop.orelse is not None for loop in scan(statement.body, (cst.For, cst.While), _NESTED)
            ):
                raise _Unknown()  # (a ``break`` of a nested loop ends that loop only)
            body = list(block_statements(statement.body))
            self.loops += 1
            try:
                return self._loop(statement, body, held)
            finally:
                self.loops -= 1
        if type(statement) is cst.With:
            return self.block(list(block_statements(statement.body)), held)
        raise _Unknown()  # try, match, nested definitions that use the name

    def _loop(self, statement: cst.CSTNode, body: List[cst.CSTNode], held: Optional[Order]) -> Optional[Order]:
        """The orders after a loop: its body taken 0, 1, 2 ... times, until nothing new follows (at least
        once over a list written out). A target in the body sees what the rounds reaching it assign."""
        current, inside = held, holds(statement, self.target)
        name = counter(statement)
        if name is not None and not inside and name not in self.lists._assume and tested(body, name):
            return self._counted(statement, body, held, name)
        if type(statement) is cst.For and _never_empty(self.function, statement.iter):
            current = self.block(body, held)
        for _ in range(_LOOP_ROUNDS):
            after = self.block(body, current)
            merged = after if inside and current is None else self._union(current, after)
            if merged == current and inside and self.loops == 1 and self.at_target is not None:
                raise _Reached()
            if merged == current:
                return current
            current = merged
        raise _Unknown()

    def _counted(self, statement: cst.CSTNode, body: List[cst.CSTNode], held: Optional[Order], name: str) -> Optional[Order]:
        """``_loop`` for a loop whose body tests its counter ``name`` (``if i > 0:``): the first
        round with the counter 0, the later ones with it above 0."""
        assumed = self.lists._assume
        try:
            self.lists._assume = {**assumed, name: False}
            current = self.block(body, held)
            self.lists._assume = {**assumed, name: True}
            for _ in range(_LOOP_ROUNDS):
                merged = self._union(current, self.block(body, current))
                if merged == current:
                    break
                current = merged
            else:
                raise _Unknown()
        finally:
            self.lists._assume = assumed
        return current if _never_empty(self.function, statement.iter) else self._union(held, current)  # type: ignore[attr-defined]

    @staticmethod
    def _union(a: Optional[Order], b: Optional[Order]) -> Optional[Order]:
        if a is _ENDED or b is _ENDED:
            return b if a is _ENDED else a
        if a is None or b is None:
            if a is None and b is None:
                return None
            raise _Unknown()  # assigned on one path only
        return a.union(b)


_SAME_MODULE_WRAPPERS = frozenset({"spectral_norm", "weight_norm"})  # (they return the module they are given)


def _rewrapped(node: cst.CSTNode, name: str) -> bool:
    """``name = spectral_norm(name)`` (or ``weight_norm``, also ``nn.utils.``'s): the module
    ``name`` held, its weight reparametrised in place."""
    if type(node) is not cst.Assign or len(node.targets) != 1 or not _is(node.targets[0].target, name):
        return False
    value = node.value
    if type(value) is not cst.Call or not value.args or value.args[0].keyword is not None or value.args[0].star:
        return False
    func = value.func
    last = func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None
    return last in _SAME_MODULE_WRAPPERS and _is(value.args[0].value, name)


def _index(node: cst.BaseExpression, name: str):
    """``0`` for ``name[0]``, ``slice(1, None)`` for ``name[1:]``; None for anything else."""
    if not (type(node) is cst.Subscript and _is(node.value, name)):
        return None
    if len(node.slice) != 1:
        return None
    inner = node.slice[0].slice
    if type(inner) is cst.Index:
        number = literal_number(inner.value)
        return int(number) if number is not None and number == int(number) else None
    if type(inner) is cst.Slice and inner.upper is None and inner.step is None and inner.lower is not None:
        lower = literal_number(inner.lower)
        return slice(int(lower), None) if lower in (1, 2, 3, 4) else None
    if type(inner) is cst.Slice and inner.lower is None and inner.step is None and inner.upper is not None:
        upper = literal_number(inner.upper)
        return slice(None, int(upper)) if upper in (-1, -2, -3, -4) else None
    return None


list_index = _index  # (for ``Resolver.spliced_order``: ``*layers[:-1]``)


def _truth(test: cst.BaseExpression, assume: Dict[str, bool]) -> Optional[bool]:
    """The truth of ``test`` (``flag``, ``not flag``) under ``assume``; None: not known."""
    if type(test) is cst.Name:
        return assume.get(test.value)
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        inner = _truth(test.expression, assume)
        return None if inner is None else not inner
    return counter_truth(test, assume)  # ``i > 0`` of a loop's counter (``loop_counters.py``)


def _statement_of(function: cst.FunctionDef, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The simple statement line of ``function`` that contains ``node``."""
    for line in scan(function.body, (cst.SimpleStatementLine,), _NESTED):  # lines never nest
        if holds(line, node):
            return line
    return None


def splices(module: cst.Module):
    """Every call with a ``*arg`` in the file, with the function and statement it is in (from
    the file's shared index: the calls, then the lines and functions above the few spliced)."""
    found = []
    index = node_index(module)
    order, parent = index.order, index.parent
    for here in index.positions(cst.Call):
        node = order[here]
        if not any(arg.star == "*" for arg in node.args) and not (  # type: ignore[attr-defined]
            type(node.func) is cst.Attribute and node.func.attr.value == "add_module"  # type: ignore[attr-defined]
        ):  # (``self.add_module(f"{i}", layer)`` over a list in a Sequential: ``registered_layers``)
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
