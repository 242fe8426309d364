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
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.vocabulary import library_module
from torchmemlint.analysis.star_names import expand_star_imports, has_project_star
from torchmemlint.project import ensure_reach, Located, package_root, ProjectIndex, REGISTRY
from torchmemlint.tree import parse_module

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
        module: Optional[cst.Module] = None,
    ) -> None:
        self.path = os.path.abspath(path)
        self._module = module
        self._from_project: Optional[Tuple[Dict[str, bool], bool]] = None
        self._own_classes: Optional[FrozenSet[str]] = None
        self._index_source = index
        self._index: Optional[ProjectIndex] = None
        self._make = make_analysis
        self._located: Dict[str, Optional[Located]] = {}
        self._package_names: Optional[FrozenSet[str]] = None
        self._assigned: Optional[FrozenSet[str]] = None  # the names the file assigns at its top level
        self._module_class: Dict[Tuple[str, bool], bool] = {}

    @property
    def index(self) -> ProjectIndex:
        if self._index is None:
            self._index = self._index_source()
        return self._index

    def may_come_from_project(self, dotted: Optional[str]) -> bool:
        """Whether another file of the project may define ``dotted``, from this file's own
        imports and without the index: its first name is bound by a relative import, by an
        import of a module beside the file's top-level package (or of that package), or by
        nothing while the file has such a star import. A name of this file, or one imported
        from torch or any module outside the project, is not."""
        if not dotted:
            return False
        if self._module is None:
            return True
        if self._from_project is None:
            self._from_project = _project_imports(self._module, self.path)
        names, star = self._from_project
        head = dotted.partition(".")[0]
        return names[head] if head in names else star

    def _own_class(self, dotted: str) -> bool:
        """A class of this file with a base that may come from another file of the project,
        directly or through other classes of this file."""
        if self._module is None:
            return False
        if self._own_classes is None:
            bases = {
                statement.name.value: [dotted_name(base.value) for base in statement.bases]
                for statement in self._module.body if type(statement) is cst.ClassDef
            }
            found: set = set()
            changed = True
            while changed:
                changed = False
                for name, written in bases.items():
                    if name not in found and any(
                        base and (base in found or (base not in bases and self.may_come_from_project(base)))
                        for base in written
                    ):
                        found.add(name)
                        changed = True
            self._own_classes = frozenset(found)
        return dotted in self._own_classes

    def may_come_from_package(self, dotted: Optional[str]) -> bool:
        """``may_come_from_project``, or imported by absolute name from the file's own top-level
        package (``from speechbrain.nnet.CNN import Conv1d`` in ``speechbrain/lobes/...``).
        Asked only where a module class's ``forward`` is read (``package=True`` below), so that
        the other questions do not make a package's every absolute import a project file to read."""
        if not dotted:
            return False
        if self.may_come_from_project(dotted):
            return True
        if self._module is None:
            return False
        if self._package_names is None:
            self._package_names = _package_imports(self._module, self.path)
        head = dotted.partition(".")[0]
        if head in self._package_names:
            return True
        # a star import of a module of its own package: a name the file binds or assigns itself is not from it
        if "*" not in self._package_names or self._from_project is None or head in self._from_project[0]:
            return False
        if self._assigned is None:
            self._assigned = _assigned_names(self._module)
        if head in self._assigned:
            return False
        if head not in self._located:
            self._located[head] = self.index.locate(self.path, head)
        located = self._located[head]  # (``nn`` through the import is torch's: not the project's)
        return located is not None and located.module is not None

    def locate(self, dotted: Optional[str], package: bool = False) -> Optional[Located]:
        """Where the module-level name ``dotted`` of this file is defined (``ProjectIndex.locate``);
        with ``package``, also a name imported by absolute name from the file's own package."""
        if not dotted or not (self.may_come_from_package(dotted) if package else self.may_come_from_project(dotted)):
            return None
        if dotted not in self._located:
            self._located[dotted] = self.index.locate(self.path, dotted)
        return self._located[dotted]

    def ancestry(self, dotted: Optional[str], own: bool = False, package: bool = False) -> List[Located]:
        """The class ``dotted`` names and the classes it derives from (``ProjectIndex.ancestry``);
        for a class of this file only when a base may come from another file, or with ``own``;
        with ``package``, also a class imported by absolute name from the file's own package."""
        if not dotted:
            return []
        if not (self.may_come_from_project(dotted) or (package and self.may_come_from_package(dotted)) or self._own_class(dotted)):
            if not own or self._module is None or not any(
                type(statement) is cst.ClassDef and statement.name.value == dotted for statement in self._module.body
            ):
                return []
        return self.index.ancestry(self.path, dotted)

    def module_class(self, dotted: Optional[str], package: bool = False) -> bool:
        """``dotted`` names a class of the project that derives, through classes of the
        project, from torch's ``nn.Module`` (or a class named ``Module`` / ``LightningModule``,
        as for a class of the file itself); with ``package``, also one imported by absolute name
        from the file's own package (``from trecover.model import TRecover`` in ``trecover/utils/``:
        asked only of a parameter's annotation, ``module_calls._annotated_class``)."""
        if not dotted:
            return False
        key = (dotted, package)
        if key not in self._module_class:
            ancestry = self.ancestry(dotted, package=package)
            self._module_class[key] = bool(ancestry) and ancestry[0].kind == "class" and any(
                ancestor.kind == "external" and (
                    ancestor.name.startswith("torch.nn.")
                    or ancestor.name.rsplit(".", 1)[-1] in ("Module", "LightningModule")
                    or library_module(ancestor.name)  # (``class SPACE_Graph(GAE)``, PyG's)
                )
                for ancestor in ancestry
            )
        return self._module_class[key]

    def read_by_importers(self, attribute: str) -> bool:
        """Whether a file of the project that imports this one reads ``.<attribute>`` on some
        object (``pipe.head.predict(x)``), or cannot be read (it may): code there may call a
        method of this file's classes. A file of classes nobody imports is loaded by name:
        any file of the project may (``ProjectIndex.readers``)."""
        for other in self.index.readers(self.path):
            ensure_reach(other)
            if other.error is not None or attribute in other.foreign_reads:
                return True
        return False

    def may_name(self, name: str, path: Optional[str] = None, depth: int = 0) -> bool:
        """Whether a file of the project that imports this one (or the one at ``path``) may name
        its top-level ``name``: imports it by name, reads ``.<name>`` on something, names it in a
        string, or cannot be read (``from . import uformer`` alone does not); a package's
        ``__init__.py`` that only star-imports it re-exports it: the files importing the package
        decide."""
        path = path or self.path
        module = self.index.module_of(path)
        for other in self.index.importers(path, name):
            if module is None or other.error is not None:
                return True
            if f"{module.name}.{name}" in other.imports.values():
                return True
            ensure_reach(other)
            if other.error is not None or name in other.foreign_reads or name in other.strings:
                return True
            if module.name in other.star and (
                depth >= 2 or os.path.basename(other.path) != "__init__.py" or self.may_name(name, other.path, depth + 1)
            ):
                return True
        return False

    def definition(self, dotted: Optional[str], kind: str, package: bool = False) -> Optional[Tuple[Any, cst.CSTNode]]:
        """``(analysis of the defining file, its ClassDef / FunctionDef)`` for a class or
        function (``kind``) of another project file; None when it is not one (``package``: see
        ``locate``)."""
        located = self.locate(dotted, package)
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

    def importing(self, name: str, unread: bool = False) -> Optional[List[Tuple[Any, List[str]]]]:
        """For each other project file that imports the top-level ``name`` of this file: its
        analysis and the local names it gives it; None when one of them cannot be read (or
        imports the module whole or by a star: its calls are not known). ``unread``: a file
        that imports the module whole but reads ``.<name>`` on nothing is passed over (a
        package's ``from . import inference`` cannot call ``inference.validate``)."""
        index = self.index
        module = index.module_of(self.path)
        if module is None:
            return None
        dotted = "%s.%s" % (module.name, name)
        found: List[Tuple[Any, List[str]]] = []
        for other in index.importers(self.path, name):
            names = [local for local, target in other.imports.items() if target == dotted]
            if unread and not names and module.name not in other.star and name not in ensure_reach(other).foreign_reads and other.error is None:
                continue
            theirs = self.analysis_of(other.path, other.digest) if other.error is None and names else None
            if theirs is None:
                return None
            found.append((theirs, names))
        return found

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
            module = parse_module(text)  # (without the per-node checks, as the engine parses)
        except (cst.ParserSyntaxError, RecursionError, MemoryError, ValueError):
            return None
        bindings = Bindings()
        bindings.bind_statements(module.body)
        bindings.hoist_function_imports(module, text)
        bindings.keep_locals_from_star(module)
        if has_project_star(text):
            expand_star_imports(bindings, path, index)
        analysis = self._make(module, bindings, text)
        analysis.links = ProjectLinks(path, lambda: index, self._make, module)
        _KEPT[key] = (index, analysis)
        while len(_KEPT) > _KEPT_MAX:
            _KEPT.popitem(last=False)
        return analysis


