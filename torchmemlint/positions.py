"""Finding positions: libcst's node ranges without its metadata passes.

The engine reports nodes; this module turns them into rows and columns (1-based, as libcst
counts them), computes the edits of fixes and the rows a `# noqa` comment covers. Code is
generated only for the top-level statements that hold findings when that can be done (each
is placed where its code stands in the source, when it stands there once), else for the file.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst
from libcst._nodes.internal import CodegenState

from torchmemlint.analysis.syntax import walk
from torchmemlint.sourcefile import line_starts
from torchmemlint.tree import indexed
from torchmemlint.context import _PendingFinding
from torchmemlint.findings import Edit, Finding, Fix, Location
from torchmemlint.fixer import compose_edits


@lru_cache(maxsize=None)
def is_statement(node_type: type) -> bool:
    return issubclass(node_type, (cst.SimpleStatementLine, cst.BaseCompoundStatement))


class _OffsetPositions(CodegenState):
    """libcst's PositionProvider and WhitespaceInclusivePositionProvider in one code pass.

    libcst computes each provider with its own pass over the tree, splitting every token on
    newlines to keep a line and column. This state keeps a character offset instead (the sum
    of token lengths) and records both ranges of every node in the same pass; rows and columns
    are computed afterwards, only for the nodes a finding needs. Ranges are the same as
    libcst's (tests/test_positions.py compares them on every node).

    With ``wanted`` (node ids), only those nodes' ranges are recorded, and the nodes a wanted
    node's syntactic range starts or ends at: code is still generated for every node, but the
    bookkeeping of the others (a dict entry and a context object each) is skipped.
    """

    def __init__(self, module: cst.Module, wanted: Optional[Set[int]] = None) -> None:
        super().__init__(default_indent=module.default_indent, default_newline=module.default_newline)
        self.offset = 0
        self.popped = ""
        self.wanted = wanted
        self._stack: List[int] = []
        self.inclusive: Dict[cst.CSTNode, Tuple[int, int]] = {}
        self.syntactic: Dict[cst.CSTNode, Tuple[int, int]] = {}

    def add_indent_tokens(self) -> None:
        self.tokens.extend(self.indent_tokens)
        for token in self.indent_tokens:
            self.offset += len(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        self.offset += len(value)

    def pop_trailing_newline(self) -> None:
        # libcst drops a newline it added at the end, after counting it in positions.
        self.popped = self.tokens[-1] if self.tokens else ""
        super().pop_trailing_newline()

    def code(self) -> str:
        """The text the offsets count in (the module's code and any newline libcst added)."""
        return "".join(self.tokens) + self.popped

    def before_codegen(self, node: cst.CSTNode) -> None:
        wanted = self.wanted
        if wanted is None or id(node) in wanted:
            self._stack.append(self.offset)

    def after_codegen(self, node: cst.CSTNode) -> None:
        wanted = self.wanted
        if wanted is None or id(node) in wanted:
            self.inclusive[node] = (self._stack.pop(), self.offset)

    def record_syntactic_position(
        self,
        node: cst.CSTNode,
        *,
        start_node: Optional[cst.CSTNode] = None,
        end_node: Optional[cst.CSTNode] = None,
    ) -> "_SyntacticRecord | _NoRecord":
        wanted = self.wanted
        if wanted is not None:
            if id(node) not in wanted:
                return _NO_RECORD
            # called before the node's children are generated: record the ones it ends at
            for bound in (start_node, end_node):
                if bound is not None:
                    wanted.add(id(bound))
        # A plain context manager: a generator-based one costs several times more a node.
        return _SyntacticRecord(self, node, start_node, end_node)

    def span(self, node: cst.CSTNode) -> Tuple[int, int]:
        """PositionProvider's range: the syntactic one where the node records it."""
        found = self.syntactic.get(node)
        return found if found is not None else self.inclusive[node]


class _NoRecord:
    """The context of a node whose range is not wanted."""

    __slots__ = ()

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exception: Any) -> None:
        pass


_NO_RECORD = _NoRecord()


