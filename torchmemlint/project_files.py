"""The files of a project as the project index (``torchmemlint/project.py``) reads them:
which files are its neighbours, their text, and its module summaries, read on
first need (``LazySummaries``), and between runs in the result cache's directory
(``SummaryStore``; ``engine.lint_paths`` loads and saves it, authenticated as the cache's
entries are: ``Cache.get_document``). A stored record is used only when it has exactly the
fields and types ``project.summarize`` makes; anything else is a miss, summarized again."""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Set, Tuple


class SummaryMap(Mapping):  # type: ignore[type-arg]
    """A read-only mapping of keys to the summaries of the files they name, made on access."""

    def __init__(self, paths: Dict[str, str], load: Callable[[str], Any]) -> None:
        self._paths = paths
        self._load = load

    def __getitem__(self, key: str) -> Any:
        return self._load(self._paths[key])

    def __contains__(self, key: object) -> bool:
        return key in self._paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


class LazySummaries:
    """The modules of one index by path and by dotted name (``names``: name -> path, decided
    from the files' places in their packages, without reading any), each read and summarized
    by ``load`` on first access: one summary object per path, for both mappings."""

    def __init__(
        self, paths: List[str], names: Dict[str, str], load: Callable[[str], Any],
        text: Optional[Callable[[str], Optional[str]]] = None,
    ) -> None:
        done: Dict[str, Any] = {}
        lock = threading.Lock()
        # the text a summary is (or would be) read from, without summarizing it (None: unknown,
        # unreadable): ``ProjectIndex.importers`` reads only the files that spell a name
        self.text = text

        def summary(path: str) -> Any:  # (refers to no self: no reference cycle to collect)
            with lock:
                found = done.get(path)
                if found is None:
                    found = done[path] = load(path)
                return found

        self.summary = summary
        self.by_path = SummaryMap({path: path for path in paths}, summary)
        self.by_name = SummaryMap(names, summary)


_CLASS_FIELDS = ("name", "bases", "assigned", "read", "builds")
_MODULE_FIELDS = (
    "path", "name", "package", "imports", "star", "classes", "foreign_reads", "strings",
    "ordered_walk", "error", "functions", "digest",
)
_CORE_KEYS = {"imports", "star", "classes", "functions"}
# Who reads which attribute (``project.ensure_reach``): stored when it was read, else read
# again from the text when first asked.
_REACH_KEYS = {"foreign_reads", "strings", "ordered_walk"}


