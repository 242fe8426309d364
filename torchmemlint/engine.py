"""Discover files, parse each once, run every enabled rule in one traversal, in parallel."""

from __future__ import annotations

import ast
import gc
import os
import time
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import accumulate
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.cache import Cache, content_hash
from torchmemlint.config import Settings
from torchmemlint.findings import Finding, Location
from torchmemlint.gitignore import GitIgnore
from torchmemlint.incremental import Document
from torchmemlint.lint_order import importers_first
from torchmemlint.analysis import leak_gate, loop_facts
from torchmemlint.analysis.dead_arms import DeadArms
from torchmemlint.analysis.links import kept_tree
from torchmemlint.analysis.sites import Sites
from torchmemlint.context import AnalysisError, FileContext, _PendingFinding
from torchmemlint.noqa import remove_suppressed
from torchmemlint.notebook import NOTEBOOK_SUFFIX, is_notebook, read_notebook
from torchmemlint.positions import resolve_findings
from torchmemlint.project import REGISTRY, STORE, ModuleSummary, remember_summary, remembered_summary, summarize
from torchmemlint.project_cst import summarize_tree
from torchmemlint.rules import all_rules
from torchmemlint.rules.base import Rule, rule_methods
from torchmemlint.pool import run_isolated
from torchmemlint.sourcefile import SourceError, decode_source, read_bytes
from torchmemlint.tree import node_index, parse_module

SYNTAX_ERROR = "E999"
IO_ERROR = "E902"
# A rule (or an analysis it needs) raised on this file: the other rules and files still report.
INTERNAL_ERROR = "TML900"


def _describe_error(error: BaseException) -> str:
    """``ExceptionType: message`` on one line, and where it was raised (file:line)."""
    if isinstance(error, AnalysisError):
        return f"in shared analysis '{error.key}': {_describe_error(error.error)}"
    message = " ".join(str(error).split())
    if len(message) > 200:
        message = message[:197] + "..."
    text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    frame = None
    traceback = error.__traceback__
    while traceback is not None:
        frame = traceback
        traceback = traceback.tb_next
    if frame is not None:
        filename = frame.tb_frame.f_code.co_filename.replace(os.sep, "/")
        marker = "torchmemlint/"
        if marker in filename:
            filename = filename[filename.rindex(marker) :]
        else:
            filename = filename.rsplit("/", 1)[-1]
        text += f" (raised at {filename}:{frame.tb_lineno})"
    return text


def internal_error_message(what: str, error: BaseException) -> str:
    return (
        f"internal error in {what}, which was skipped for this file: {_describe_error(error)}; "
        "please report it"
    )


@lru_cache(maxsize=None)
def _is_statement(node_type: type) -> bool:
    """Whether nodes of ``node_type`` are statements, once per node type."""
    return issubclass(node_type, (cst.SimpleStatementLine, cst.BaseCompoundStatement))


