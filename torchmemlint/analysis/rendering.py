"""Source text of a rewritten statement or expression, as a fix writes it into the file."""

from __future__ import annotations

from typing import Optional, Tuple

import libcst as cst


def render(module: cst.Module, statement: cst.CSTNode, indents: Tuple[Optional[str], ...]) -> str:
    """Source of `statement` at the nesting given by `indents`, as it would sit in the file.

    The statement is nested in dummy `if True:` blocks with the original relative indents and
    the dummy header lines are dropped; string contents are never re-indented."""
    node = statement
    for indent in reversed(indents):
        node = cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=[node], indent=indent))
    code = module.with_changes(body=[node], header=[], footer=[], has_trailing_newline=True).code
    lines = _unix_newlines(module, code).splitlines(keepends=True)
    return "".join(lines[len(indents):])


def render_expression(module: cst.Module, node: cst.CSTNode) -> str:
    return _unix_newlines(module, module.code_for_node(node))


def _unix_newlines(module: cst.Module, code: str) -> str:
    """Edits are written with "\n"; the fixer turns them into the file's own line ending."""
    newline = module.default_newline
    return code if newline == "\n" else code.replace(newline, "\n")


def shortened(code: str, limit: int = 40) -> str:
    """``code`` on one line, cut to ``limit`` characters with an ellipsis (for messages)."""
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."
