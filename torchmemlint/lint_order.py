"""The order a run lints its files in: every file before the project files it imports.

A lint that follows a name into another file of the project parses that file
(``analysis/links.py``) and keeps its tree for a while; when that file's own turn comes, its lint
takes the kept tree instead of parsing it again (``links.kept_tree``). That only happens when
the file is linted after the files that import it: in the order of their paths a package's
``layers/`` come before the ``models/`` that import them, and each of those was parsed twice.

The imports are read with a regular expression over each file's text (``import x.y``,
``from .x import y``), without parsing: the order is only a guess at what the lints will
follow, and any order gives the same findings. Files that import each other keep their order.
"""

from __future__ import annotations

import heapq
import os
import re
from typing import Dict, List, Optional, Sequence, Set

from torchmemlint.project import _resolve_relative, module_name
from torchmemlint.sourcefile import SourceError, read_bytes

_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import\b|import[ \t]+([\w.]+))", re.M)
_MAX_BYTES = 4 * 1024 * 1024  # a larger file is not read for its imports


def importers_first(paths: Sequence[str]) -> List[int]:
    """Indices of ``paths`` in the order to lint them: the order given, except that a file comes
    after every file of ``paths`` that imports it (when they do not import each other)."""
    if len(paths) < 2:
        return list(range(len(paths)))
    names: Dict[str, int] = {}
    places = []
    for number, path in enumerate(paths):
        name, package = module_name(path)
        places.append(package)
        names.setdefault(name, number)
    imported: List[Set[int]] = [set() for _ in paths]  # who each file imports
    importers = [0] * len(paths)
    for number, path in enumerate(paths):
        for target in _imports(path, places[number]):
            found = _project_module(target, names)
            if found is not None and found != number and found not in imported[number]:
                imported[number].add(found)
                importers[found] += 1
    ready = [number for number in range(len(paths)) if importers[number] == 0]
    heapq.heapify(ready)
    order: List[int] = []
    done = [False] * len(paths)
    while len(order) < len(paths):
        if not ready:  # files that import each other: the first left goes on
            ready = [next(number for number in range(len(paths)) if not done[number])]
        number = heapq.heappop(ready)
        if done[number]:
            continue
        done[number] = True
        order.append(number)
        for target in sorted(imported[number]):
            importers[target] -= 1
            if importers[target] == 0 and not done[target]:
                heapq.heappush(ready, target)
    return order


def _imports(path: str, package: str) -> List[str]:
    """The dotted names ``path`` imports (a ``from`` import: its module and each candidate
    submodule ``module.name`` is left to the caller's prefix look-up)."""
    try:
        if os.path.getsize(path) > _MAX_BYTES:
            return []
        data = read_bytes(path)  # a regular file only: a FIFO would block (the lint reports it)
    except (OSError, SourceError):
        return []
    found = []
    for dots, module, plain in _IMPORT.findall(data):
        if plain:
            found.append(plain.decode("ascii", "replace"))
            continue
        dotted = _resolve_relative(package, len(dots), module.decode("ascii", "replace") or None)
        if dotted:
            found.append(dotted)
    return found


def _project_module(dotted: str, names: Dict[str, int]) -> Optional[int]:
    """The file of ``dotted`` or of the longest module name it starts with."""
    while dotted:
        found = names.get(dotted)
        if found is not None:
            return found
        dotted = dotted.rpartition(".")[0]
    return None