class _BatchedWalker:
    """One traversal that dispatches each node to every rule interested in its type."""

    def __init__(self, context: FileContext, rules: Sequence[Rule]) -> None:
        self.context = context
        self.rules = list(rules)
        self.statements: List[cst.CSTNode] = []  # every statement met, for noqa rows
        self.index = node_index(context.module)  # the file's shared index
        self._sites: Optional[Sites] = None  # where a visited node is, asked when one is
        self._build_tables()

    def _build_tables(self) -> None:
        self.visits: Dict[str, List[Callable[[cst.CSTNode], Any]]] = {}
        self.leaves: Dict[str, List[Callable[[cst.CSTNode], Any]]] = {}
        for rule in self.rules:
            for attribute, methods in rule_methods(rule).items():
                kind, _, node_type = attribute.partition("_")
                table = self.visits if kind == "visit" else self.leaves
                table.setdefault(node_type, []).extend(methods)
        # Per node type: (is a statement, visit methods, leave methods).
        self.kinds: Dict[type, Tuple[bool, Tuple[Any, ...], Tuple[Any, ...]]] = {}

    def _kind(self, node_type: type) -> Tuple[bool, Tuple[Any, ...], Tuple[Any, ...]]:
        name = node_type.__name__
        kind = self.kinds[node_type] = (
            _is_statement(node_type),
            tuple(self.visits.get(name, ())),
            tuple(self.leaves.get(name, ())),
        )
        return kind

    def _failed(self, method: Callable[[cst.CSTNode], Any], node: cst.CSTNode, error: Exception) -> None:
        """A rule raised: report it at the node, drop the rule for the rest of this file."""
        if _interrupted(error):
            raise KeyboardInterrupt from None
        rule = getattr(method, "__self__", None)
        if rule in self.rules:
            self.rules.remove(rule)
            self._build_tables()
        code = getattr(rule, "code", "?")
        name = getattr(rule, "name", type(rule).__name__)
        hook = getattr(method, "__name__", "?")
        what = f"rule {code} ({name}, {hook})"
        self.context.pending.append(
            _PendingFinding(
                INTERNAL_ERROR, node, internal_error_message(what, error), None,
                self.context.statement_stack[0] if self.context.statement_stack else None,
            )
        )

    def walk(self, root: cst.CSTNode) -> None:
        """Visit ``root``'s subtree in pre-order, each node's leave methods after its subtree,
        as a recursive walk would; only the nodes of a type some rule visits or leaves are met
        (read off the index, in its order). At each, the context holds what a recursive walk
        would: the statements around the node and the names it sees (``analysis.sites``);
        every statement of the subtree is kept for the noqa rows."""
        index = self.index
        top = index.find(root)
        if top is None:
            raise ValueError("the walk starts at a node of the file's index")
        order, end = index.order, index.end
        stop = end[top]
        statements: List[int] = []
        hooked: List[int] = []
        for node_type in index.types():
            is_statement, visits, leaves = self.kinds.get(node_type) or self._kind(node_type)
            if is_statement:
                statements.extend(index.positions(node_type))
            if visits or leaves:
                hooked.extend(index.positions(node_type))
        statements.sort()
        self.statements.extend(order[here] for here in statements[bisect_left(statements, top):bisect_left(statements, stop)])
        hooked.sort()
        open_nodes: List[Tuple[int, int]] = []  # (end of subtree, position), innermost last
        try:
            for here in hooked[bisect_left(hooked, top):bisect_left(hooked, stop)]:
                while open_nodes and open_nodes[-1][0] <= here:
                    self._visit(open_nodes.pop()[1], leave=True)
                self._visit(here, leave=False)
                open_nodes.append((end[here], here))
            while open_nodes:
                self._visit(open_nodes.pop()[1], leave=True)
        finally:
            self.context.statement_stack = []
            self.context.bindings = self.context.module_bindings

    def _visit(self, here: int, leave: bool) -> None:
        """Call the visit (or leave) methods of the node at ``here``, with the context at it.
        Looked up at each call: without the rules that failed meanwhile."""
        node = self.index.order[here]
        _, visits, leaves = self.kinds.get(type(node)) or self._kind(type(node))
        methods = leaves if leave else visits
        if not methods:
            return
        if self._sites is None:
            self._sites = Sites(self.index, self.context.module_bindings)
        context = self.context
        context.statement_stack, context.bindings = self._sites.at(here)
        for method in methods:
            try:
                method(node)
            except Exception as error:
                self._failed(method, node, error)


@dataclass
class FileResult:
    path: str
    findings: List[Finding] = field(default_factory=list)
    error: Optional[str] = None  # a one-line I/O or decoding error
    # Of a file linted for ``lint_paths`` with the result cache (``_lint_miss``): the hash of
    # the bytes linted, and the module's summary for the project index read off the tree the
    # lint parsed (``SummaryStore.record_of``: its key and record), None when there is none.
    content: Optional[str] = None
    summary: Optional[Tuple[str, Dict[str, Any]]] = None


