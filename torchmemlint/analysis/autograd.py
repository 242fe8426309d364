"""The autograd state of every scope, and the loops and statements around every call.

One fast walk per file records, for the module body and for every function, the calls and
assignments in source order with their context: enclosing loops, whether autograd is off there
(``torch.no_grad()``, ``torch.inference_mode()``, a decorator, ``set_grad_enabled``), and the
statements (with their indents) around them. ``FileAnalysis.scopes`` builds it on first need.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, FrozenSet, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.tree import children, indexed, nodes_of
from torchmemlint.analysis.vocabulary import library_module

# Parameters and `self` attributes taken to be the model when they are called (`is_model`,
# `build_model` are functions, not models).
MODEL_NAME = re.compile(
    r"^(?:model|net|network|module|model_ema|_{1,2}(?:model|net|network)|"  # (``self._model``: detectron2's hooks)
    r"(?!_*(?:is|get|build|load|make|create|init|save|set|to|has|prepare|wrap|unwrap|update|"
    r"compute|export|register|freeze|copy|reset|convert|check|apply|run|call)_)\w+_(?:model|net))$"
)
# Callables whose result is a loss.
CRITERION_NAME = re.compile(r"(?:^|_)(?:criterion|loss_?fn|loss_?func|loss_?function)(?:$|_|\d)")
# methods only a module has (a tensor has `.to`/`.cuda` too, but a tensor is never called)
MODULE_METHODS = frozenset(
    {"eval", "train", "parameters", "named_parameters", "modules", "named_modules", "children",
     "state_dict", "load_state_dict", "requires_grad_", "zero_grad", "buffers", "named_buffers",
     "named_children", "get_submodule", "get_parameter", "get_buffer",
     # (a hook's handle, not an output: `handles.append(module.register_backward_hook(f))`)
     "register_forward_hook", "register_forward_pre_hook", "register_backward_hook",
     "register_full_backward_hook", "register_full_backward_pre_hook", "register_buffer",
     "register_parameter", "register_module", "add_module"}
)
MODULE_MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16"})
# Words of a function name that make it evaluation code.
EVAL_WORDS = frozenset(
    {"eval", "evaluate", "evaluation", "validate", "validation", "val", "valid", "test",
     "testing", "predict", "prediction", "predicted", "predicting", "infer", "inference", "inferring",
     "evaluating", "validating"}
)
# Lightning runs these hooks under `torch.inference_mode()` / `no_grad()` itself.
FRAMEWORK_NO_GRAD_HOOKS = re.compile(
    r"^(?:(?:validation|test|predict)_(?:step|step_end|epoch_end)"
    r"|on_(?:validation|test|predict)_\w+)$"
)
NO_GRAD_CONTEXTS = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad",
     "torch.autograd.inference_mode", "torch.autograd.grad_mode.no_grad",
     "torch.autograd.grad_mode.inference_mode"}
)
SET_GRAD_ENABLED = frozenset(
    {"torch.set_grad_enabled", "torch.autograd.set_grad_enabled",
     "torch.autograd.grad_mode.set_grad_enabled"}
)
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
AUTOGRAD_CALLS = frozenset({"torch.autograd.grad", "torch.autograd.backward"})
FUNCTIONAL_LOSSES = frozenset({"cross_entropy", "binary_cross_entropy", "kl_div"})
# Tensor methods whose result still carries the receiver's autograd history.
GRAD_KEEPING_METHODS = frozenset(
    {"mean", "sum", "squeeze", "unsqueeze", "view", "reshape", "flatten", "float", "double",
     "half", "bfloat16", "to", "cpu", "cuda", "clone", "contiguous", "softmax", "log_softmax",
     "sigmoid", "exp", "abs", "permute", "transpose", "t", "view_as", "reshape_as", "expand",
     "narrow", "squeeze_", "unsqueeze_", "gather", "index_select"}
)
# For activations kept on `self`, `.detach()` keeps the memory (only moving it off does not).
DEVICE_KEEPING_METHODS = (GRAD_KEEPING_METHODS - {"cpu"}) | {"detach", "detach_", "chunk"}
GRAD_KEEPING_TORCH_FUNCTIONS = frozenset(
    {"torch.sigmoid", "torch.softmax", "torch.log_softmax", "torch.exp", "torch.tanh",
     "torch.nn.functional.softmax", "torch.nn.functional.log_softmax",
     "torch.nn.functional.sigmoid", "torch.cat", "torch.stack", "torch.flatten"}
)
# torch functions that do not return a tensor.
NON_TENSOR_TORCH = re.compile(
    r"^torch\.(?:is_\w+|numel|jit\.\w+|compiler\.\w+|_assert|get_\w+|cuda\.\w+)$"
)
# Where a float works as well as a 0-dim tensor: the `.item()` fix is offered only then.
# Calls whose result has a fixed type, whatever they are given:
FIXED_TYPE_CALLS = frozenset({"print", "float", "int", "str", "repr", "format", "bool", "len"})
# logging calls:
LOGGING_METHODS = frozenset(
    {"info", "debug", "warning", "write", "add_scalar", "set_postfix", "set_description", "log"}
)
# Calls whose result follows the type of what they are given (a tensor in, a tensor out): a
# read through them counts as a read of their result.
TYPE_FOLLOWING_CALLS = frozenset({"sum", "max", "min", "abs", "sorted", "round"})
TYPE_FOLLOWING_MODULES = ("np.", "numpy.", "statistics.")



@dataclass(frozen=True)
class Frame:
    """A statement that encloses an event, with what is needed to rewrite it."""

    statement: cst.CSTNode
    indents: Tuple[Optional[str], ...]  # the relative indents of the blocks around it
    seq: int


@dataclass(frozen=True)
class Ctx:
    # Built field by field (positionally) where one field changes: dataclasses.replace costs
    # several times more, once per statement of the file.
    loops: Tuple[cst.CSTNode, ...] = ()
    no_grad: bool = False  # autograd off, or switched by something we cannot read
    iterating: bool = False  # in a loop or a comprehension
    chain: Tuple[Frame, ...] = ()
    indents: Tuple[Optional[str], ...] = ()


@dataclass
class CallEvent:
    node: cst.Call
    seq: int
    ctx: Ctx
    func: Optional[str]  # dotted callee, e.g. "model", "self.model", "loss.backward"
    attr: Optional[str]  # method name when the callee is an attribute
    receiver: Optional[cst.BaseExpression]


@dataclass
class AssignEvent:
    node: cst.CSTNode
    seq: int
    ctx: Ctx
    targets: Tuple[str, ...]
    value: Optional[cst.BaseExpression]
    augmented: bool = False
    unpacked: bool = False


@dataclass
class ClassFacts:
    node: cst.ClassDef
    methods: List["Scope"] = field(default_factory=list)


@dataclass
class Scope:
    node: Union[cst.Module, cst.FunctionDef]
    name: str
    bindings: Bindings
    no_grad: bool  # decorated, or defined where autograd is off
    indents: Tuple[Optional[str], ...]  # of the `def` line
    owner: Optional[ClassFacts] = None
    grad_work: bool = False  # enable_grad / requires_grad: gradients are wanted here
    grad_off_seq: Optional[int] = None  # `torch.set_grad_enabled(False)` as a statement
    calls: List[CallEvent] = field(default_factory=list)
    assigns: List[AssignEvent] = field(default_factory=list)
    parent: Optional["Scope"] = None  # the scope the ``def`` is in

    @property
    def function(self) -> Optional[cst.FunctionDef]:
        return self.node if type(self.node) is cst.FunctionDef else None

    def params(self) -> List[cst.Param]:
        if self.function is None:
            return []
        params = self.function.params
        return [*params.posonly_params, *params.params, *params.kwonly_params]


# -- the walk ---------------------------------------------------------------------------------


def framework_hook(owner: Optional[ClassFacts], name: str, bindings: Bindings) -> bool:
    """``name`` is a hook Lightning runs without autograd (``validation_step`` ...) of a method
    of ``owner``, unless that class derives from torch's ``nn.Module`` itself: Lightning runs a
    ``LightningModule``'s hooks only, and a plain module's ``validation_step`` runs as its
    callers run it (torchlaplace's ``GeneralNeuralLaplace``, called by hand with autograd on)."""
    if owner is None or not FRAMEWORK_NO_GRAD_HOOKS.match(name):
        return False
    return not any(
        arg.keyword is None and type(arg.value) in (cst.Name, cst.Attribute) and bindings.qualify(arg.value) == "torch.nn.Module"
        for arg in owner.node.bases
    )


def grad_effect(expr: cst.BaseExpression, bindings: Bindings) -> Optional[str]:
    """"off", "on", "unknown" (grad mode switched in a way we cannot read) or None."""
    call = expr if type(expr) is cst.Call else None
    target = call.func if call is not None else expr
    qualified = bindings.qualify(target) if type(target) in (cst.Name, cst.Attribute) else None
    if qualified in NO_GRAD_CONTEXTS:
        if call is not None and call.args and _is_false(call.args[0].value):
            return "on"  # inference_mode(False)
        return "off"
    if qualified in ENABLE_GRAD:
        return "on"
    if qualified in SET_GRAD_ENABLED and call is not None and call.args:
        value = call.args[0].value
        return "off" if _is_false(value) else "on" if _is_true(value) else "unknown"
    for name in _names_in(expr):
        if _grad_mode_name(name.rsplit(".", 1)[-1]):
            return "unknown"
    return None


def _trains_inside(node: cst.With) -> bool:
    """A ``with`` whose body calls ``.backward()`` (in an ``if`` too): the mode it sets may be
    off, but it is on when that backward runs."""
    return any(
        type(call.func) is cst.Attribute and call.func.attr.value == "backward" for call in nodes_of(node.body, cst.Call)
    )


def _grad_mode_name(last: str) -> bool:
    """A name that says it switches autograd off: torch's own, and project wrappers named
    `*no_grad*`, `*inference_mode*` (ultralytics `smart_inference_mode`) or `eval_mode`
    (monai's context manager that enters `torch.no_grad()`)."""
    return (
        last == "set_grad_enabled" or last == "eval_mode"
        or ("no_grad" in last and not last.startswith(("is_", "has_")))
        or ("inference_mode" in last and not last.startswith(("is_", "has_")))
    )


def _is_false(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "False"


def _is_true(expr: cst.BaseExpression) -> bool:
    return type(expr) is cst.Name and expr.value == "True"


def _names_in(node: cst.CSTNode) -> Iterator[str]:
    """Dotted names (outermost chains) anywhere in an expression."""
    found = indexed(node)
    if found is not None:
        index, here = found
        order, end = index.order, index.end
        skip = -1
        for at in index.positions_in(here, (cst.Name, cst.Attribute)):
            if at < skip:
                continue
            dotted = dotted_name(order[at])  # type: ignore[arg-type]
            if dotted is not None:
                yield dotted
                skip = end[at]
        return
    yield from _names_walk(node)


def _names_walk(node: cst.CSTNode) -> Iterator[str]:
    if type(node) in (cst.Name, cst.Attribute):
        dotted = dotted_name(node)
        if dotted is not None:
            yield dotted
            return
    for child in children(node):
        yield from _names_walk(child)


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    if type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            yield from _target_names(element.value)
    elif type(target) is cst.StarredElement:
        yield from _target_names(target.value)
    else:
        dotted = dotted_name(target)
        if dotted is not None:
            yield dotted


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_EXPRESSION_TYPES = (cst.Lambda, cst.Call, *_COMPREHENSIONS)  # what ScopeWalk.expr acts on
_GRAD_MODE_NAMES = ("no_grad", "inference_mode", "set_grad_enabled", "enable_grad")


def _scan_grad_switches(nodes: Sequence[cst.CSTNode], function: Optional[str], found: Set[str]) -> None:
    """``grad_switching_functions``' statement-level scan, adding to ``found``."""
    for node in nodes:
        if type(node) is cst.FunctionDef:
            _scan_grad_switches(_suite_statements(node.body), node.name.value, found)
        elif type(node) is cst.ClassDef:
            _scan_grad_switches(_suite_statements(node.body), None, found)
        elif type(node) is cst.With and function is not None and any(
            name.rsplit(".", 1)[-1] in _GRAD_MODE_NAMES
            for item in node.items
            for name in _names_in(item.item)
        ):
            found.add(function)
        elif isinstance(node, cst.BaseCompoundStatement):
            for child in children(node):
                if isinstance(child, (cst.BaseSuite, cst.Else, cst.Finally, cst.ExceptHandler)):
                    _scan_grad_switches(_suite_statements(child), function, found)
                elif type(child) in (cst.If, cst.ExceptHandler):
                    _scan_grad_switches([child], function, found)
            for suite in _extra_suites(node):
                _scan_grad_switches(_suite_statements(suite), function, found)


def grad_switching_functions(statements: Sequence[cst.CSTNode]) -> Set[str]:
    """Functions of this file that switch grad mode in a `with` block: a context manager like
    `def _set_training_mode(self, training): ... with torch.set_grad_enabled(training): yield`.
    A `with` over one of them is treated as switching grad mode (statement-level scan only)."""
    found: Set[str] = set()

    _scan_grad_switches(statements, None, found)
    # Decorator factories and wrappers whose body (nested functions included) uses torch's
    # grad-mode switches: `def smart_inference_mode(): def decorate(fn): return
    # torch.inference_mode()(fn) ...`.
    for node in _functions_of(statements):
        if node.name.value not in found and any(
            name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode", "set_grad_enabled")
            for name in _names_in(node.body)
        ):
            found.add(node.name.value)
    return found


def _functions_of(statements: Sequence[cst.CSTNode]) -> Iterator[cst.FunctionDef]:
    """Module-level functions and methods of module-level classes."""
    for node in statements:
        if type(node) is cst.FunctionDef:
            yield node
        elif type(node) is cst.ClassDef:
            yield from (s for s in _suite_statements(node.body) if type(s) is cst.FunctionDef)


def _suite_statements(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", ())
    if isinstance(body, cst.BaseSuite):
        body = body.body
    return body if isinstance(body, Sequence) else ()


def _extra_suites(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    if type(node) in (cst.Try, cst.TryStar):
        yield from node.handlers
    if type(node) is cst.Match:
        yield from node.cases


class ScopeWalk:
    """Every scope of a file (module body first), its classes and the functions called
    where autograd is off."""


    def __init__(
        self,
        module: cst.Module,
        bindings: Bindings,
        may_contain: Callable[..., bool] = lambda *words: True,
    ) -> None:
        self.module = module
        self.bindings = bindings
        self.seq = 0
        self.scopes: List[Scope] = []
        self.classes: List[ClassFacts] = []
        self.no_grad_callees: Set[str] = set()  # functions called where autograd is off
        # Only a file that names a grad-mode switch can define a function that uses one.
        self.grad_switching = (
            grad_switching_functions(module.body) if may_contain(*_GRAD_MODE_NAMES) else set()
        )
        self._module_classes: Optional[Set[str]] = None
        self._defined: Optional[Tuple[int, int, FrozenSet[str]]] = None  # (see ``defined_names``)
        # the file's project (``analysis/links.py``), set by ``FileAnalysis``; None: the file alone
        self.links: Optional[Any] = None

    def close(self) -> None:
        """Break the class <-> method links (``FileAnalysis.close``)."""
        for facts in self.classes:
            facts.methods.clear()
        self.__dict__.clear()

    def project_module_class(self, func: cst.BaseExpression) -> bool:
        """``func`` names a class that another file of the project (or this one) defines and
        that derives from an ``nn.Module`` there (``from models import *``; ``Net()``)."""
        if self.links is None or type(func) not in (cst.Name, cst.Attribute):
            return False
        return self.links.module_class(dotted_name(func))

    def defined_names(self) -> FrozenSet[str]:
        """The names of the file's functions (each a scope) and classes, as walked so far
        (kept until the walk adds a scope or a class)."""
        kept = self._defined
        if kept is None or kept[0] != len(self.scopes) or kept[1] != len(self.classes):
            names = frozenset(
                [scope.name for scope in self.scopes if scope.function is not None]
                + [facts.node.name.value for facts in self.classes]
            )
            kept = self._defined = (len(self.scopes), len(self.classes), names)
        return kept[2]

    def module_classes(self) -> Set[str]:
        """Names of this file's classes that derive from a `Module`: through this file, or
        through a class another file of the project defines (``class Tagger(BaseModel)`` with
        ``from .base_model import BaseModel``, ``BaseModel(torch.nn.Module)`` there), as the
        same classes pasted into one file would."""
        if self._module_classes is None:
            found: Set[str] = set()
            changed = True
            while changed:
                changed = False
                for facts in self.classes:
                    name = facts.node.name.value
                    if name in found:
                        continue
                    bases = [arg.value for arg in facts.node.bases if arg.keyword is None]
                    if {(dotted_name(base) or "").rsplit(".", 1)[-1] for base in bases} & (
                        {"Module", "LightningModule"} | found
                    ) or any(self.project_module_class(base) or library_module(self.bindings.qualify(base)) for base in bases):
                        found.add(name)
                        changed = True
            self._module_classes = found
        return self._module_classes

    def run(self, module_bindings: Bindings) -> None:
        scope = Scope(self.module, "", module_bindings, False, ())
        self.scopes.append(scope)
        self.block(scope, self.module.body, Ctx())
        self._close_no_grad_callees()

    def _close_no_grad_callees(self) -> None:
        """A function of the file every call of which (in the file) runs with autograd off,
        directly or inside a function every call of which does (``predict`` opens ``no_grad``
        around ``self.batch_predict(...)``, its only caller, which calls
        ``self.model_prediction(...)``): called where autograd is off too."""
        defined = {scope.name for scope in self.scopes if scope.function is not None}
        sites: Dict[str, List[Tuple[Scope, CallEvent]]] = {}
        for scope in self.scopes:
            for event in scope.calls:
                func = event.node.func
                callee = event.attr or (func.value if type(func) is cst.Name else None)
                if callee in defined:
                    sites.setdefault(callee, []).append((scope, event))
        only: Set[str] = set()  # functions every call of which runs with autograd off
        changed = True
        while changed:
            changed = False
            for callee, found in sites.items():
                if callee not in only and all(
                    event.ctx.no_grad or scope.no_grad
                    or (scope.function is not None and scope.name in only and scope.name != callee)
                    for scope, event in found
                ):
                    only.add(callee)
                    changed = True
        self.no_grad_callees |= only

    # statements
    def block(self, scope: Scope, statements: Sequence[cst.CSTNode], ctx: Ctx) -> None:
        for statement in statements:
            self.statement(scope, statement, ctx)

    def suite(self, scope: Scope, suite: cst.BaseSuite, ctx: Ctx) -> None:
        if type(suite) is cst.IndentedBlock:
            inner = Ctx(ctx.loops, ctx.no_grad, ctx.iterating, ctx.chain, ctx.indents + (suite.indent,))
            self.block(scope, suite.body, inner)
        else:  # a one-line suite: `if x: y = f(x)`
            for small in suite.body:
                self.small(scope, small, ctx)

    def statement(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        self.seq += 1
        if type(node) is cst.FunctionDef:
            self.function(scope, node, ctx, None)
            return
        if type(node) is cst.ClassDef:
            self.class_def(scope, node, ctx)
            return
        inner = Ctx(
            ctx.loops, ctx.no_grad, ctx.iterating, ctx.chain + (Frame(node, ctx.indents, self.seq),),
            ctx.indents,
        )
        if type(node) is cst.SimpleStatementLine:
            for small in node.body:
                self.small(scope, small, inner)
        elif type(node) is cst.If:
            self.if_chain(scope, node, inner)
        elif type(node) is cst.For:
            self.expr(scope, node.iter, inner)
            looping = Ctx(inner.loops + (node,), inner.no_grad, True, inner.chain, inner.indents)
            self.assign(scope, node, looping, node.target, None)
            self.suite(scope, node.body, looping)
            if node.orelse is not None:
                self.suite(scope, node.orelse.body, inner)
        elif type(node) is cst.While:
            looping = Ctx(inner.loops + (node,), inner.no_grad, True, inner.chain, inner.indents)
            self.expr(scope, node.test, looping)
            self.suite(scope, node.body, looping)
            if node.orelse is not None:
                self.suite(scope, node.orelse.body, inner)
        elif type(node) is cst.With:
            body_ctx = inner
            for item in node.items:
                effect = self.context_effect(scope, item.item)
                if effect == "unknown" and _trains_inside(node):  # ``set_grad_enabled(phase == "train")``
                    effect = "on"  # around a backward: autograd is on in the runs that train
                if effect in ("off", "unknown"):
                    body_ctx = Ctx(body_ctx.loops, True, body_ctx.iterating, body_ctx.chain, body_ctx.indents)
                elif effect == "on":
                    scope.grad_work = True
                    body_ctx = Ctx(body_ctx.loops, False, body_ctx.iterating, body_ctx.chain, body_ctx.indents)
                self.expr(scope, item.item, inner)
                if item.asname is not None:
                    self.assign(scope, item, inner, item.asname.name, None)
            self.suite(scope, node.body, body_ctx)
        elif type(node) in (cst.Try, cst.TryStar):
            self.suite(scope, node.body, inner)
            for handler in node.handlers:
                self.suite(scope, handler.body, inner)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.suite(scope, extra.body, inner)
        elif type(node) is cst.Match:
            self.expr(scope, node.subject, inner)
            for case in node.cases:
                self.suite(scope, case.body, inner)

    def context_effect(self, scope: Scope, expr: cst.BaseExpression) -> Optional[str]:
        """What a `with` item or a decorator does to autograd: torch's switches, project
        wrappers (by name, or by a definition in this file that uses torch's), and a context
        held in a variable of this scope (`ctx = torch.no_grad() if c else nullcontext()`;
        `with ctx:`), taken as "unknown" when any value it was given switches autograd."""
        effect = grad_effect(expr, scope.bindings)
        if effect is None and self._calls_grad_switching(expr):
            effect = "unknown"
        held = expr.func if type(expr) is cst.Call and not expr.args else expr
        if effect is None and type(held) is cst.Name:
            values = [
                event.value
                for event in scope.assigns
                if event.targets == (held.value,) and event.value is not None
            ]
            effects = {grad_effect(value, scope.bindings) for value in values}
            if effects & {"off", "unknown"}:
                effect = "unknown"
        return effect

    def _calls_grad_switching(self, expr: cst.BaseExpression) -> bool:
        func = expr.func if type(expr) is cst.Call else expr
        if type(func) is cst.Attribute:
            name: Optional[str] = func.attr.value
        elif type(func) is cst.Name:
            name = func.value
        else:
            return False
        return name in self.grad_switching

    def if_chain(self, scope: Scope, node: cst.If, ctx: Ctx) -> None:
        self.expr(scope, node.test, ctx)
        self.suite(scope, node.body, ctx)
        if type(node.orelse) is cst.If:
            self.if_chain(scope, node.orelse, ctx)
        elif node.orelse is not None:
            self.suite(scope, node.orelse.body, ctx)

    def small(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        if type(node) is cst.Assign:
            self.expr(scope, node.value, ctx)
            for target in node.targets:
                self.assign(scope, node, ctx, target.target, node.value)
        elif type(node) is cst.AnnAssign:
            if node.value is not None:
                self.expr(scope, node.value, ctx)
                self.assign(scope, node, ctx, node.target, node.value)
        elif type(node) is cst.AugAssign:
            self.expr(scope, node.value, ctx)
            targets = tuple(_target_names(node.target))
            scope.assigns.append(
                AssignEvent(node, self._next(), ctx, targets, node.value, augmented=True)
            )
        else:
            for child in children(node):
                self.expr(scope, child, ctx)

    def assign(
        self,
        scope: Scope,
        node: cst.CSTNode,
        ctx: Ctx,
        target: cst.BaseExpression,
        value: Optional[cst.BaseExpression],
    ) -> None:
        targets = tuple(_target_names(target))
        if any(name.endswith(".requires_grad") for name in targets):
            scope.grad_work = True
        unpacked = type(target) in (cst.Tuple, cst.List)
        event = AssignEvent(node, self._next(), ctx, targets, value, unpacked=unpacked)
        scope.assigns.append(event)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    # expressions
    def expr(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        """The calls of an expression in pre-order (not in lambdas; in a comprehension, as
        iterating), from the file's shared index."""
        found = indexed(node)
        if found is None:
            self._expr_walk(scope, node, ctx)
            return
        index, here = found
        order, end = index.order, index.end
        skip = comprehension_end = -1
        comprehension_ctx = ctx
        for at in index.positions_in(here, _EXPRESSION_TYPES):
            if at < skip:
                continue
            inner = order[at]
            inner_type = type(inner)
            if inner_type is cst.Lambda:
                skip = end[at]
            elif inner_type is cst.Call:
                self.call(scope, inner, comprehension_ctx if at < comprehension_end else ctx)  # type: ignore[arg-type]
            elif at >= comprehension_end and not ctx.iterating:  # an outermost comprehension
                comprehension_ctx = Ctx(ctx.loops, ctx.no_grad, True, ctx.chain, ctx.indents)
                comprehension_end = end[at]

    def _expr_walk(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        node_type = type(node)
        if node_type is cst.Lambda:
            return
        if node_type in _COMPREHENSIONS and not ctx.iterating:
            ctx = Ctx(ctx.loops, ctx.no_grad, True, ctx.chain, ctx.indents)
        elif node_type is cst.Call:
            self.call(scope, node, ctx)  # type: ignore[arg-type]
        for child in children(node):
            self._expr_walk(scope, child, ctx)

    def call(self, scope: Scope, node: cst.Call, ctx: Ctx) -> None:
        func = node.func
        attr = func.attr.value if type(func) is cst.Attribute else None
        receiver = func.value if type(func) is cst.Attribute else None
        dotted = dotted_name(func)
        if dotted is not None and dotted.endswith(".__call__"):
            dotted = dotted[: -len(".__call__")]  # `self.__call__(x)` runs what `self(x)` runs
        scope.calls.append(CallEvent(node, self._next(), ctx, dotted, attr, receiver))
        if ctx.no_grad or scope.no_grad:
            callee = attr or (func.value if type(func) is cst.Name else None)
            if callee:
                self.no_grad_callees.add(callee)
        if attr == "requires_grad_" or (attr == "freeze" and not node.args):
            scope.grad_work = True  # (`model.freeze()`: Lightning's, and projects' own, set requires_grad False)
        if (attr or dotted) == "set_grad_enabled" and ctx.chain and type(ctx.chain[-1].statement) is cst.SimpleStatementLine:
            effect = grad_effect(node, scope.bindings)
            if scope.bindings.qualify(func) in SET_GRAD_ENABLED:
                if effect == "on":
                    scope.grad_work = True
                elif scope.grad_off_seq is None:
                    scope.grad_off_seq = self.seq

    # scopes
    def function(
        self, parent: Scope, node: cst.FunctionDef, ctx: Ctx, owner: Optional[ClassFacts]
    ) -> None:
        bindings = Bindings(parent.bindings)
        bindings.bind_parameters(node.params)
        if type(node.body) is cst.IndentedBlock:
            bindings.bind_statements(node.body.body)
        effects = {self.context_effect(parent, d.decorator) for d in node.decorators}
        no_grad = (
            ctx.no_grad or parent.no_grad or bool(effects & {"off", "unknown"})
            or framework_hook(owner, node.name.value, parent.bindings)  # (a method: Lightning's hook)
        )
        scope = Scope(node, node.name.value, bindings, no_grad, ctx.indents, owner, parent=parent)
        scope.grad_work = "on" in effects
        self.scopes.append(scope)
        if owner is not None:
            owner.methods.append(scope)
        self.suite(scope, node.body, Ctx(indents=ctx.indents))

    def class_def(self, scope: Scope, node: cst.ClassDef, ctx: Ctx) -> None:
        facts = ClassFacts(node)
        self.classes.append(facts)
        if type(node.body) is not cst.IndentedBlock:
            return
        inner = Ctx(ctx.loops, ctx.no_grad, ctx.iterating, ctx.chain, ctx.indents + (node.body.indent,))
        for statement in node.body.body:
            if type(statement) is cst.FunctionDef:
                self.seq += 1
                self.function(scope, statement, inner, facts)
            elif type(statement) is cst.ClassDef:
                self.class_def(scope, statement, inner)

