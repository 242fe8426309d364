"""Names a file takes from other files of its project, followed into those files.

A rule that meets a name the file does not define (``Block`` from ``from .blocks import
Block``, ``Net`` from ``from models import *``, a base class re-exported by a package's
``__init__.py``) asks ``ProjectLinks``: the project index (``torchmemlint/project.py``) says
where the name is defined, and the defining file's own shared analysis (``FileAnalysis``,
parsed on first need and kept while the project is unchanged) answers what it builds. The
answers are the ones the same code pasted into one file gets, because the same analysis
gives them.

The static linter never runs the other file: it is parsed, like the file being linted.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import Bindings
from torchmemlint.project import Located, ProjectIndex, REGISTRY

# Parsed files of the project, kept while the index they were followed in is the current one:
# (path, digest) -> (index, analysis). A few: a file is followed into only for the names it
# imports from the project.
_KEPT: "OrderedDict[Tuple[str, str], Tuple[ProjectIndex, Any]]" = OrderedDict()
_KEPT_MAX = 64


class ProjectLinks:
    """The project seen from one file (``path``): where its undefined names come from.

    ``index`` returns the project index (asked on first need); ``make_analysis(module,
    bindings, text)`` builds the shared analysis of another file (``FileAnalysis``, given by
    the caller so that this module does not import it)."""

    def __init__(
        self,
        path: str,
        index: Callable[[], ProjectIndex],
        make_analysis: Callable[[cst.Module, Bindings, str], Any],
    ) -> None:
        self.path = os.path.abspath(path)
        self._index_source = index
        self._index: Optional[ProjectIndex] = None
        self._make = make_analysis
        self._located: Dict[str, Optional[Located]] = {}
        self._module_class: Dict[str, bool] = {}

    @property
    def index(self) -> ProjectIndex:
        if self._index is None:
            self._index = self._index_source()
        return self._index

    def locate(self, dotted: Optional[str]) -> Optional[Located]:
        """Where the module-level name ``dotted`` of this file is defined (``ProjectIndex.locate``)."""
        if not dotted:
            return None
        if dotted not in self._located:
            self._located[dotted] = self.index.locate(self.path, dotted)
        return self._located[dotted]

    def ancestry(self, dotted: Optional[str]) -> List[Located]:
        """The class ``dotted`` names and the classes it derives from (``ProjectIndex.ancestry``)."""
        return self.index.ancestry(self.path, dotted) if dotted else []

    def module_class(self, dotted: Optional[str]) -> bool:
        """``dotted`` names a class of the project that derives, through classes of the
        project, from torch's ``nn.Module`` (or a class named ``Module`` / ``LightningModule``,
        as for a class of the file itself)."""
        if not dotted:
            return False
        if dotted not in self._module_class:
            ancestry = self.ancestry(dotted)
            self._module_class[dotted] = bool(ancestry) and ancestry[0].kind == "class" and any(
                ancestor.kind == "external" and (
                    ancestor.name.startswith("torch.nn.")
                    or ancestor.name.rsplit(".", 1)[-1] in ("Module", "LightningModule")
                )
                for ancestor in ancestry
            )
        return self._module_class[dotted]

    def definition(self, dotted: Optional[str], kind: str) -> Optional[Tuple[Any, cst.CSTNode]]:
        """``(analysis of the defining file, its ClassDef / FunctionDef)`` for a class or
        function (``kind``) of another project file; None when it is not one."""
        located = self.locate(dotted)
        if located is None or located.kind != kind or located.module is None:
            return None
        if os.path.abspath(located.module.path) == self.path:
            return None  # the file's own: its analysis answers without the project
        analysis = self.analysis_of(located.module.path, located.module.digest)
        if analysis is None:
            return None
        callables = analysis.callables
        node = (callables.classes if kind == "class" else callables.functions).get(located.name)
        return None if node is None else (analysis, node)

    def analysis_of(self, path: str, digest: str) -> Optional[Any]:
        """The shared analysis of another project file (None: it cannot be read or parsed)."""
        key = (os.path.abspath(path), digest)
        index = self.index
        kept = _KEPT.get(key)
        if kept is not None and kept[0] is index:
            _KEPT.move_to_end(key)
            return kept[1]
        text = REGISTRY.text_of(path)
        if text is None:
            return None
        try:
            module = cst.parse_module(text)
        except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
            return None
        bindings = Bindings()
        bindings.bind_statements(module.body)
        analysis = self._make(module, bindings, text)
        analysis.links = ProjectLinks(path, lambda: index, self._make)
        _KEPT[key] = (index, analysis)
        while len(_KEPT) > _KEPT_MAX:
            _KEPT.popitem(last=False)
        return analysis