def kept_tree(path: str, text: str) -> Optional[cst.Module]:
    """The tree of the file ``path`` that a lint of another file parsed from ``text`` while
    following a name into it (``ProjectLinks.analysis_of``), while it is kept: the file's own
    lint takes it instead of parsing the same text again (``lint_order`` lints a file after the
    files that import it, so that this happens)."""
    if not _KEPT:
        return None
    absolute = os.path.abspath(path)
    for (kept_path, _), (_, analysis) in list(_KEPT.items()):  # (a copy: another thread may add)
        if kept_path == absolute and analysis.text == text:
            return analysis.module
    return None


def _project_imports(module: cst.Module, path: str) -> Tuple[Dict[str, bool], bool]:
    """The module-level names of a file and whether each may come from the project (see
    ``ProjectLinks.may_come_from_project``); and whether a star import may bring others."""
    directory = os.path.dirname(os.path.abspath(path))
    root = package_root(path)
    known: Dict[str, bool] = {}  # per first name: a file imports `torch`, its own package ... many times

    def in_project(dotted: str) -> bool:
        top = dotted.partition(".")[0]
        found = known.get(top)
        if found is None:
            found = known[top] = any(
                os.path.isfile(os.path.join(base, top + ".py"))
                or os.path.isfile(os.path.join(base, top, "__init__.py"))
                for base in {root, directory, *_beside(root, top)}
            )
        return found

    names: Dict[str, bool] = {}
    star = False
    for small in _top_level_smalls(module.body):
        if type(small) is cst.ImportFrom:
            relative = bool(small.relative)
            source = dotted_name(small.module) if small.module is not None else None
            project = relative or (source is not None and in_project(source))
            if type(small.names) is cst.ImportStar:
                star = star or project
                continue
            for alias in small.names:
                bound = alias.asname.name if alias.asname is not None else alias.name
                local = dotted_name(bound)  # type: ignore[arg-type]
                if local:
                    names[local.partition(".")[0]] = project
        elif type(small) is cst.Import:
            for alias in small.names:
                full = dotted_name(alias.name) or ""
                bound = dotted_name(alias.asname.name) if alias.asname is not None else full  # type: ignore[arg-type]
                if bound:
                    names[bound.partition(".")[0]] = in_project(full)
    for statement in module.body:  # the file's own classes and functions
        if type(statement) in (cst.ClassDef, cst.FunctionDef):
            names[statement.name.value] = False  # type: ignore[attr-defined]
    return names, star


