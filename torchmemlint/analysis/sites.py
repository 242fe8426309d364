"""Where a node of a file is, as the engine's traversal sees it there.

An analysis that answers a rule from ``visit_Module`` finds its nodes in the file's index
(``tree.NodeIndex``) instead of meeting them in the traversal. ``Sites`` gives it what the
traversal would have held at such a node: the statements around it (``FileContext.
statement_stack``) and the names it sees (``FileContext.bindings``: the module's, then one
scope per function or lambda around it, each binding its parameters and its body's names).
``Cursor`` gives the same while visiting the nodes of one type in the traversal's order.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import ClassModel, Resolver
from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.syntax import _scope_of
from torchmemlint.tree import NodeIndex

_SCOPES = (cst.FunctionDef, cst.Lambda)
_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class Sites:
    """The statements around and the names seen at any position of one file's index."""

    def __init__(self, index: NodeIndex, root: Bindings) -> None:
        self.index = index
        self.root = root
        self._scopes: Dict[int, Bindings] = {}
        self._models: Dict[int, ClassModel] = {}

    def statements(self, here: int) -> List[cst.CSTNode]:
        """The statements holding the node at ``here`` (itself too, if it is one), outermost
        first: the engine's ``statement_stack`` when it visits that node."""
        order = self.index.order
        return [order[at] for at in self.index.ancestors(here) if isinstance(order[at], _STATEMENTS)]

    def enclosing(self, here: int, node_type: type) -> Optional[cst.CSTNode]:
        """The innermost statement of ``node_type`` around ``here`` (``syntax.enclosing``)."""
        order, parent = self.index.order, self.index.parent
        while here >= 0:
            if isinstance(order[here], node_type):
                return order[here]
            here = parent[here]
        return None

    def bindings(self, here: int) -> Bindings:
        """The names the node at ``here`` sees."""
        return self.at(here)[1]

    def at(self, here: int) -> Tuple[List[cst.CSTNode], Bindings]:
        """``statements(here)`` and ``bindings(here)``, read in one walk up the tree."""
        order = self.index.order
        statements: List[cst.CSTNode] = []
        scope = self.root
        for at in self.index.ancestors(here):
            node = order[at]
            if isinstance(node, _STATEMENTS):
                statements.append(node)
            if type(node) in _SCOPES:  # (a function is a statement too)
                inner = self._scopes.get(at)
                if inner is None:
                    inner = self._scopes[at] = _scope_of(node, scope)  # type: ignore[arg-type]
                scope = inner
        return statements, scope

    def qualify(self, here: int) -> Callable[[cst.BaseExpression], Optional[str]]:
        """``FileContext.qualify`` as it answers at ``here``."""
        return self.bindings(here).qualify

    def class_model(self, analysis, classdef: cst.ClassDef, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> ClassModel:
        """``analysis.class_model(classdef)``; for a class defined in a function, one whose
        names (``import torch.nn as nn`` in the function) resolve with ``qualify``, the names
        seen where the traversal first asked about the class."""
        here = self.index.find(classdef)
        if here is None or self.enclosing(self.index.parent[here], cst.FunctionDef) is None:
            return analysis.class_model(classdef)
        model = self._models.get(here)
        if model is None:
            scoped = _ScopedFile(analysis, qualify)
            model = self._models[here] = ClassModel(classdef, scoped, analysis.class_indent(classdef))  # type: ignore[arg-type]
        return model


class Cursor:
    """The traversal's view of the node ``walk`` has reached: ``Sites`` for an analysis that
    visits the nodes of one type itself, in the engine's order (the statements around kept as
    a stack, the scopes those of ``Sites``)."""

    def __init__(self, index: NodeIndex, root: Bindings) -> None:
        self.sites = Sites(index, root)
        self.index = index
        self.statement_stack: List[cst.CSTNode] = []
        self._scopes: List[int] = []  # positions of the functions and lambdas around, outermost first

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.bindings().qualify(node)

    def bindings(self) -> Bindings:
        return self.sites.bindings(self._scopes[-1]) if self._scopes else self.sites.root

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
        open_nodes: List[Tuple[int, int]] = []  # (end of subtree, position), innermost last
        for here in sorted(targeted.union(wanted)):
            while open_nodes and open_nodes[-1][0] <= here:
                self._leave(open_nodes.pop()[1])
            node = order[here]
            if here in targeted:
                yield node
            if isinstance(node, _STATEMENTS) or type(node) in _SCOPES:
                self._enter(here)
                open_nodes.append((end[here], here))
        while open_nodes:
            self._leave(open_nodes.pop()[1])

    def _enter(self, here: int) -> None:
        node = self.index.order[here]
        if isinstance(node, _STATEMENTS):
            self.statement_stack.append(node)
        if type(node) in _SCOPES:
            self._scopes.append(here)

    def _leave(self, here: int) -> None:
        node = self.index.order[here]
        if type(node) in _SCOPES:
            self._scopes.pop()
        if isinstance(node, _STATEMENTS):
            self.statement_stack.pop()


class _ScopedFile:
    """A file's analysis as code in a function sees it: names resolved with ``qualify`` (the
    function's imports and parameters too); every other part is the file's."""

    def __init__(self, file, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self._file = file
        self.qualify = qualify
        self.resolver = Resolver(qualify, file.layer_lists, file.factories, file.resolver.children, file.resolver.helpers)

    def __getattr__(self, name: str):
        return getattr(self._file, name)
