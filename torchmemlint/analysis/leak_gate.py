"""Whether a file can hold a TML5xx finding at all, decided before the scope walk
(``ScopeWalk``, the costly part of the loop analysis, which most model files need for nothing)
and, where only loop rules are left for a file, before libcst parses it.

The decision reads a few syntactic facts (``LoopFacts``): function names, mode switches,
stores on ``self`` in ``forward``, and for each outermost loop whether it accumulates and what
it calls. Two readers give the same facts: one from the file's node index (the file is parsed
anyway) and one from Python's ``ast`` (a tenth of a libcst parse), used by the engine when the
loop rules are the only ones whose text gates pass. Each test is a necessary condition of one
rule, taken from what ``rules/loops.py`` requires before it reports (the names are the ones
``analysis/training.py`` and ``autograd.py`` use): it may answer True for a file without
findings, never False for a file with one. ``tests/test_gates.py`` lints every example and
fixture with the gates on and off and compares the two readers' facts.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.callers import _FORWARD_PARTS, _LOADER_WORDS
from torchmemlint.analysis.autograd import (
    _COMPREHENSIONS, _is_false, AUTOGRAD_CALLS, CRITERION_NAME, FUNCTIONAL_LOSSES, MODEL_NAME, MODULE_METHODS,
    MODULE_MOVES, Scope,
)
from torchmemlint.analysis.feeds import over_loader
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.sinks import (
    metric_call, SINK_MODULE_ROOTS, STRONG_METHODS, STRONG_NAMES, sink_name, tensor_comparison,
)
from torchmemlint.analysis.training import (
    FOLDING_NAMES, is_eval_name, _keyword, _self_attribute, _self_attribute_name,
)
from torchmemlint.analysis.vocabulary import whole_words
from torchmemlint.tree import NodeIndex, nodes_of

# a comprehension over batches is a loop that collects what it computes (``feeds``)
_AST_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
# ``sinks.VALUE_COMPARISONS`` in ``ast``
_AST_VALUE_COMPARISONS = (ast.Lt, ast.Gt, ast.LtE, ast.GtE, ast.Eq, ast.NotEq)
# the loop rules' codes (rules/loops.py reports under these)
EVAL_WITHOUT_NO_GRAD = "TML501"
ACCUMULATED_TENSOR = "TML502"
RETAIN_GRAPH = "TML503"
LIST_ON_SELF = "TML504"
TENSOR_ON_SELF = "TML505"
LOOP_CODES = frozenset(
    {EVAL_WITHOUT_NO_GRAD, ACCUMULATED_TENSOR, RETAIN_GRAPH, LIST_ON_SELF, TENSOR_ON_SELF}
)

# `def evaluate`, `model.eval()`, `model.train(False)`: all TML501 can start from, in words
_MODE_WORD = re.compile(r"(?:eval|train)\b")  # whole words (vocabulary.whole_words)
_DEF_NAME = re.compile(r"def[\s\\]+(\w+)")
_AUTOGRAD_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in AUTOGRAD_CALLS)
_STEP_ATTRS = frozenset({"backward", "manual_backward", "step"})
# calls that make a bare name a module (``module_calls._moved_like_a_module``)
_MOVED_BY = MODULE_METHODS | MODULE_MOVES
_MODE_ATTRS = frozenset({"eval", "train"})


_SINK_TEXT = re.compile(
    r"(?i)\.(?:data|%s)\b|\b(?:%s)\b|[<>]|[=!]=|save|print|log|write|show|plot|display|dump|metric|score|acc|psnr|"
    r"ssim|lpips|bleu|fid|info|debug|warning|%s" % (
        "|".join(sorted(STRONG_METHODS)), "|".join(sorted(STRONG_NAMES)), "|".join(SINK_MODULE_ROOTS),
    )
)


def sink_code_possible(text: str) -> bool:
    """TML501 outside evaluation-named code needs a strong sink (``analysis.sinks``): one of
    their names is in the text."""
    return _SINK_TEXT.search(text) is not None


def loader_comprehension_possible(text: str) -> bool:
    """TML501 reports a model call collected by a comprehension over a loader
    (``feeds.collected_over_loader``): a `for ... in` naming a loader, data set or batches."""
    return _LOADER_FOR.search(text) is not None


_LOADER_FOR = re.compile(r"(?i)\bfor\b[^\n]*\bin\b[^\n]*(?:loader|dataset|batches)")


# Array frameworks with their own autograd and `model.eval()` / `loss.backward()` (Paddle,
# Jittor, OneFlow, MegEngine, MindSpore, MXNet, Chainer, TensorFlow/Keras, JAX/Flax, MLX,
# tinygrad): a file that imports one of them and never names torch is that framework's code.
_OTHER_FRAMEWORK_IMPORT = re.compile(
    r"(?m)^[ \t]*(?:import|from)[ \t]+(?:paddle|jittor|oneflow|megengine|mindspore|mxnet|chainer"
    r"|tensorflow|tf_keras|keras|jax|flax|mlx|tinygrad)\b"
)


# What torch's modules and tensors are asked in training and evaluation code, and code for
# other libraries rarely writes: a file that never names torch must show one of them.
_TORCH_IDIOMS = re.compile(
    r"\.(?:eval|train)\(\s*\)|\.backward\(|\bzero_grad\(|\bno_grad\b|\binference_mode\b"
    r"|\.cuda\(|\.parameters\(\)|\bstate_dict\("
)


def torch_code_possible(text: str) -> bool:
    """Whether the file may be torch code: it names torch, or it imports no other array
    framework and asks a module or tensor what torch code asks (``model.eval()``,
    ``loss.backward()``, ``optimizer.zero_grad()`` ...). A module of a training project that
    never names torch (`def validate(loader, model, criterion)` beside `from tqdm import tqdm`,
    a helper of `train.py`) is read; a Paddle or JAX file whose loops look alike is not, nor
    one whose `model` is another library's (fontTools' `model.interpolateFromMasters(loc, v)`
    collected in a loop)."""
    if "torch" in text:
        return True
    return _OTHER_FRAMEWORK_IMPORT.search(text) is None and _TORCH_IDIOMS.search(text) is not None


def eval_code_possible(text: str) -> bool:
    """TML501 reports a model call in a function named like evaluation (``is_eval_name``) or
    after a ``.eval()`` / ``.train(False)``: the text names one or the other."""
    return any(True for _ in whole_words(_MODE_WORD, text)) or any(
        is_eval_name(match.group(1)) for match in whole_words(_DEF_NAME, text)
    )


Call = Tuple[Optional[str], Optional[str]]  # (method name, dotted callee) of a call


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
            sorted(self.moved),
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
        if attr in _MODE_ATTRS:
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
                if rest in self.methods and rest not in self_bound and not MODEL_NAME.match(rest):
                    continue  # `self._lazy_init()`: a method of the class (``module_calls.module_attribute``)
                return True
            last = callee.rsplit(".", 1)[-1]
            if last in _FORWARD_PARTS or last.startswith("forward_"):
                return True
            if (head == "self" and MODEL_NAME.match(last)) or MODEL_NAME.match(head):
                return True  # `self.learn.model(...)`, `model.generate(n)`: a model or a method of one
        return False


def may_report(facts: LoopFacts, codes: FrozenSet[str], text: Optional[str]) -> bool:
    """False only when none of the TML5xx ``codes`` can report in the file ``facts`` were
    read from (``text``: its source, None when unknown)."""
    return (
        RETAIN_GRAPH in codes  # its text gate (`retain_graph`) already passed
        or (EVAL_WITHOUT_NO_GRAD in codes and (
            _eval_code(facts) or _sink_code(facts) or any(loop.comprehension for loop in facts.loops)))
        or (LIST_ON_SELF in codes and facts.forward_appends)
        or (TENSOR_ON_SELF in codes and facts.forward_assigns)
        or (ACCUMULATED_TENSOR in codes and _accumulating_loop(facts, text))
    )


def _eval_code(facts: LoopFacts) -> bool:
    """TML501: a function named like evaluation, or a switch to evaluation mode."""
    return any(is_eval_name(name) for name in facts.function_names) or any(
        to_eval for _, to_eval in facts.mode_calls
    )


def _sinks_in(
    function: FunctionFacts, depth: int, imported: Dict[str, str], by_name: Dict[str, List[FunctionFacts]]
) -> bool:
    """``function``'s own sink, or one in a helper of the file it calls (`self._report(out)`,
    `report(out)`): ``analysis.sinks`` follows an output into helpers two levels deep."""
    if function.sinks(imported):
        return True
    if depth == 0:
        return False
    for callee in function.callees:
        head, _, rest = callee.partition(".")
        name = rest if head == "self" and rest and "." not in rest else callee
        if "." not in name and any(
            helper is not function and helper.name not in ("__init__", "forward")
            and _sinks_in(helper, depth - 1, imported, by_name)
            for helper in by_name.get(name, ())
        ):
            return True
    return False


def _sink_code(facts: LoopFacts) -> bool:
    """TML501 outside evaluation-named code: a module's output that reaches only saving,
    printing, logging or numbers needs, in one function (other than ``__init__`` /
    ``forward``), a call of one of those (a sink named so, or a call into numpy, matplotlib
    ...: ``analysis.sinks``) and a call that may run a module (``FunctionFacts``)."""
    by_name: Dict[str, List[FunctionFacts]] = {}
    for function in facts.functions:
        by_name.setdefault(function.name, []).append(function)

    return any(
        function.may_run_module(facts.module_stores, facts.self_bound, facts.moved) and _sinks_in(function, 2, facts.imported, by_name)
        for function in facts.functions
    )


def _accumulating_loop(facts: LoopFacts, text: Optional[str]) -> bool:
    """TML502: a loop that both accumulates and computes: runs a model, steps, or computes a
    loss (``ScopeFacts.loop_computes``). Only outermost loops are read: an inner loop's nodes
    are all in the loop around it."""
    # what `.eval()` / `.train(...)` is called on is a model (``ScopeFacts._model_names``)
    switched = {name for name, _ in facts.mode_calls if name is not None}
    # a name bound to an `nn.*Loss` instance computes a loss whatever it is called
    # (``ScopeFacts._loss_instances``): its class's name is written in the file
    loss_class = text is None or "Loss" in text
    for loop in facts.loops:
        if (loop.accumulates or any(_folds(dotted, facts.renamed) for _, dotted in loop.calls)) and any(
            _computes(attr, dotted, switched, facts.renamed, loss_class)
            for attr, dotted in loop.calls
        ):
            return True
    return False


def _folds(dotted: Optional[str], renamed: Dict[str, str]) -> bool:
    """A call that may join a tensor to a loop-carried one (``acc = torch.cat((acc, out))``:
    ``ScopeFacts.folded``): its name is torch's ``cat`` / ``stack`` ..., perhaps renamed."""
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    if "." not in dotted:
        last = renamed.get(last, last)
    return last in FOLDING_NAMES


