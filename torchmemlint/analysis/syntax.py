"""Small questions about libcst nodes: fast walks, call arguments, literals, the statements
around the node being visited."""

from __future__ import annotations

from typing import FrozenSet, Iterator, List, Optional, Tuple

import libcst as cst

from typing import Iterable


from torchmemlint.analysis.names import canonical
from torchmemlint.tree import children

# -- fast traversal ---------------------------------------------------------------------------
def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk over ``children``."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def path_to(root: cst.CSTNode, target: cst.CSTNode) -> Optional[List[cst.CSTNode]]:
    """The nodes from ``root`` down to ``target`` (both included), or None if not inside."""
    stack: List[Tuple[cst.CSTNode, int]] = [(root, 0)]
    path: List[cst.CSTNode] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(children(node)))
    return None


def reads_beside(statement: cst.CSTNode, skipped: cst.CSTNode, name: str) -> int:
    """Reads of ``name`` in ``statement`` outside ``skipped`` that can run together with it.

    The other branch of a conditional expression around ``skipped`` never runs with it.
    """
    path = path_to(statement, skipped)
    on_path = {id(node) for node in path or ()}
    count = 0
    stack: List[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        if node is skipped:
            continue
        if isinstance(node, cst.Name):
            count += node.value == name
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        elif isinstance(node, cst.IfExp) and id(node) in on_path:
            stack.append(node.test)
            stack.extend(branch for branch in (node.body, node.orelse) if id(branch) in on_path)
        else:
            stack.extend(children(node))
    return count


def mentions(expression: cst.CSTNode, word: str) -> bool:
    """Whether a name or attribute in ``expression`` contains ``word`` (``self.inplace``)."""
    for node in walk(expression):
        if isinstance(node, cst.Name) and word in node.value:
            return True
    return False


# -- call arguments ----------------------------------------------------------------------------
def argument(call: cst.Call, position: Optional[int], keyword: str) -> Optional[cst.Arg]:
    """The argument bound to a parameter given by its position (None: keyword only) and name."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg
            continue
        if arg.star:
            return None
        if position is not None and index == position:
            return arg
        index += 1
    return None


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


def literal_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_number(node: cst.BaseExpression) -> Optional[float]:
    sign = 1.0
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = -1.0, node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        return sign * float(node.evaluated_value)
    return None


def is_literal(node: cst.BaseExpression) -> bool:
    """A constant that can move from ``__init__`` to ``forward`` unchanged."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return literal_number(node) is not None
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(
            isinstance(e, cst.Element) and is_literal(e.value) for e in node.elements
        )
    return False



def terminal_name(func: cst.BaseExpression) -> Optional[str]:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def watched_names(context, qualified_names: FrozenSet[str]) -> FrozenSet[str]:
    """Last components of ``qualified_names`` plus the file's import aliases for them.

    A cheap first test for ``visit_Call``: a call whose function does not end in one of these
    names cannot be one of ``qualified_names``.
    """
    names = {q.rsplit(".", 1)[-1] for q in qualified_names}
    root = context.bindings
    while root.parent is not None:
        root = root.parent
    for local, qualified in root.names.items():
        if qualified is not None and canonical(qualified) in qualified_names:
            names.add(local)
    return frozenset(names)


def enclosing(context, node_type: type) -> Optional[cst.CSTNode]:
    """The innermost statement of ``node_type`` around the node being visited."""
    for statement in reversed(context.statement_stack):
        if isinstance(statement, node_type):
            return statement
    return None


def class_indent(context, node: cst.ClassDef) -> str:
    """Indentation of a class statement, from the blocks of the statements around it."""
    indent = ""
    for statement in context.statement_stack:
        if statement is node:
            break
        body = getattr(statement, "body", None)
        if isinstance(body, cst.IndentedBlock):
            indent += block_indent(body, context.module)
    return indent


def block_statements(suite: cst.BaseSuite) -> Iterable[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else [suite]


def block_indent(suite: cst.BaseSuite, module: cst.Module) -> str:
    if isinstance(suite, cst.IndentedBlock):
        return suite.indent if suite.indent is not None else module.default_indent
    return ""


def is_static(method: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
        for d in method.decorators
    )
