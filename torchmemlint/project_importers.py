"""Who imports what across a project (``ProjectIndex.importers``): the modules that may call a
top-level name of another, read from their summaries; for one name, only the files whose text
spells it are read."""

from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Set, Tuple

from torchmemlint.analysis.vocabulary import whole_words

# ``from x import *`` (a continuation line between the two words too)
_STAR_IMPORT = re.compile(r"import[\s\\]*\*")


def _words_pattern(words: Tuple[str, ...]) -> "re.Pattern[str]":
    """One of ``words``, ended as a word (``vocabulary.whole_words`` checks where it starts)."""
    return re.compile("(?:%s)\\b" % "|".join(re.escape(word) for word in words))


class Importers:
    """The importers of the modules of one index: ``by_path`` (path -> module summary, made on
    access), ``texts`` (path -> the text a summary is read from; None where not known)."""

    def __init__(self, by_path: Mapping[str, Any], texts: Optional[Callable[[str], Optional[str]]]) -> None:
        self.by_path = by_path
        self.texts = texts
        self._map: Optional[Tuple[Dict[str, Set[str]], Dict[str, Set[str]], Dict[str, Set[str]], List[str]]] = None
        self._spelled: Dict[Tuple[str, str], List[Any]] = {}
        self._stars: Dict[str, bool] = {}
        # the files that spell one set of words (a module's last part, and a package's name
        # asked), read once per set: a module's names all ask for its last part
        self._spellers: Dict[Tuple[str, ...], Set[str]] = {}

    def of(self, module: Any, name: Optional[str]) -> List[Any]:
        """The other modules that import ``name`` of ``module`` (None: any name, or the module
        itself), star-import it or cannot be read."""
        if name is not None and self.texts is not None:  # (any name: every file is read)
            return self._spelling(module, name)
        exact, under, star, unread = self._importer_map()
        found = set(unread) | star.get(module.name, set()) | exact.get(module.name, set())
        if name is None:
            found |= under.get(module.name, set())
        else:
            found |= exact.get(f"{module.name}.{name}", set())
        return [other for other in (self.by_path[p] for p in sorted(found)) if other is not module]

    def _spelling(self, module: Any, name: str) -> List[Any]:
        """The importers of ``name``, reading and summarizing only the files that may import
        it: those whose text has the module's last part as a word (every import of a module
        spells it: ``from .layers import leaky``, ``import pkg.layers as L``, ``from pkg import
        layers``, a star import of it) or a star import; for a package's ``__init__.py``, also
        those spelling ``name`` (``from . import leaky`` in the package). Another cannot import
        it, even one that does not parse. The same modules as the map of every file's imports
        otherwise, without summarizing the project's other files (most of them: timm's
        ``get_act_layer``). Who may read a class's attributes (any name: ``readers``, for the
        TML101 fix) still counts every file that cannot be read, spelled or not."""
        key = (module.path, name)
        if key in self._spelled:
            return self._spelled[key]
        last = module.name.rpartition(".")[2]
        package = os.path.basename(module.path) == "__init__.py"
        words = (last, name) if package else (last,)
        dotted = f"{module.name}.{name}"
        found: List[Any] = []
        if self._map is not None:  # (every file summarized already, a cache's run: the map answers)
            exact, _, star, unread = self._map
            paths = set(star.get(module.name, ())) | exact.get(module.name, set()) | exact.get(dotted, set())
            pattern = _words_pattern(words)
            paths |= {path for path in unread if self._spelled_in(path, words, pattern)}
            found = [other for other in (self.by_path[p] for p in sorted(paths)) if other is not module]
        else:
            for path in sorted(self._spelling_files(words)):
                other = self.by_path[path]
                if other is module:
                    continue
                targets = other.imports.values()
                if other.error is not None or module.name in other.star or module.name in targets or dotted in targets:
                    found.append(other)
        self._spelled[key] = found
        return found

    def _spelling_files(self, words: Tuple[str, ...]) -> Set[str]:
        """The files whose text has one of ``words`` as a whole word, or a star import (or
        cannot be read)."""
        found = self._spellers.get(words)
        if found is None:
            pattern = _words_pattern(words)
            found = self._spellers[words] = {path for path in self.by_path if self._spelled_in(path, words, pattern)}
        return found

    def _spelled_in(self, path: str, words: Tuple[str, ...], pattern: "re.Pattern[str]") -> bool:
        text = self.texts(path)  # type: ignore[misc]
        if text is None or self._star_importing(path, text):
            return True
        # (a substring test first: most files do not hold the words at all)
        return any(word in text for word in words) and any(True for _ in whole_words(pattern, text))

    def _star_importing(self, path: str, text: str) -> bool:
        found = self._stars.get(path)
        if found is None:
            found = self._stars[path] = _STAR_IMPORT.search(text) is not None
        return found

    def _importer_map(self) -> Tuple[Dict[str, Set[str]], Dict[str, Set[str]], Dict[str, Set[str]], List[str]]:
        """Who imports what, read once from every module of the project: the modules that
        import each dotted target, that import a name under each dotted prefix, that
        star-import each module, and those that cannot be read."""
        if self._map is None:
            exact: Dict[str, Set[str]] = {}
            under: Dict[str, Set[str]] = {}
            star: Dict[str, Set[str]] = {}
            unread: List[str] = []
            for path in self.by_path:
                other = self.by_path[path]
                if other.error is not None:
                    unread.append(path)
                for target in other.imports.values():
                    exact.setdefault(target, set()).add(path)
                    head = target
                    while "." in head:
                        head = head.rpartition(".")[0]
                        under.setdefault(head, set()).add(path)
                for starred in other.star:
                    star.setdefault(starred, set()).add(path)
            self._map = (exact, under, star, unread)
        return self._map