# A file that may be too deep or too long for CPython (its tokenizer stops at 200 nested
# brackets, its AST builder at about the recursion limit) is first given to CPython, and when
# CPython refuses it for that, reported with CPython's verdict and never handed to libcst,
# whose native parser can overflow its stack on it. The screen costs about 1 % of a lint
# (timm: 0.12 s of CPU for 304 files, none of which it sends to CPython); compiling every file
# first would cost about 8 % of libcst's parse.
_LONG_LINE = 500  # characters in one line (timm's longest: 207)
_DEEP_BRACKETS = 100  # running bracket depth, counting brackets in strings and comments too
_BRACKET_STEPS = bytes(
    1 if byte in b"([{" else 255 if byte in b")]}" else 0 for byte in range(256)
)  # read as signed bytes: +1, -1, 0
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"()[]{}")  # dropped first


def may_exceed_python_limits(text: str) -> bool:
    """Whether the text has a line of _LONG_LINE characters or brackets nested (as counted
    through the whole text) more than _DEEP_BRACKETS deep: only then can CPython refuse it
    for its depth or length before libcst's recursion limits are near."""
    if len(text) < _DEEP_BRACKETS:
        return False
    if max(map(len, text.splitlines()), default=0) >= _LONG_LINE:
        return True
    # the running depth over the brackets alone (a twentieth of timm's bytes): the same maximum
    brackets = text.encode("utf-8", "surrogatepass").translate(_BRACKET_STEPS, _NOT_BRACKETS)
    steps = memoryview(brackets).cast("b")
    return max(accumulate(steps), default=0) > _DEEP_BRACKETS


# CPython's messages for code too deep or too long for it (tokenizer, parser, AST builder)
_LIMIT_MESSAGES = ("too many nested", "too many levels", "too complex", "nested too deeply",
                   "stack overflow", "recursion")


def _cpython_verdict(text: str, filename: str) -> Tuple[Optional[Finding], bool]:
    """(CPython's E999 for the text or None, whether it is a limit of depth or size)."""
    return _cpython_parse(text, filename)[:2]  # type: ignore[return-value]


