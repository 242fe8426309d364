"""What a rule reports: a finding with an exact range and an optional fix."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Tuple


class Applicability(str, enum.Enum):
    """How far a fix can be trusted (Ruff's terms)."""

    SAFE = "safe"  # keeps outputs and gradients identical; applied by --fix
    UNSAFE = "unsafe"  # may change behaviour; applied only with --unsafe-fixes


@dataclass(frozen=True, order=True)
class Location:
    """A position in a file: row 1-based, column 1-based (in characters)."""

    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    """Replace the text between two locations (end exclusive) with ``content``."""

    content: str
    location: Location
    end_location: Location


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    title: str
    edits: Tuple[Edit, ...]

    @property
    def is_safe(self) -> bool:
        return self.applicability is Applicability.SAFE


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    filename: str
    location: Location
    end_location: Location
    fix: Optional[Fix] = None
    # Physical rows whose `# noqa` comment suppresses this finding (the whole statement).
    noqa_rows: Tuple[int, ...] = field(default=(), compare=False)
    # In a notebook: the cell (1-based, among all cells); rows and columns are within it.
    cell: Optional[int] = None

    @property
    def sort_key(self):
        return (self.filename, self.cell or 0, self.location.row, self.location.column, self.code)

    @property
    def position(self) -> str:
        """``row:col``, or ``cell N:row:col`` in a notebook (Ruff's text)."""
        cell = f"cell {self.cell}:" if self.cell is not None else ""
        return f"{cell}{self.location.row}:{self.location.column}"

    def fix_applies(self, unsafe_fixes: bool) -> bool:
        return self.fix is not None and (self.fix.is_safe or unsafe_fixes)
