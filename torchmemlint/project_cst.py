"""A module's summary for the project index read off the libcst tree a lint already parsed.

``project.summarize(path, text, reach=False)`` reads what names resolve through (imports,
top-level classes and their bases, top-level functions) from Python's ``ast``. A run with the
result cache needs that summary of every module a linted file imports, for the cache keys
(``ProjectIndex.key_for``); compiling each file with ``ast`` for it cost a cold run of timm
about 1 s of CPU beside libcst's parse. A worker that has just linted a file holds its libcst
tree: ``summarize_tree`` reads the same summary from it, statement by statement, in the order
``ast.walk`` meets them (a later import of a name wins, as there), so the keys are computed
after the lint without a second parse (``engine.lint_paths``).

A tree using syntax the running Python cannot parse (type parameters, ``type`` aliases before
3.12) gets no summary here: ``ast`` would call that module unreadable, and the index must
see what it sees without the result cache.
"""

from __future__ import annotations

import sys
from typing import Dict, List, Optional, Set

import libcst as cst

from torchmemlint.project import ClassSummary, ModuleSummary, _digest, _library_alias, _resolve_relative, module_name

# Syntax newer than 3.12 this reader knows: below it, such a tree gets no summary.
_NEW_SYNTAX = sys.version_info < (3, 12)
_TYPE_ALIAS = getattr(cst, "TypeAlias", None)  # (libcst 1.1 and later)


class _Unsupported(Exception):
    """The tree holds syntax ``ast`` of this interpreter would refuse."""


def _dotted(node: cst.CSTNode) -> Optional[str]:
    """``project._dotted`` on libcst nodes: ``a.b.c`` of names and attributes, through a subscript."""
    node_type = type(node)
    if node_type is cst.Name:
        return node.value  # type: ignore[attr-defined]
    if node_type is cst.Attribute:
        head = _dotted(node.value)  # type: ignore[attr-defined]
        return None if head is None else f"{head}.{node.attr.value}"  # type: ignore[attr-defined]
    if node_type is cst.Subscript:
        return _dotted(node.value)  # type: ignore[attr-defined]
    return None


def _suite(body: cst.CSTNode) -> List[cst.CSTNode]:
    """The statements of an indented block or a one-line suite, as ``ast`` lists them (each
    small statement of a line on its own)."""
    found: List[cst.CSTNode] = []
    for item in body.body:  # type: ignore[attr-defined]
        if type(item) is cst.SimpleStatementLine:
            found.extend(item.body)
        else:
            found.append(item)
    return found


def _below(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The statement-level nodes ``ast`` lists directly under ``node``, in its fields' order
    (an ``else`` block's statements, an ``elif``'s ``If``, a handler, a match case)."""
    node_type = type(node)
    if node_type in (cst.FunctionDef, cst.ClassDef):
        if _NEW_SYNTAX and getattr(node, "type_parameters", None) is not None:
            raise _Unsupported
        return _suite(node.body)  # type: ignore[attr-defined]
    if node_type is cst.If:
        found = _suite(node.body)  # type: ignore[attr-defined]
        orelse = node.orelse  # type: ignore[attr-defined]
        if type(orelse) is cst.If:
            found.append(orelse)
        elif orelse is not None:
            found.extend(_suite(orelse.body))
        return found
    if node_type in (cst.For, cst.While):
        found = _suite(node.body)  # type: ignore[attr-defined]
        if node.orelse is not None:  # type: ignore[attr-defined]
            found.extend(_suite(node.orelse.body))  # type: ignore[attr-defined]
        return found
    if node_type is cst.With or node_type in (cst.ExceptHandler, cst.ExceptStarHandler, cst.MatchCase):
        return _suite(node.body)  # type: ignore[attr-defined]
    if node_type in (cst.Try, cst.TryStar):
        found = _suite(node.body)  # type: ignore[attr-defined]
        found.extend(node.handlers)  # type: ignore[attr-defined]
        if node.orelse is not None:  # type: ignore[attr-defined]
            found.extend(_suite(node.orelse.body))  # type: ignore[attr-defined]
        if node.finalbody is not None:  # type: ignore[attr-defined]
            found.extend(_suite(node.finalbody.body))  # type: ignore[attr-defined]
        return found
    if node_type is cst.Match:
        return list(node.cases)  # type: ignore[attr-defined]
    if _NEW_SYNTAX and node_type is _TYPE_ALIAS:
        raise _Unsupported
    return []


def summarize_tree(path: str, text: str, module: cst.Module) -> Optional[ModuleSummary]:
    """``project.summarize(path, text, reach=False)`` read from ``module``, the libcst tree of
    ``text``; None when the tree holds syntax this interpreter's ``ast`` refuses."""
    name, package = module_name(path)
    summary = ModuleSummary(path, name, package)
    summary.digest = _digest(text)
    try:
        statements: List[cst.CSTNode] = []
        level = _suite(module)
        while level:  # breadth first, as project._statements
            statements.extend(level)
            below: List[cst.CSTNode] = []
            for node in level:
                below.extend(_below(node))
            level = below
    except _Unsupported:
        return None
    for statement in statements:
        statement_type = type(statement)
        if statement_type is cst.Import:
            for alias in statement.names:  # type: ignore[attr-defined]
                full = _dotted(alias.name)
                if full is None:
                    return None
                local = alias.asname.name.value if alias.asname is not None else full.split(".")[0]
                summary.imports[local] = full if alias.asname is not None else full.split(".")[0]
        elif statement_type is cst.ImportFrom:
            relative = len(statement.relative)  # type: ignore[attr-defined]
            written = statement.module  # type: ignore[attr-defined]
            dotted = None if written is None else _dotted(written)
            source = _resolve_relative(package, relative, dotted)
            names = statement.names  # type: ignore[attr-defined]
            if type(names) is cst.ImportStar:
                summary.star.append(source)
                continue
            for alias in names:
                imported = _dotted(alias.name)
                if imported is None:
                    return None
                local = alias.asname.name.value if alias.asname is not None else imported
                summary.imports[local] = f"{source}.{imported}" if source else imported
    functions: Set[str] = set()
    classes: Dict[str, ClassSummary] = summary.classes
    for statement in _suite(module):
        statement_type = type(statement)
        if statement_type is cst.Assign and len(statement.targets) == 1 and type(statement.targets[0].target) is cst.Name:  # type: ignore[attr-defined]
            _library_alias(summary, statement.targets[0].target.value, _dotted(statement.value))  # type: ignore[attr-defined]  # ``nn = torch.nn``
        if statement_type is cst.ClassDef:
            bases = tuple(
                dotted
                for dotted in (
                    _dotted(arg.value) for arg in statement.bases  # type: ignore[attr-defined]
                    if arg.keyword is None and not arg.star
                )
                if dotted
            )
            classes[statement.name.value] = ClassSummary(  # type: ignore[attr-defined]
                statement.name.value, bases, frozenset(), frozenset()  # type: ignore[attr-defined]
            )
        elif statement_type is cst.FunctionDef:
            functions.add(statement.name.value)  # type: ignore[attr-defined]
    summary.functions = frozenset(functions)
    summary.text = text
    return summary
