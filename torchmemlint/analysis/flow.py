"""The statement flow of one function: a statement-level control-flow graph with the names
each statement reads and writes. It answers "which assignments reach here", "is this value
read again later" and "was it read in between"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import walk
from torchmemlint.tree import children

# -- flow of one function --------------------------------------------------------------------------
ENTRY = -1  # pseudo statement index: the value came from outside (a parameter, a global)


@dataclass
class _Node:
    statement: cst.CSTNode
    reads: Dict[str, int] = field(default_factory=dict)  # name -> number of reads
    writes: Set[str] = field(default_factory=set)
    values: Dict[str, cst.BaseExpression] = field(default_factory=dict)  # name -> assigned value
    augmented: Dict[str, cst.BaseAugOp] = field(default_factory=dict)  # name -> `+=` operator
    stores: List[Tuple[str, str]] = field(default_factory=list)  # (container, element) pairs
    succ: List[int] = field(default_factory=list)
    pred: List[int] = field(default_factory=list)


@dataclass(frozen=True)
class Definition:
    """One assignment that may reach a use: its statement index and assigned value."""

    index: int  # ENTRY for a parameter or a name bound outside the function
    value: Optional[cst.BaseExpression] = None  # None: not a plain `name = value`
    augmented: Optional[cst.BaseAugOp] = None


_FLOW_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_APPENDERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


class Flow:
    """Statement-level control flow of one function (structured: if/for/while/try/with)."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self.nodes: List[_Node] = []
        self.index: Dict[int, int] = {}  # id(statement) -> node index
        self.captured: Set[str] = set()  # names read inside nested functions / lambdas
        self.reliable = True  # False: global/nonlocal/match, the analysis stays silent
        self.parameters = _parameter_names(function.params)
        body = function.body
        statements = body.body if type(body) is cst.IndentedBlock else [body]
        self.entry = self._block(statements, follow=None, loop=None)
        for number, node in enumerate(self.nodes):
            for successor in node.succ:
                self.nodes[successor].pred.append(number)

    # -- construction -------------------------------------------------------------------------
    def _new(self, statement: cst.CSTNode) -> int:
        self.nodes.append(_Node(statement))
        self.index[id(statement)] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def _block(
        self, statements: Iterable[cst.CSTNode], follow: Optional[int], loop: Optional[Tuple[int, Optional[int]]]
    ) -> Optional[int]:
        """Build a block backwards; return its entry (``follow`` when empty)."""
        entry = follow
        for statement in reversed(list(statements)):
            entry = self._statement(statement, entry, loop)
        return entry

    def _suite(self, suite: cst.BaseSuite, follow, loop) -> Optional[int]:
        statements = suite.body if type(suite) is cst.IndentedBlock else [suite]
        return self._block(statements, follow, loop)

    def _statement(self, statement: cst.CSTNode, follow: Optional[int], loop) -> Optional[int]:
        succ = [] if follow is None else [follow]
        if type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            number = self._new(statement)
            node = self.nodes[number]
            for small in statement.body:
                succ = self._small(small, node, succ, loop)
            node.succ = succ
            return number
        if type(statement) is cst.If:
            number = self._new(statement)
            self._read(statement.test, self.nodes[number])
            body = self._suite(statement.body, follow, loop)
            orelse = statement.orelse
            if type(orelse) is cst.If:
                other = self._statement(orelse, follow, loop)
            elif type(orelse) is cst.Else:
                other = self._suite(orelse.body, follow, loop)
            else:
                other = follow
            self.nodes[number].succ = [i for i in (body, other) if i is not None]
            return number
        if type(statement) in (cst.For, cst.While):
            number = self._new(statement)
            node = self.nodes[number]
            if type(statement) is cst.For:
                self._read(statement.iter, node)
                self._target(statement.target, node, None)
            else:
                self._read(statement.test, node)
            after = self._suite(statement.orelse.body, follow, loop) if statement.orelse else follow
            body = self._suite(statement.body, number, (number, follow))
            node.succ = [i for i in (body, after) if i is not None]
            return number
        if type(statement) is cst.With:
            number = self._new(statement)
            node = self.nodes[number]
            for item in statement.items:
                self._read(item.item, node)
                if item.asname is not None:
                    self._target(item.asname.name, node, None)
            body = self._suite(statement.body, follow, loop)
            node.succ = [] if body is None else [body]
            return number
        if type(statement) in (cst.Try, cst.TryStar):
            number = self._new(statement)
            final = self._suite(statement.finalbody.body, follow, loop) if statement.finalbody else follow
            orelse = self._suite(statement.orelse.body, final, loop) if statement.orelse else final
            handlers = []
            for handler in statement.handlers:
                head = self._new(handler)
                if handler.type is not None:
                    self._read(handler.type, self.nodes[head])
                if handler.name is not None:
                    self._target(handler.name.name, self.nodes[head], None)
                inner = self._suite(handler.body, final, loop)
                self.nodes[head].succ = [] if inner is None else [inner]
                handlers.append(head)
            first = len(self.nodes)
            body = self._suite(statement.body, orelse, loop)
            for number_in_body in range(first, len(self.nodes)):
                self.nodes[number_in_body].succ.extend(handlers)  # any statement may raise
            self.nodes[number].succ = [i for i in [body, *handlers] if i is not None]
            return number
        if type(statement) in (cst.FunctionDef, cst.ClassDef):
            number = self._new(statement)
            node = self.nodes[number]
            node.writes.add(statement.name.value)
            inner_reads: Dict[str, int] = {}
            _collect_reads(statement, inner_reads, set(), self.captured)
            self.captured.update(inner_reads)
            node.reads.update(inner_reads)
            node.succ = succ
            return number
        # match statements and anything newer: give up on this function.
        self.reliable = False
        number = self._new(statement)
        self.nodes[number].succ = succ
        return number

    def _small(self, small: cst.BaseSmallStatement, node: _Node, succ: List[int], loop) -> List[int]:
        if type(small) is cst.Assign:
            self._read(small.value, node)
            value = small.value
            for target in small.targets:
                self._target(target.target, node, value if len(small.targets) == 1 else None)
        elif type(small) is cst.AnnAssign:
            if small.value is not None:
                self._read(small.value, node)
                self._target(small.target, node, small.value)
        elif type(small) is cst.AugAssign:
            self._read(small.value, node)
            if type(small.target) is cst.Name:
                name = small.target.value
                node.reads[name] = node.reads.get(name, 0) + 1
                node.writes.add(name)
                node.augmented[name] = small.operator
                node.values.pop(name, None)
                if type(small.value) in (cst.List, cst.Tuple):
                    for element in small.value.elements:
                        if type(element.value) is cst.Name:
                            node.stores.append((name, element.value.value))
            else:
                self._read(small.target, node)
        elif type(small) is cst.Expr:
            self._read(small.value, node)
            self._note_store_call(small.value, node)
        elif type(small) is cst.Return:
            if small.value is not None:
                self._read(small.value, node)
            return []
        elif type(small) is cst.Raise:
            for part in (small.exc, small.cause):
                if part is not None:
                    self._read(part.item if type(part) is cst.From else part, node)
            return []
        elif type(small) is cst.Del:
            self._delete(small.target, node)
        elif type(small) is cst.Break:
            return [] if loop is None or loop[1] is None else [loop[1]]
        elif type(small) is cst.Continue:
            return [] if loop is None else [loop[0]]
        elif type(small) in (cst.Global, cst.Nonlocal):
            self.reliable = False
        elif type(small) in (cst.Import, cst.ImportFrom):
            names = small.names
            if type(names) is not cst.ImportStar:
                for alias in names:
                    bound = alias.asname.name if alias.asname else alias.name
                    name = dotted_name(bound)  # type: ignore[arg-type]
                    if name is not None:
                        node.writes.add(name.split(".", 1)[0])
        else:  # assert, pass, ...
            for child in children(small):
                self._read(child, node)
        return succ

    def _read(self, expression: cst.CSTNode, node: _Node) -> None:
        _collect_reads(expression, node.reads, set(), self.captured)
        for inner in _named_expressions(expression):
            self._target(inner.target, node, inner.value)

    def _target(self, target: cst.BaseExpression, node: _Node, value: Optional[cst.BaseExpression]) -> None:
        if type(target) is cst.Name:
            node.writes.add(target.value)
            node.augmented.pop(target.value, None)
            if value is not None:
                node.values[target.value] = value
                if type(value) in (cst.List, cst.Tuple, cst.Set):
                    for element in value.elements:
                        if type(element.value) is cst.Name:
                            node.stores.append((target.value, element.value.value))
            else:
                node.values.pop(target.value, None)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._target(element.value, node, None)
        elif type(target) is cst.StarredElement:
            self._target(target.value, node, None)
        else:  # `obj.attr = v` / `obj[i] = v` read obj (and store v into it)
            self._read(target, node)
            if type(target) is cst.Subscript and type(target.value) is cst.Name:
                if type(value) is cst.Name:
                    node.stores.append((target.value.value, value.value))

    def _delete(self, target: cst.BaseExpression, node: _Node) -> None:
        if type(target) is cst.Name:
            node.writes.add(target.value)
        elif type(target) in (cst.Tuple, cst.List):
            for element in target.elements:
                self._delete(element.value, node)
        else:
            self._read(target, node)

    @staticmethod
    def _note_store_call(expression: cst.BaseExpression, node: _Node) -> None:
        """``feats.append(x)``: ``feats`` now holds ``x``."""
        if (
            type(expression) is cst.Call
            and type(expression.func) is cst.Attribute
            and type(expression.func.value) is cst.Name
            and expression.func.attr.value in _APPENDERS
        ):
            for arg in expression.args:
                if type(arg.value) is cst.Name:
                    node.stores.append((expression.func.value.value, arg.value.value))

    # -- queries ---------------------------------------------------------------------------------
    def statement_index(self, statement: Optional[cst.CSTNode]) -> Optional[int]:
        return None if statement is None else self.index.get(id(statement))

    def definitions(self, name: str, index: int) -> List[Definition]:
        """The assignments of ``name`` that may reach statement ``index`` (before it runs)."""
        found: Dict[int, Definition] = {}
        seen: Set[int] = set()
        stack = list(self.nodes[index].pred)
        if index == self.entry:
            found[ENTRY] = Definition(ENTRY)
        while stack:
            number = stack.pop()
            if number in seen:
                continue
            seen.add(number)
            node = self.nodes[number]
            if name in node.writes:
                found[number] = Definition(number, node.values.get(name), node.augmented.get(name))
                continue
            if number == self.entry:
                found[ENTRY] = Definition(ENTRY)
            stack.extend(node.pred)
        return [found[key] for key in sorted(found)]

    def read_again(self, names: FrozenSet[str], index: int) -> bool:
        """Whether a value held in ``names`` after statement ``index`` may be read later (the
        names ``index`` itself writes dropped first): ``read_after`` of the rest."""
        names = names - self.nodes[index].writes
        return bool(names) and self.read_after(names, index)

    def read_after(self, names: FrozenSet[str], index: int) -> bool:
        """Whether a statement after ``index`` may read one of ``names`` before writing it. A
        write of a name ends that name's interest on that path; coming back to ``index`` through
        a loop counts as a read (the next iteration sees the value)."""
        seen: Set[Tuple[int, FrozenSet[str]]] = set()
        stack = [(successor, names) for successor in self.nodes[index].succ]
        while stack:
            number, live = stack.pop()
            if (number, live) in seen:
                continue
            seen.add((number, live))
            node = self.nodes[number]
            if any(name in node.reads for name in live):
                return True
            live = live - node.writes
            if live:
                stack.extend((successor, live) for successor in node.succ)
        return False

    def read_between(self, name: str, start: int, end: int) -> bool:
        """Whether ``name`` is read on a path from after ``start`` up to (not including) ``end``."""
        seen: Set[int] = set()
        stack = list(self.nodes[start].succ)
        while stack:
            number = stack.pop()
            if number in seen or number == end:
                continue
            seen.add(number)
            node = self.nodes[number]
            if name in node.reads:
                return True
            if name not in node.writes:
                stack.extend(node.succ)
        return False

    def holders(self, name: str, index: int) -> FrozenSet[str]:
        """``name`` and the names that hold the same tensor at ``index``.

        ``identity = x`` or ``feats.append(x)`` made earlier, while ``x`` had the value it has
        at ``index``, keeps that tensor reachable through ``identity`` / ``feats``.
        """
        reaching = self.definitions(name, index)
        held = {name}
        if len(reaching) == 1 and type(reaching[0].value) is cst.Name:
            source, copied_at = reaching[0].value.value, reaching[0].index
            if self.definitions(source, copied_at) == self.definitions(source, index):
                held.add(source)  # `x = identity`: identity still holds the tensor
        for number, node in enumerate(self.nodes):
            pairs = list(node.stores)
            pairs += [(alias, v.value) for alias, v in node.values.items() if type(v) is cst.Name]
            for holder, element in pairs:
                if element == name and holder != name and self.definitions(name, number) == reaching:
                    held.add(holder)
        return frozenset(held)


