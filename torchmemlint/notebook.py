"""Jupyter notebooks (``.ipynb``): their code cells as one Python source, and back.

As Ruff does, the code cells of a notebook are linted as one file: each cell's source in
order (markdown and raw cells left out), IPython syntax masked so that it parses. A line
magic (``%time f()``), a shell line (``!pip install x``), a help line (``obj?``) and an
assignment from either (``files = !ls``) become a placeholder statement on the same row; a
cell that starts with a cell magic running other code (``%%bash``, ``%%html``) is left out,
one whose magic runs its body as Python (``%%time``, ``%%capture`` ...) is linted below that
line. A comment line before each cell marks where it starts, so rows and fixes map back to
``(cell, row in cell)`` and the fixed source splits into cells again; cells are numbered from
1 among all cells, as Jupyter shows them and Ruff reports them.

Only the standard library is used: the notebook is read and written with ``json``, keeping
everything that is not a code cell's source (outputs, metadata, ids, key order), the file's
indentation and its final line break.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from torchmemlint.findings import Edit, Finding, Fix, Location
from torchmemlint.sourcefile import SourceError

NOTEBOOK_SUFFIX = ".ipynb"

_CELL_MARKER = "# torchmemlint-cell {}\n"
_CELL_MARKER_LINE = re.compile(r"# torchmemlint-cell (\d+)\r?\n?\Z")
_MAGIC_PLACEHOLDER = re.compile(
    r"(?P<indent>[ \t]*)(?P<code>.*?)  # torchmemlint-magic (?P<id>\d+)(?P<end>\r?\n?)\Z"
)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_ASSIGNED_MAGIC = re.compile(r"(?P<target>[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[%!]")
# Cell magics whose body IPython runs as Python: linted below the magic line.
# (%%writefile writes its body to a file and runs nothing: left out.)
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "python", "python3"})


class NotebookError(SourceError):
    """A notebook that cannot be read, or a fixed source that no longer splits into its cells."""


def is_notebook(path: str) -> bool:
    return path.lower().endswith(NOTEBOOK_SUFFIX)


def _lines(text: str) -> List[str]:
    return _LINE.findall(text)


def _magic_kind(stripped: str) -> Optional[str]:
    """How a line that starts a statement is IPython syntax: None when it is Python."""
    if not stripped or stripped.startswith("#"):
        return None
    if stripped[0] in "%!?":
        return "line"
    if stripped.endswith("?"):
        return "line"  # `obj?`, `obj??`: help
    if _ASSIGNED_MAGIC.match(stripped):
        return "assign"
    return None


def _mask(cell_lines: Sequence[str], first_id: int) -> Tuple[List[str], Dict[int, str]]:
    """The cell's lines with IPython lines replaced by placeholders, and the originals by id.

    A line counts as IPython only where a statement starts (not inside brackets, a string
    or after a backslash), so ``% b`` continuing an expression or a docstring line ending in
    ``?`` stay as they are.
    """
    masked: List[str] = []
    originals: Dict[int, str] = {}
    depth = 0
    quote: Optional[str] = None
    continued = False
    magic_continues = False
    next_id = first_id
    for line in cell_lines:
        body = line.rstrip("\r\n")
        end = line[len(body):]
        stripped = body.strip()
        kind = None
        if magic_continues:
            kind = "line"
        elif depth == 0 and quote is None and not continued:
            kind = _magic_kind(stripped)
        if kind is not None:
            indent = body[: len(body) - len(body.lstrip())]
            if kind == "assign":
                match = _ASSIGNED_MAGIC.match(stripped)
                code = f"{match.group('target')} = None" if match else "pass"
            else:
                code = "pass"
            originals[next_id] = stripped
            masked.append(f"{indent}{code}  # torchmemlint-magic {next_id}{end or chr(10)}")
            next_id += 1
            magic_continues = body.endswith("\\")
            continue
        masked.append(line)
        depth, quote, continued = _scan(body, depth, quote)
    return masked, originals


def _scan(body: str, depth: int, quote: Optional[str]) -> Tuple[int, Optional[str], bool]:
    """Bracket depth, open string and backslash continuation after one line of Python."""
    index, size = 0, len(body)
    while index < size:
        char = body[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if body.startswith(quote, index):
                index += len(quote)
                quote = None
                continue
            index += 1
            continue
        if char == "#":
            return depth, None, False
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(0, depth - 1)
        elif char in "'\"":
            quote = char * 3 if body.startswith(char * 3, index) else char
            index += len(quote)
            continue
        index += 1
    continued = body.endswith("\\")
    if quote is not None and len(quote) == 1 and not continued:
        quote = None  # an unterminated one-line string: the parser reports it
    return depth, quote, continued


def _cell_text(cell: Dict[str, Any]) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


@dataclass
class _Cell:
    number: int  # 1-based among all cells
    position: int  # index in the notebook's "cells"
    text: str  # the cell's source as stored
    lines: int  # rows it has in the joined source
    magics: Dict[int, str] = field(default_factory=dict)
    added_newline: bool = False


class Notebook:
    """A notebook's code cells as one Python source (``source``), positions mapped back."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        try:
            data = json.loads(text)
        except ValueError as error:
            raise NotebookError(f"cannot read {path} as a notebook: {error}") from None
        cells = data.get("cells") if isinstance(data, dict) else None
        if not isinstance(cells, list) or not all(isinstance(cell, dict) for cell in cells):
            raise NotebookError(
                f"cannot read {path} as a notebook: no list of cells (nbformat 4 has one)"
            )
        self.data = data
        self.cells: List[_Cell] = []
        # joined row (0-based) -> (cell number, row in cell; 0 for the cell's marker)
        self.rows: List[Tuple[int, int]] = []
        parts: List[str] = []
        if not self._is_python(data):
            self.source = ""
            return
        magic_id = 1
        for position, cell in enumerate(cells):
            if cell.get("cell_type") != "code":
                continue
            text = _cell_text(cell)
            lines = _lines(text)
            first = lines[0].strip() if lines else ""
            skip_first = False
            if first.startswith("%%"):
                name = first[2:].split(None, 1)[0] if len(first) > 2 else ""
                if name not in PYTHON_CELL_MAGICS:
                    continue  # a cell in another language: not linted, written back as it was
                skip_first = True
            added_newline = bool(lines) and not lines[-1].endswith(("\n", "\r"))
            if added_newline:
                lines[-1] += "\n"
            if skip_first:
                masked, magics = _mask(lines[1:], magic_id + 1)
                magics[magic_id] = first
                masked.insert(0, f"pass  # torchmemlint-magic {magic_id}\n")
            else:
                masked, magics = _mask(lines, magic_id)
            magic_id += len(magics)
            number = position + 1
            self.cells.append(_Cell(number, position, text, len(lines), magics, added_newline))
            parts.append(_CELL_MARKER.format(number))
            self.rows.append((number, 0))
            parts.extend(masked)
            self.rows.extend((number, row) for row in range(1, len(masked) + 1))
        self.source = "".join(parts)

    @staticmethod
    def _is_python(data: Dict[str, Any]) -> bool:
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            return True
        for key in ("kernelspec", "language_info"):
            entry = metadata.get(key)
            if isinstance(entry, dict):
                default = entry.get("name") if key == "language_info" else None
                language = entry.get("language", default)
                if isinstance(language, str) and language.lower() not in ("python", "python3"):
                    return False
        return True

    # -- positions ---------------------------------------------------------------------------
    def _where(self, location: Location, is_end: bool = False) -> Tuple[int, Location]:
        """(cell, location in the cell) of a location in ``source``."""
        if not self.rows:
            return 1, location
        index = location.row - 1
        if index >= len(self.rows):
            cell, row = self.rows[-1]
            return cell, Location(row + index - len(self.rows) + 1, location.column)
        cell, row = self.rows[max(index, 0)]
        if row == 0:  # the marker line before a cell
            if is_end and index > 0:
                previous, last = self.rows[index - 1]
                return previous, Location(last + 1, 1)
            return cell, Location(1, 1)
        return cell, Location(row, location.column)

    def translate(self, findings: Sequence[Finding]) -> List[Finding]:
        """Findings on ``source`` as findings on the notebook: cell, row and column in it."""
        translated = []
        for finding in findings:
            cell, start = self._where(finding.location)
            _, end = self._where(finding.end_location, is_end=True)
            fix = finding.fix
            if fix is not None:
                edits = tuple(
                    Edit(
                        edit.content,
                        self._where(edit.location)[1],
                        self._where(edit.end_location, is_end=True)[1],
                    )
                    for edit in fix.edits
                )
                fix = Fix(fix.applicability, fix.title, edits)
            noqa_rows = tuple(
                self._where(Location(row, 1))[1].row for row in finding.noqa_rows
            )
            translated.append(
                replace(finding, location=start, end_location=end, fix=fix,
                        noqa_rows=noqa_rows, cell=cell)
            )
        return translated

    # -- writing -------------------------------------------------------------------------------
    def render(self, source: str) -> str:
        """The notebook's JSON text with its code cells taken from a (fixed) ``source``.

        Cells whose code is unchanged keep their stored source as it was; everything else in
        the file (outputs, metadata, key order, indentation, final line break) is kept.
        """
        if source == self.source:
            return self.text
        split = self._split(source)
        cells = self.data["cells"]
        for cell in self.cells:
            text = self._restore(cell, split[cell.number])
            if text == cell.text:
                continue
            stored = cells[cell.position].get("source")
            cells[cell.position]["source"] = _lines(text) if isinstance(stored, list) else text
        return _dump(self.data, self.text)

    def _split(self, source: str) -> Dict[int, List[str]]:
        split: Dict[int, List[str]] = {}
        order: List[int] = []
        current: Optional[List[str]] = None
        before: List[str] = []  # lines a fix put above the first cell's marker
        for line in _lines(source):
            match = _CELL_MARKER_LINE.match(line)
            if match:
                number = int(match.group(1))
                current = split.setdefault(number, [])
                order.append(number)
                if len(order) == 1:
                    current.extend(before)
                continue
            (current if current is not None else before).append(line)
        if order != [cell.number for cell in self.cells]:
            raise NotebookError(
                f"{self.path}: a fix would move code across notebook cells"
            )
        return split

    @staticmethod
    def _restore(cell: _Cell, lines: List[str]) -> str:
        restored = []
        seen = set()
        for line in lines:
            match = _MAGIC_PLACEHOLDER.match(line)
            if match and int(match.group("id")) in cell.magics:
                magic_id = int(match.group("id"))
                seen.add(magic_id)
                original = cell.magics[magic_id]
                restored.append(match.group("indent") + original.lstrip() + match.group("end"))
                continue
            restored.append(line)
        if seen != set(cell.magics):
            raise NotebookError(f"a fix would remove an IPython line of cell {cell.number}")
        text = "".join(restored)
        if cell.added_newline and text.endswith("\n"):
            text = text[:-2] if text.endswith("\r\n") else text[:-1]
        return text


