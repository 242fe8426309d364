"""A result cache, as Ruff's: an unchanged file with unchanged settings is not linted again.

One entry per (file, settings) pair, in ``<cache dir>/<tool key>/<2 hex>/<entry>.json``:

- the *tool key* hashes the version, the source of torchmemlint itself and of every rule
  module on the rule path (so an edited or added rule invalidates everything), the libcst
  version and the Python version (CPython's own parser positions syntax errors);
- the *entry name* hashes the file's absolute path, a fingerprint of the resolved Settings
  object the file is linted with (per-file settings give per-file fingerprints), the enabled
  rule codes, the rule options and ``--ignore-noqa``;
- the entry stores a SHA-256 of the file's bytes and its findings; a different hash is a miss,
  and the entry is overwritten, so the cache holds one entry per file and settings.

Entries are written to a temporary file and renamed over the old one, so parallel workers
(``-j``) and concurrent runs never see half an entry; an unreadable or corrupt entry is a miss.

Entries are authenticated: each starts with an HMAC-SHA256, keyed with a per-user secret kept
outside every repository (``$XDG_CACHE_HOME/torchmemlint/secret``, else
``~/.cache/torchmemlint/secret``, created mode 0600 on first use), of the entry's name and its
JSON. A cache directory shipped with a repository or written by another user therefore holds
only misses for this user: its entries were made with another secret. When the secret cannot
be created or read (or is readable by others), the run goes without a cache rather than trust
entries it cannot check. An authentic entry is still checked against its schema (types, rule
codes that exist, rows within the file) before it is used; anything else is a miss.
The directory is ``--cache-dir`` if given, else ``.torchmemlint_cache`` in the settings' root:
the directory of the configuration file, or the working directory when there is none. It holds
a ``.gitignore`` of ``*`` and a ``CACHEDIR.TAG``, so it never shows up in version control or
backups. Errors writing the cache are ignored: the cache only ever saves time.

Beside the entries, ``<tool key>/<name>.json`` documents (``get_document``/``put_document``)
hold other data of the same tool key, signed the same way: the project index's module
summaries (``project_files.SummaryStore``), which their reader checks against its schema.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import secrets
import stat
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from torchmemlint import __version__
from torchmemlint.findings import Applicability, Edit, Finding, Fix, Location

DEFAULT_DIRECTORY = ".torchmemlint_cache"
_FORMAT = 2
_MAX_ENTRY_BYTES = 64 * 1024 * 1024
_SECRET_NAME = "secret"
_CACHEDIR_TAG = (
    "Signature: 8a477f597d28d172789f06886806bc55\n"
    "# This file is a cache directory tag created by torchmemlint.\n"
)


@lru_cache(maxsize=None)
def tool_key() -> str:
    """What, besides the file and its settings, decides the findings."""
    import libcst

    import torchmemlint
    import torchmemlint.rules

    digest = hashlib.sha256()
    digest.update(f"{_FORMAT}\0{__version__}\0{sys.version}\0".encode())
    digest.update(getattr(libcst, "__version__", "?").encode())
    package = os.path.dirname(os.path.abspath(torchmemlint.__file__))
    directories = [package, *(os.path.abspath(p) for p in torchmemlint.rules.__path__)]
    for directory in directories:
        for root, subdirectories, files in os.walk(directory):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    digest.update(path.encode() + b"\0")
                    try:
                        with open(path, "rb") as handle:
                            digest.update(handle.read())
                    except OSError:
                        pass
    return digest.hexdigest()[:16]


def settings_fingerprint(settings: Any) -> str:
    """A stable digest of a (frozen dataclass) Settings object: every field, by name."""
    if dataclasses.is_dataclass(settings):
        fields = [(f.name, getattr(settings, f.name)) for f in dataclasses.fields(settings)]
        text = repr(sorted(fields, key=lambda item: item[0]))
    else:
        text = repr(settings)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def cache_directory(settings_root: str, cache_dir: Optional[str] = None) -> str:
    return os.path.abspath(cache_dir or os.path.join(settings_root, DEFAULT_DIRECTORY))


def secret_path() -> str:
    """Where this user's cache secret lives: the user cache directory, never a repository."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "torchmemlint", _SECRET_NAME)


