"""Reading and writing source files without changing their encoding, BOM or line endings."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import re
import tempfile
import tokenize
from dataclasses import dataclass
from typing import List, Optional, Tuple


_O_BINARY = getattr(os, "O_BINARY", 0)


class SourceError(Exception):
    """A file that cannot be read or decoded; reported as a one-line error."""


@dataclass(frozen=True)
class SourceFile:
    path: str
    text: str  # decoded, BOM removed, line endings untouched
    encoding: str  # "utf-8-sig" when the file had a BOM
    # (size, mtime in ns, SHA-256 of the bytes) as read: write_atomic replaces only that file
    origin: Optional[Tuple[int, int, str]] = None

    def encode(self, text: str) -> bytes:
        return text.encode(self.encoding)


def read_bytes(path: str) -> bytes:
    return _read(path)[0]


def _read(path: str) -> Tuple[bytes, os.stat_result]:
    """A regular file's bytes; anything else (a FIFO, a device, a socket, a directory) is a
    SourceError at once, before it is opened for reading: a FIFO would block forever."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SourceError(f"cannot read {path}: not a regular file")
        # O_NONBLOCK: a file swapped for a FIFO after the stat above still does not block.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | _O_BINARY)
        with os.fdopen(descriptor, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode):
                raise SourceError(f"cannot read {path}: not a regular file")
            return handle.read(), status
    except OSError as error:
        raise SourceError(f"cannot read {path}: {error.strerror or error}") from None


def read_source(path: str) -> SourceFile:
    data, status = _read(path)
    source = decode_source(path, data)
    origin = (status.st_size, status.st_mtime_ns, hashlib.sha256(data).hexdigest())
    return SourceFile(source.path, source.text, source.encoding, origin)


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


def may_write(status: os.stat_result, path: str) -> bool:
    """Whether the user may write the file: for root, whom permission bits do not stop, a
    file with no write bit at all (0444) counts as read-only too."""
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        return bool(status.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return os.access(path, os.W_OK)


def write_atomic(source: SourceFile, new_text: str) -> None:
    """Put the fixed text in place of the file ``source`` was read from.

    - A symlink is followed: its target is fixed, the link stays a link.
    - A file that is read-only for the user (for root: without any write bit) is not written.
    - Just before the file is replaced, its size, modification time and content are compared
      with what was read: a file changed meanwhile is left as it is (its change is not lost).
    - A file with one name is written next to itself and renamed over it (a reader never
      sees half a file), with the original's mode, owner and group. A file with more than one
      name (a hard link), or whose owner cannot be kept, is rewritten in place, so that every
      name keeps seeing the same file.

    SourceError for the refusals; OSError when the system refuses.
    """
    data = source.encode(new_text)
    path = os.path.realpath(source.path)
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):
        raise SourceError(f"cannot write {source.path}: not a regular file")
    if not may_write(status, path):
        raise SourceError(f"cannot write {source.path}: the file is read-only; left unchanged")
    if status.st_nlink > 1:
        _write_in_place(source, path, data)
        return
    directory = os.path.dirname(path)
    handle, temporary = tempfile.mkstemp(prefix=".torchmemlint-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, status.st_mode & 0o7777)
        if hasattr(os, "chown"):
            try:
                os.chown(temporary, status.st_uid, status.st_gid)
            except PermissionError:  # not ours to give away: keep the owner by writing in place
                os.unlink(temporary)
                _write_in_place(source, path, data)
                return
            os.chmod(temporary, status.st_mode & 0o7777)  # chown may clear set-id bits
        _check_unchanged(source, path)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _write_in_place(source: SourceFile, path: str, data: bytes) -> None:
    with open(path, "r+b") as stream:
        _check_unchanged(source, path, stream)
        stream.seek(0)
        stream.write(data)
        stream.truncate()
        stream.flush()
        os.fsync(stream.fileno())


def _check_unchanged(source: SourceFile, path: str, stream: Optional[io.BufferedRandom] = None) -> None:
    """SourceError when the file is no longer the one read (another program wrote to it)."""
    if source.origin is None:
        return
    size, mtime_ns, digest = source.origin
    if stream is None:
        with open(path, "rb") as handle:
            status, data = os.fstat(handle.fileno()), handle.read()
    else:
        status = os.fstat(stream.fileno())
        stream.seek(0)
        data = stream.read()
    if (
        status.st_size != size
        or status.st_mtime_ns != mtime_ns
        or hashlib.sha256(data).hexdigest() != digest
    ):
        raise SourceError(
            f"{source.path}: changed while fixing (another program wrote to it after it was "
            "read); left as it is, run --fix again"
        )
