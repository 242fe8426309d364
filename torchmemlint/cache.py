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
The directory is ``--cache-dir`` if given, else ``.torchmemlint_cache`` in the settings' root:
the directory of the configuration file, or the working directory when there is none. It holds
a ``.gitignore`` of ``*`` and a ``CACHEDIR.TAG``, so it never shows up in version control or
backups. Errors writing the cache are ignored: the cache only ever saves time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, FrozenSet, List, Optional, Tuple

from torchmemlint import __version__
from torchmemlint.findings import Applicability, Edit, Finding, Fix, Location

DEFAULT_DIRECTORY = ".torchmemlint_cache"
_FORMAT = 1
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


@dataclass(frozen=True)
class Cache:
    """A cache directory for one tool key; picklable, so workers of ``-j`` share it."""

    directory: str
    key: str

    @classmethod
    def open(cls, directory: str) -> "Cache":
        return cls(os.path.abspath(directory), tool_key())

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
    def get(self, entry: str, content_hash: str) -> Optional[List[Finding]]:
        try:
            with open(entry, encoding="utf-8") as handle:
                data = json.load(handle)
            if data.get("content") != content_hash:
                return None
            filename = data["filename"]
            return [_finding(item, filename) for item in data["findings"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, entry: str, content_hash: str, filename: str, findings: List[Finding]) -> None:
        data = {
            "content": content_hash,
            "filename": filename,
            "findings": [_record(f) for f in findings],
        }
        text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
        try:
            self._prepare()
            directory = os.path.dirname(entry)
            os.makedirs(directory, exist_ok=True)
            handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    stream.write(text)
                os.replace(temporary, entry)
            except BaseException:
                try:
                    os.unlink(temporary)
                except OSError:
                    pass
                raise
        except OSError:
            pass  # a read-only tree, a full disk: lint without a cache

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