class SummaryStore:
    """Module summaries kept between runs, by the text's digest and the module's place in its
    package (``key``): a warm run reads each file but summarizes only those whose text changed.
    ``module_type`` and ``class_type``: ``project.ModuleSummary`` and ``ClassSummary``; a
    summary with fields this store does not know (a fact added to them) is not stored."""

    def __init__(self, module_type: type, class_type: type) -> None:
        self._module_type, self._class_type = module_type, class_type
        self._fields = [
            [f.name for f in dataclasses.fields(module_type)], [f.name for f in dataclasses.fields(class_type)]
        ]
        self._known = (tuple(self._fields[0]), tuple(self._fields[1])) == (_MODULE_FIELDS, _CLASS_FIELDS)
        self.records: Optional[Dict[str, Any]] = None  # None: no store for this run
        self.used: Dict[str, Any] = {}
        self.added = False
        self._lock = threading.Lock()

    @staticmethod
    def key(digest: str, name: str, package: str) -> str:
        return f"{digest} {name} {package}"

    def load(self, data: Any) -> None:
        """Use the records of ``data`` (what ``dump`` returned in an earlier run, or None)."""
        records = data.get("modules") if type(data) is dict and data.get("fields") == self._fields else None
        self.records = records if type(records) is dict and self._known else {}
        self.used, self.added = {}, False

    def dump(self) -> Optional[Dict[str, Any]]:
        """What to store again, or None when this run made no summary: the records kept and
        the ones made; the ones this run did not use are dropped once they outnumber it (the
        texts of files since edited)."""
        if self.records is None or not self.added:
            return None
        modules = {**self.records, **self.used}
        if len(modules) > max(2 * len(self.used), 1000):
            modules = dict(self.used)
        return {"fields": self._fields, "modules": modules}

    def close(self) -> None:
        self.records, self.used, self.added = None, {}, False

    def get(self, path: str, name: str, package: str, digest: str) -> Optional[Any]:
        """The stored summary of the module ``path`` whose text has ``digest``, if any."""
        if self.records is None:
            return None
        key = self.key(digest, name, package)
        with self._lock:
            record = self.records.get(key)
        summary = self._decode(record, path, name, package, digest)
        if summary is not None:
            with self._lock:
                self.used[key] = record
        return summary

    def add(self, summary: Any) -> None:
        if self.records is None or summary.error is not None or not self._known:
            return
        key, record = self.record_of(summary)
        with self._lock:
            self.used[key] = record
            self.added = True

    def offer(self, key: Any, record: Any) -> None:
        """A summary made by another process of this run (``record_of``: a worker's, read off
        the tree it linted): used as a stored record is, once its key is asked (``get``
        checks it as it checks those). A record already kept for the same text is kept: it
        may hold more (who reads which attribute, read for the TML101 fix)."""
        if self.records is not None and type(key) is str:
            with self._lock:
                if key not in self.records:
                    self.records[key] = record
                    self.added = True

    def record_of(self, summary: Any) -> Tuple[str, Dict[str, Any]]:
        """The key and the record ``add`` stores for ``summary``."""
        reach = summary.reach_known
        record = {
            "imports": summary.imports,
            "star": summary.star,
            "classes": [
                [k.name, list(k.bases), sorted(k.assigned), sorted(k.read), [list(b) for b in k.builds]]
                if reach else [k.name, list(k.bases)]
                for k in summary.classes.values()
            ],
            "functions": sorted(summary.functions),
        }
        if reach:
            record.update(
                foreign_reads=sorted(summary.foreign_reads), strings=sorted(summary.strings),
                ordered_walk=summary.ordered_walk,
            )
        return self.key(summary.digest, summary.name, summary.package), record

    def _decode(self, record: Any, path: str, name: str, package: str, digest: str) -> Optional[Any]:
        if type(record) is not dict or set(record) not in (_CORE_KEYS, _CORE_KEYS | _REACH_KEYS):
            return None
        reach = set(record) != _CORE_KEYS
        imports, classes = record["imports"], record["classes"]
        if type(imports) is not dict or not all(type(k) is str and type(v) is str for k, v in imports.items()):
            return None
        lists = ("star", "functions", "foreign_reads", "strings") if reach else ("star", "functions")
        if not all(_strings(record[k]) for k in lists) or type(classes) is not list:
            return None
        if reach and type(record["ordered_walk"]) is not bool:
            return None
        built: Dict[str, Any] = {}
        for item in classes:
            if not (
                type(item) is list and len(item) == (5 if reach else 2) and type(item[0]) is str
                and all(_strings(part) for part in item[1:4])
                and (not reach or (type(item[4]) is list and all(_strings(pair) and len(pair) == 2 for pair in item[4])))
            ):
                return None
            built[item[0]] = self._class_type(
                item[0], tuple(item[1]), frozenset(item[2]) if reach else frozenset(),
                frozenset(item[3]) if reach else frozenset(),
                tuple((pair[0], pair[1]) for pair in item[4]) if reach else (),
            )
        summary = self._module_type(path, name, package, dict(imports), list(record["star"]), built)
        summary.functions = frozenset(record["functions"])
        summary.digest = digest
        if reach:
            summary.foreign_reads = frozenset(record["foreign_reads"])
            summary.strings = frozenset(record["strings"])
            summary.ordered_walk = record["ordered_walk"]
            summary.reach_known = True
        return summary


def _strings(value: Any) -> bool:
    return type(value) is list and all(type(item) is str for item in value)


# Neighbours read for one run at most; a larger tree is read only where it is linted.
MAX_NEIGHBOURS = 5000


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        try:
            return data.decode("latin-1")
        except UnicodeDecodeError:
            return None


def _neighbours(paths: Sequence[str]) -> List[str]:
    """The other Python files of the top-level packages of ``paths``, and of the directories
    of the files outside any package."""
    found: List[str] = []
    roots: Set[str] = set()
    for path in paths:
        directory = os.path.dirname(path)
        if os.path.isfile(os.path.join(directory, "__init__.py")):
            roots.add(_top_package(directory))
        else:
            roots.add(directory + os.sep + "*")  # the directory's own files, not its subtree
    for root in sorted(roots):
        if root.endswith(os.sep + "*"):
            directory = root[:-2]
            try:
                names = sorted(os.listdir(directory))
            except OSError:
                continue
            for name in names:
                if name.endswith(".py"):
                    candidate = os.path.join(directory, name)
                    if os.path.isfile(candidate):
                        found.append(candidate)
                        if len(found) >= MAX_NEIGHBOURS:
                            return found
            continue
        for directory, subdirectories, filenames in os.walk(root):
            subdirectories[:] = sorted(
                name for name in subdirectories
                if os.path.isfile(os.path.join(directory, name, "__init__.py"))
            )
            for name in sorted(filenames):
                if name.endswith(".py"):
                    candidate = os.path.join(directory, name)
                    if os.path.isfile(candidate):
                        found.append(candidate)
                        if len(found) >= MAX_NEIGHBOURS:
                            return found
    return found


def _top_package(directory: str) -> str:
    top = directory
    while os.path.isfile(os.path.join(directory, "__init__.py")):
        top = directory
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        directory = parent
    return top


def _stamp(path: str) -> Tuple[str, float, int]:
    try:
        status = os.stat(path)
    except OSError:
        return (path, -1.0, -1)
    return (path, status.st_mtime, status.st_size)