def _computes(
    attr: Optional[str], dotted: Optional[str], switched, renamed: Dict[str, str], loss_class: bool
) -> bool:
    if attr in _STEP_ATTRS:
        return True  # backward, manual_backward, an optimizer's step
    if dotted is None:
        return False
    if dotted.endswith(".forward"):
        dotted = dotted[: -len(".forward")]
    if dotted in switched or loss_class:
        return True
    head = dotted.rpartition(".")[0]
    if head and (head in switched or MODEL_NAME.match(head.rsplit(".", 1)[-1])):
        return True  # a part or method of the model (``ScopeFacts.model_part``)
    last = dotted.rsplit(".", 1)[-1]
    if "." not in dotted:
        last = renamed.get(last, last)
    return bool(
        MODEL_NAME.match(last) or CRITERION_NAME.search(last)
        or last.endswith("_loss") or last in FUNCTIONAL_LOSSES or last in _AUTOGRAD_NAMES
    )


# -- reading the facts from the node index (libcst) -------------------------------------------
def facts_from_index(index: NodeIndex) -> LoopFacts:
    facts = LoopFacts()
    order = index.order

    def nodes(node_type: type) -> List[cst.CSTNode]:
        return [order[here] for here in index.positions(node_type)]

    facts.function_names = [function.name.value for function in nodes(cst.FunctionDef)]
    records: Dict[int, FunctionFacts] = {}
    for here in index.positions(cst.FunctionDef):
        function_node = order[here]
        record = records[here] = facts.function(function_node.name.value)
        record.params.update(_param_names(function_node.params))

    def record_of(here: int) -> Optional[FunctionFacts]:
        function = index.function_of(here)
        return records[function] if function >= 0 else None

    for here in index.positions(cst.Lambda):
        owner = record_of(here)
        for name in _param_names(order[here].params):
            if owner is not None:
                owner.params.add(name)
            else:
                facts.note_store(None, name)
    for node_type, read_target in _STORE_TARGETS:
        for here in index.positions(node_type):
            target = read_target(order[here])
            if target is not None:
                owner = record_of(here)
                for name in _target_names(target):
                    facts.note_store(owner, name)
                facts.self_bound.update(_target_names(target, on_self=True))
    classes: Dict[str, List[Tuple[List[str], Set[str]]]] = {}  # name: (bases, methods) of each
    for here in index.positions(cst.ClassDef):
        node = order[here]
        bases = [arg.value.value for arg in node.bases if type(arg.value) is cst.Name]
        methods = {
            statement.name.value for statement in getattr(node.body, "body", ())
            if type(statement) is cst.FunctionDef
        }
        classes.setdefault(node.name.value, []).append((bases, methods))
    for here in index.positions(cst.FunctionDef):
        owner_class = index.scope[here]
        if owner_class >= 0 and type(order[owner_class]) is cst.ClassDef and order[here] in getattr(
            order[owner_class].body, "body", ()
        ):
            node = order[owner_class]
            record = records[here]
            record.method = True
            record.first, record.annotated = _first_and_annotated(order[here].params)
            record.methods = _visible_methods(
                [arg.value.value for arg in node.bases if type(arg.value) is cst.Name],
                {s.name.value for s in getattr(node.body, "body", ()) if type(s) is cst.FunctionDef},
                classes,
            )
    for here in index.positions(cst.Call):
        call = order[here]
        func = call.func
        function = index.function_of(here)
        name = order[function].name.value if function >= 0 else None
        if name is not None and name not in ("__init__", "forward"):
            records[function].note_call(
                func.attr.value if type(func) is cst.Attribute else None, dotted_name(func),
            )
        if type(func) is cst.Attribute and func.attr.value in MODULE_METHODS:
            facts.self_bound.update(_target_names(func.value, on_self=True))
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.attr.value in _MOVED_BY:
            facts.moved.add(func.value.value)
        if type(func) is cst.Attribute and func.attr.value in _MODE_ATTRS:
            receiver = dotted_name(func.value)
            if func.attr.value == "eval":
                if not call.args:
                    facts.mode_calls.append((receiver, True))
            else:
                to_eval = bool(call.args) and _is_false(call.args[0].value)
                facts.mode_calls.append((receiver, to_eval))
    for here in index.positions(cst.FunctionDef):
        if order[here].name.value != "forward" or index.scope[here] < 0:
            continue
        if type(order[index.scope[here]]) is not cst.ClassDef:
            continue  # not a method
        for node in index.of_types(here, (cst.Call, cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if type(node) is cst.Call:
                func = node.func
                if (
                    type(func) is cst.Attribute and func.attr.value == "append"
                    and _self_attribute(func.value) is not None
                ):
                    facts.forward_appends = True
            else:
                targets = (
                    [target.target for target in node.targets]
                    if type(node) is cst.Assign else [node.target]
                )
                if any(_self_attribute(target) is not None for target in targets):
                    facts.forward_assigns = True
    outer_end = -1
    comprehensions = [here for kind in _COMPREHENSIONS for here in index.positions(kind)]
    for here in sorted(index.positions(cst.For) + index.positions(cst.While) + comprehensions):
        if here < outer_end:
            continue
        outer_end = index.end[here]
        loop = Loop(accumulates=type(order[here]) in _COMPREHENSIONS)  # a comprehension collects
        for node in index.of_types(here, (cst.AugAssign, cst.BinaryOperation, cst.Call) + _COMPREHENSIONS):
            if type(node) in _COMPREHENSIONS:
                loop.comprehension = loop.comprehension or over_loader(node)  # type: ignore[arg-type]
            elif type(node) is cst.AugAssign:
                if type(node.operator) in (cst.AddAssign, cst.SubtractAssign):
                    loop.accumulates = True
            elif type(node) is cst.BinaryOperation:
                if type(node.operator) is cst.Add:
                    loop.accumulates = True
            else:
                func = node.func
                attr = func.attr.value if type(func) is cst.Attribute else None
                if attr == "append":
                    loop.accumulates = True
                loop.calls.append((attr, dotted_name(func)))
        facts.loops.append(loop)
    for here in index.positions(cst.Attribute):
        if order[here].attr.value == "data":
            function = index.function_of(here)
            if function >= 0:
                records[function].note_data()
    for here in index.positions(cst.Comparison):
        if tensor_comparison(order[here]):
            function = index.function_of(here)
            if function >= 0:
                records[function].note_data()
    for node in nodes(cst.ImportFrom):
        if type(node.names) is cst.ImportStar:
            continue
        module = dotted_name(node.module) if node.module is not None and not node.relative else None
        for alias in node.names:
            original = dotted_name(alias.name) or ""
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                facts.renamed[alias.asname.name.value] = original.rsplit(".", 1)[-1]
            if module is not None:
                bound = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else original
                facts.imported[bound] = f"{module}.{original}"
    for node in nodes(cst.Import):
        for alias in node.names:
            original = dotted_name(alias.name) or ""
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                facts.imported[alias.asname.name.value] = original
            else:
                facts.imported[original.split(".", 1)[0]] = original.split(".", 1)[0]
    return facts


def _first_and_annotated(params: cst.Parameters) -> Tuple[Optional[str], Set[str]]:
    positional = [*params.posonly_params, *params.params]
    found = [*positional, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    first = positional[0].name.value if positional else None
    return first, {param.name.value for param in found if param.annotation is not None}


def _param_names(params: cst.Parameters) -> List[str]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    return [param.name.value for param in found]


def _target_names(target: cst.BaseExpression, on_self: bool = False) -> List[str]:
    """The names a binding target binds (`a`, `a, (b, *c)`; not `x.a`, `x[i]`); ``on_self``:
    the `x` of each `self.x` it binds instead."""
    names: List[str] = []
    stack = [target]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is cst.Attribute:
            if on_self and type(item.value) is cst.Name and item.value.value == "self":  # type: ignore
                names.append(item.attr.value)  # type: ignore[attr-defined]
        elif kind is cst.Name:
            if not on_self:
                names.append(item.value)  # type: ignore[attr-defined]
        elif kind in (cst.Tuple, cst.List):
            stack.extend(element.value for element in item.elements)  # type: ignore[attr-defined]
        elif kind is cst.StarredElement:
            stack.append(item.value)  # type: ignore[attr-defined]
    return names


# the binding targets of each statement or expression that binds names
_STORE_TARGETS = (
    (cst.AssignTarget, lambda node: node.target),
    (cst.AnnAssign, lambda node: node.target),
    (cst.AugAssign, lambda node: node.target),
    (cst.For, lambda node: node.target),
    (cst.CompFor, lambda node: node.target),
    (cst.NamedExpr, lambda node: node.target),
    (cst.WithItem, lambda node: node.asname.name if node.asname is not None else None),
)


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
    facts = LoopFacts()
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
        if attr in _MODE_ATTRS:
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
        if attr in _MOVED_BY and type(func.value) is ast.Name:  # type: ignore[union-attr]
            self.facts.moved.add(func.value.id)  # type: ignore[union-attr]
        if forward and attr == "append" and _ast_on_self(func.value):  # type: ignore[union-attr]
            self.facts.forward_appends = True
        if loop is not None:
            if attr == "append":
                loop.accumulates = True
            loop.calls.append((attr, _ast_dotted(func)))


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


# -- per scope, after the walk -----------------------------------------------------------------
def scope_may_leak(scope: Scope) -> bool:
    """Cheap test, per scope of a file the gate let through, for a pattern some TML5xx rule
    looks at (``rules/loops.py`` replays only these); most scopes have none."""
    if scope.owner is not None and scope.name == "forward":
        return any(
            call.attr == "append" and call.receiver is not None
            and _self_attribute(call.receiver) is not None
            for call in scope.calls
        ) or any(
            not event.augmented and any(_self_attribute_name(t) for t in event.targets)
            for event in scope.assigns
        )
    sinks = scope.function is not None and scope.name not in ("__init__", "forward")
    if sinks and is_eval_name(scope.name) and scope.calls:
        return True  # `predict()`: any module it calls is a model call (analysis.module_calls)
    if sinks and scope.calls and any(tensor_comparison(node) for node in nodes_of(scope.function, cst.Comparison)):
        return True  # `return logits >= threshold`: a bool tensor (analysis.sinks)
    for call in scope.calls:
        if call.attr in ("eval", "train") or (call.attr == "append" and call.ctx.loops):
            return True
        if sinks and (call.attr in STRONG_METHODS or sink_name(call.attr or call.func) or metric_call(call.func)
                      or (call.func or "").rsplit(".", 1)[-1] in STRONG_NAMES
                      or (call.func is not None and "." in call.func and (
                          scope.bindings.qualify(call.node.func) or "").startswith(SINK_MODULE_ROOTS))):
            return True  # a module's output may end here (TML501: analysis.sinks)
        if call.attr == "backward" and call.ctx.loops and _keyword(call.node, "retain_graph"):
            return True
        if call.func is not None and MODEL_NAME.match(call.func.rsplit(".", 1)[-1]):
            return True
        if sinks and call.func is not None and MODEL_NAME.match(call.func.split(".", 1)[0]):
            return True  # `model.encode(...)`: its output may end in `.data` (TML501)
    if any(over_loader(event.value) for event in scope.assigns):
        return True  # `outs = [model(b) for b in loader]` (TML502: ``feeds.collected_over_loader``)
    return any(event.ctx.loops and event.value is not None for event in scope.assigns) and (
        any(event.augmented or type(event.value) is cst.BinaryOperation
            for event in scope.assigns if event.ctx.loops)
    )
