"""Reading and writing source files without changing their encoding, BOM or line endings."""

from __future__ import annotations

import io
import os
import re
import tempfile
import tokenize
from dataclasses import dataclass
from typing import List


class SourceError(Exception):
    """A file that cannot be read or decoded; reported as a one-line error."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str  # decoded, BOM removed, line endings untouched
    encoding: str  # "utf-8-sig" when the file had a BOM

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def read_source(path: str) -> SourceFile:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error.strerror or error}") from None
    return decode_source(path, data)


def decode_source(path: str, data: bytes) -> SourceFile:
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as error:
        raise SourceError(f"cannot decode {path}: {error.msg}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as error:
        raise SourceError(f"cannot decode {path} as {encoding}: {error}") from None
    return SourceFile(path, text, encoding)


# What libcst, Python and the LSP count as a line end (not the other breaks str.splitlines knows).
LINE_BREAK = re.compile(r"\r\n|\r|\n")


def line_starts(text: str) -> List[int]:
    """The offset where each line of ``text`` starts (0 first; after a final line break, the
    text's length)."""
    return [0] + [match.end() for match in LINE_BREAK.finditer(text)]


def newline_of(text: str) -> str:
    """The file's first line ending, so inserted lines match the rest."""
    for index, char in enumerate(text):
        if char == "\n":
            return "\n"
        if char == "\r":
            return "\r\n" if text[index + 1 : index + 2] == "\n" else "\r"
    return "\n"


def write_atomic(source: SourceFile, new_text: str) -> None:
    """Write next to the file and rename over it: a reader never sees half a file."""
    data = source.encode(new_text)
    directory = os.path.dirname(os.path.abspath(source.path))
    mode = os.stat(source.path).st_mode
    handle, temporary = tempfile.mkstemp(prefix=".torchmemlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode & 0o7777)
        os.replace(temporary, source.path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise
