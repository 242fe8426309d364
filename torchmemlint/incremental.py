"""Re-linting one document as it is edited: parse and positions reused for unchanged statements.

The language server lints a buffer again after every pause in typing, and an edit usually
changes one top-level statement. ``Document`` keeps, between versions of one text:

- the top-level statements parsed from each *chunk* of the text (a top-level statement with
  the comment and blank lines before it), keyed by the chunk's text. A new version is cut into
  chunks; only the chunks not seen in the last version are parsed, and the module is assembled
  from the statements of all of them. libcst nodes are immutable, so a statement parsed once is
  the same whatever module holds it;
- the node index of every top-level statement (``tree.NodeIndex``), from which the module's
  index is put together;
- the positions of every node of a top-level statement, relative to where the statement
  starts, for the statements that had findings (``positions._kept_positions``).

Everything after the parse and the index (the analyses, the rules) runs on the whole module as for
a file read from disk: the findings are the same as ``lint_source`` without a ``Document``
(tests/test_incremental.py checks that on every fixture and on edited forms).

Cutting is a guess checked by the parser: a chunk starts at a line that begins in column 0
with code (not a comment, not a closing bracket, not ``else``/``elif``/``except``/``finally``,
not the line after a decorator), moved up over the blank and comment lines just above it. A
guess inside a string, a bracket or a backslash continuation leaves the chunk before it
unfinished, which libcst refuses: that chunk is then joined to the next one. The assembled
module is the one ``libcst.parse_module`` returns for the whole text, or the whole text is
parsed: when a chunk ends in lines libcst would give to the next statement (a footer), when
the chunks disagree on the file's indentation or line break, or when nothing parses.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.sourcefile import LINE_BREAK, line_starts
from torchmemlint.tree import NodeIndex, parse_module

# A line that cannot start a top-level statement although it starts in column 0 with a word.
_CONTINUATION = re.compile(r"(?:else|elif|except|finally)\b")
_MAX_JOINS = 200  # chunks joined in a row before the whole text is parsed instead


@dataclass(frozen=True)
class _Chunk:
    """What one chunk's text parses to on its own."""

    statements: Tuple[cst.BaseStatement, ...]  # the first with the chunk's leading lines
    header: Tuple[cst.EmptyLine, ...]  # the leading lines, for the file's first chunk
    footer: Tuple[cst.EmptyLine, ...]
    default_indent: Optional[str]  # None: no indented block, any indentation suits it
    default_newline: Optional[str]  # None: no line break
    has_trailing_newline: bool


_FAILED = object()  # a chunk libcst refuses on its own


class Document:
    """The parse state of one document across its versions (see the module docstring)."""

    def __init__(self) -> None:
        self._chunks: Dict[Tuple[str, bool], object] = {}
        # id(top-level statement) -> (it, its layout, its ranges, its code): positions.py
        self.positions: Dict[int, Tuple[cst.CSTNode, Tuple[str, str], object, str]] = {}
        self.indices: Dict[int, Tuple[cst.CSTNode, NodeIndex]] = {}  # per top-level statement
        self.module_index: Optional[NodeIndex] = None
        self.starts: Dict[int, int] = {}  # id(top-level statement) -> its offset in the text
        self.reused = 0  # chunks taken from the last version at the last parse
        self.parsed = 0  # chunks parsed at the last parse (0 and reused 0: the whole text)

    def parse(self, text: str) -> cst.Module:
        """The module of ``text``, as ``tree.parse_module`` gives it (it raises as it does)."""
        assembled = self._assemble(text)
        if assembled is None:
            # The chunks parsed stay kept: a file that is parsed whole (its chunks disagree on
            # indentation) does not parse them all again at the next version.
            self.starts = {}
            self.reused = self.parsed = 0
            module = parse_module(text)
        else:
            module, self.starts = assembled
        kept = {id(statement) for statement in module.body}
        self.positions = {key: value for key, value in self.positions.items() if key in kept}
        self.indices = {key: value for key, value in self.indices.items() if key in kept}
        return module

    def index(self, module: cst.Module) -> NodeIndex:
        """The module's node index (registered, as ``tree.node_index`` builds it), put together
        from the kept indices of its top-level statements."""
        pieces = []
        for statement in module.body:
            kept = self.indices.get(id(statement))
            if kept is None or kept[0] is not statement:
                kept = self.indices[id(statement)] = (statement, NodeIndex(statement, register=False))
            pieces.append(kept[1])
        # The registry holds indices weakly: this one lives until the next version's.
        self.module_index = NodeIndex.of_module(module, pieces)
        return self.module_index

    # -- cutting and assembling ------------------------------------------------------------------
    def _assemble(self, text: str) -> Optional[Tuple[cst.Module, Dict[int, int]]]:
        bounds = chunk_bounds(text)
        if len(bounds) < 3:
            return None  # one chunk: nothing to reuse
        previous, used = self._chunks, {}
        self.reused = self.parsed = 0
        pieces: List[Tuple[int, _Chunk]] = []
        last = len(bounds) - 1
        at = 0
        while at < last:
            end = at + 1
            while True:
                first, final = at == 0, end == last
                piece = self._chunk(text[bounds[at] : bounds[end]], first, final, previous, used)
                if piece is not None and (final or not piece.footer):
                    break
                if final or end - at > _MAX_JOINS:
                    return None
                end += 1
            pieces.append((bounds[at], piece))
            at = end
        self._chunks = used
        return _module(pieces)

    def _chunk(
        self, text: str, first: bool, final: bool, previous: Dict, used: Dict
    ) -> Optional[_Chunk]:
        key = (text, first)
        found = previous.get(key, used.get(key))
        if found is None:
            found = _parse_chunk(text, first)
            self.parsed += 1
        else:
            self.reused += 1
        used[key] = found
        return None if found is _FAILED else found  # type: ignore[return-value]


