"""The syntactic facts the loop rules' gate (``analysis/leak_gate.py``) decides from
(``LoopFacts``: function names, mode switches, stores on ``self`` in ``forward``, each outermost
loop, and per function its sinks and the calls that may run a module), and their reader from
Python's ``ast`` (a tenth of a libcst parse: the engine reads it where only loop rules are left
for a file). ``leak_gate.facts_from_index`` reads the same facts from a parsed file's node
index; ``tests/test_gates.py`` compares the two readers."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, Iterator, List, Optional, Set, Tuple

from torchmemlint.analysis.autograd import MODEL_NAME, MODULE_METHODS, MODULE_MOVES
from torchmemlint.analysis.callers import _FORWARD_PARTS, _LOADER_WORDS, MODEL_VERBS
from torchmemlint.analysis.sinks import metric_call, SINK_MODULE_ROOTS, STRONG_METHODS, STRONG_NAMES, sink_name

# a comprehension over batches is a loop that collects what it computes (``feeds``)
_AST_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# ``sinks.VALUE_COMPARISONS`` in ``ast``
_AST_VALUE_COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)
# calls that make a bare name a module (``module_calls._moved_like_a_module``)
MOVED_BY = MODULE_METHODS | MODULE_MOVES
MODE_ATTRS = frozenset({"eval", "train"})

Call = Tuple[Optional[str], Optional[str]]  # (method name, dotted callee) of a call
# in place of a method name: a name handed to a call as an argument (``_run_batch(b, model)``),
# which computes in the loop when it names the model (``ScopeFacts._helper_runs_model``)
HANDED = "(handed)"


@dataclass
class Loop:
    """An outermost `for` / `while` or comprehension (its nested loops included)."""

    accumulates: bool = False  # `+=` / `-=`, a `+`, or an `.append(...)` inside
    # is or holds a comprehension over a loader (``feeds.over_loader``, ``collected_over_loader``)
    comprehension: bool = False
    # (a call of torch's `cat` / `stack` ..., among ``calls``, also counts: ``_folds``)
    calls: List[Call] = field(default_factory=list)


@dataclass
class LoopFacts:
    function_names: List[str] = field(default_factory=list)
    # each `x.eval()` (no arguments) and `x.train(...)`: x's dotted name, and whether it
    # switches to evaluation (`eval()`, `train(False)`: ``ScopeFacts.last_mode_change``)
    mode_calls: List[Tuple[Optional[str], bool]] = field(default_factory=list)
    forward_appends: bool = False  # `self.<name>.append(...)` in a method `forward`
    forward_assigns: bool = False  # `self.<name> = ...` (or `+=`, `: T =`) in a method `forward`
    loops: List[Loop] = field(default_factory=list)
    renamed: Dict[str, str] = field(default_factory=dict)  # `from m import name as alias`
    # per function (a ``def``; a lambda belongs to the function around it): its strong sinks,
    # the calls that may run a module, the names it binds (``FunctionFacts``)
    functions: List["FunctionFacts"] = field(default_factory=list)
    module_stores: Set[str] = field(default_factory=set)  # names bound outside any function
    # `import numpy as np` -> np: numpy; `from numpy import array` -> array: numpy.array
    imported: Dict[str, str] = field(default_factory=dict)
    # `<x>` of every `self.<x>` bound (assigned, a loop or `with` target) or given a call only
    # modules answer (`self.<x>.eval()`): what may make `self.<x>` a module besides its name
    self_bound: Set[str] = field(default_factory=set)
    # bare names given a call only modules answer or a move (`net.eval()`, `net.to(device)`)
    moved: Set[str] = field(default_factory=set)
    # every identifier the file writes (names, attributes, imported modules and names,
    # parameters, keywords, definitions), listed on demand by the reader (``loss_named``)
    identifiers: Callable[[], Iterable[str]] = field(default=lambda: (), compare=False, repr=False)

    def loss_named(self) -> bool:
        """An identifier ends in ``Loss``: no `nn.*Loss` can be named without one (a
        qualified name is made of the identifiers of the code and its imports), so without
        one no name is bound to a loss instance (``ScopeFacts._loss_instances``)."""
        return any(name.endswith("Loss") for name in self.identifiers())

    def normalised(self) -> tuple:
        """For comparing two readers: order does not matter."""
        return (
            sorted(self.function_names), sorted(self.mode_calls, key=repr),
            self.forward_appends, self.forward_assigns,
            sorted(((loop.accumulates, loop.comprehension, sorted(loop.calls, key=repr)) for loop in self.loops),
                   key=repr),
            sorted(self.renamed.items()),
            sorted(function.normalised() for function in self.functions),
            sorted(self.module_stores), sorted(self.imported.items()), sorted(self.self_bound),
            sorted(self.moved), sorted({name for name in self.identifiers() if name.endswith("Loss")}),
        )

    def function(self, name: str) -> "FunctionFacts":
        """A new function's record (its calls and names are noted on it)."""
        record = FunctionFacts(name)
        self.functions.append(record)
        return record

    def note_store(self, function: Optional["FunctionFacts"], name: str) -> None:
        """``name`` bound by an assignment, a loop, a ``with``, a comprehension or ``:=``."""
        (function.stores if function is not None else self.module_stores).add(name)


