"""Where a node of a file is, as the engine's traversal sees it there.

An analysis that answers a rule from ``visit_Module`` finds its nodes in the file's index
(``tree.NodeIndex``) instead of meeting them in the traversal. ``Sites`` gives it what the
traversal would have held at such a node: the statements around it (``FileContext.
statement_stack``) and the names it sees (``FileContext.bindings``: the module's, then one
scope per function or lambda around it, each binding its parameters and its body's names).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

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
        order = self.index.order
        scope = self.root
        for at in self.index.ancestors(here):
            if type(order[at]) in _SCOPES:
                inner = self._scopes.get(at)
                if inner is None:
                    inner = self._scopes[at] = _scope_of(order[at], scope)  # type: ignore[arg-type]
                scope = inner
        return scope

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


class _ScopedFile:
    """A file's analysis as code in a function sees it: names resolved with ``qualify`` (the
    function's imports and parameters too); every other part is the file's."""

    def __init__(self, file, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self._file = file
        self.qualify = qualify
        self.resolver = Resolver(qualify, file.layer_lists, file.factories, file.resolver.children)

    def __getattr__(self, name: str):
        return getattr(self._file, name)