def _dump(data: Any, original: str) -> str:
    """JSON in the layout of ``original``: its indentation, escaping and final line break."""
    match = re.match(r"\s*[\[{]\r?\n([ \t]+)", original)
    indent: Optional[str] = match.group(1) if match else None
    ensure_ascii = original.isascii() and "\\u" in original
    text = json.dumps(data, indent=indent, ensure_ascii=ensure_ascii)
    if "\r\n" in original[:200]:
        text = text.replace("\n", "\r\n")
    ending = re.search(r"(\r?\n)*\Z", original)
    return text + (ending.group(0) if ending else "")


def read_notebook(path: str, text: str) -> Notebook:
    return Notebook(path, text)


def cell_diff(path: str, before: str, after: str) -> str:
    """A unified diff per changed code cell, headed ``a/PATH:cell N`` as Ruff heads them."""
    try:
        old = json.loads(before).get("cells", [])
        new = json.loads(after).get("cells", [])
    except (ValueError, AttributeError):
        return ""
    parts = []
    for number, (old_cell, new_cell) in enumerate(zip(old, new), start=1):
        old_text, new_text = _cell_text(old_cell), _cell_text(new_cell)
        if old_text == new_text:
            continue
        parts.extend(
            difflib.unified_diff(
                _with_final_newline(old_text), _with_final_newline(new_text),
                fromfile=f"a/{path}:cell {number}", tofile=f"b/{path}:cell {number}",
            )
        )
    return "".join(parts)


def _with_final_newline(text: str) -> List[str]:
    lines = _lines(text)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n"
    return lines


def for_structured_reports(findings: Sequence[Finding]) -> List[Finding]:
    """Findings for the GitHub, SARIF and JUnit reports, whose consumers place a row of the
    file itself: as Ruff does, a notebook's finding is put at 1:1, a position that is clearly
    a fallback, and its message names the cell, row and column; its fix is left out (its edits
    are in the cell's coordinates, not the JSON file's)."""
    start = Location(1, 1)
    return [
        finding if finding.cell is None else replace(
            finding, message=f"{finding.position}: {finding.message}", location=start,
            end_location=start, fix=None, noqa_rows=(),
        )
        for finding in findings
    ]