def _cpython_parse(
    text: str, filename: str
) -> Tuple[Optional[Finding], bool, Optional[ast.Module]]:
    """CPython's verdict on the text, and its tree when it has one."""
    start = Location(1, 1)
    try:
        tree = compile(text, filename, "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
    except SyntaxError as error:
        location = Location(error.lineno or 1, error.offset or 1)
        message = f"{type(error).__name__}: {error.msg}"
        limit = any(words in str(error.msg) for words in _LIMIT_MESSAGES)
        return Finding(SYNTAX_ERROR, message, filename, location, location), limit, None
    except ValueError as error:  # source with NUL bytes
        return Finding(SYNTAX_ERROR, f"SyntaxError: {error}", filename, start, start), False, None
    except (RecursionError, MemoryError, OverflowError) as error:
        message = (
            f"{type(error).__name__}: {error or 'out of memory'} "
            "(too deep or too long for Python)"
        )
        return Finding(SYNTAX_ERROR, message, filename, start, start), True, None
    return None, False, tree


def _python_syntax_error(text: str, filename: str) -> Optional[Finding]:
    """CPython's own verdict: its positions and messages are the ones users know."""
    return _cpython_verdict(text, filename)[0]


def _interrupted(error: BaseException) -> bool:
    """Whether ``error`` was raised while a Ctrl-C was on its way (a KeyboardInterrupt caught
    by a ``finally`` or ``__exit__`` that raised in turn): the run stops, nothing is reported."""
    seen = 0
    current: Optional[BaseException] = error
    while current is not None and seen < 50:
        if isinstance(current, KeyboardInterrupt):
            return True
        current = current.__context__ or current.__cause__
        seen += 1
    return False


def _loop_rules_may_report(
    text: str, codes: FrozenSet[str], tree: Optional[ast.Module] = None
) -> bool:
    """When only loop rules are left for a file: whether they can report there, read from
    Python's ``ast`` (a tenth of a libcst parse; ``analysis.leak_gate``). True for a file
    CPython cannot parse: libcst's parse reports it."""
    if tree is None:
        try:
            tree = compile(text, "<gate>", "exec", dont_inherit=True, flags=ast.PyCF_ONLY_AST)
        except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
            return True
    return leak_gate.may_report(loop_facts.facts_from_ast(tree), codes, text)


def syntax_error_finding(text: str, filename: str, error: cst.ParserSyntaxError) -> Finding:
    """A file libcst cannot parse, positioned by CPython when CPython rejects it too."""
    finding = _python_syntax_error(text, filename)
    if finding is not None:
        return finding
    location = Location(error.raw_line, error.raw_column + 1)
    message = str(error.message).splitlines()[0] if error.message else "invalid syntax"
    return Finding(SYNTAX_ERROR, f"SyntaxError: {message}", filename, location, location)


def lint_source(
    text: str,
    filename: str,
    settings: Settings,
    codes: Optional[FrozenSet[str]] = None,
    ignore_noqa: bool = False,
    document: Optional[Document] = None,
    trees: Optional[List[Any]] = None,
) -> List[Finding]:
    """All findings for one file's text, noqa applied, sorted by position.

    With a ``document`` (the language server keeps one per open buffer), the parse and the
    positions of the top-level statements the last version of the text shared with this one
    are reused; the findings are the same. ``trees``: a list the tree parsed is appended to:
    libcst's for the rules, or, when no rule needs one, Python's ``ast`` tree where the
    syntax check or the loop rules' gate read one (none when the text does not parse).

    A rule that raises becomes one INTERNAL_ERROR finding at the node it was visiting and is
    skipped for the rest of the file; an error outside any rule (parsing aside) becomes one
    INTERNAL_ERROR finding for the file. Either way the caller gets findings, not a traceback.
    """
    # Python's cyclic garbage collector would walk the growing tree again and again while libcst
    # builds it and the analyses read it (~30 % of a dense file's lint; benchmarks/README.md,
    # "Garbage collection"). It is off for one file and switched back on as it was: what the
    # file's lint leaves in cycles is collected after it.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _lint_source(text, filename, settings, codes, ignore_noqa, document, trees)
    except Exception as error:
        if _interrupted(error):
            raise KeyboardInterrupt from None
        start = Location(1, 1)
        if isinstance(error, (RecursionError, MemoryError)):
            verdict = _cpython_verdict(text, filename)[0]
            if verdict is not None:  # too deep for CPython too: its verdict
                return [verdict]
            # Python accepted the file, but it nests deeper than torchmemlint's analysis goes.
            message = (
                f"cannot lint: too deeply nested or too large for torchmemlint "
                f"({type(error).__name__}); the file was skipped"
            )
            return [Finding(IO_ERROR, message, filename, start, start)]
        message = internal_error_message("torchmemlint's engine", error)
        return [Finding(INTERNAL_ERROR, message, filename, start, start)]
    finally:
        if collecting:
            gc.enable()


def _lint_source(
    text: str,
    filename: str,
    settings: Settings,
    codes: Optional[FrozenSet[str]],
    ignore_noqa: bool,
    document: Optional[Document] = None,
    trees: Optional[List[Any]] = None,
) -> List[Finding]:
    if codes is None:
        codes = settings.codes_for_file(filename)
    verdict: Optional[Finding] = None
    tree: Optional[ast.Module] = None
    checked = may_exceed_python_limits(text)
    if checked:
        verdict, beyond_limits, tree = _cpython_parse(text, filename)
        if beyond_limits:
            return [verdict]  # type: ignore[list-item]
    registry = all_rules()
    # only the rules whose words the text holds (their gates: Rule.needs, needs_torch)
    codes = frozenset(code for code in codes if code not in registry or registry[code].may_apply_at(text, filename))
    if codes and codes <= leak_gate.LOOP_CODES:
        if tree is None and not checked and trees is not None:
            tree = _cpython_parse(text, filename)[2]  # (kept for the caller's ``trees``)
        if not _loop_rules_may_report(text, codes, tree):
            if trees is not None and tree is not None:
                trees.append(tree)
            return []  # CPython parsed it (no syntax error), and no loop rule can report there
    if not codes:
        # Nothing can match; still report a file that does not parse, cheaply.
        if not checked:
            verdict, _, tree = _cpython_parse(text, filename)
        if verdict is None:
            if trees is not None and tree is not None:
                trees.append(tree)
            return []
        # Only libcst's verdict counts: it also reads syntax newer than this interpreter.
        try:
            parse_module(text)
        except cst.ParserSyntaxError as error:
            return [syntax_error_finding(text, filename, error)]
        return []
    try:
        # (a tree another file's lint parsed from this very text, following a name into it)
        module = document.parse(text) if document is not None else kept_tree(filename, text) or parse_module(text)
    except cst.ParserSyntaxError as error:
        return [syntax_error_finding(text, filename, error)]
    if document is not None:
        document.index(module)  # registered: the walker and the analyses find it
    if trees is not None:
        trees.append(module)
    project = filename.endswith((".py", ".pyi")) and any(code in registry and registry[code].needs_project for code in codes)
    if project:
        # the file's own, read off its tree (not compiled again), unless another file's lint read it
        summary = remembered_summary(filename, text) or summarize_tree(filename, text, module)
        if summary is not None:
            remember_summary(filename, text, summary)
    # (a rule that reads the project keys the file's cached findings by the modules it imports,
    # star-imported ones too: only then are names read through ``from .x import *``)
    context = FileContext(module, filename, settings.option_values(), text, codes, star_imports=project)
    rules = []
    for code in sorted(codes):
        try:
            rules.append(registry[code](context))
        except Exception as error:
            if _interrupted(error):
                raise KeyboardInterrupt from None
            what = f"rule {code} ({registry[code].name}, __init__)"
            message = internal_error_message(what, error)
            context.pending.append(_PendingFinding(INTERNAL_ERROR, module, message, None))
    walker = _BatchedWalker(context, rules)
    try:
        walker.walk(module)
        pending = context.pending
    finally:
        context.close()
        del rules[:], walker.rules[:]
    if not pending:
        return []
    dead = DeadArms(module, node_index(module))
    if dead.spans:  # (no rule reports code that cannot run: ``analysis/dead_arms.py``)
        pending = [finding for finding in pending if finding.code == INTERNAL_ERROR or not dead.holds(finding.node)]
        if not pending:
            return []
    findings = resolve_findings(module, filename, pending, text, walker.statements, document)
    if not ignore_noqa:
        findings = remove_suppressed(text, findings)
    return sorted(findings, key=lambda finding: finding.sort_key)


def lint_path(path: str, settings: Settings, ignore_noqa: bool = False) -> FileResult:
    """One file's findings (the cache is ``lint_paths``': it keys an entry after the lint)."""
    try:
        data = read_bytes(path)  # a regular file only: a FIFO would hang the run
    except SourceError as error:
        return FileResult(path, error=str(error))
    return _lint_data(path, data, settings, ignore_noqa)


def _lint_data(path: str, data: bytes, settings: Settings, ignore_noqa: bool, summary: bool = False) -> FileResult:
    """The findings of the file ``path`` whose bytes are ``data``; with ``summary``, also its
    module summary (``FileResult.summary``), read off the tree the lint parsed.

    The tree is still alive after ``lint_source`` while the summary is read: the cyclic garbage
    collector stays off until it is dropped, else its next collection walks every node of it
    (most of what a cold cache run cost beyond a run without the cache)."""
    if not summary:
        return _lint_text(path, data, settings, ignore_noqa, None)
    collecting = gc.isenabled()
    gc.disable()
    trees: List[Any] = []
    try:
        return _lint_text(path, data, settings, ignore_noqa, trees)
    finally:
        del trees[:]
        if collecting:
            gc.enable()


def _lint_text(
    path: str, data: bytes, settings: Settings, ignore_noqa: bool, trees: Optional[List[Any]]
) -> FileResult:
    """``_lint_data``; ``trees``: ``lint_source``'s, the summary is read off it when given."""
    try:
        source = decode_source(path, data)
        notebook = read_notebook(path, source.text) if is_notebook(path) else None
    except SourceError as error:  # a notebook's NotebookError too
        return FileResult(path, error=str(error))
    text = source.text if notebook is None else notebook.source
    findings = lint_source(text, path, settings, ignore_noqa=ignore_noqa, trees=trees)
    if notebook is not None:
        findings = notebook.translate(findings)  # cells, rows and columns in them
    result = FileResult(path, findings)
    if trees and notebook is None and path.endswith((".py", ".pyi")):
        tree = trees[0]
        if type(tree) is ast.Module:
            summary: Optional[ModuleSummary] = summarize(path, text, reach=False, tree=tree)
        else:  # the one the lint read off this tree when a rule asked the project
            summary = remembered_summary(path, text) or summarize_tree(path, text, tree)
        if summary is not None and summary.error is None:
            result.summary = STORE.record_of(summary)
    return result


# -- discovery ------------------------------------------------------------------------------
# The one place that decides which files a directory walk lints (by their suffix).
LINTED_SUFFIXES: Tuple[str, ...] = (".py", ".pyi", NOTEBOOK_SUFFIX)


def is_linted_name(name: str) -> bool:
    return name.endswith(LINTED_SUFFIXES)


def discover(
    paths: Sequence[str], settings: Settings, force_exclude: bool = False
) -> Tuple[List[str], List[FileResult]]:
    """Python files under ``paths`` and the errors met on the way.

    A file named explicitly is linted even if excluded, unless ``force_exclude`` (for hooks
    that pass every changed file by name).
    """
    files: List[str] = []
    errors: List[FileResult] = []
    seen = set()
    for path in paths:
        path = os.path.normpath(path)  # "./a.py" and "a.py" are one file, shown as "a.py"
        if os.path.isdir(path):
            found = _walk(path, settings, _walk_error_recorder(errors))
        elif os.path.exists(path) or os.path.islink(path):
            if force_exclude and is_excluded_file(path, settings):
                continue
            found = iter([path])
        else:
            errors.append(FileResult(path, error=f"{path}: no such file or directory"))
            continue
        for file in found:
            key = os.path.normpath(file)
            if key not in seen:
                seen.add(key)
                files.append(file)
    return files, errors


def is_excluded_file(path: str, settings: Settings) -> bool:
    """Whether discovery would skip ``path``: it or a directory above it is excluded.

    For surfaces handed one file by an editor or a hook (stdin, the language server), which
    should stay as quiet about excluded files as a directory walk is. ``settings`` may be a
    config.Resolver: the settings that govern ``path`` decide.
    """
    settings = settings.for_path(path)
    parts = settings.relative(path).split("/")
    for depth in range(1, len(parts) + 1):
        if all(part == os.pardir for part in parts[:depth]):
            continue  # the directories above the project root are not the project's to exclude
        is_dir = True if depth < len(parts) else None
        if settings.is_excluded(os.path.join(settings.root, *parts[:depth]), is_dir):
            return True
    return False


def _walk_error_recorder(errors: List[FileResult]) -> Callable[[OSError], None]:
    """os.walk's onerror: a directory that cannot be listed is an E902 finding, not a silent
    gap; the walk goes on with the others."""

    def record(error: OSError) -> None:
        path = os.path.normpath(error.filename or "?")
        errors.append(
            FileResult(path, error=f"cannot read directory {path}: {error.strerror or error}")
        )

    return record


def _walk(
    root: str, settings: Settings, onerror: Optional[Callable[[OSError], None]] = None
) -> Iterator[str]:
    """The linted files under ``root``, skipping what ``exclude`` names and, unless
    ``respect-gitignore = false``, what git ignores (``root`` itself is walked: a directory
    named on the command line is linted, as Ruff does)."""
    git = GitIgnore()

    def skipped(path: str, here: Settings, is_dir: bool) -> bool:
        if here.is_excluded(path, is_dir):
            return True
        return here.respect_gitignore and git.ignored(path, is_dir)

    # never follows symlinked dirs; a directory that cannot be listed goes to ``onerror``
    for directory, subdirectories, filenames in os.walk(root, onerror=onerror):
        here = settings.for_path(directory)  # a Resolver: the config that governs this directory
        subdirectories[:] = sorted(
            name
            for name in subdirectories
            if not skipped(os.path.join(directory, name), here, True)
        )
        for name in sorted(filenames):
            if is_linted_name(name):
                path = os.path.normpath(os.path.join(directory, name))
                if not skipped(path, here, False):
                    yield path


def lint_paths(
    files: Sequence[str],
    settings: Settings,
    jobs: int,
    ignore_noqa: bool = False,
    cache: Optional[Cache] = None,
) -> List[FileResult]:
    if cache is None:
        return _importers_first(_lint_one, files, (settings, ignore_noqa), jobs)
    # Hits are answered here; only the files that changed go to the worker processes, so a
    # warm run of an unchanged tree starts no pool.
    results: Dict[str, FileResult] = {}
    misses: List[str] = []
    read: Dict[str, bytes] = {}
    started = time.time_ns()
    # The project's module summaries (for the keys of the rules that read other files) are
    # kept in the cache directory too: a warm run summarizes only the files whose text changed.
    STORE.load(cache.get_document(SUMMARY_DOCUMENT))
    try:
        for path in files:
            hit, data = _cached(path, settings, ignore_noqa, cache)
            if hit is None:
                misses.append(path)
                if data is not None:
                    read[path] = data
            else:
                results[path] = hit
        # The workers (forked here: they inherit the summaries made and loaded so far) lint the
        # misses and return each file's module summary, read off the tree they parsed; the keys
        # of the new entries are computed after, from those, so that a cold run does not parse
        # every file a second time, with ``ast``, for its keys (``project_cst``).
        linted = _importers_first(_lint_miss, misses, (settings, ignore_noqa), jobs)
        for result in linted:
            if result.summary is not None:
                STORE.offer(*result.summary)
        changed = _ChangedSince(started)
        for path, result in zip(misses, linted):
            _store(path, read.get(path), result, settings, ignore_noqa, cache, changed)
            result.content = result.summary = None
            results[path] = result
        kept = STORE.dump()
        if kept is not None:
            cache.put_document(SUMMARY_DOCUMENT, kept)
    finally:
        STORE.close()
    return [results[path] for path in files]


SUMMARY_DOCUMENT = "project-summaries"


def _cached(
    path: str, settings: Settings, ignore_noqa: bool, cache: Cache
) -> Tuple[Optional[FileResult], Optional[bytes]]:
    """The stored result of ``path`` if its entry holds, and the bytes read."""
    try:
        data = read_bytes(path)
    except SourceError:
        return None, None  # the worker reports it
    codes = settings.codes_for_file(path)
    entry = cache.entry_path(path, settings, codes, ignore_noqa)
    if not cache.holds(entry):
        return None, data  # a miss whatever its key: the key is computed after the lint
    findings = cache.get(entry, project_content_hash(path, data, codes), data)
    return (None if findings is None else FileResult(path, findings)), data


def _lint_miss(path: str, settings: Settings, ignore_noqa: bool) -> FileResult:
    """A worker's lint of a file the cache did not hold: its findings, the hash of the bytes
    linted and the module's summary (``FileResult.summary``); the entry is written by
    ``lint_paths`` (``_store``)."""
    try:
        data = read_bytes(path)
    except SourceError as error:
        return FileResult(path, error=str(error))
    result = _lint_data(path, data, settings, ignore_noqa, summary=True)
    result.content = content_hash(data)
    return result


def _store(
    path: str,
    data: Optional[bytes],
    result: FileResult,
    settings: Settings,
    ignore_noqa: bool,
    cache: Cache,
    changed: "_ChangedSince",
) -> None:
    """Write the cache entry of a file a worker linted, keyed with the project facts as they
    are now (the summaries the workers returned are in ``STORE``). Not when the bytes read
    here before the lint are not the ones the worker linted, nor when a project module its key
    holds was written since the run began (the worker may have read it before or after: the
    findings may not be those of the texts the key names), nor for an error, nor when a rule
    failed (an internal error may be transient)."""
    if result.error is not None or result.content is None or data is None or content_hash(data) != result.content:
        return
    if any(finding.code == INTERNAL_ERROR for finding in result.findings):
        return
    codes = settings.codes_for_file(path)
    key = project_key(path, codes)
    if key and any(changed(module.path) for module in REGISTRY.index_for(path).dependencies(path)):
        return
    cache.put(cache.entry_path(path, settings, codes, ignore_noqa), keyed_hash(data, key), path, result.findings)


class _ChangedSince:
    """Whether a file was written since ``started`` (``time.time_ns()``), or cannot be read:
    a file's time stamp comes from a coarser clock, up to a tick behind, hence the margin."""

    MARGIN_NS = 20_000_000

    def __init__(self, started: int) -> None:
        self.since = started - self.MARGIN_NS
        self.known: Dict[str, bool] = {}

    def __call__(self, path: str) -> bool:
        found = self.known.get(path)
        if found is None:
            try:
                found = os.stat(path).st_mtime_ns >= self.since
            except OSError:
                found = True
            self.known[path] = found
        return found


def project_key(path: str, codes: FrozenSet[str], text: Optional[str] = None) -> str:
    """The project facts the findings of ``path`` may depend on (``ProjectIndex.key_for``), or
    "" when no rule of ``codes`` reads other files of the project; ``text``: the file's text
    when it is not the one on disk (an editor's buffer)."""
    registry = all_rules()
    facts: Set[str] = set()
    for code in codes:
        rule = registry.get(code)
        if rule is not None and rule.needs_project:
            facts.update(rule.project_facts)
    if not facts:
        return ""
    return REGISTRY.index_for(path, text).key_for(path, frozenset(facts))


def project_content_hash(path: str, data: bytes, codes: FrozenSet[str]) -> str:
    """The cache's content key of a file: its bytes, and the project facts its findings may
    depend on (``project_key``): an edit elsewhere that changes them makes this file a miss."""
    return keyed_hash(data, project_key(path, codes))


def keyed_hash(data: bytes, key: str) -> str:
    """The content key of bytes ``data`` with the project facts ``key`` (``project_key``)."""
    return content_hash(data + b"\0" + key.encode("ascii")) if key else content_hash(data)


def _lint_one(path: str, settings: Settings, ignore_noqa: bool) -> FileResult:
    """A worker's lint of one file, without the cache (``lint_paths`` with a cache: ``_lint_miss``)."""
    return lint_path(path, settings, ignore_noqa)


def _importers_first(function: Callable[..., FileResult], files: Sequence[str], extra: Tuple, jobs: int) -> List[FileResult]:
    """``run_parallel`` over ``files`` with each file linted after the files that import it
    (``lint_order``: its tree may then be one a lint of theirs parsed already); the results in
    the order of ``files``."""
    order = importers_first(files)
    results: List[Any] = [None] * len(files)
    for number, result in zip(order, run_parallel(function, [files[number] for number in order], extra, jobs)):
        results[number] = result
    return results


def run_parallel(
    function: Callable[..., Any],
    items: Sequence[str],
    extra: Tuple,
    jobs: int,
    on_death: Optional[Callable[[str, str], Any]] = None,
):
    """``function(item, *extra)`` for every item, in order, over up to ``jobs`` child
    processes (``pool.run_isolated``; one child with ``-j 1``): a child that dies costs only the
    item it held, for which ``on_death(item, why)`` stands in (by default a FileResult with
    an error naming the signal)."""
    return run_isolated(function, items, extra, jobs, on_death or worker_died)


def worker_died(path: str, why: str) -> FileResult:
    return FileResult(path, error=worker_died_message(path, why))


def worker_died_message(path: str, why: str) -> str:
    return f"cannot lint {path}: the process linting it was {why}; the file was skipped"
