"""Scope analysis shared by the TML5xx rules (training and evaluation loop leaks).

One fast walk per file records, for the module body and for every function, the calls and
assignments in source order together with their context: enclosing loops, whether autograd is
off there (``torch.no_grad()``, ``torch.inference_mode()``, a decorator, ``set_grad_enabled``)
and the statements around them. ``analyse`` then replays each scope in order, following names
only within it, and returns the findings of every TML5xx rule keyed by the node to report on.
The rules report those nodes when the engine's traversal reaches them.

What counts as "the model", "a loss" or "an activation" is decided conservatively, from what
the scope itself shows (see the constants below); anything else is left alone.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchmemlint.findings import Applicability
from torchmemlint.names import Bindings, dotted_name
from torchmemlint.rules.base import FixSpec, NodeEdit
from torchmemlint.tree import children

EVAL_WITHOUT_NO_GRAD = "TML501"
ACCUMULATED_TENSOR = "TML502"
RETAIN_GRAPH = "TML503"
LIST_ON_SELF = "TML504"
TENSOR_ON_SELF = "TML505"

# Figures quoted by the messages, from benchmarks/memory_figures.py (f_training_loop_leaks in
# benchmarks/results/memory_figures.json; tests/test_loop_rules.py checks they still agree).
EVAL_PEAK_FACTOR = "x2.33"  # eval_without_no_grad_peak_ratio
EVAL_GROWTH = "6.29 MB"  # eval_total_loss_growth_per_iteration
RETAIN_GRAPH_PEAK = "+40 %"  # retain_graph_peak_change_pct
LIST_GROWTH = "2.1 MB"  # feats_list_growth_per_iteration

# Parameters and `self` attributes taken to be the model when they are called (`is_model`,
# `build_model` are functions, not models).
MODEL_NAME = re.compile(
    r"^(?:model|net|network|module|model_ema|"
    r"(?!(?:is|get|build|load|make|create|init|save|set|to|has|prepare|wrap|unwrap|update|"
    r"compute|export|register|freeze|copy|reset|convert|check|apply|run|call)_)\w+_(?:model|net))$"
)
# Callables whose result is a loss.
CRITERION_NAME = re.compile(r"(?:^|_)(?:criterion|loss_?fn|loss_?func|loss_?function)(?:$|_|\d)")
# Words of a function name that make it evaluation code.
EVAL_WORDS = frozenset(
    {"eval", "evaluate", "evaluation", "validate", "validation", "val", "valid", "test",
     "testing", "predict", "prediction", "infer", "inference"}
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
     "narrow", "squeeze_", "unsqueeze_"}
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


class Kind(enum.Enum):
    LOSS = "loss"
    OUTPUT = "model output"
    ACTIVATION = "activation"


@dataclass(frozen=True)
class Frame:
    """A statement that encloses an event, with what is needed to rewrite it."""

    statement: cst.CSTNode
    indents: Tuple[Optional[str], ...]  # the relative indents of the blocks around it
    seq: int


@dataclass(frozen=True)
class Ctx:
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

    @property
    def function(self) -> Optional[cst.FunctionDef]:
        return self.node if isinstance(self.node, cst.FunctionDef) else None

    def params(self) -> List[cst.Param]:
        if self.function is None:
            return []
        params = self.function.params
        return [*params.posonly_params, *params.params, *params.kwonly_params]


@dataclass(frozen=True)
class Pending:
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec] = None


Findings = Dict[str, Dict[int, Pending]]

# -- the walk ---------------------------------------------------------------------------------


def grad_effect(expr: cst.BaseExpression, bindings: Bindings) -> Optional[str]:
    """"off", "on", "unknown" (grad mode switched in a way we cannot read) or None."""
    call = expr if isinstance(expr, cst.Call) else None
    target = call.func if call is not None else expr
    qualified = bindings.qualify(target) if isinstance(target, (cst.Name, cst.Attribute)) else None
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
        if name.rsplit(".", 1)[-1] in ("no_grad", "inference_mode", "set_grad_enabled"):
            return "unknown"
    return None


def _is_false(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "False"


def _is_true(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Name) and expr.value == "True"


def _names_in(node: cst.CSTNode) -> Iterator[str]:
    """Dotted names (outermost chains) anywhere in an expression."""
    if isinstance(node, (cst.Name, cst.Attribute)):
        dotted = dotted_name(node)
        if dotted is not None:
            yield dotted
            return
    for child in children(node):
        yield from _names_in(child)


def _target_names(target: cst.BaseExpression) -> Iterator[str]:
    if isinstance(target, (cst.Tuple, cst.List)):
        for element in target.elements:
            yield from _target_names(element.value)
    elif isinstance(target, cst.StarredElement):
        yield from _target_names(target.value)
    else:
        dotted = dotted_name(target)
        if dotted is not None:
            yield dotted


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.DictComp, cst.GeneratorExp)
_GRAD_MODE_NAMES = ("no_grad", "inference_mode", "set_grad_enabled", "enable_grad")


def grad_switching_functions(statements: Sequence[cst.CSTNode]) -> Set[str]:
    """Functions of this file that switch grad mode in a `with` block: a context manager like
    `def _set_training_mode(self, training): ... with torch.set_grad_enabled(training): yield`.
    A `with` over one of them is treated as switching grad mode (statement-level scan only)."""
    found: Set[str] = set()

    def scan(nodes: Sequence[cst.CSTNode], function: Optional[str]) -> None:
        for node in nodes:
            if isinstance(node, cst.FunctionDef):
                scan(_suite_statements(node.body), node.name.value)
            elif isinstance(node, cst.ClassDef):
                scan(_suite_statements(node.body), None)
            elif isinstance(node, cst.With) and function is not None and any(
                name.rsplit(".", 1)[-1] in _GRAD_MODE_NAMES
                for item in node.items
                for name in _names_in(item.item)
            ):
                found.add(function)
            elif isinstance(node, cst.BaseCompoundStatement):
                for child in children(node):
                    if isinstance(child, (cst.BaseSuite, cst.Else, cst.Finally, cst.ExceptHandler)):
                        scan(_suite_statements(child), function)
                    elif isinstance(child, (cst.If, cst.ExceptHandler)):
                        scan([child], function)
                for suite in _extra_suites(node):
                    scan(_suite_statements(suite), function)

    scan(statements, None)
    return found


def _suite_statements(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", ())
    if isinstance(body, cst.BaseSuite):
        body = body.body
    return body if isinstance(body, Sequence) else ()


def _extra_suites(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    if isinstance(node, (cst.Try, cst.TryStar)):
        yield from node.handlers
    if isinstance(node, cst.Match):
        yield from node.cases


class _Walker:
    def __init__(self, module: cst.Module, bindings: Bindings) -> None:
        self.module = module
        self.seq = 0
        self.scopes: List[Scope] = []
        self.classes: List[ClassFacts] = []
        self.no_grad_callees: Set[str] = set()  # functions called where autograd is off
        self.wrapped: Set[Tuple[str, int]] = set()  # no_grad fixes already offered (TML501)
        self.grad_switching = grad_switching_functions(module.body)

    def run(self, module_bindings: Bindings) -> None:
        scope = Scope(self.module, "", module_bindings, False, ())
        self.scopes.append(scope)
        self.block(scope, self.module.body, Ctx())

    # statements
    def block(self, scope: Scope, statements: Sequence[cst.CSTNode], ctx: Ctx) -> None:
        for statement in statements:
            self.statement(scope, statement, ctx)

    def suite(self, scope: Scope, suite: cst.BaseSuite, ctx: Ctx) -> None:
        if isinstance(suite, cst.IndentedBlock):
            inner = dataclasses.replace(ctx, indents=ctx.indents + (suite.indent,))
            self.block(scope, suite.body, inner)
        else:  # a one-line suite: `if x: y = f(x)`
            for small in suite.body:
                self.small(scope, small, ctx)

    def statement(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        self.seq += 1
        if isinstance(node, cst.FunctionDef):
            self.function(scope, node, ctx, None)
            return
        if isinstance(node, cst.ClassDef):
            self.class_def(scope, node, ctx)
            return
        inner = dataclasses.replace(ctx, chain=ctx.chain + (Frame(node, ctx.indents, self.seq),))
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                self.small(scope, small, inner)
        elif isinstance(node, cst.If):
            self.if_chain(scope, node, inner)
        elif isinstance(node, cst.For):
            self.expr(scope, node.iter, inner)
            looping = dataclasses.replace(inner, loops=inner.loops + (node,), iterating=True)
            self.assign(scope, node, looping, node.target, None)
            self.suite(scope, node.body, looping)
            if node.orelse is not None:
                self.suite(scope, node.orelse.body, inner)
        elif isinstance(node, cst.While):
            looping = dataclasses.replace(inner, loops=inner.loops + (node,), iterating=True)
            self.expr(scope, node.test, looping)
            self.suite(scope, node.body, looping)
            if node.orelse is not None:
                self.suite(scope, node.orelse.body, inner)
        elif isinstance(node, cst.With):
            body_ctx = inner
            for item in node.items:
                effect = grad_effect(item.item, scope.bindings)
                if effect is None and self._calls_grad_switching(item.item):
                    effect = "unknown"
                if effect in ("off", "unknown"):
                    body_ctx = dataclasses.replace(body_ctx, no_grad=True)
                elif effect == "on":
                    scope.grad_work = True
                    body_ctx = dataclasses.replace(body_ctx, no_grad=False)
                self.expr(scope, item.item, inner)
                if item.asname is not None:
                    self.assign(scope, item, inner, item.asname.name, None)
            self.suite(scope, node.body, body_ctx)
        elif isinstance(node, (cst.Try, cst.TryStar)):
            self.suite(scope, node.body, inner)
            for handler in node.handlers:
                self.suite(scope, handler.body, inner)
            for extra in (node.orelse, node.finalbody):
                if extra is not None:
                    self.suite(scope, extra.body, inner)
        elif isinstance(node, cst.Match):
            self.expr(scope, node.subject, inner)
            for case in node.cases:
                self.suite(scope, case.body, inner)

    def _calls_grad_switching(self, expr: cst.BaseExpression) -> bool:
        if not isinstance(expr, cst.Call):
            return False
        func = expr.func
        name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
        return name in self.grad_switching

    def if_chain(self, scope: Scope, node: cst.If, ctx: Ctx) -> None:
        self.expr(scope, node.test, ctx)
        self.suite(scope, node.body, ctx)
        if isinstance(node.orelse, cst.If):
            self.if_chain(scope, node.orelse, ctx)
        elif node.orelse is not None:
            self.suite(scope, node.orelse.body, ctx)

    def small(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        if isinstance(node, cst.Assign):
            self.expr(scope, node.value, ctx)
            for target in node.targets:
                self.assign(scope, node, ctx, target.target, node.value)
        elif isinstance(node, cst.AnnAssign):
            if node.value is not None:
                self.expr(scope, node.value, ctx)
                self.assign(scope, node, ctx, node.target, node.value)
        elif isinstance(node, cst.AugAssign):
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
        unpacked = isinstance(target, (cst.Tuple, cst.List))
        event = AssignEvent(node, self._next(), ctx, targets, value, unpacked=unpacked)
        scope.assigns.append(event)

    def _next(self) -> int:
        self.seq += 1
        return self.seq

    # expressions
    def expr(self, scope: Scope, node: cst.CSTNode, ctx: Ctx) -> None:
        node_type = type(node)
        if node_type is cst.Lambda:
            return
        if node_type in _COMPREHENSIONS and not ctx.iterating:
            ctx = dataclasses.replace(ctx, iterating=True)
        elif node_type is cst.Call:
            self.call(scope, node, ctx)  # type: ignore[arg-type]
        for child in children(node):
            self.expr(scope, child, ctx)

    def call(self, scope: Scope, node: cst.Call, ctx: Ctx) -> None:
        func = node.func
        attr = func.attr.value if isinstance(func, cst.Attribute) else None
        receiver = func.value if isinstance(func, cst.Attribute) else None
        dotted = dotted_name(func)
        scope.calls.append(CallEvent(node, self._next(), ctx, dotted, attr, receiver))
        if ctx.no_grad or scope.no_grad:
            callee = attr or (func.value if isinstance(func, cst.Name) else None)
            if callee:
                self.no_grad_callees.add(callee)
        if attr == "requires_grad_":
            scope.grad_work = True
        if (attr or dotted) == "set_grad_enabled" and ctx.chain and isinstance(
            ctx.chain[-1].statement, cst.SimpleStatementLine
        ):
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
        if isinstance(node.body, cst.IndentedBlock):
            bindings.bind_statements(node.body.body)
        effects = {grad_effect(d.decorator, parent.bindings) for d in node.decorators}
        no_grad = (
            ctx.no_grad or parent.no_grad or bool(effects & {"off", "unknown"})
            or bool(FRAMEWORK_NO_GRAD_HOOKS.match(node.name.value))
        )
        scope = Scope(node, node.name.value, bindings, no_grad, ctx.indents, owner)
        scope.grad_work = "on" in effects
        self.scopes.append(scope)
        if owner is not None:
            owner.methods.append(scope)
        self.suite(scope, node.body, Ctx(indents=ctx.indents))

    def class_def(self, scope: Scope, node: cst.ClassDef, ctx: Ctx) -> None:
        facts = ClassFacts(node)
        self.classes.append(facts)
        if not isinstance(node.body, cst.IndentedBlock):
            return
        inner = dataclasses.replace(ctx, indents=ctx.indents + (node.body.indent,))
        for statement in node.body.body:
            if isinstance(statement, cst.FunctionDef):
                self.seq += 1
                self.function(scope, statement, inner, facts)
            elif isinstance(statement, cst.ClassDef):
                self.class_def(scope, statement, inner)


# -- values -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    kind: Kind
    loops: Tuple[cst.CSTNode, ...]  # loops around where it was computed
    scalar: bool = False  # known to be a 0-dim tensor (a reduced loss)


class _ScopeAnalysis:
    """Replays one scope in source order, following names within it only."""

    def __init__(self, walker: _Walker, scope: Scope, findings: Findings) -> None:
        self.walker = walker
        self.scope = scope
        self.findings = findings
        self.bindings = scope.bindings
        self.forward = scope.owner is not None and scope.name == "forward"
        self.model_names = self._model_names()
        self.loss_instances = self._loss_instances()
        self.backward_calls = [c for c in scope.calls if self._is_backward(c)]
        self.training_calls = [c for c in scope.calls if self._is_training_step(c)]
        self.backward_losses = self._backward_losses()
        self.scalar_losses = self._scalar_losses()
        self.env: Dict[str, Value] = {}

    # what things are
    def _model_names(self) -> Set[str]:
        names = {p.name.value for p in self.scope.params() if MODEL_NAME.match(p.name.value)}
        for call in self.scope.calls:
            if call.attr in ("eval", "train") and call.receiver is not None:
                receiver = dotted_name(call.receiver)
                if receiver is not None and not (call.attr == "eval" and call.node.args):
                    names.add(receiver)
        return names

    def is_model(self, dotted: Optional[str]) -> bool:
        if dotted is None:
            return False
        if dotted.endswith(".forward"):
            dotted = dotted[: -len(".forward")]
        if dotted in self.model_names:
            return True
        head, _, attr = dotted.partition(".")
        if head != "self" or "." in attr or not MODEL_NAME.match(attr):
            return False
        owner = self.scope.owner
        return owner is None or all(method.name != attr for method in owner.methods)

    def _loss_instances(self) -> Dict[str, bool]:
        """Names bound to `nn.*Loss(...)` here -> whether the loss they compute is reduced."""
        found: Dict[str, bool] = {}
        for event in self.scope.assigns:
            value = event.value
            if isinstance(value, cst.Call) and not event.unpacked and not event.augmented:
                qualified = self.bindings.qualify(value.func) if dotted_name(value.func) else None
                if qualified and qualified.startswith("torch.nn.") and qualified.endswith("Loss"):
                    for target in event.targets:
                        found[target] = _reduced(value)
        return found

    def loss_call(self, call: cst.Call) -> Optional[bool]:
        """None if `call` is not a loss computation, else whether its result is known scalar."""
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        if dotted in self.loss_instances:
            return self.loss_instances[dotted]
        qualified = self.bindings.qualify(call.func)
        if qualified and qualified.startswith("torch.nn.functional."):
            name = qualified.rsplit(".", 1)[-1]
            if name.endswith("_loss") or name in FUNCTIONAL_LOSSES:
                return _reduced(call)
            return None
        if CRITERION_NAME.search(dotted.rsplit(".", 1)[-1]):
            return False
        return None

    def _is_backward(self, call: CallEvent) -> bool:
        if call.attr in ("backward", "manual_backward"):
            return True
        return bool(call.func) and self.bindings.qualify(call.node.func) in AUTOGRAD_CALLS

    def _is_training_step(self, call: CallEvent) -> bool:
        if self._is_backward(call):
            return True
        if call.attr == "step" and call.receiver is not None:
            receiver = (dotted_name(call.receiver) or "").rsplit(".", 1)[-1].lower()
            return "opt" in receiver or "scaler" in receiver
        return False

    def _backward_losses(self) -> Set[str]:
        """Names whose value reaches a backward: receivers, arguments, and what they came from."""
        names: Set[str] = set()
        for call in self.backward_calls:
            if call.receiver is not None:
                names.update(_names_in(call.receiver))
            for arg in call.node.args:
                names.update(_names_in(arg.value))
        changed = True
        while changed:  # `loss = loss_sum / n; loss.backward()` reaches loss_sum too
            changed = False
            for event in self.scope.assigns:
                if event.value is not None and names.intersection(event.targets):
                    new = set(_names_in(event.value)) - names
                    if new:
                        names |= new
                        changed = True
        return names

    def _scalar_losses(self) -> Set[str]:
        """Names that `.backward()` is called on with no gradient argument: 0-dim tensors."""
        found = set()
        for call in self.backward_calls:
            if call.attr == "backward" and call.receiver is not None:
                positional = [a for a in call.node.args if a.keyword is None and not a.star]
                receiver = dotted_name(call.receiver)
                if receiver is not None and not positional:
                    found.add(receiver)
        return found

    def value_of(self, expr: cst.BaseExpression, ctx: Ctx) -> Optional[Value]:
        """The kind of tensor an expression evaluates to, if this scope shows it."""
        if ctx.no_grad and not self.forward:
            return None
        if isinstance(expr, (cst.Name, cst.Attribute)):
            dotted = dotted_name(expr)
            if dotted is not None and dotted in self.env:
                return self.env[dotted]
            if isinstance(expr, cst.Attribute) and expr.attr.value in ("loss", "logits"):
                base = self.value_of(expr.value, ctx)  # outputs.loss of a transformers model
                if base is not None and base.kind is Kind.OUTPUT:
                    kind = Kind.LOSS if expr.attr.value == "loss" else base.kind
                    return Value(kind, base.loops)
            return None
        if isinstance(expr, cst.Subscript):
            return self.value_of(expr.value, ctx)
        if isinstance(expr, cst.BinaryOperation):
            left = self.value_of(expr.left, ctx)
            right = self.value_of(expr.right, ctx)
            if left is None or right is None:
                known = left or right
                other = expr.right if left is not None else expr.left
                if known is None:
                    return None
                return dataclasses.replace(known, scalar=known.scalar and _is_number(other))
            kind = Kind.LOSS if Kind.LOSS in (left.kind, right.kind) else left.kind
            return Value(kind, left.loops if len(left.loops) >= len(right.loops) else right.loops)
        if isinstance(expr, cst.UnaryOperation):
            return self.value_of(expr.expression, ctx)
        if isinstance(expr, cst.Call):
            return self._call_value(expr, ctx)
        return None

    def _call_value(self, call: cst.Call, ctx: Ctx) -> Optional[Value]:
        func = call.func
        dotted = dotted_name(func)
        if self.forward:
            return self._activation(call, ctx)
        if self.is_model(dotted):
            return Value(Kind.OUTPUT, ctx.loops)
        scalar = self.loss_call(call)
        if scalar is not None:
            return Value(Kind.LOSS, ctx.loops, scalar)
        if isinstance(func, cst.Attribute):
            if func.attr.value in GRAD_KEEPING_METHODS:
                base = self.value_of(func.value, ctx)
                if base is None:
                    return None
                reduced = func.attr.value in ("mean", "sum") and not call.args
                return dataclasses.replace(base, scalar=base.scalar or reduced)
            if func.attr.value == "scale" and call.args:  # GradScaler.scale(loss)
                return self.value_of(call.args[0].value, ctx)
        qualified = self.bindings.qualify(func) if dotted else None
        if qualified in GRAD_KEEPING_TORCH_FUNCTIONS and call.args:
            base = self.value_of(call.args[0].value, ctx)
            return dataclasses.replace(base, scalar=False) if base else None
        return None

    def _activation(self, call: cst.Call, ctx: Ctx) -> Optional[Value]:
        """In forward: submodule calls, torch ops on activations and tensor methods."""
        func = call.func
        dotted = dotted_name(func)
        activation = Value(Kind.ACTIVATION, ctx.loops)
        if dotted is not None and dotted.startswith("self.") and dotted.count(".") == 1:
            # a submodule applied to an activation
            if any(self.value_of(arg.value, ctx) is not None for arg in call.args):
                return activation
            return None
        if isinstance(func, cst.Attribute) and dotted_name(func.value) != "self":
            base = self.value_of(func.value, ctx)
            if base is not None and func.attr.value in DEVICE_KEEPING_METHODS:
                if func.attr.value == "to" and any(_mentions_cpu(a.value) for a in call.args):
                    return None
                return base
            if base is not None:
                return None
        qualified = self.bindings.qualify(func) if dotted else None
        if qualified and qualified.startswith("torch.") and not NON_TENSOR_TORCH.match(qualified):
            for arg in call.args:
                listed = isinstance(arg.value, (cst.List, cst.Tuple))
                values = arg.value.elements if listed else [arg]
                if any(self.value_of(v.value, ctx) is not None for v in values):
                    return activation
        return None

    # replay
    def run(self) -> None:
        if self.forward:
            for param in self._activation_params():
                self.env[param] = Value(Kind.ACTIVATION, ())
        events: List[Union[CallEvent, AssignEvent]] = [*self.scope.calls, *self.scope.assigns]
        events.sort(key=lambda event: event.seq)
        for event in events:
            if isinstance(event, AssignEvent):
                self._assignment(event)
            else:
                self._call(event)
        if not self.forward:
            self._retain_graph()

    def _activation_params(self) -> List[str]:
        params = [p for p in self.scope.params() if p.name.value != "self"]
        found = [params[0].name.value] if params and params[0].default is None else []
        for param in params:
            annotation = param.annotation
            annotated = dotted_name(annotation.annotation) if annotation is not None else None
            if (annotated or "").endswith("Tensor"):
                found.append(param.name.value)
        return found

    def _assignment(self, event: AssignEvent) -> None:
        if event.augmented or self._is_self_increment(event):
            self._accumulation(event)
        if self.forward and event.value is not None and not event.augmented:
            self._tensor_on_self(event)
        value = None
        if event.value is not None and not event.augmented:
            value = self.value_of(event.value, event.ctx)
            if set(event.targets) & self.scalar_losses and not event.ctx.no_grad:
                # what `.backward()` is called on is a 0-dim loss, whatever computed it
                if value is not None:
                    value = Value(Kind.LOSS, value.loops, True)
                elif isinstance(event.value, (cst.Call, cst.BinaryOperation)) and not _detaches(
                    event.value
                ):
                    value = Value(Kind.LOSS, event.ctx.loops, True)
        for target in event.targets:
            if event.augmented:
                continue
            if value is None:
                self.env.pop(target, None)
            elif event.unpacked and value.kind is Kind.LOSS:
                self.env.pop(target, None)  # `loss, logs = ...`: only one of them is the loss
            else:
                self.env[target] = value

    def _is_self_increment(self, event: AssignEvent) -> bool:
        value = event.value
        return (
            len(event.targets) == 1
            and isinstance(value, cst.BinaryOperation)
            and isinstance(value.operator, cst.Add)
            and event.targets[0] in (dotted_name(value.left), dotted_name(value.right))
        )

    def _call(self, event: CallEvent) -> None:
        if self.forward:
            self._list_on_self(event)
            return
        if self.is_model(event.func):
            self._model_call(event)
        if event.attr == "append" and event.receiver is not None and len(event.node.args) == 1:
            self._accumulation(event)

    # TML501
    def _model_call(self, event: CallEvent) -> None:
        scope = self.scope
        if event.ctx.no_grad or self._grad_controlled(event.seq) or scope.grad_work:
            return
        callee = event.func or ""
        if callee.endswith(".forward"):
            callee = callee[: -len(".forward")]
        mode_seq = self._last_mode_change(callee, event.seq)
        named = is_eval_name(scope.name)
        if mode_seq is not None and mode_seq[1] == "train":
            return  # the model was put back in training mode
        if not named and (mode_seq is None or not event.ctx.iterating):
            return  # a single call after eval() (a test, an export) is no loop leak
        if named and self.training_calls:
            return
        if named:
            where = f"in `{scope.name}()` with autograd on"
        else:
            where = f"after `{callee}.eval()` with autograd on (`eval()` does not disable it)"
        message = (
            f"`{callee}` is called {where}: every call records its graph and keeps the saved "
            f"activations while the output lives (peak {EVAL_PEAK_FACTOR} measured against "
            "`torch.no_grad()`; accumulating outputs or losses grows memory every batch); use "
            "`torch.no_grad()`"
        )
        target = self._wrap_target(event, None if named else mode_seq[0])
        if not named and self._trains_around(event, mode_seq[0], target):
            return  # eval() for frozen batch-norm or an attack: gradients are wanted
        key = ("decorate", id(scope.node)) if target is None else ("wrap", id(target.statement))
        if key in self.walker.wrapped:
            return  # one finding per loop (or function) to wrap
        self.walker.wrapped.add(key)
        self.findings[EVAL_WITHOUT_NO_GRAD][id(event.node)] = Pending(
            event.node, message, self._no_grad_fix(target)
        )

    def _trains_around(self, event: CallEvent, eval_seq: int, target: Optional[Frame]) -> bool:
        """A backward or step between `.eval()` and the call, or in what would be wrapped."""
        for call in self.training_calls:
            if eval_seq < call.seq < event.seq:
                return True
            if target is not None and any(f.statement is target.statement for f in call.ctx.chain):
                return True
        return False

    def _grad_controlled(self, seq: int) -> bool:
        scope = self.scope
        if scope.no_grad or (scope.grad_off_seq is not None and scope.grad_off_seq < seq):
            return True
        name = scope.name
        return bool(name) and (
            name in self.walker.no_grad_callees or bool(FRAMEWORK_NO_GRAD_HOOKS.match(name))
        )

    def _last_mode_change(self, callee: str, seq: int) -> Optional[Tuple[int, str]]:
        last = None
        for call in self.scope.calls:
            if call.seq >= seq:
                break
            if call.attr in ("eval", "train") and call.receiver is not None:
                if dotted_name(call.receiver) != callee:
                    continue
                args = call.node.args
                if call.attr == "eval" and args:
                    continue  # not nn.Module.eval()
                to_eval = call.attr == "eval" or (args and _is_false(args[0].value))
                mode = "eval" if to_eval else "train"
                last = (call.seq, mode)
        return last

    def _wrap_target(self, event: CallEvent, after_seq: Optional[int]) -> Optional[Frame]:
        """The statement to wrap in `no_grad`; None: decorate the function instead."""
        if after_seq is None and self.scope.function is not None:
            return None
        chain = [frame for frame in event.ctx.chain if after_seq is None or frame.seq > after_seq]
        for frame in chain:
            if isinstance(frame.statement, (cst.For, cst.While)):
                return frame
        return event.ctx.chain[-1]

    def _no_grad_fix(self, target: Optional[Frame]) -> Optional[FixSpec]:
        if self.bindings.qualify(cst.Name("torch")) != "torch":
            return None
        module = self.walker.module
        if target is None:
            function = self.scope.function
            assert function is not None
            if function.asynchronous is not None:
                return None
            decorator = cst.Decorator(decorator=cst.parse_expression("torch.no_grad()"))
            new = function.with_changes(decorators=[*function.decorators, decorator])
            text = render(module, new, self.scope.indents)
            return FixSpec(
                Applicability.UNSAFE,
                "Decorate the function with `@torch.no_grad()`",
                (NodeEdit(function, text),),
            )
        statement = target.statement
        wrapped = cst.With(
            items=[cst.WithItem(item=cst.parse_expression("torch.no_grad()"))],
            body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=[])]),
            leading_lines=statement.leading_lines,
        )
        what = "loop" if isinstance(statement, (cst.For, cst.While)) else "statement"
        return FixSpec(
            Applicability.UNSAFE,
            f"Wrap the {what} in `with torch.no_grad():`",
            (NodeEdit(statement, render(module, wrapped, target.indents)),),
        )

    # TML502
    def _accumulation(self, event: Union[AssignEvent, CallEvent]) -> None:
        ctx = event.ctx
        if not ctx.loops or ctx.no_grad:
            return
        if isinstance(event, CallEvent):
            assert event.receiver is not None
            argument = event.node.args[0]
            if argument.star or argument.keyword is not None:
                return
            accumulator = dotted_name(event.receiver)
            value_node = argument.value
            appended = True
        else:
            if len(event.targets) != 1 or event.value is None:
                return
            operator = getattr(event.node, "operator", None)
            if event.augmented and not isinstance(operator, (cst.AddAssign, cst.SubtractAssign)):
                return
            accumulator = event.targets[0]
            value_node = event.value
            if not event.augmented:  # total = total + loss
                binary = event.value
                assert isinstance(binary, cst.BinaryOperation)
                on_left = dotted_name(binary.left) == accumulator
                value_node = binary.right if on_left else binary.left
            appended = False
        if accumulator is None or accumulator in self.backward_losses:
            return
        value = self.value_of(value_node, ctx)
        if value is None or value.kind is Kind.ACTIVATION:
            return
        loop = ctx.loops[-1]
        if loop not in value.loops or self._reassigned_in(accumulator, loop, event.node):
            return
        if not self._loop_computes(loop):
            return
        persists = self._loops_kept_across(accumulator, ctx.loops, event.node)
        training = any(self._loop_has(loop, self.training_calls) for loop in persists)
        if not training and self._grad_controlled(event.seq):
            return
        if not training and self.training_calls and not self._in_eval_mode(event.seq):
            return  # this scope trains elsewhere: which mode applies here is not clear
        shown = _short(self.walker.module.code_for_node(value_node))
        what = "loss tensor" if value.kind is Kind.LOSS else "model output"
        if appended:
            head = f"`{accumulator}.append({shown})` keeps the {what} of every iteration"
        else:
            head = f"`{accumulator}` sums the {what} `{shown}` across iterations"
        if training:
            tail = (
                ": backward frees the saved activations (device memory does not grow), but "
                "every iteration's autograd graph nodes stay reachable and host memory grows"
            )
            if appended:
                tail += " and the list holds one tensor per iteration on its device"
        else:
            tail = (
                " in a loop without backward and outside `torch.no_grad()`: every batch's graph "
                f"stays alive with all its saved activations (+{EVAL_GROWTH} per iteration "
                "measured) until out of memory"
            )
        if value.kind is Kind.LOSS:
            named = dotted_name(value_node) is not None
            advice = f"; accumulate `{shown}.item()`" if named else "; use `.item()`"
        else:
            advice = "; keep `.detach()` (or `.detach().cpu()`) copies"
        fix = self._item_fix(event, accumulator, value_node, value, appended)
        self.findings[ACCUMULATED_TENSOR][id(event.node)] = Pending(
            event.node, head + tail + advice, fix
        )

    def _loops_kept_across(
        self, name: str, loops: Tuple[cst.CSTNode, ...], accumulation: cst.CSTNode
    ) -> List[cst.CSTNode]:
        """The enclosing loops whose iterations the accumulator outlives (innermost first)."""
        kept = []
        for loop in reversed(loops):
            if self._reassigned_in(name, loop, accumulation):
                break
            kept.append(loop)
        return kept

    def _in_eval_mode(self, seq: int) -> bool:
        """The last `.eval()` / `.train()` on a model before `seq` is `.eval()`."""
        last = None
        for call in self.scope.calls:
            if call.seq >= seq:
                break
            if call.attr in ("eval", "train") and self.is_model(
                dotted_name(call.receiver) if call.receiver is not None else None
            ):
                last = call.attr == "eval" and not call.node.args
        return bool(last)

    def _reassigned_in(self, name: str, loop: cst.CSTNode, accumulation: cst.CSTNode) -> bool:
        return any(
            name in event.targets and not event.augmented and loop in event.ctx.loops
            and event.node is not accumulation
            for event in self.scope.assigns
        )

    def _loop_has(self, loop: cst.CSTNode, calls: Sequence[CallEvent]) -> bool:
        return any(loop in call.ctx.loops for call in calls)

    def _loop_computes(self, loop: cst.CSTNode) -> bool:
        """The loop runs the model, steps, or computes a loss from something it called: it
        iterates over batches (a loop that sums the losses of one batch's heads is not one)."""
        for call in self.scope.calls:
            if loop not in call.ctx.loops:
                continue
            if self.is_model(call.func) or self._is_training_step(call):
                return True
            if self.loss_call(call.node) is not None and any(
                self._computed_in(arg.value, loop, call.seq) for arg in call.node.args
            ):
                return True
        return False

    def _computed_in(self, expr: cst.BaseExpression, loop: cst.CSTNode, seq: int) -> bool:
        """`expr` is a call result, or a name last assigned a call result, in this loop."""
        if isinstance(expr, cst.Call):
            return True
        dotted = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
        if dotted is None:
            return False
        last = None
        for event in self.scope.assigns:
            if event.seq < seq and dotted in event.targets:
                last = event
        return (
            last is not None and loop in last.ctx.loops and isinstance(last.value, cst.Call)
        )

    def _item_fix(
        self,
        event: Union[AssignEvent, CallEvent],
        accumulator: str,
        value_node: cst.BaseExpression,
        value: Value,
        appended: bool,
    ) -> Optional[FixSpec]:
        if value.kind is not Kind.LOSS or not value.scalar:
            return None
        if not isinstance(value_node, (cst.Name, cst.Attribute)) or dotted_name(value_node) is None:
            return None
        allowed = _list_use if appended else _float_use
        if not appended and not self._starts_as_number(accumulator, event.ctx):
            return None
        if not uses_allow(self.scope, accumulator, allowed):
            return None
        return FixSpec(
            Applicability.UNSAFE,
            f"Use `{dotted_name(value_node)}.item()`",
            (NodeEdit(value_node, ".item()", "after"),),
        )

    def _starts_as_number(self, name: str, ctx: Ctx) -> bool:
        """The accumulator's last assignment before the loop is a number: `total = 0.0`."""
        loop = ctx.loops[-1]
        loop_seq = next(frame.seq for frame in ctx.chain if frame.statement is loop)
        start = None
        for event in self.scope.assigns:
            if event.seq < loop_seq and name in event.targets and not event.augmented:
                start = event
        return start is not None and start.value is not None and _is_number(start.value)

    # TML503
    def _retain_graph(self) -> None:
        for call in self.backward_calls:
            retain = _keyword(call.node, "retain_graph")
            if retain is None or not _is_true(retain.value) or not call.ctx.loops:
                continue
            create = _keyword(call.node, "create_graph")
            if create is not None and not _is_false(create.value):
                continue
            outer = call.ctx.loops[0]
            others = [c for c in self.backward_calls if c is not call and outer in c.ctx.loops]
            if others or not self._built_in_loop(call):
                continue
            args = [a for a in call.node.args if a is not retain]
            if args and call.node.args[-1] is retain:
                args[-1] = args[-1].with_changes(comma=retain.comma)
            new = call.node.with_changes(args=args)
            fix = FixSpec(
                Applicability.UNSAFE,
                "Remove `retain_graph=True`",
                (NodeEdit(call.node, render_expression(self.walker.module, new)),),
            )
            message = (
                "`retain_graph=True` with no second backward through this graph in the loop: the "
                "graph and its saved activations stay alive into the next iteration's forward "
                f"({RETAIN_GRAPH_PEAK} peak per iteration measured); drop it, or detach state "
                "carried between iterations"
            )
            self.findings[RETAIN_GRAPH][id(call.node)] = Pending(call.node, message, fix)

    def _built_in_loop(self, call: CallEvent) -> bool:
        """What is backpropagated was computed in this iteration (not a graph from before the
        loop that every iteration backpropagates through again)."""
        receiver = call.receiver
        if call.attr != "backward" or receiver is None:
            receiver = call.node.args[0].value if call.node.args else None
        names = list(_primary_names(receiver)) if receiver is not None else []
        loop = call.ctx.loops[-1]
        for name in names:
            last = None
            for event in self.scope.assigns:
                if event.seq < call.seq and name in event.targets:
                    last = event
            if last is None or loop not in last.ctx.loops:
                return False
        return bool(names)

    # TML504 / TML505
    def _list_on_self(self, event: CallEvent) -> None:
        if event.attr != "append" or event.receiver is None or len(event.node.args) != 1:
            return
        attribute = _self_attribute(event.receiver)
        if attribute is None or not self._unbounded_list(attribute):
            return
        value = self.value_of(event.node.args[0].value, event.ctx)
        if value is None:
            return
        message = (
            f"`self.{attribute}.append(...)` in `forward` keeps one activation per call in a list "
            f"that is never emptied (+{LIST_GROWTH} per iteration measured; `.detach()` does not "
            "help): store `.detach().cpu()` copies, bound the list, or clear it"
        )
        self.findings[LIST_ON_SELF][id(event.node)] = Pending(event.node, message)

    def _unbounded_list(self, attribute: str) -> bool:
        owner = self.scope.owner
        assert owner is not None
        initialised = False
        target = f"self.{attribute}"
        for method in owner.methods:
            for assign in method.assigns:
                if target not in assign.targets:
                    continue
                if method.name != "__init__" or assign.augmented:
                    return False  # reset or rebound elsewhere: the class manages its size
                initialised = initialised or _is_empty_list(assign.value)
            for call in method.calls:
                if call.receiver is not None and dotted_name(call.receiver) == target:
                    if call.attr in ("clear", "pop", "popleft", "remove"):
                        return False
        return initialised and not _deleted(owner, target)

    def _tensor_on_self(self, event: AssignEvent) -> None:
        if len(event.targets) != 1 or event.unpacked or event.value is None:
            return
        attribute = _self_attribute_name(event.targets[0])
        if attribute is None or attribute in _buffers(self.scope.owner):
            return
        value = self.value_of(event.value, event.ctx)
        if value is None:
            return
        message = (
            f"`self.{attribute} = ...` in `forward` keeps this activation alive until the next "
            "call: one extra activation between steps (peak unchanged in the measured net); "
            "store a `.detach().cpu()` copy or return it instead"
        )
        self.findings[TENSOR_ON_SELF][id(event.node)] = Pending(event.node, message)


def _primary_names(expr: cst.BaseExpression) -> Iterator[str]:
    """The tensors an expression is computed from: `(a + b).mean()` -> a, b;
    `scaler.scale(loss)` -> loss; `out[i]` -> out."""
    dotted = dotted_name(expr) if isinstance(expr, (cst.Name, cst.Attribute)) else None
    if dotted is not None:
        yield dotted
    elif isinstance(expr, cst.BinaryOperation):
        yield from _primary_names(expr.left)
        yield from _primary_names(expr.right)
    elif isinstance(expr, cst.UnaryOperation):
        yield from _primary_names(expr.expression)
    elif isinstance(expr, cst.Subscript):
        yield from _primary_names(expr.value)
    elif isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        if expr.func.attr.value == "scale" and expr.args:
            yield from _primary_names(expr.args[0].value)
        else:
            yield from _primary_names(expr.func.value)
    else:
        yield "?"  # something we cannot follow


def _short(code: str, limit: int = 40) -> str:
    code = " ".join(code.split())
    return code if len(code) <= limit else code[: limit - 3] + "..."


def _reduced(call: cst.Call) -> bool:
    reduction = _keyword(call, "reduction")
    if reduction is None:
        return True
    value = reduction.value
    return isinstance(value, cst.SimpleString) and value.evaluated_value in ("mean", "sum")


def _keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def _is_number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.UnaryOperation):
        expr = expr.expression
    return isinstance(expr, (cst.Integer, cst.Float))


