"""A recursive walk of a libcst tree that keeps, at every node, the statements around it and the
names it sees, written independently of ``analysis/sites.py`` (which the engine's walk now asks):
the reference that tests of ``Sites``, ``Cursor`` and the engine compare against. A statement
is a ``SimpleStatementLine`` or a compound statement, pushed before its node is recorded; a
``def`` or a ``lambda`` opens a scope that binds its parameters and, for a ``def`` with an
indented body, what its statements bind; a class body opens none."""

from __future__ import annotations

from typing import Callable, List

import libcst as cst

from torchmemlint.analysis.names import Bindings

_STATEMENTS = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class ReferenceWalk(cst.CSTVisitor):
    """Calls ``record(node, statements, bindings)`` at every node, in pre-order."""

    def __init__(self, root: Bindings, record: Callable[[cst.CSTNode, List[cst.CSTNode], Bindings], None]) -> None:
        super().__init__()
        self.statements: List[cst.CSTNode] = []
        self.scopes: List[Bindings] = [root]
        self.record = record

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _STATEMENTS):
            self.statements.append(node)
        if isinstance(node, (cst.FunctionDef, cst.Lambda)):
            scope = Bindings(self.scopes[-1])
            scope.bind_parameters(node.params)
            body = getattr(node, "body", None)
            if isinstance(body, cst.IndentedBlock):
                scope.bind_statements(body.body)
            self.scopes.append(scope)
        self.record(node, list(self.statements), self.scopes[-1])
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        if isinstance(original_node, (cst.FunctionDef, cst.Lambda)):
            self.scopes.pop()
        if isinstance(original_node, _STATEMENTS):
            self.statements.pop()
