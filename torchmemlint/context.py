"""What a rule sees of the file being linted: ``FileContext``, below the engine and the rules.

The engine imports this module and the rules; the rules import it (through ``rules.base``);
it imports neither, so there is no import circle. The shared per-file analysis
(``torchmemlint.analysis``) hangs off the context and is built lazily, once per file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.star_names import bind_reexports, expand_star_imports, has_project_star, may_import_reexports
from torchmemlint.tree import node_index

from torchmemlint.findings import Applicability

if TYPE_CHECKING:
    from torchmemlint.analysis import FileAnalysis
    from torchmemlint.project import ProjectIndex


@dataclass(frozen=True)
class NodeEdit:
    """An edit expressed on the tree; the engine turns it into a text range after the visit.

    ``where`` is "replace" (the node's code, owned whitespace included), "before" (insert
    just before the node) or "after" (insert just after it).
    """

    node: cst.CSTNode
    content: str
    where: str = "replace"


@dataclass(frozen=True)
class FixSpec:
    applicability: Applicability
    title: str
    edits: Tuple[NodeEdit, ...]


@dataclass
class _PendingFinding:
    code: str
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec]
    # The top-level statement being visited when it was reported (None: the module): the
    # engine computes positions only for the top-level statements that hold reports.
    top: Optional[cst.CSTNode] = None


class FileContext:
    """What a rule sees of the file being linted."""

    def __init__(
        self,
        module: cst.Module,
        filename: str,
        options: Dict[str, Any],
        text: Optional[str] = None,
        codes: Optional[FrozenSet[str]] = None,
        star_imports: bool = False,
    ) -> None:
        self.module = module
        # The source the module was parsed from (None: unknown). Analyses may use it to skip
        # work that needs a word the file does not contain; it never adds findings.
        self.text = text
        self.filename = filename
        self.options = options
        # The codes of the rules running on this file (None: unknown). A shared analysis may
        # skip work that only rules not running here could use.
        self.codes = codes
        self.bindings = Bindings()
        self.bindings.bind_statements(module.body)
        self.bindings.hoist_function_imports(module, text)
        self.bindings.keep_locals_from_star(module)
        if star_imports and has_project_star(text):
            # ``from .torch_core import *`` giving ``torch``, ``F``, ``nn``: read off the project
            expand_star_imports(self.bindings, filename, self.project)
        if star_imports and may_import_reexports(text):  # ``from mlagents.torch_utils import torch, nn``
            bind_reexports(self.bindings, filename, self.project)
        self.module_bindings = self.bindings
        self.pending: List[_PendingFinding] = []
        # The statements enclosing the node being visited, outermost first.
        self.statement_stack: List[cst.CSTNode] = []
        self._shared: Dict[str, Any] = {}
        self._analysis: Optional["FileAnalysis"] = None

    @property
    def analysis(self) -> "FileAnalysis":
        """The file's shared model (names, classes, flows, autograd scopes, checkpoints)."""
        if self._analysis is None:
            from torchmemlint.analysis import FileAnalysis

            self._analysis = FileAnalysis(
                self.module, self.module_bindings, self.qualify, text=self.text
            )
            from torchmemlint.analysis.links import ProjectLinks

            self._analysis.links = ProjectLinks(
                self.filename,
                lambda: self.project,
                lambda module, bindings, text: FileAnalysis(module, bindings, text=text),
                self.module,
            )
        return self._analysis

    @property
    def project(self) -> "ProjectIndex":
        """The project this file is linted in (``torchmemlint/project.py``): the other files of
        the run and of the file's package, read on first need (rules that ask set
        ``needs_project``, so that the result cache keys their findings by it)."""
        from torchmemlint.project import REGISTRY

        return REGISTRY.index_for(self.filename, self.text)

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.bindings.qualify(node)

    def option_value(self, name: str) -> Any:
        return self.options[name]

    def shared(self, key: str, build: Callable[[], Any]) -> Any:
        """A per-file value computed once and shared by the rules that need it.

        An analysis that raises is not retried: every rule that asks for it gets the error
        (and is disabled for this file), the rules that do not need it go on.
        """
        if key not in self._shared:
            try:
                self._shared[key] = build()
            except Exception as error:
                self._shared[key] = _FailedAnalysis(key, error)
        value = self._shared[key]
        if type(value) is _FailedAnalysis:
            raise AnalysisError(value.key, value.error)
        return value

    def close(self) -> None:
        """Drop what the file's lint built: the analyses refer to each other and to this
        context, and those reference cycles would hold the whole tree until Python's cyclic
        garbage collector walked it (about a tenth of a timm lint, benchmarks/README.md,
        "Garbage collection"); broken here, the tree is freed as soon as the lint returns."""
        if self._analysis is not None:
            self._analysis.close()
        for value in self._shared.values():
            close = getattr(value, "close", None)
            if close is not None:
                close()
        self.__dict__.clear()

    def report(self, code: str, node: cst.CSTNode, message: str, fix: Optional[FixSpec]) -> None:
        top = self.statement_stack[0] if self.statement_stack else self._top_statement(node)
        self.pending.append(_PendingFinding(code, node, message, fix, top))

    def _top_statement(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The top-level statement holding ``node``, for a report made outside the traversal
        of the statements (a rule that answers from the shared analysis in ``visit_Module``);
        None for the module itself or a node that is not the file's."""
        index = node_index(self.module)  # the file's index, built once (the engine's)
        here = index.find(node)
        if here is None or here == 0:
            return None
        path = index.ancestors(here)
        return index.order[path[1]]


class _FailedAnalysis:
    __slots__ = ("key", "error")

    def __init__(self, key: str, error: Exception) -> None:
        self.key = key
        self.error = error


class AnalysisError(Exception):
    """A shared per-file analysis raised; the rule that asked for it cannot run on this file."""

    def __init__(self, key: str, error: Exception) -> None:
        super().__init__(key, error)
        self.key = key
        self.error = error
