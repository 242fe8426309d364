"""A module's project facts read with Python's ``ast`` (``project.summarize``): the statements
and nodes of a tree without ``ast.walk``'s generators, what a class's ``__init__`` builds, and
who reads which attribute (``read_reach``) where a rule asks (``project.ensure_reach``)."""

from __future__ import annotations

import ast
from typing import Any, Dict, FrozenSet, List, Optional, Set, Tuple

# Calls and names that reach a module's children in order, or by a name held in a string:
# torchvision's IntermediateLayerGetter / create_feature_extractor, timm's features_only and
# feature wrappers, nn.Module.children() / named_children() / _modules.
ORDERED_WALKS: FrozenSet[str] = frozenset(
    {
        "IntermediateLayerGetter",
        "create_feature_extractor",
        "get_graph_node_names",
        "features_only",
        "FeatureListNet",
        "FeatureDictNet",
        "FeatureHooks",
        "FeatureGetterNet",
        "build_model_with_cfg",
        "children",
        "named_children",
        "_modules",
    }
)


def _dotted(node: ast.AST) -> Optional[str]:
    if type(node) is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if type(node) is ast.Attribute:
        head = _dotted(node.value)  # type: ignore[attr-defined]
        return None if head is None else f"{head}.{node.attr}"  # type: ignore[attr-defined]
    if type(node) is ast.Subscript:  # Generic[T]
        return _dotted(node.value)  # type: ignore[attr-defined]
    return None


# The index is read with ``ast`` (a tenth of a libcst parse); ``ast.walk`` (a generator of
# generators) took as long again on timm, and was run over each class twice: one walk of
# each top-level statement with the walker below reads the same nodes in a quarter of that.
_STATEMENT_LEVEL = (ast.stmt, ast.excepthandler, ast.match_case)


def _statements(tree: ast.Module) -> List[ast.AST]:
    """The statements of ``tree`` (the only nodes an import can be) in ``ast.walk``'s
    breadth-first order, without walking any expression."""
    found: List[ast.AST] = []
    level: List[ast.AST] = [tree]
    while level:
        below: List[ast.AST] = []
        for node in level:
            for name in node._fields:
                value = getattr(node, name, None)
                if type(value) is list:
                    below.extend(item for item in value if isinstance(item, _STATEMENT_LEVEL))
        found.extend(below)
        level = below
    return found


def _nodes(root: ast.AST) -> List[ast.AST]:
    """Every node under ``root`` (itself included): ``ast.walk``'s nodes, in another order."""
    found: List[ast.AST] = []
    stack = [root]
    pop, push, keep = stack.pop, stack.append, found.append
    node_ast = ast.AST
    while stack:
        node = pop()
        keep(node)
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, node_ast):
                        push(item)
            elif isinstance(value, node_ast):
                push(value)
    return found


def _builds(classdef: ast.ClassDef) -> Tuple[Tuple[str, str], ...]:
    """What ``__init__`` assigns from a call: ``self.maxpool = nn.MaxPool2d(...)``."""
    builds: Dict[str, str] = {}
    for statement in classdef.body:
        if type(statement) is ast.FunctionDef and statement.name == "__init__":
            for node in _nodes(statement):
                if type(node) is not ast.Assign or type(node.value) is not ast.Call:  # type: ignore[attr-defined]
                    continue
                callee = _dotted(node.value.func)  # type: ignore[attr-defined]
                for target in node.targets:  # type: ignore[attr-defined]
                    if (
                        callee and type(target) is ast.Attribute and type(target.value) is ast.Name
                        and target.value.id == "self"
                    ):
                        builds[target.attr] = callee
    return tuple(sorted(builds.items()))


def _read_reach(summary: Any, tree: ast.Module) -> None:
    imported = summary.imports  # the names the module's imports bind
    foreign: Set[str] = set()
    named: List[Tuple[str, str]] = []  # (attribute, the name it is read on): foreign unless imported
    strings: Set[str] = set()
    ordered = False
    # one walk of each top-level statement; a class's own `self.<name>` reads and stores too
    for statement in tree.body:
        is_class = type(statement) is ast.ClassDef
        assigned: Set[str] = set()
        read: Set[str] = set()
        for node in _nodes(statement):
            node_type = type(node)
            if node_type is ast.Attribute:
                attr = node.attr  # type: ignore[attr-defined]
                if attr in ORDERED_WALKS:
                    ordered = True
                head = node.value  # type: ignore[attr-defined]
                if type(head) is ast.Name:
                    if head.id == "self":  # type: ignore[attr-defined]
                        if is_class:
                            (assigned if type(node.ctx) is ast.Store else read).add(attr)  # type: ignore
                        continue
                    named.append((attr, head.id))  # type: ignore[attr-defined]
                    continue
                foreign.add(attr)
            elif node_type is ast.Name:
                if node.id in ORDERED_WALKS:  # type: ignore[attr-defined]
                    ordered = True
            elif node_type is ast.Constant:
                value = node.value  # type: ignore[attr-defined]
                if type(value) is str and value.isidentifier():
                    strings.add(value)
                    if value in ORDERED_WALKS:
                        ordered = True
            elif node_type is ast.keyword:
                if node.arg in ORDERED_WALKS:  # type: ignore[attr-defined]
                    ordered = True
        if is_class:
            klass = summary.classes[statement.name]  # type: ignore[attr-defined]
            klass.assigned, klass.read = frozenset(assigned), frozenset(read)
            klass.builds = _builds(statement)  # type: ignore[arg-type]
    foreign.update(attr for attr, name in named if name not in imported)
    summary.foreign_reads = frozenset(foreign)
    summary.strings = frozenset(strings)
    summary.ordered_walk = ordered
    summary.reach_known = True
