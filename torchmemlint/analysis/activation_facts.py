"""What the TML2xx questions need of one function's value graph, indexed once
(``GraphFacts``): the values each expression made, who reads each value and in which order,
the loops around a statement, which statements exclude each other, what a loop carries to its
next round; and whether a reader keeps a tensor to read it later (``holds``)."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst


def holds(reader) -> bool:
    """A reader that keeps the tensor to read it later: a list or tuple, an ``append``, a store."""
    if type(reader) is str:
        return reader == "store"
    return reader.op in ("tuple", "list") or (reader.op == "call" and reader.info.get("method") in ("append", "extend", "insert"))


class GraphFacts:
    """What the TML2xx questions need of one value graph, indexed once: the values each
    expression made, who reads each value (in the order the graph met them), and the loops."""

    def __init__(self, graph, file: Any) -> None:  # a FileAnalysis
        self.graph = graph
        self.file = file
        self.made: Dict[int, List[Any]] = {}
        for value in graph.values:
            if value.node is not None:
                self.made.setdefault(id(value.node), []).append(value)
        self.reads: Dict[int, List[Tuple[int, Any]]] = {}
        for position, use in enumerate(graph.uses):
            self.reads.setdefault(id(use.value), []).append((position, use.consumer))
        self._loops: Dict[int, FrozenSet[int]] = {}
        self._loop_joins: Optional[Dict[int, List[Any]]] = None

    def loops(self, statement: Optional[cst.CSTNode]) -> FrozenSet[int]:
        """The loops of the function around ``statement`` (positions in the file's index)."""
        if statement is None:
            return frozenset()
        key = id(statement)
        if key not in self._loops:
            index = self.file.index
            here = index.find(statement)
            found = []
            order, parent = index.order, index.parent
            above = parent[here] if here is not None else -1
            while above >= 0 and type(order[above]) is not cst.FunctionDef:
                if type(order[above]) in (cst.For, cst.While):
                    found.append(above)
                above = parent[above]
            self._loops[key] = frozenset(found)
        return self._loops[key]

    def within(self, inner: Optional[cst.CSTNode], outer: Optional[cst.CSTNode]) -> bool:
        """Whether statement ``inner`` is inside compound statement ``outer``."""
        return self.file.index.within(inner, outer)

    def exclusive(self, one: Optional[cst.CSTNode], other: Optional[cst.CSTNode]) -> bool:
        """Whether ``one`` and ``other`` are in different arms of one ``if`` (``NodeIndex.exclusive``)."""
        return self.file.index.exclusive(one, other)

    def passed_by(self, source, consumer, join) -> bool:
        """Whether the join ``join`` of a branch reads ``source`` only on a way where ``consumer``
        did not run (``y = relu_(x) if c else x``; ``x = conv(x)``, ``if a: x = act(x)``), or
        holds it for nothing that reads it afterwards. A join of an ``if``/``elif``/``else``,
        ``a if c else b`` or ``try``/``except``/``else`` whose arm ran ``consumer`` and that is
        read later (``if c: up = f(x); out = seq(up)``, ``else:`` the same; ``return up``) carries
        the tensor on; a loop's join is passed by when ``consumer`` is in that loop."""
        arms = self._arms(join)
        if arms is None:  # a loop, or arms that cannot be told apart
            return self.within(consumer.statement, join.statement)
        mine = [i for i, regions in enumerate(arms) if any(self._inside(consumer, region) for region in regions)]
        if mine and type(join.statement) in (cst.Try, cst.TryStar) and mine[0] == 0:
            mine = list(range(len(arms)))  # a handler may run after the body ran the activation
        if mine and not any(join.inputs[i] is source for i in mine):
            return True  # in one arm; the tensor reaches the join only through another
        return not self.read_later(join)

    def _inside(self, consumer, region: Optional[cst.CSTNode]) -> bool:
        return region is not None and (
            consumer.node is region or self.within(consumer.node, region) or self.within(consumer.statement, region)
            or consumer.statement is region
        )

    def _arms(self, join) -> Optional[List[Tuple[Optional[cst.CSTNode], ...]]]:
        """The regions of each input of an ``if``/``try``/``a if c else b`` join, in order."""
        node, statement = join.node, join.statement
        if type(node) is cst.IfExp:
            return [(node.body,), (node.orelse,)][: len(join.inputs)]
        if type(statement) is cst.If:
            branches = join.info.get("branches") or ()
            if len(branches) != len(join.inputs):
                return None
            return [(statement.body,) if branch else (statement.orelse,) for branch in branches]
        if type(statement) in (cst.Try, cst.TryStar):
            regions = [(statement.body, statement.orelse)] + [(h.body,) for h in statement.handlers]
            return regions if len(regions) == len(join.inputs) else None
        return None

    def read_later(self, value, depth: int = 0) -> bool:
        """Whether something other than a ``.shape``-like read takes ``value`` (through joins)."""
        for _, reader in self.reads.get(id(value), ()):
            if type(reader) is str:
                if reader != "meta":
                    return True
            elif reader.op == "join" and self._arms(reader) is not None and depth < 8:
                if self.read_later(reader, depth + 1):
                    return True
            elif reader.op != "meta":
                return True
        return False

    def carried(self, source, consumer) -> List[Any]:
        """For ``consumer`` in a loop that rebinds the name holding ``source`` (made before the
        loop): the values the name holds at the end of a round, which the next round reads."""
        around = self.loops(consumer.statement) - self.loops(source.statement)
        if not around:
            return []
        self._index_loop_joins()
        order = self.file.index.order
        return [
            value for loop in around for join in self._loop_joins.get(id(order[loop]), ())  # type: ignore[union-attr]
            if source in join.inputs for value in join.inputs if value is not source
        ]

    def _index_loop_joins(self) -> None:
        if self._loop_joins is None:
            self._loop_joins = {}
            for value in self.graph.values:
                if value.op == "join" and type(value.statement) in (cst.For, cst.While):
                    self._loop_joins.setdefault(id(value.statement), []).append(value)

    def repeated(self, source, consumer) -> bool:
        """Whether ``consumer`` runs in a loop that ``source`` was made before, and the name
        holding ``source`` is not bound again in it: the next round reads ``source`` again."""
        around = self.loops(consumer.statement) - self.loops(source.statement)
        if not around:
            return False
        self._index_loop_joins()
        assert self._loop_joins is not None
        order = self.file.index.order
        for loop in around:
            if not any(source in join.inputs for join in self._loop_joins.get(id(order[loop]), ())):
                return True
        return False

    def _loop_entry(self, join) -> Any:
        """For the join after a loop (``for blk in blocks: x = blk(x)``) whose every round
        binds the name again (no arm of the last round still holds the value from before the
        loop) and that no ``break``/``continue`` leaves early: that value from before the loop,
        which arrives after it only when no round ran (None otherwise)."""
        loop = join.statement
        if type(loop) not in (cst.For, cst.While) or len(join.inputs) != 2:
            return None
        before = [arm for arm in join.inputs if not self.within(arm.statement, loop) and arm.statement is not loop]
        if len(before) != 1:
            return None
        entry = before[0]
        rounds = [arm for arm in join.inputs if arm is not entry]
        todo, seen = list(rounds), set()
        while todo:  # through the joins of the round (``if c: x = f(x)``): is ``entry`` an arm?
            value = todo.pop()
            if value is entry:
                return None
            if id(value) in seen or value.op != "join" or not self.within(value.statement, loop):
                continue
            seen.add(id(value))
            todo.extend(value.inputs)
        index = self.file.index
        start = index.find(loop)
        if start is None or any(
            type(index.order[i]) in (cst.Break, cst.Continue) for i in range(start + 1, index.end[start])
        ):
            return None
        return entry

    def arms_alone(self, source, depth: int = 0, above: FrozenSet[int] = frozenset()) -> bool:
        """For a join (``x = conv(x)``; ``if bn: x = bn(x)``): each arm is read by nothing but
        the join, or by what leads to another arm (``bn`` on the path where it is ``bn(x)``
        that arrives), or by a join around it that the activation reads (``ret = a + b``; ``if
        residual:`` ``if ...:`` ``ret = ret + x``: ``ret`` reaches it either way)."""
        if source.op == "helper" and source.info.get("helper") is not None and depth < 4:
            inner = source.inputs[0]  # what the helper returned: read by nothing else in it
            return all(reader is source for _, reader in self.reads.get(id(inner), ())) and self.arms_alone(inner, depth + 1, above)
        if source.op != "join":
            return True
        leading = set()
        todo = [(arm, 0) for arm in source.inputs]
        while todo:
            value, steps = todo.pop()
            if id(value) in leading or steps > 6:
                continue
            leading.add(id(value))
            todo.extend((v, steps + 1) for v in value.inputs)
        entry = self._loop_entry(source)
        for arm in source.inputs:
            for _, reader in self.reads.get(id(arm), ()):
                if reader is source or (type(reader) is not str and (id(reader) in leading or id(reader) in above or reader.op == "meta")):
                    continue  # (``ret.shape``: a size read keeps nothing)
                if arm is entry and type(reader) is not str and self.within(reader.statement, source.statement):
                    continue  # a round ran: the name holds what the round bound, not ``arm``
                return False
            if depth < 4 and not self.arms_alone(arm, depth + 1, above | {id(source)}):
                return False
        return True