@dataclass
class FunctionFacts:
    """What TML501's sink case needs of one function (``callers.only_sinks_reached``): the
    model call and the strong sink its output reaches are in the same function body, and the
    callee is a module only as ``callers.module_call`` / ``ScopeFacts.is_model`` allow it."""

    name: str
    strong: bool = False  # a strong sink: saved, printed, logged, made a number, `.data`
    roots: Set[str] = field(default_factory=set)  # roots of the dotted callees (`np` of np.save)
    callees: List[str] = field(default_factory=list)  # dotted callees
    params: Set[str] = field(default_factory=set)  # its parameters and its lambdas'
    stores: Set[str] = field(default_factory=set)  # names it binds
    mode: bool = False  # calls `.eval(...)` / `.train(...)`: a receiver may be the model
    # a method's (a def written in a class body): the methods of its class and of the classes
    # of the file it derives from; its first parameter; its parameters with an annotation
    method: bool = False
    methods: Set[str] = field(default_factory=set)
    first: Optional[str] = None
    annotated: Set[str] = field(default_factory=set)
    # the libcst ``FunctionDef`` (``leak_gate.facts_from_index`` only; not compared between readers)
    node: Optional[object] = field(default=None, compare=False, repr=False)

    def normalised(self) -> tuple:
        return (self.name, self.strong, sorted(self.roots), sorted(self.callees),
                sorted(self.params), sorted(self.stores), self.mode, self.method,
                sorted(self.methods), self.first, sorted(self.annotated))

    def note_data(self) -> None:
        """``x.data``: detached on purpose, a strong sink; or a comparison of values
        (``sinks.tensor_comparison``: a bool tensor)."""
        self.strong = True

    def note_call(self, attr: Optional[str], dotted: Optional[str]) -> None:
        last = (dotted or "").rsplit(".", 1)[-1]
        if attr in STRONG_METHODS or last in STRONG_NAMES or sink_name(attr or last or None) or metric_call(dotted):
            self.strong = True
        if attr in MODE_ATTRS:
            self.mode = True
        if dotted is not None:
            self.roots.add(dotted.split(".", 1)[0])
            self.callees.append(dotted)

    def sinks(self, imported: Dict[str, str]) -> bool:
        """A strong sink may end a module's output here (not in `__init__` / `forward`)."""
        return self.name not in ("__init__", "forward") and (self.strong or any(
            imported.get(root, "").split(".", 1)[0] in SINK_MODULE_ROOTS for root in self.roots
        ))

    def may_run_module(
        self, module_stores: Set[str], self_bound: Set[str] = frozenset(), moved: Set[str] = frozenset(),  # type: ignore
    ) -> bool:
        """Some call here may run a module (``callers.module_call``, ``ScopeFacts.is_model``):
        `self.<name>(...)`; a bare name that is a parameter, bound here or at module level;
        `x.forward(...)`, `x.decode(...)`, `x.forward_*()` ...; anything once the function
        switches a mode (the receiver of `.eval()` / `.train()` is then a model)."""
        if self.mode:
            return any(True for _ in self.callees)
        for callee in self.callees:
            if callee.endswith(".forward"):
                callee = callee[: -len(".forward")]
            head, _, rest = callee.partition(".")
            if not rest:
                if (
                    self.method and callee in self.params and callee != self.first and callee not in self.stores
                    and callee not in self.annotated and callee not in moved and not MODEL_NAME.match(callee)
                ):
                    continue  # a method's parameter (`closure`): a module only so named, annotated or moved
                if callee in self.params or callee in self.stores or callee in module_stores:
                    return True
                continue
            if head == "self" and "." not in rest:
                if (
                    rest in self.methods and rest not in self_bound and not MODEL_NAME.match(rest)
                    and rest not in _FORWARD_PARTS  # (`self.encode(x)`: the model's own part)
                ):
                    continue  # `self._lazy_init()`: a method of the class (``module_calls.module_attribute``)
                return True
            last = callee.rsplit(".", 1)[-1]
            if last in _FORWARD_PARTS or last in MODEL_VERBS or last.startswith("forward_"):
                return True
            if (head == "self" and MODEL_NAME.match(last)) or MODEL_NAME.match(head):
                return True  # `self.learn.model(...)`, `model.generate(n)`: a model or a method of one
        return False




