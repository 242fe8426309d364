"""Fast traversal of libcst trees: only the fields that can hold code.

libcst's own visitors descend into every whitespace, comma and parenthesis node; the engine's
walk and the rules' analyses skip those layout fields, which makes a walk several times cheaper.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache
from typing import List, Tuple

import libcst as cst

# Fields that hold layout only (whitespace, brackets, punctuation, operators), plus the keyword
# name of an argument, which is not a use of that name.
_LAYOUT_FIELDS = frozenset(
    {
        "lpar", "rpar", "lbrace", "rbrace", "lbracket", "rbracket", "leading_lines",
        "lines_after_decorators", "empty_lines", "comma", "equal", "colon", "semicolon", "dot",
        "header", "footer", "newline", "trailing_whitespace", "asynchronous", "star", "operator",
        "keyword", "indent", "first_line", "default_indent", "default_newline", "encoding",
        "has_trailing_newline",
    }
)
# Fields in evaluation order where libcst declares them otherwise (decorators come first).
_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
}


@lru_cache(maxsize=None)
def child_fields(node_type: type) -> Tuple[str, ...]:
    if node_type in _ORDER:
        return _ORDER[node_type]
    return tuple(
        f.name
        for f in dataclasses.fields(node_type)
        if f.name not in _LAYOUT_FIELDS and "whitespace" not in f.name
    )


@lru_cache(maxsize=None)
def is_node_type(value_type: type) -> bool:
    # libcst's node classes are ABCs: a cached subclass test is much cheaper than isinstance.
    return issubclass(value_type, cst.CSTNode)


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes that carry code, in evaluation order."""
    found: List[cst.CSTNode] = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            found.extend(item for item in value if is_node_type(type(item)))
        elif is_node_type(value_type):
            found.append(value)
    return found