def _detaches(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, cst.Call):
        func = expr.func
        if isinstance(func, cst.Name) and func.value in ("float", "int", "bool"):
            return True
        if isinstance(func, cst.Attribute):
            return func.attr.value in ("item", "detach", "tolist", "numpy") or _detaches(func.value)
    if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
        return True
    return False


def _mentions_cpu(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.SimpleString) and "cpu" in expr.value


def _self_attribute(expr: cst.BaseExpression) -> Optional[str]:
    dotted = dotted_name(expr)
    return _self_attribute_name(dotted) if dotted else None


def _self_attribute_name(dotted: str) -> Optional[str]:
    head, _, attribute = dotted.partition(".")
    return attribute if head == "self" and attribute and "." not in attribute else None


def _is_empty_list(value: Optional[cst.BaseExpression]) -> bool:
    if isinstance(value, cst.List):
        return not value.elements
    return (
        isinstance(value, cst.Call) and isinstance(value.func, cst.Name)
        and value.func.value == "list" and not value.args
    )


def _deleted(owner: ClassFacts, target: str) -> bool:
    """`del self.x[:]` / `del self.x` anywhere in the class."""
    for statement in _class_small_statements(owner.node):
        if isinstance(statement, cst.Del):
            for name in _names_in(statement.target):
                if name == target:
                    return True
    return False