def _parameter_names(params: cst.Parameters) -> List[str]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if type(extra) is cst.Param:
            every.append(extra)
    return [param.name.value for param in every]


def _collect_reads(
    root: cst.CSTNode, reads: Dict[str, int], local: Set[str], captured: Set[str]
) -> None:
    """Count the names an expression (or nested definition) reads; skips attribute names."""
    stack: List[Tuple[cst.CSTNode, Set[str], bool]] = [(root, local, False)]
    while stack:
        node, bound, nested = stack.pop()
        node_type = type(node)
        if node_type is cst.Name:
            name = node.value  # type: ignore[attr-defined]
            if name not in bound:
                reads[name] = reads.get(name, 0) + 1
                if nested:
                    captured.add(name)
            continue
        if node_type is cst.Attribute:
            stack.append((node.value, bound, nested))  # type: ignore[attr-defined]
            continue
        if node_type is cst.Arg:
            stack.append((node.value, bound, nested))  # type: ignore[attr-defined]
            continue
        if node_type is cst.Lambda:
            inner = bound | set(_parameter_names(node.params))  # type: ignore[attr-defined]
            stack.append((node.body, inner, True))  # type: ignore[attr-defined]
            continue
        if node_type is cst.FunctionDef or node_type is cst.ClassDef:
            if node_type is cst.FunctionDef:
                inner = bound | set(_parameter_names(node.params))  # type: ignore[attr-defined]
                for param in _all_params(node.params):  # type: ignore[attr-defined]
                    if param.default is not None:
                        stack.append((param.default, bound, nested))
            else:
                inner = bound
                stack.extend((base, bound, nested) for base in node.bases)  # type: ignore[attr-defined]
            stack.extend((d.decorator, bound, nested) for d in node.decorators)  # type: ignore[attr-defined]
            stack.append((node.body, inner, True))  # type: ignore[attr-defined]
            continue
        if node_type in _FLOW_COMPREHENSIONS:
            inner = bound | _comprehension_targets(node)  # type: ignore[arg-type]
            stack.extend((child, inner, nested) for child in children(node))
            continue
        if node_type is cst.Param or node_type is cst.Parameters:
            continue
        stack.extend((child, bound, nested) for child in children(node))


def _all_params(params: cst.Parameters) -> List[cst.Param]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if type(extra) is cst.Param:
            every.append(extra)
    return every


def _comprehension_targets(node: cst.BaseComp) -> Set[str]:
    names: Set[str] = set()
    clause: Optional[cst.CompFor] = node.for_in
    while clause is not None:
        for inner in walk(clause.target):
            if type(inner) is cst.Name:
                names.add(inner.value)
        clause = clause.inner_for_in
    return names


def _named_expressions(expression: cst.CSTNode) -> List[cst.NamedExpr]:
    if not isinstance(expression, cst.BaseExpression):
        return []
    return [inner for inner in walk(expression) if type(inner) is cst.NamedExpr]


