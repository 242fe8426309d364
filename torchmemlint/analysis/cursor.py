"""Where a node of the file is, as the engine's traversal would say it: the statements around
it (``statement_stack``) and the names it sees (``qualify``), for an analysis that a rule asks
from ``visit_Module`` and that visits the nodes itself, in the traversal's order (``walk``).
The scopes are the engine's (a ``def`` or a ``lambda`` binds its parameters, a ``def`` with an
indented body also what its statements bind), built only when a name is qualified."""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.syntax import _scope_of
from torchmemlint.tree import NodeIndex

_SCOPES = (cst.FunctionDef, cst.Lambda)
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class Cursor:
    """The traversal's view of the node ``walk`` has reached."""

    def __init__(self, index: NodeIndex, root: Bindings) -> None:
        self.index = index
        self.root = root
        self.statement_stack: List[cst.CSTNode] = []
        self._scopes: List[cst.CSTNode] = []  # functions and lambdas around, outermost first
        self._bindings: Dict[int, Bindings] = {}

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.bindings().qualify(node)

    def bindings(self) -> Bindings:
        scope = self.root
        for node in self._scopes:
            inner = self._bindings.get(id(node))
            if inner is None:
                inner = self._bindings[id(node)] = _scope_of(node, scope)  # type: ignore[arg-type]
            scope = inner
        return scope

    def walk(self, node_type: type, keep: Callable[[Any], bool] = bool) -> Iterator[cst.CSTNode]:
        """Every node of ``node_type`` in the file that ``keep`` accepts (asked first, without
        the cursor), in pre-order, with the cursor at it."""
        index = self.index
        order, end = index.order, index.end
        targets = [here for here in index.positions(node_type) if keep(order[here])]
        if not targets:
            return
        wanted = [
            here for kind in index.types()
            if issubclass(kind, _STATEMENTS) or kind in _SCOPES
            for here in index.positions(kind)
        ]
        wanted.sort()
        wanted = wanted[: bisect_left(wanted, targets[-1])]  # nothing after the last target matters
        targeted = set(targets)
        open_nodes: List[Tuple[int, cst.CSTNode]] = []  # (end of subtree, node), innermost last
        for here in sorted(targeted.union(wanted)):
            while open_nodes and open_nodes[-1][0] <= here:
                self._leave(open_nodes.pop()[1])
            node = order[here]
            if here in targeted:
                yield node
            if isinstance(node, _STATEMENTS) or type(node) in _SCOPES:
                self._enter(node)
                open_nodes.append((end[here], node))
        while open_nodes:
            self._leave(open_nodes.pop()[1])

    def _enter(self, node: cst.CSTNode) -> None:
        if isinstance(node, _STATEMENTS):
            self.statement_stack.append(node)
        if type(node) in _SCOPES:
            self._scopes.append(node)

    def _leave(self, node: cst.CSTNode) -> None:
        if type(node) in _SCOPES:
            self._scopes.pop()
        if isinstance(node, _STATEMENTS):
            self.statement_stack.pop()