def _class_small_statements(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    for child in children(node):
        if isinstance(child, cst.BaseSmallStatement):
            yield child
        elif isinstance(child, (cst.BaseStatement, cst.BaseSuite, cst.ExceptHandler,
                                cst.Else, cst.Finally, cst.MatchCase)):
            yield from _class_small_statements(child)


def _buffers(owner: Optional[ClassFacts]) -> Set[str]:
    found: Set[str] = set()
    for method in owner.methods if owner else ():
        for call in method.calls:
            if call.attr == "register_buffer" and call.node.args:
                first = call.node.args[0].value
                if isinstance(first, cst.SimpleString):
                    found.add(str(first.evaluated_value))
    return found


def is_eval_name(name: str) -> bool:
    """`evaluate`, `run_validation`, `predictBatch`, `test`; not test-suite functions
    (`test_shape`, `_test_outputs`, `testShape`) nor Lightning hooks."""
    bare = name.lstrip("_")
    if not bare or FRAMEWORK_NO_GRAD_HOOKS.match(name) or re.match(r"test(?:_|[A-Z])", bare):
        return False
    words = re.findall(r"[a-z]+|[A-Z][a-z]*", name)
    return any(word.lower() in EVAL_WORDS for word in words)


# -- uses of an accumulator (for the `.item()` fix) -----------------------------------------


def _float_use(label: str) -> bool:
    kind, _, name = label.partition(":")
    if kind == "arg":
        return name in FIXED_TYPE_CALLS or (
            "." in name and name.rsplit(".", 1)[-1] in LOGGING_METHODS
        )
    return kind in ("test", "format")


def _list_use(label: str) -> bool:
    kind, _, name = label.partition(":")
    if kind == "receiver":
        return name in ("append", "clear")
    return _float_use(label)


_PASS_THROUGH = (cst.BinaryOperation, cst.UnaryOperation, cst.Comparison, cst.BooleanOperation)


def uses_allow(scope: Scope, name: str, allowed, depth: int = 0) -> bool:
    """Every read of `name` in the scope is one `allowed` accepts (names derived by assignment
    from it are checked the same way, one level deep)."""
    labels: List[str] = []
    derived: Set[str] = set()
    body = scope.node.body
    statements = body if isinstance(body, Sequence) else body.body
    for statement in statements:
        _scan_statement(statement, name, labels, derived)
    if not all(allowed(label) for label in labels):
        return False
    if depth == 0:
        return all(uses_allow(scope, other, allowed, 1) for other in derived - {name})
    return not derived - {name}


def _scan_statement(node: cst.CSTNode, name: str, labels: List[str], derived: Set[str]) -> None:
    if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        return
    if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        value = node.value
        if value is None:
            return
        before = len(labels)
        _scan(value, name, "assign", labels)
        if "assign" in labels[before:]:
            # read into another name (`avg = total / n`): that name's uses are checked instead
            assigned = isinstance(node, cst.Assign)
            targets = [t.target for t in node.targets] if assigned else [node.target]
            for target in targets:
                derived.update(_target_names(target))
            labels[before:] = [label for label in labels[before:] if label != "assign"]
        return
    if isinstance(node, (cst.Return, cst.Yield)):
        if node.value is not None:
            _scan(node.value, name, "return", labels)
        return
    if isinstance(node, (cst.If, cst.While)):
        _scan(node.test, name, "test", labels)
        for child in children(node):
            if child is not node.test:
                _scan_statement(child, name, labels, derived)
        return
    if isinstance(node, cst.Expr):
        _scan(node.value, name, "expr", labels)
        return
    if isinstance(node, cst.BaseExpression):
        _scan(node, name, "escape", labels)
        return
    for child in children(node):
        _scan_statement(child, name, labels, derived)


def _scan(node: cst.CSTNode, name: str, label: str, labels: List[str]) -> None:
    if isinstance(node, cst.Lambda):
        return
    if isinstance(node, (cst.Name, cst.Attribute)):
        dotted = dotted_name(node)
        if dotted == name:
            labels.append(label)
            return
        if isinstance(node, cst.Attribute):
            _scan(node.value, name, f"receiver:{node.attr.value}", labels)
        return
    if isinstance(node, cst.Call):
        callee = dotted_name(node.func) or (
            f".{node.func.attr.value}" if isinstance(node.func, cst.Attribute) else "?"
        )
        _scan(node.func, name, "callee", labels)
        following = callee in TYPE_FOLLOWING_CALLS or callee.startswith(TYPE_FOLLOWING_MODULES)
        for arg in node.args:
            _scan(arg.value, name, label if following else f"arg:{callee}", labels)
        return
    if isinstance(node, (cst.FormattedString, cst.FormattedStringExpression)):
        label = "format"
    elif not isinstance(node, _PASS_THROUGH + (cst.IfExp,)):
        label = "escape"
    for child in children(node):
        _scan(child, name, label, labels)


# -- rendering a rewritten statement --------------------------------------------------------


def render(module: cst.Module, statement: cst.CSTNode, indents: Tuple[Optional[str], ...]) -> str:
    """Source of `statement` at the nesting given by `indents`, as it would sit in the file.

    The statement is nested in dummy `if True:` blocks with the original relative indents and
    the dummy header lines are dropped; string contents are never re-indented."""
    node = statement
    for indent in reversed(indents):
        node = cst.If(test=cst.Name("True"), body=cst.IndentedBlock(body=[node], indent=indent))
    code = module.with_changes(body=[node], header=[], footer=[], has_trailing_newline=True).code
    lines = _unix_newlines(module, code).splitlines(keepends=True)
    return "".join(lines[len(indents):])


def render_expression(module: cst.Module, node: cst.CSTNode) -> str:
    return _unix_newlines(module, module.code_for_node(node))


def _unix_newlines(module: cst.Module, code: str) -> str:
    """Edits are written with "\n"; the fixer turns them into the file's own line ending."""
    newline = module.default_newline
    return code if newline == "\n" else code.replace(newline, "\n")


# -- entry point ----------------------------------------------------------------------------


def _may_leak(scope: Scope) -> bool:
    """Cheap test for a pattern some TML5xx rule looks at; most scopes have none."""
    if scope.owner is not None and scope.name == "forward":
        return any(
            call.attr == "append" and call.receiver is not None
            and _self_attribute(call.receiver) is not None
            for call in scope.calls
        ) or any(
            not event.augmented and any(_self_attribute_name(t) for t in event.targets)
            for event in scope.assigns
        )
    for call in scope.calls:
        if call.attr in ("eval", "train") or (call.attr == "append" and call.ctx.loops):
            return True
        if call.attr == "backward" and call.ctx.loops and _keyword(call.node, "retain_graph"):
            return True
        if call.func is not None and MODEL_NAME.match(call.func.rsplit(".", 1)[-1]):
            return True
    return any(event.ctx.loops and event.value is not None for event in scope.assigns) and (
        any(event.augmented or isinstance(event.value, cst.BinaryOperation)
            for event in scope.assigns if event.ctx.loops)
    )


def analyse(module: cst.Module, module_bindings: Bindings) -> Findings:
    walker = _Walker(module, module_bindings)
    walker.run(module_bindings)
    findings: Findings = {
        code: {} for code in (EVAL_WITHOUT_NO_GRAD, ACCUMULATED_TENSOR, RETAIN_GRAPH,
                              LIST_ON_SELF, TENSOR_ON_SELF)
    }
    for scope in walker.scopes:
        if _may_leak(scope):
            _ScopeAnalysis(walker, scope, findings).run()
    return findings