def user_secret() -> Optional[bytes]:
    """The per-user key of the cache's HMACs, created on first use (0600); None when it cannot
    be created or read, or when it could be read by other users."""
    path = secret_path()
    for _ in range(2):
        try:
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            try:
                os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
                descriptor = os.open(
                    path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                    0o600,
                )
                with os.fdopen(descriptor, "w", encoding="ascii") as handle:
                    handle.write(secrets.token_hex(32))
            except FileExistsError:
                continue  # another run made it meanwhile: read that one
            except OSError:
                return None
            continue
        except OSError:
            return None
        with os.fdopen(descriptor, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not stat.S_ISREG(status.st_mode):
                return None
            if hasattr(os, "geteuid") and (
                status.st_uid != os.geteuid() or status.st_mode & 0o077
            ):
                return None  # another user's, or readable by others: it proves nothing
            secret = handle.read(4096).strip()
        return secret if len(secret) >= 32 else None
    return None


@dataclass(frozen=True)
class Cache:
    """A cache directory for one tool key; picklable, so workers of ``-j`` share it."""

    directory: str
    key: str
    secret: bytes = dataclasses.field(default=b"", repr=False)

    @classmethod
    def open(cls, directory: str) -> Optional["Cache"]:
        """The cache in ``directory``, or None when no secret is at hand to authenticate it."""
        secret = user_secret()
        if secret is None:
            return None
        return cls(os.path.abspath(directory), tool_key(), secret)

    def _mac(self, entry: str, body: bytes) -> str:
        name = os.path.basename(entry).encode("ascii", "replace")
        return hmac.new(self.secret, name + b"\0" + body, hashlib.sha256).hexdigest()

    # -- keys -------------------------------------------------------------------------------
    def entry_path(
        self, path: str, settings: Any, codes: FrozenSet[str], ignore_noqa: bool
    ) -> str:
        options = settings.option_values() if hasattr(settings, "option_values") else {}
        identity = repr(
            (
                os.path.abspath(path),
                path,  # findings carry the path as given
                settings_fingerprint(settings),
                sorted(codes),
                sorted(options.items()),
                bool(ignore_noqa),
            )
        )
        name = hashlib.sha256(identity.encode("utf-8", "surrogatepass")).hexdigest()
        return os.path.join(self.directory, self.key, name[:2], name[2:] + ".json")

    # -- reading and writing ----------------------------------------------------------------
    def get(
        self, entry: str, content_hash: str, source: Optional[bytes] = None
    ) -> Optional[List[Finding]]:
        """The stored findings for a file whose bytes hash to ``content_hash``; None (a miss)
        for an entry that is missing, not authentic, or not of the schema ``put`` writes.
        ``source``: the file's bytes, to check that the rows stored lie within it."""
        data = self._read_signed(entry)
        if data is None:
            return None
        rows = _line_count(source) if source is not None else None
        return _valid_findings(data, content_hash, rows)

    def holds(self, entry: str) -> bool:
        """Whether there is an entry at ``entry`` at all (not whether it is authentic or
        current: ``get`` says that). Without one, a file is a miss whatever its content key."""
        return os.path.isfile(entry)

    def _read_signed(self, entry: str) -> Optional[Any]:
        """The JSON ``_write_signed`` stored at ``entry``, when its HMAC holds; None otherwise."""
        if not self.secret:
            return None
        try:
            with open(entry, "rb") as handle:
                raw = handle.read(_MAX_ENTRY_BYTES + 1)
        except OSError:
            return None
        mac, newline, body = raw.partition(b"\n")
        if not newline or len(raw) > _MAX_ENTRY_BYTES:
            return None
        if not hmac.compare_digest(mac, self._mac(entry, body).encode("ascii")):
            return None
        try:
            return json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError, MemoryError):
            return None

    def put(self, entry: str, content_hash: str, filename: str, findings: List[Finding]) -> None:
        data = {
            "content": content_hash,
            "filename": filename,
            "findings": [_record(f) for f in findings],
        }
        if not self.secret:
            return
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        self._write_signed(entry, body)

    def _write_signed(self, entry: str, body: bytes) -> None:
        """``body`` under its HMAC, written atomically; a read-only tree or a full disk only
        means linting without a cache."""
        payload = self._mac(entry, body).encode("ascii") + b"\n" + body
        try:
            self._prepare()
            directory = os.path.dirname(entry)
            os.makedirs(directory, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
            try:
                with os.fdopen(handle, "wb") as stream:
                    stream.write(payload)
                os.replace(temporary, entry)
            except BaseException:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
                raise
        except OSError:
            pass

    # -- documents: other data kept for this tool key (the project's module summaries) -------
    def document_path(self, name: str) -> str:
        return os.path.join(self.directory, self.key, f"{name}.json")

    def get_document(self, name: str) -> Optional[Any]:
        """The JSON stored with ``put_document(name, ...)``, when authentic; None otherwise (the
        caller checks its schema, as ``get`` does for findings)."""
        return self._read_signed(self.document_path(name))

    def put_document(self, name: str, data: Any) -> None:
        if not self.secret:
            return
        entry = self.document_path(name)
        body = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        if len(body) > _MAX_ENTRY_BYTES:
            return
        self._write_signed(entry, body)

    def _prepare(self) -> None:
        """Create the directory with its .gitignore and CACHEDIR.TAG (idempotent, race-safe)."""
        marker = os.path.join(self.directory, ".gitignore")
        if os.path.exists(marker):
            return
        os.makedirs(self.directory, exist_ok=True)
        for name, content in ((".gitignore", "# Created by torchmemlint\n*\n"),
                              ("CACHEDIR.TAG", _CACHEDIR_TAG)):
            target = os.path.join(self.directory, name)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", dir=self.directory)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(content)
            os.replace(temporary, target)


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- `torchmemlint clean` ---------------------------------------------------------------------
def is_cache_directory(path: str) -> bool:
    """A directory torchmemlint made: its CACHEDIR.TAG is the one ``_prepare`` writes."""
    try:
        with open(os.path.join(path, "CACHEDIR.TAG"), encoding="utf-8") as handle:
            return handle.read() == _CACHEDIR_TAG
    except (OSError, UnicodeDecodeError):
        return False


def cache_directories(root: str) -> List[str]:
    """Every ``.torchmemlint_cache`` torchmemlint made under ``root`` (itself included); other
    hidden directories (``.git``, ``.venv``) and ``__pycache__`` are not searched."""
    found: List[str] = []
    for directory, subdirectories, _ in os.walk(root):
        if os.path.basename(directory) == DEFAULT_DIRECTORY and is_cache_directory(directory):
            found.append(directory)
            subdirectories[:] = []
            continue
        subdirectories[:] = sorted(
            d for d in subdirectories
            if d == DEFAULT_DIRECTORY or not (d.startswith(".") or d == "__pycache__")
        )
    return found


# -- (de)serialising findings ----------------------------------------------------------------
def _record(finding: Finding) -> Dict[str, Any]:
    record: Dict[str, Any] = {
        "c": finding.code,
        "m": finding.message,
        "s": [finding.location.row, finding.location.column],
        "e": [finding.end_location.row, finding.end_location.column],
        "n": list(finding.noqa_rows),
    }
    if finding.cell is not None:
        record["k"] = finding.cell  # a notebook's cell
    if finding.fix is not None:
        record["f"] = {
            "a": finding.fix.applicability.value,
            "t": finding.fix.title,
            "e": [
                [e.content, e.location.row, e.location.column, e.end_location.row,
                 e.end_location.column]
                for e in finding.fix.edits
            ],
        }
    return record


def _line_count(data: bytes) -> int:
    """Rows a finding may name: lines, counting \\n, \\r\\n and \\r as libcst does (+1 for
    the end of the file)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") + 1


@lru_cache(maxsize=1)
def _known_codes() -> FrozenSet[str]:
    from torchmemlint.rules import all_rules

    return frozenset(all_rules()) | {"E999", "E902", "TML900"}


def _is_int(value: Any, low: int, high: Optional[int]) -> bool:
    return type(value) is int and low <= value and (high is None or value <= high)


def _is_location(value: Any, rows: Optional[int]) -> bool:
    return (
        type(value) is list
        and len(value) == 2
        and _is_int(value[0], 1, rows)
        and _is_int(value[1], 1, None)
    )


def _valid_record(record: Any, rows: Optional[int]) -> bool:
    if type(record) is not dict or not {"c", "m", "s", "e", "n"} <= set(record):
        return False
    if set(record) - {"c", "m", "s", "e", "n", "f"}:
        return False
    if type(record["c"]) is not str or record["c"] not in _known_codes():
        return False
    if type(record["m"]) is not str:
        return False
    if not (_is_location(record["s"], rows) and _is_location(record["e"], rows)):
        return False
    if type(record["n"]) is not list or not all(_is_int(row, 1, rows) for row in record["n"]):
        return False
    if "f" in record:
        spec = record["f"]
        if type(spec) is not dict or set(spec) != {"a", "t", "e"}:
            return False
        if spec["a"] not in {a.value for a in Applicability} or type(spec["t"]) is not str:
            return False
        if type(spec["e"]) is not list:
            return False
        for edit in spec["e"]:
            if type(edit) is not list or len(edit) != 5 or type(edit[0]) is not str:
                return False
            if not (_is_location(edit[1:3], rows) and _is_location(edit[3:5], rows)):
                return False
    return True


def _valid_findings(
    data: Any, content_hash: str, rows: Optional[int]
) -> Optional[List[Finding]]:
    """The findings of an entry that has exactly the schema ``put`` writes, else None."""
    if type(data) is not dict or set(data) != {"content", "filename", "findings"}:
        return None
    if data["content"] != content_hash or type(data["filename"]) is not str:
        return None
    records = data["findings"]
    if type(records) is not list or not all(_valid_record(r, rows) for r in records):
        return None
    try:
        return [_finding(record, data["filename"]) for record in records]
    except (ValueError, TypeError, KeyError):
        return None


def _finding(record: Dict[str, Any], filename: str) -> Finding:
    fix = None
    if "f" in record:
        spec = record["f"]
        edits: Tuple[Edit, ...] = tuple(
            Edit(content, Location(row, column), Location(end_row, end_column))
            for content, row, column, end_row, end_column in spec["e"]
        )
        fix = Fix(Applicability(spec["a"]), spec["t"], edits)
    return Finding(
        record["c"],
        record["m"],
        filename,
        Location(*record["s"]),
        Location(*record["e"]),
        fix,
        noqa_rows=tuple(record["n"]),
        cell=record.get("k"),
    )