class _SyntacticRecord:
    """Records a node's syntactic range around the code generated inside the ``with``."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(
        self,
        state: _OffsetPositions,
        node: cst.CSTNode,
        start_node: Optional[cst.CSTNode],
        end_node: Optional[cst.CSTNode],
    ) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node
        self.start = state.offset

    def __enter__(self) -> None:
        self.start = self.state.offset

    def __exit__(self, *exception: Any) -> None:
        state = self.state
        start, end = self.start, state.offset
        if self.start_node is not None:
            start = state.span(self.start_node)[0]
        if self.end_node is not None:
            end = state.span(self.end_node)[1]
        state.syntactic[self.node] = (start, end)




class _Rows:
    """Offsets to 1-based (row, column) locations, as libcst counts lines."""

    def __init__(self, text: str) -> None:
        self.starts = line_starts(text)

    def location(self, offset: int) -> Location:
        row = bisect_right(self.starts, offset) - 1
        return Location(row + 1, offset - self.starts[row] + 1)

    def row(self, offset: int) -> int:
        """``location(offset).row``, without building the location."""
        return bisect_right(self.starts, offset)

    def range(self, span: Tuple[int, int]) -> Tuple[Location, Location]:
        return self.location(span[0]), self.location(span[1])


def _partial_positions(
    module: cst.Module, text: str, pending: List[_PendingFinding], document: Any = None
) -> Optional[Tuple[_OffsetPositions, List[cst.CSTNode]]]:
    """Positions of only the top-level statements that hold the reports, or None.

    Each statement's code is generated alone (its leading blank and comment lines included)
    and looked up in the source text: it is there, at the start of a line, since the module's
    code is the text; when it is there exactly once, that is where the statement starts and its
    ranges are shifted there. A report or edit outside those statements, or a statement whose
    code is not in the text exactly once (two identical statements), gives None, and the
    caller makes the full pass instead. The statements returned are every statement inside
    them: a finding's `# noqa` statement is always inside its own top-level statement
    (top-level statements never share a row).

    With an ``incremental.Document``, where each statement starts is known from the chunks it
    was parsed from (its code is still checked to be there), and the ranges of every node of a
    statement are kept for the next version of the text, which usually holds the same statement
    object: only the statements parsed anew are generated again.
    """
    if not module.has_trailing_newline:
        return None  # the last statement's newline is not in the text
    body = module.body
    index = {id(statement): position for position, statement in enumerate(body)}
    wanted = set()
    for item in pending:
        position = index.get(id(item.top)) if item.top is not None else None
        if position is None:
            return None
        wanted.add(position)
        for edit in item.fix.edits if item.fix is not None else ():
            if id(edit.node) in index:
                wanted.add(index[id(edit.node)])
    starts = document.starts if document is not None else {}
    known = all(id(body[position]) in starts for position in wanted)
    if 2 * len(wanted) > len(body) and not known:
        return None  # most of the file: one full pass is cheaper
    # The nodes whose ranges are needed, by the top-level statement that holds them: the
    # statements inside (for noqa rows), the reported nodes and the edited ones (an edit
    # outside its report's statement is found nowhere, and the full pass is made instead).
    needed: Dict[int, List[cst.CSTNode]] = {position: [] for position in wanted}
    for item in pending:
        top = index[id(item.top)]
        needed[top].append(item.node)
        for edit in item.fix.edits if item.fix is not None else ():
            needed[index.get(id(edit.node), top)].append(edit.node)
    # What is generated for each: the statement, or (without a document) the methods of a
    # class that hold everything needed there, when each method's code is in the text once.
    units: Dict[int, List[Tuple[cst.CSTNode, Tuple[str, ...]]]] = {}
    for position in sorted(wanted):
        methods = None if known else _methods_holding(module, body[position], needed[position])
        units[position] = methods or [(body[position], ())]
    groups: Dict[int, List[cst.CSTNode]] = {}
    statements: List[cst.CSTNode] = []
    for position in sorted(wanted):
        inner = [node for unit, _ in units[position] for node in _statements_in(unit)]
        statements.extend(inner)
        groups[position] = inner + needed[position]
    # kept ranges cover every node; code generated here records only the nodes needed
    nodes = None if known else _wanted_nodes(pending, statements)
    state = _OffsetPositions(module)  # holds the shifted ranges; generates nothing
    for position in sorted(wanted):
        for unit, indent in units[position]:
            if known:
                alone, code = _kept_positions(module, unit, document)
                start = starts[id(unit)]
                if not text.startswith(code, start):
                    return None
            else:
                alone = _OffsetPositions(module, nodes)
                alone.indent_tokens = list(indent)
                unit._codegen(alone)
                code = "".join(alone.tokens)
                start = text.find(code)
                if start < 0 or text.find(code, start + 1) >= 0 or not code:
                    return None
                if start > 0 and text[start - 1] not in "\n\r":
                    return None
            inclusive, syntactic = alone.inclusive, alone.syntactic
            for node in groups[position]:
                found = inclusive.get(node)
                if found is None:
                    continue
                state.inclusive[node] = (found[0] + start, found[1] + start)
                found = syntactic.get(node)
                if found is not None:
                    state.syntactic[node] = (found[0] + start, found[1] + start)
    for item in pending:
        if item.node not in state.inclusive:
            return None
        for edit in item.fix.edits if item.fix is not None else ():
            if edit.node not in state.inclusive:
                return None
    return state, statements


def _methods_holding(
    module: cst.Module, statement: cst.CSTNode, needed: List[cst.CSTNode]
) -> Optional[List[Tuple[cst.CSTNode, Tuple[str, ...]]]]:
    """The methods of the top-level class ``statement`` that hold every node of ``needed``,
    each with the indentation its body's code is generated under (a class's code is mostly
    other methods: generating only these is a fraction of the work); None when a node is
    outside any method (a class attribute, the header) or the nodes are not indexed."""
    if type(statement) is not cst.ClassDef or type(statement.body) is not cst.IndentedBlock:
        return None
    block = statement.body
    indent = (block.indent if block.indent is not None else module.default_indent,)
    methods: Dict[int, cst.CSTNode] = {}
    for node in needed:
        found = indexed(node)
        if found is None:
            return None
        index, here = found
        path = index.ancestors(here)
        # module > class > its body > the method (> ... > the node)
        if len(path) < 4 or index.order[path[1]] is not statement or index.order[path[2]] is not block:
            return None
        method = index.order[path[3]]
        if type(method) is not cst.FunctionDef:
            return None
        methods[id(method)] = method
    return [(method, indent) for method in methods.values()]


_STATEMENT_TYPES = tuple(
    node_type
    for node_type in vars(cst).values()
    if isinstance(node_type, type)
    and issubclass(node_type, (cst.SimpleStatementLine, cst.BaseCompoundStatement))
    and not node_type.__subclasses__()
)


def _statements_in(statement: cst.CSTNode) -> List[cst.CSTNode]:
    """The statements of ``statement``'s subtree (itself included), in pre-order."""
    found = indexed(statement)
    if found is not None:
        return found[0].of_types(found[1], _STATEMENT_TYPES)
    return [node for node in walk(statement) if is_statement(type(node))]