def chunk_bounds(text: str) -> List[int]:
    """Offsets where chunks may start (0 first), and the text's length last."""
    starts = line_starts(text)
    if starts[-1] == len(text):
        starts.pop()  # the text ends with a line break: no line after it
    ends = starts[1:] + [len(text)]
    bounds = [0]
    boundary = -1  # where the blank and comment lines above the next statement start
    after_decorator = False
    for start, end in zip(starts, ends):
        char = text[start : start + 1]
        if char in " \t\x0c\r\n":
            if text[start:end].strip():
                boundary = -1  # indented code or comment: it stays with the chunk above
            elif boundary < 0:
                boundary = start
            continue
        if char == "#":
            if boundary < 0:
                boundary = start
            continue
        if char in ")]}":
            boundary = -1
            continue
        if _CONTINUATION.match(text, start):
            boundary, after_decorator = -1, False
            continue
        begin = start if boundary < 0 else boundary
        if not after_decorator and begin > 0:
            bounds.append(begin)
        after_decorator = char == "@"
        boundary = -1
    bounds.append(len(text))
    return bounds


def _parse_chunk(text: str, first: bool) -> object:
    try:
        module = parse_module(text)
    except cst.ParserSyntaxError:
        return _FAILED
    statements = tuple(module.body)
    header = tuple(module.header)
    if not first and not statements:
        return _FAILED  # lines that belong to a statement of the chunk above or below
    if not first and statements and header:
        # In the whole file these lines lead the statement (libcst gives a module's leading
        # lines to its header): move them there, as one parse of the file would.
        head = statements[0]
        statements = (
            head.with_changes(leading_lines=(*header, *head.leading_lines)),
            *statements[1:],
        )
        header = ()
    return _Chunk(
        statements,
        header,
        tuple(module.footer),
        module.default_indent if any(_has_block(s) for s in statements) else None,
        module.default_newline if LINE_BREAK.search(text) else None,
        module.has_trailing_newline,
    )


_SUITE_PARTS = (cst.Else, cst.Finally, cst.ExceptHandler, cst.ExceptStarHandler, cst.If, cst.MatchCase)


def _has_block(statement: cst.CSTNode) -> bool:
    """Whether an indented block is in ``statement`` (the only nodes the module's default
    indentation is written into)."""
    if not isinstance(statement, cst.BaseCompoundStatement):
        return False
    stack: List[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            value = getattr(node, name, None)
            for part in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(part, cst.IndentedBlock):
                    return True
                if isinstance(part, _SUITE_PARTS):
                    stack.append(part)
    return False


def _module(pieces: List[Tuple[int, _Chunk]]) -> Optional[Tuple[cst.Module, Dict[int, int]]]:
    indents = {piece.default_indent for _, piece in pieces} - {None}
    newlines = {piece.default_newline for _, piece in pieces} - {None}
    if len(indents) > 1 or len(newlines) > 1:
        return None  # mixed indentation or line breaks: libcst's choice is the file's first
    body: List[cst.BaseStatement] = []
    starts: Dict[int, int] = {}
    for start, piece in pieces:
        if piece.statements:
            starts[id(piece.statements[0])] = start
        body.extend(piece.statements)
    final = pieces[-1][1]
    module = cst.Module(
        body=body,
        header=pieces[0][1].header,
        footer=final.footer,
        encoding="utf-8",
        default_indent=indents.pop() if indents else "    ",
        default_newline=newlines.pop() if newlines else "\n",
        has_trailing_newline=final.has_trailing_newline,
    )
    return module, starts