def _beside(root: str, top: str) -> Tuple[str, ...]:
    """The directory a top-level package sits in, where its sibling packages are (``models/``
    beside ``utils/``, imported as ``from utils.util import f``); none for a script's directory,
    nor for the package itself (its absolute imports: ``ProjectLinks.may_come_from_package``)."""
    if top == os.path.basename(root) or not os.path.isfile(os.path.join(root, "__init__.py")):
        return ()
    return (os.path.dirname(root),)


def _assigned_names(module: cst.Module) -> FrozenSet[str]:
    """The names a file assigns at its top level (``Linear = make_linear``): its own, whatever a
    star import gives it."""
    return frozenset(
        target.target.value for small in _top_level_smalls(module.body) if type(small) is cst.Assign
        for target in small.targets if type(target.target) is cst.Name
    )


def _package_imports(module: cst.Module, path: str) -> FrozenSet[str]:
    """The module-level names a file binds by absolute import from its own top-level package
    (``"*"`` among them: it star-imports a module of that package)."""
    root = package_root(path)
    if not os.path.isfile(os.path.join(root, "__init__.py")):
        return frozenset()
    top = os.path.basename(root)
    # (``from telekinesis.rlbotics.config import MLPConfig`` in ``telekinesis/rlbotics/models.py``:
    # the package also imported through the namespace package, no ``__init__.py``, that holds it)
    namespace = f"{os.path.basename(os.path.dirname(root))}.{top}"

    def own(source: str) -> bool:
        return source.partition(".")[0] == top or source == namespace or source.startswith(namespace + ".")

    names = set()
    for small in _top_level_smalls(module.body):
        if type(small) is cst.ImportFrom and not small.relative and small.module is not None:
            source = dotted_name(small.module) or ""
            if own(source) and type(small.names) is cst.ImportStar:
                names.add("*")  # (``from torchfusion.gan.layers.layers import *``: any name it does not bind)
            elif own(source):
                for alias in small.names:
                    bound = dotted_name(alias.asname.name if alias.asname is not None else alias.name)  # type: ignore[arg-type]
                    if bound:
                        names.add(bound.partition(".")[0])
        elif type(small) is cst.Import:
            for alias in small.names:
                full = dotted_name(alias.name) or ""
                bound = dotted_name(alias.asname.name) if alias.asname is not None else full  # type: ignore[arg-type]
                if own(full) and bound:
                    names.add(bound.partition(".")[0])
    return frozenset(names)


def _top_level_smalls(statements) -> List[cst.BaseSmallStatement]:
    found: List[cst.BaseSmallStatement] = []
    for statement in statements:
        if type(statement) is cst.SimpleStatementLine:
            found.extend(statement.body)
        elif type(statement) in (cst.If, cst.Try):  # `try: from .x import y` / `if TYPE_CHECKING:`
            found.extend(_top_level_smalls(statement.body.body))
            if type(statement) is cst.Try:
                for handler in statement.handlers:
                    found.extend(_top_level_smalls(handler.body.body))
            elif statement.orelse is not None and type(statement.orelse) is cst.Else:
                found.extend(_top_level_smalls(statement.orelse.body.body))
    return found