def _kept_positions(
    module: cst.Module, statement: cst.CSTNode, document: Any
) -> Tuple[_OffsetPositions, str]:
    """Every node's range in ``statement``'s code alone, and that code, kept by the document
    for as long as the statement is in its text (under the same indentation and line break)."""
    layout = (module.default_indent, module.default_newline)
    kept = document.positions.get(id(statement))
    if kept is not None and kept[0] is statement and kept[1] == layout:
        return kept[2], kept[3]
    alone = _OffsetPositions(module)
    statement._codegen(alone)
    code = "".join(alone.tokens)
    alone.tokens = []
    document.positions[id(statement)] = (statement, layout, alone, code)
    return alone, code


def _wanted_nodes(pending: List[_PendingFinding], statements: Sequence[cst.CSTNode]) -> Set[int]:
    """The nodes whose ranges are needed: reported, edited, and the statements for noqa rows."""
    wanted = {id(node) for node in statements}
    for item in pending:
        wanted.add(id(item.node))
        for edit in item.fix.edits if item.fix is not None else ():
            wanted.add(id(edit.node))
    return wanted


def resolve_findings(
    module: cst.Module,
    filename: str,
    pending: List[_PendingFinding],
    text: str,
    statements: Sequence[cst.CSTNode],
    document: Any = None,
) -> List[Finding]:
    """Turn node-based reports into ranges; positions are computed only for files with reports,
    and there only for the top-level statements that hold them when that can be done (kept
    across versions of the text with an ``incremental.Document``)."""
    partial = _partial_positions(module, text, pending, document)
    if partial is not None:
        state, statements = partial
        rows = _Rows(text)
    else:
        state = _OffsetPositions(module, _wanted_nodes(pending, statements))
        module._codegen(state)
        rows = _Rows(state.code())
    # The statements the walk met (not every node of the file): their rows, for `# noqa`.
    spans = [(state.span(node), type(node) is cst.SimpleStatementLine) for node in statements]
    row = rows.row
    rows_of = sorted((row(span[0]), is_simple, row(span[1])) for span, is_simple in spans)
    findings = []
    for item in pending:
        start, end = rows.range(state.span(item.node))
        noqa_rows = _statement_rows(rows_of, start.row, end.row)
        fix = None
        if item.fix is not None:
            edits = []
            for edit in item.fix.edits:
                edit_start, edit_end = rows.range(state.inclusive[edit.node])
                if edit.where == "before":
                    edit_end = edit_start
                elif edit.where == "after":
                    edit_start = edit_end
                edits.append(Edit(edit.content, edit_start, edit_end))
            # Nested or repeated uses give edits inside edits: fold them into one another.
            composed = tuple(edits)
            if len(edits) > 1:
                composed = compose_edits(text, edits, rows.starts)
            if composed is not None:
                fix = Fix(item.fix.applicability, item.fix.title, composed)
        findings.append(
            Finding(item.code, item.message, filename, start, end, fix, noqa_rows=noqa_rows)
        )
    return findings


def _statement_rows(
    statements: List[Tuple[int, bool, int]], first: int, last: int
) -> Tuple[int, ...]:
    """The physical rows whose `# noqa` covers a finding on rows first..last.

    The innermost statement that starts on or before ``first`` and contains it: a simple
    statement gives all its rows; a compound one (the finding is in its header: `with`, `for`,
    `def` ...) gives its rows up to the finding's end.
    """
    innermost = None
    # Sorted by start, so later starts are nested deeper: the last statement starting on or
    # before `first` that still reaches it. Walk back from the last start <= first.
    index = bisect_right(statements, (first, True, sys.maxsize)) - 1
    while index >= 0:
        if statements[index][2] >= first:
            innermost = statements[index]
            break
        index -= 1
    if innermost is None:
        return tuple(range(first, last + 1))
    start, is_simple, end = innermost
    return tuple(range(start, (max(end, last) if is_simple else last) + 1))