def _visible_methods(
    bases: List[str], methods: Set[str], classes: Dict[str, List[Tuple[List[str], Set[str]]]]
) -> Set[str]:
    """``methods`` and those of every class of the file (any of that name) that ``bases``
    name, and of their bases in turn."""
    seen: Set[str] = set()
    found = set(methods)
    todo = list(bases)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for more_bases, more_methods in classes.get(name, ()):
            found |= more_methods
            todo.extend(more_bases)
    return found


# -- reading the same facts from Python's ast --------------------------------------------------
def facts_from_ast(tree: ast.Module) -> LoopFacts:
    facts = LoopFacts(identifiers=lambda: _ast_identifiers(tree))
    reader = _AstReader(facts)
    reader.read(tree, owner=None, forward=False, loop=None, function=None)
    classes: Dict[str, List[Tuple[List[str], Set[str]]]] = {}
    for node in reader.classes:
        classes.setdefault(node.name, []).append((_ast_bases(node), _ast_methods(node)))
    for node in reader.classes:
        for statement in node.body:
            record = reader.records.get(id(statement))
            if record is not None:
                record.method = True
                arguments = statement.args  # type: ignore[attr-defined]
                positional = [*arguments.posonlyargs, *arguments.args]
                record.first = positional[0].arg if positional else None
                record.annotated = {
                    arg.arg for arg in [*positional, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
                    if arg is not None and arg.annotation is not None
                }
                record.methods = _visible_methods(_ast_bases(node), _ast_methods(node), classes)
    return facts


# ``ast`` fields holding identifiers as strings (libcst holds each as a ``Name`` node)
_AST_IDENTIFIERS = {
    ast.Name: ("id",), ast.Attribute: ("attr",), ast.alias: ("name", "asname"), ast.arg: ("arg",),
    ast.keyword: ("arg",), ast.FunctionDef: ("name",), ast.AsyncFunctionDef: ("name",),
    ast.ClassDef: ("name",), ast.ImportFrom: ("module",), ast.Global: ("names",),
    ast.Nonlocal: ("names",), ast.ExceptHandler: ("name",), ast.MatchAs: ("name",),
    ast.MatchStar: ("name",), ast.MatchMapping: ("rest",), ast.MatchClass: ("kwd_attrs",),
}


def _ast_identifiers(tree: ast.AST) -> Iterator[str]:
    """Every identifier of ``tree``, as the ``Name`` nodes of libcst's tree of the same code
    hold them (a dotted import, one per part)."""
    for node in ast.walk(tree):
        fields = _AST_IDENTIFIERS.get(type(node))
        if fields is None:
            continue
        for name in fields:
            value = getattr(node, name)
            for one in value if type(value) is list else (value,):
                if one:
                    yield from one.split(".")


def _ast_bases(node: ast.ClassDef) -> List[str]:
    return [base.id for base in node.bases if type(base) is ast.Name]


def _ast_methods(node: ast.ClassDef) -> Set[str]:
    return {s.name for s in node.body if type(s) in (ast.FunctionDef, ast.AsyncFunctionDef)}


class _AstReader:
    def __init__(self, facts: LoopFacts) -> None:
        self.facts = facts
        self.classes: List[ast.ClassDef] = []
        self.records: Dict[int, FunctionFacts] = {}  # id of a def: its record

    def read(
        self, node: ast.AST, owner: Optional[str], forward: bool, loop: Optional[Loop],
        function: Optional[FunctionFacts],
    ) -> None:
        facts = self.facts
        kind = type(node)
        if kind is ast.FunctionDef or kind is ast.AsyncFunctionDef:
            facts.function_names.append(node.name)  # type: ignore[attr-defined]
            forward = forward or (node.name == "forward" and owner == "class")  # type: ignore
            owner = "function"
            function = facts.function(node.name)  # type: ignore[attr-defined]
            self.records[id(node)] = function
            function.params.update(_ast_params(node.args))  # type: ignore[attr-defined]
        elif kind is ast.Lambda:
            # (libcst's index reader does not count a lambda as a function either)
            for name in _ast_params(node.args):  # type: ignore[attr-defined]
                if function is not None:
                    function.params.add(name)
                else:
                    facts.note_store(None, name)
        elif kind is ast.Name:
            if type(node.ctx) is ast.Store:  # type: ignore[attr-defined]
                facts.note_store(function, node.id)  # type: ignore[attr-defined]
        elif kind is ast.ClassDef:
            owner = "class"
            self.classes.append(node)  # type: ignore[arg-type]
        elif kind in (ast.For, ast.AsyncFor, ast.While) or kind in _AST_COMPREHENSIONS:
            if loop is None:
                loop = Loop(accumulates=kind in _AST_COMPREHENSIONS)
                facts.loops.append(loop)
            loop.comprehension = loop.comprehension or (
                kind in _AST_COMPREHENSIONS and _ast_over_loader(node)  # type: ignore[arg-type]
            )
        elif kind is ast.Call:
            self.call(node, forward, loop)  # type: ignore[arg-type]
            func = node.func  # type: ignore[attr-defined]
            if function is not None and function.name not in ("__init__", "forward"):
                function.note_call(func.attr if isinstance(func, ast.Attribute) else None, _ast_dotted(func))
        elif kind is ast.AugAssign:
            if loop is not None and isinstance(node.op, (ast.Add, ast.Sub)):  # type: ignore
                loop.accumulates = True
            if forward and _ast_on_self(node.target):  # type: ignore[attr-defined]
                facts.forward_assigns = True
        elif kind is ast.Attribute and node.attr == "data":  # type: ignore[attr-defined]
            if function is not None:
                function.note_data()
        elif kind is ast.Compare:
            if function is not None and any(type(op) in _AST_VALUE_COMPARISONS for op in node.ops):  # type: ignore
                function.note_data()
        elif kind is ast.BinOp:
            if loop is not None and isinstance(node.op, ast.Add):  # type: ignore[attr-defined]
                loop.accumulates = True
        elif kind is ast.Assign:
            if forward and any(_ast_on_self(target) for target in node.targets):  # type: ignore
                facts.forward_assigns = True
        elif kind is ast.AnnAssign:
            if forward and _ast_on_self(node.target):  # type: ignore[attr-defined]
                facts.forward_assigns = True
        elif kind is ast.ImportFrom:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname is not None and alias.name != "*":
                    facts.renamed[alias.asname] = alias.name.rsplit(".", 1)[-1]
                if node.module and not node.level and alias.name != "*":  # type: ignore[attr-defined]
                    facts.imported[alias.asname or alias.name] = f"{node.module}.{alias.name}"  # type: ignore
        elif kind is ast.Import:
            for alias in node.names:  # type: ignore[attr-defined]
                if alias.asname is not None:
                    facts.imported[alias.asname] = alias.name
                else:
                    root = alias.name.split(".", 1)[0]
                    facts.imported[root] = root
        if kind is ast.Attribute and type(node.ctx) is ast.Store and _ast_on_self(node):  # type: ignore
            facts.self_bound.add(node.attr)  # type: ignore[attr-defined]
        for child in ast.iter_child_nodes(node):
            self.read(child, owner, forward, loop, function)

    def call(self, node: ast.Call, forward: bool, loop: Optional[Loop]) -> None:
        func = node.func
        attr = func.attr if isinstance(func, ast.Attribute) else None
        if attr in MODE_ATTRS:
            receiver = _ast_dotted(func.value)  # type: ignore[union-attr]
            arguments = sorted(
                [*node.args, *node.keywords],
                key=lambda argument: (argument.lineno, argument.col_offset),
            )
            if attr == "eval":
                if not arguments:
                    self.facts.mode_calls.append((receiver, True))
            else:
                first = arguments[0].value if arguments and isinstance(
                    arguments[0], ast.keyword) else (arguments[0] if arguments else None)
                to_eval = isinstance(first, ast.Constant) and first.value is False
                self.facts.mode_calls.append((receiver, to_eval))
        if attr in MODULE_METHODS and _ast_on_self(func.value):  # type: ignore[union-attr]
            self.facts.self_bound.add(func.value.attr)  # type: ignore[union-attr]
        if attr in MOVED_BY and type(func.value) is ast.Name:  # type: ignore[union-attr]
            self.facts.moved.add(func.value.id)  # type: ignore[union-attr]
        if forward and attr == "append" and _ast_on_self(func.value):  # type: ignore[union-attr]
            self.facts.forward_appends = True
        if loop is not None:
            if attr == "append":
                loop.accumulates = True
            loop.calls.append((attr, _ast_dotted(func)))
            for argument in (*node.args, *(keyword.value for keyword in node.keywords if keyword.arg)):
                if type(argument) is ast.Name:  # a model handed to a helper that runs it
                    loop.calls.append((HANDED, argument.id))


def _ast_over_loader(node: ast.ListComp) -> bool:
    """``feeds.over_loader`` read from ``ast``: a ``for`` clause iterates a name or attribute
    named like a loader, a data set or batches."""
    return any(
        _LOADER_WORDS.search(name)
        for generator in node.generators for part in ast.walk(generator.iter)
        for name in ([part.id] if type(part) is ast.Name else [part.attr] if type(part) is ast.Attribute else [])
    )


def _ast_params(arguments: ast.arguments) -> List[str]:
    found = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    found += [arg for arg in (arguments.vararg, arguments.kwarg) if arg is not None]
    return [arg.arg for arg in found]


def _ast_dotted(node: ast.AST) -> Optional[str]:
    """``names.dotted_name`` for an ast expression: `a.b.c`, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _ast_on_self(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )
