"""Shared analysis for the module-structure rules (TML1xx stateless layers, TML2xx inplace,
TML3xx dropped downsampling).

One model per file, built lazily and cached in ``FileContext.shared``:

* ``ClassModel``: every ``self.x = ...`` assignment of a class and every ``self.x`` reference in
  its methods (direct calls ``self.x(...)`` kept apart from other uses), with the assigned value
  described as a torch.nn layer, an ``nn.Sequential`` (flattened), or a part borrowed from another
  object (``enc.layer1``).
* ``Flow``: a statement-level control-flow graph of one function with the names each statement
  reads and writes; it answers "which assignments reach here", "is this value read again later"
  and "was it read in between".
* ``Producer``: what produced a tensor (the previous element of a Sequential, or the call that
  made a function's local value), classified by what autograd keeps of it.

Walks use a field-based child iterator that skips whitespace and punctuation nodes: it is an order
of magnitude faster than a libcst visitor, which matters because every rule shares one traversal
budget. Names resolve through the engine's qualified names, so look-alikes (a local class
``ReLU``, ``keras.layers.ReLU``, a class named ``nn``) never match.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Callable, Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.names import canonical, dotted_name
from torchmemlint.tree import children

NN = "torch.nn."
FUNCTIONAL = "torch.nn.functional."

# -- fast traversal ---------------------------------------------------------------------------
def walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Pre-order walk over ``children``."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def path_to(root: cst.CSTNode, target: cst.CSTNode) -> Optional[List[cst.CSTNode]]:
    """The nodes from ``root`` down to ``target`` (both included), or None if not inside."""
    stack: List[Tuple[cst.CSTNode, int]] = [(root, 0)]
    path: List[cst.CSTNode] = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(children(node)))
    return None


def reads_beside(statement: cst.CSTNode, skipped: cst.CSTNode, name: str) -> int:
    """Reads of ``name`` in ``statement`` outside ``skipped`` that can run together with it.

    The other branch of a conditional expression around ``skipped`` never runs with it.
    """
    path = path_to(statement, skipped)
    on_path = {id(node) for node in path or ()}
    count = 0
    stack: List[cst.CSTNode] = [statement]
    while stack:
        node = stack.pop()
        if node is skipped:
            continue
        if isinstance(node, cst.Name):
            count += node.value == name
        elif isinstance(node, (cst.Attribute, cst.Arg)):
            stack.append(node.value)
        elif isinstance(node, cst.IfExp) and id(node) in on_path:
            stack.append(node.test)
            stack.extend(branch for branch in (node.body, node.orelse) if id(branch) in on_path)
        else:
            stack.extend(children(node))
    return count


def mentions(expression: cst.CSTNode, word: str) -> bool:
    """Whether a name or attribute in ``expression`` contains ``word`` (``self.inplace``)."""
    for node in walk(expression):
        if isinstance(node, cst.Name) and word in node.value:
            return True
    return False


# -- call arguments ----------------------------------------------------------------------------
def argument(call: cst.Call, position: Optional[int], keyword: str) -> Optional[cst.Arg]:
    """The argument bound to a parameter given by its position (None: keyword only) and name."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg
            continue
        if arg.star:
            return None
        if position is not None and index == position:
            return arg
        index += 1
    return None


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


def literal_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if isinstance(node, cst.Name) and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_number(node: cst.BaseExpression) -> Optional[float]:
    sign = 1.0
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        sign, node = -1.0, node.expression
    if isinstance(node, (cst.Integer, cst.Float)):
        return sign * float(node.evaluated_value)
    return None


def is_literal(node: cst.BaseExpression) -> bool:
    """A constant that can move from ``__init__`` to ``forward`` unchanged."""
    if isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString)):
        return True
    if isinstance(node, cst.Name):
        return node.value in ("True", "False", "None")
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus):
        return literal_number(node) is not None
    if isinstance(node, (cst.Tuple, cst.List)):
        return all(
            isinstance(e, cst.Element) and is_literal(e.value) for e in node.elements
        )
    return False


# -- the layer catalogue -------------------------------------------------------------------------
class Saves(str, enum.Enum):
    """What an activation keeps for backward when run out of place (measured, memory-facts 3.2)."""

    INPUT = "input"  # in place it keeps its result instead: one activation less (TML201)
    OUTPUT = "output"  # ReLU: keeps its output either way (TML202)
    CLONE = "clone"  # in place, autograd keeps a copy of the input: no saving (TML202)
    MASK = "mask"  # dropout


@dataclass(frozen=True)
class ActivationKind:
    """An activation (or dropout) with an ``inplace`` switch, as module and as function."""

    name: str  # the functional name: "leaky_relu"
    module: str  # "LeakyReLU"
    module_params: Tuple[str, ...]  # constructor parameters in order
    functional_params: Tuple[str, ...]  # functional parameters after ``input``
    saves: Saves

    @property
    def module_qualified(self) -> str:
        return NN + self.module


def _kind(name: str, module: str, module_params: str, functional_params: str, saves: Saves):
    return ActivationKind(
        name, module, tuple(module_params.split()), tuple(functional_params.split()), saves
    )


ACTIVATION_KINDS: Tuple[ActivationKind, ...] = (
    _kind("leaky_relu", "LeakyReLU", "negative_slope inplace", "negative_slope inplace", Saves.INPUT),
    _kind("elu", "ELU", "alpha inplace", "alpha inplace", Saves.INPUT),
    _kind("celu", "CELU", "alpha inplace", "alpha inplace", Saves.INPUT),
    _kind("selu", "SELU", "inplace", "inplace", Saves.INPUT),
    _kind("rrelu", "RReLU", "lower upper inplace", "lower upper training inplace", Saves.INPUT),
    _kind("relu", "ReLU", "inplace", "inplace", Saves.OUTPUT),
    _kind("relu6", "ReLU6", "inplace", "inplace", Saves.CLONE),
    _kind("hardtanh", "Hardtanh", "min_val max_val inplace", "min_val max_val inplace", Saves.CLONE),
    _kind("silu", "SiLU", "inplace", "inplace", Saves.CLONE),
    _kind("hardswish", "Hardswish", "inplace", "inplace", Saves.CLONE),
    _kind("hardsigmoid", "Hardsigmoid", "inplace", "inplace", Saves.CLONE),
    _kind("mish", "Mish", "inplace", "inplace", Saves.CLONE),
    _kind("threshold", "Threshold", "threshold value inplace", "threshold value inplace", Saves.CLONE),
    _kind("dropout", "Dropout", "p inplace", "p training inplace", Saves.MASK),
    _kind("dropout1d", "Dropout1d", "p inplace", "p training inplace", Saves.MASK),
    _kind("dropout2d", "Dropout2d", "p inplace", "p training inplace", Saves.MASK),
    _kind("dropout3d", "Dropout3d", "p inplace", "p training inplace", Saves.MASK),
    _kind("alpha_dropout", "AlphaDropout", "p inplace", "p training inplace", Saves.MASK),
    _kind(
        "feature_alpha_dropout", "FeatureAlphaDropout", "p inplace", "p training inplace", Saves.MASK
    ),
)
KIND_BY_MODULE: Dict[str, ActivationKind] = {k.module_qualified: k for k in ACTIVATION_KINDS}
KIND_BY_FUNCTION: Dict[str, ActivationKind] = {FUNCTIONAL + k.name: k for k in ACTIVATION_KINDS}
KIND_BY_NAME: Dict[str, ActivationKind] = {k.name: k for k in ACTIVATION_KINDS}

# Always in place: ``F.relu_(x)``, ``torch.sigmoid_(x)``; the fix drops the underscore.
INPLACE_FUNCTIONS: Dict[str, str] = {
    **{
        FUNCTIONAL + n + "_": n
        for n in ("relu", "leaky_relu", "elu", "celu", "selu", "rrelu", "hardtanh", "threshold")
    },
    **{
        "torch." + n + "_": n
        for n in ("relu", "selu", "celu", "rrelu", "threshold", "sigmoid", "tanh", "dropout")
    },
}
INPLACE_METHODS: Dict[str, str] = {"relu_": "relu", "sigmoid_": "sigmoid", "tanh_": "tanh"}


class Category(str, enum.Enum):
    """What autograd keeps of an op's result, for deciding about an in-place op after it."""

    FRESH = "fresh"  # a new tensor whose value backward does not need
    SAVES_OUTPUT = "saves-output"  # backward reads the result: modifying it in place raises
    POOL = "pool"  # FRESH, and it downsamples (TML3xx)
    UNKNOWN = "unknown"  # user code, views, ops that may return their input


def _names(prefix: str, names: str) -> FrozenSet[str]:
    return frozenset(prefix + name for name in names.split())


FRESH_MODULES = _names(
    NN,
    "Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d LazyConv1d LazyConv2d "
    "LazyConv3d LazyConvTranspose1d LazyConvTranspose2d LazyConvTranspose3d Linear LazyLinear "
    "Bilinear BatchNorm1d BatchNorm2d BatchNorm3d LazyBatchNorm1d LazyBatchNorm2d LazyBatchNorm3d "
    "SyncBatchNorm GroupNorm LayerNorm RMSNorm Upsample UpsamplingNearest2d "
    "UpsamplingBilinear2d GELU Softplus",
)
POOL_MODULES = _names(
    NN,
    "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d "
    "AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d "
    "LPPool1d LPPool2d LPPool3d FractionalMaxPool2d FractionalMaxPool3d",
)
OUTPUT_SAVING_MODULES = _names(NN, "ReLU Sigmoid Tanh Softmax Softmin LogSoftmax Softmax2d")
# Shape-preserving layers a stem trace may walk through (TML3xx).
NORM_MODULES = _names(
    NN,
    "BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm GroupNorm LayerNorm InstanceNorm1d "
    "InstanceNorm2d InstanceNorm3d Dropout Dropout1d Dropout2d Dropout3d Identity GELU Sigmoid Tanh",
)

FRESH_FUNCTIONS = _names(
    FUNCTIONAL,
    "conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d linear bilinear "
    "batch_norm group_norm layer_norm rms_norm interpolate upsample upsample_nearest "
    "upsample_bilinear gelu softplus",
) | _names(
    "torch.",
    "cat concat concatenate add sub subtract mul multiply div divide matmul mm bmm abs clamp "
    "clip pow conv1d conv2d conv3d",
)
POOL_FUNCTIONS = _names(
    FUNCTIONAL,
    "max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d "
    "adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d adaptive_max_pool2d "
    "adaptive_max_pool3d lp_pool1d lp_pool2d",
) | _names("torch.", "max_pool1d max_pool2d max_pool3d avg_pool1d adaptive_avg_pool1d")
OUTPUT_SAVING_FUNCTIONS = _names(
    FUNCTIONAL, "relu relu_ sigmoid tanh softmax softmin log_softmax scaled_dot_product_attention"
) | _names(
    "torch.",
    "relu relu_ sigmoid sigmoid_ tanh tanh_ softmax log_softmax exp exp_ expm1 sqrt rsqrt "
    "reciprocal selu_ celu_ rrelu_",
) | _names(FUNCTIONAL, "leaky_relu_ elu_ celu_ selu_ rrelu_")
FRESH_METHODS = frozenset({"add", "sub", "mul", "div", "matmul", "clamp", "abs", "pow"})
OUTPUT_SAVING_METHODS = frozenset(
    {"relu", "relu_", "sigmoid", "sigmoid_", "tanh", "tanh_", "softmax", "log_softmax", "exp",
     "exp_", "sqrt", "rsqrt", "reciprocal"}
)
# Saving its input when out of place, an in-place activation keeps its result instead.
OUTPUT_SAVING_WHEN_INPLACE = frozenset({"leaky_relu", "elu", "celu", "selu", "rrelu", "relu"})

CONTAINERS = frozenset({NN + "Sequential", NN + "ModuleList"})


def short_name(qualified: str) -> str:
    """``torch.nn.LeakyReLU`` -> ``nn.LeakyReLU``; ``torch.nn.functional.elu`` -> ``F.elu``."""
    if qualified.startswith(FUNCTIONAL):
        return "F." + qualified[len(FUNCTIONAL):]
    if qualified.startswith(NN):
        return "nn." + qualified[len(NN):]
    return qualified


@dataclass(frozen=True)
class Layer:
    """A ``torch.nn`` constructor call."""

    qualified: str
    call: cst.Call

    @property
    def kind(self) -> Optional[ActivationKind]:
        return KIND_BY_MODULE.get(self.qualified)

    def inplace(self) -> Optional[bool]:
        """True/False when ``inplace`` is literal (absent: False); None when not known."""
        kind = self.kind
        if kind is None or has_star_args(self.call):
            return None
        arg = argument(self.call, kind.module_params.index("inplace"), "inplace")
        return False if arg is None else literal_bool(arg.value)

    def category(self) -> Category:
        if self.qualified in POOL_MODULES:
            return Category.POOL
        kind = self.kind
        if kind is not None:
            if kind.name == "relu":
                return Category.SAVES_OUTPUT
            inplace = self.inplace()
            if inplace is None or kind.saves is Saves.MASK:
                return Category.UNKNOWN  # dropout returns its input in eval mode
            if inplace:
                return Category.SAVES_OUTPUT if kind.name in OUTPUT_SAVING_WHEN_INPLACE else Category.UNKNOWN
            return Category.FRESH
        if self.qualified in OUTPUT_SAVING_MODULES:
            return Category.SAVES_OUTPUT
        if self.qualified in FRESH_MODULES:
            return Category.FRESH
        return Category.UNKNOWN


# -- values assigned to attributes -----------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One module expression: a torch.nn layer, ``self.x``, a borrowed ``enc.part``, or other."""

    node: cst.BaseExpression
    layer: Optional[Layer] = None
    attribute: Optional[str] = None  # ``self.<attribute>``
    borrowed: Optional[Tuple[str, str]] = None  # (``enc``, ``layer1``) for ``enc.layer1``


def _is_self(node: cst.BaseExpression, self_name: Optional[str]) -> bool:
    return self_name is not None and isinstance(node, cst.Name) and node.value == self_name


def _rooted_at(node: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """``self`` or ``self.a.b``."""
    while isinstance(node, cst.Attribute):
        node = node.value
    return _is_self(node, self_name)


class Resolver:
    """Turns module expressions into ``Part`` / Sequential element lists for one file."""

    def __init__(self, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self.qualify = qualify

    def constructor(self, node: cst.BaseExpression) -> Optional[str]:
        if isinstance(node, cst.Call):
            qualified = self.qualify(node.func)
            if qualified is not None and qualified.startswith(NN):
                return qualified
        return None

    def part(self, node: cst.BaseExpression, self_name: Optional[str]) -> Part:
        qualified = self.constructor(node)
        if qualified is not None:
            assert isinstance(node, cst.Call)
            return Part(node, layer=Layer(qualified, node))
        if isinstance(node, cst.Attribute):
            if _is_self(node.value, self_name):
                return Part(node, attribute=node.attr.value)
            base = dotted_name(node.value)
            if base is not None and self.qualify(node.value) is None:
                return Part(node, borrowed=(base, node.attr.value))
        return Part(node)

    def sequential(self, call: cst.Call, self_name: Optional[str]) -> Optional[List[Part]]:
        """Elements of ``nn.Sequential(...)``, nested Sequentials flattened; None if not one."""
        if self.constructor(call) != NN + "Sequential":
            return None
        parts: List[Part] = []
        for arg in call.args:
            if arg.keyword is not None:
                return None
            if arg.star:
                parts.append(Part(arg.value))  # unknown elements
                continue
            ordered = self._ordered_dict_values(arg.value)
            values = ordered if ordered is not None else [arg.value]
            for value in values:
                inner = self.sequential(value, self_name) if isinstance(value, cst.Call) else None
                parts.extend(inner if inner is not None else [self.part(value, self_name)])
        return parts

    def _ordered_dict_values(self, node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
        if not isinstance(node, cst.Call) or self.qualify(node.func) != "collections.OrderedDict":
            return None
        if len(node.args) != 1 or not isinstance(node.args[0].value, (cst.List, cst.Tuple)):
            return None
        values = []
        for element in node.args[0].value.elements:
            pair = element.value
            if not isinstance(pair, cst.Tuple) or len(pair.elements) != 2:
                return None
            values.append(pair.elements[1].value)
        return values


# -- flow of one function --------------------------------------------------------------------------
ENTRY = -1  # pseudo statement index: the value came from outside (a parameter, a global)


@dataclass
class _Node:
    statement: cst.CSTNode
    reads: Dict[str, int] = field(default_factory=dict)  # name -> number of reads
    writes: Set[str] = field(default_factory=set)
    values: Dict[str, cst.BaseExpression] = field(default_factory=dict)  # name -> assigned value
    augmented: Dict[str, cst.BaseAugOp] = field(default_factory=dict)  # name -> `+=` operator
    stores: List[Tuple[str, str]] = field(default_factory=list)  # (container, element) pairs
    succ: List[int] = field(default_factory=list)
    pred: List[int] = field(default_factory=list)


@dataclass(frozen=True)
class Definition:
    """One assignment that may reach a use: its statement index and assigned value."""

    index: int  # ENTRY for a parameter or a name bound outside the function
    value: Optional[cst.BaseExpression] = None  # None: not a plain `name = value`
    augmented: Optional[cst.BaseAugOp] = None


_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)
_APPENDERS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})


class Flow:
    """Statement-level control flow of one function (structured: if/for/while/try/with)."""

    def __init__(self, function: cst.FunctionDef) -> None:
        self.function = function
        self.nodes: List[_Node] = []
        self.index: Dict[int, int] = {}  # id(statement) -> node index
        self.captured: Set[str] = set()  # names read inside nested functions / lambdas
        self.reliable = True  # False: global/nonlocal/match, the analysis stays silent
        self.parameters = _parameter_names(function.params)
        body = function.body
        statements = body.body if isinstance(body, cst.IndentedBlock) else [body]
        self.entry = self._block(statements, follow=None, loop=None)
        for number, node in enumerate(self.nodes):
            for successor in node.succ:
                self.nodes[successor].pred.append(number)

    # -- construction -------------------------------------------------------------------------
    def _new(self, statement: cst.CSTNode) -> int:
        self.nodes.append(_Node(statement))
        self.index[id(statement)] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def _block(
        self, statements: Iterable[cst.CSTNode], follow: Optional[int], loop: Optional[Tuple[int, Optional[int]]]
    ) -> Optional[int]:
        """Build a block backwards; return its entry (``follow`` when empty)."""
        entry = follow
        for statement in reversed(list(statements)):
            entry = self._statement(statement, entry, loop)
        return entry

    def _suite(self, suite: cst.BaseSuite, follow, loop) -> Optional[int]:
        statements = suite.body if isinstance(suite, cst.IndentedBlock) else [suite]
        return self._block(statements, follow, loop)

    def _statement(self, statement: cst.CSTNode, follow: Optional[int], loop) -> Optional[int]:
        succ = [] if follow is None else [follow]
        if isinstance(statement, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
            number = self._new(statement)
            node = self.nodes[number]
            for small in statement.body:
                succ = self._small(small, node, succ, loop)
            node.succ = succ
            return number
        if isinstance(statement, cst.If):
            number = self._new(statement)
            self._read(statement.test, self.nodes[number])
            body = self._suite(statement.body, follow, loop)
            orelse = statement.orelse
            if isinstance(orelse, cst.If):
                other = self._statement(orelse, follow, loop)
            elif isinstance(orelse, cst.Else):
                other = self._suite(orelse.body, follow, loop)
            else:
                other = follow
            self.nodes[number].succ = [i for i in (body, other) if i is not None]
            return number
        if isinstance(statement, (cst.For, cst.While)):
            number = self._new(statement)
            node = self.nodes[number]
            if isinstance(statement, cst.For):
                self._read(statement.iter, node)
                self._target(statement.target, node, None)
            else:
                self._read(statement.test, node)
            after = self._suite(statement.orelse.body, follow, loop) if statement.orelse else follow
            body = self._suite(statement.body, number, (number, follow))
            node.succ = [i for i in (body, after) if i is not None]
            return number
        if isinstance(statement, cst.With):
            number = self._new(statement)
            node = self.nodes[number]
            for item in statement.items:
                self._read(item.item, node)
                if item.asname is not None:
                    self._target(item.asname.name, node, None)
            body = self._suite(statement.body, follow, loop)
            node.succ = [] if body is None else [body]
            return number
        if isinstance(statement, (cst.Try, cst.TryStar)):
            number = self._new(statement)
            final = self._suite(statement.finalbody.body, follow, loop) if statement.finalbody else follow
            orelse = self._suite(statement.orelse.body, final, loop) if statement.orelse else final
            handlers = []
            for handler in statement.handlers:
                head = self._new(handler)
                if handler.type is not None:
                    self._read(handler.type, self.nodes[head])
                if handler.name is not None:
                    self._target(handler.name.name, self.nodes[head], None)
                inner = self._suite(handler.body, final, loop)
                self.nodes[head].succ = [] if inner is None else [inner]
                handlers.append(head)
            first = len(self.nodes)
            body = self._suite(statement.body, orelse, loop)
            for number_in_body in range(first, len(self.nodes)):
                self.nodes[number_in_body].succ.extend(handlers)  # any statement may raise
            self.nodes[number].succ = [i for i in [body, *handlers] if i is not None]
            return number
        if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            number = self._new(statement)
            node = self.nodes[number]
            node.writes.add(statement.name.value)
            inner_reads: Dict[str, int] = {}
            _collect_reads(statement, inner_reads, set(), self.captured)
            self.captured.update(inner_reads)
            node.reads.update(inner_reads)
            node.succ = succ
            return number
        # match statements and anything newer: give up on this function.
        self.reliable = False
        number = self._new(statement)
        self.nodes[number].succ = succ
        return number

    def _small(self, small: cst.BaseSmallStatement, node: _Node, succ: List[int], loop) -> List[int]:
        if isinstance(small, cst.Assign):
            self._read(small.value, node)
            value = small.value
            for target in small.targets:
                self._target(target.target, node, value if len(small.targets) == 1 else None)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self._read(small.value, node)
                self._target(small.target, node, small.value)
        elif isinstance(small, cst.AugAssign):
            self._read(small.value, node)
            if isinstance(small.target, cst.Name):
                name = small.target.value
                node.reads[name] = node.reads.get(name, 0) + 1
                node.writes.add(name)
                node.augmented[name] = small.operator
                node.values.pop(name, None)
                if isinstance(small.value, (cst.List, cst.Tuple)):
                    for element in small.value.elements:
                        if isinstance(element.value, cst.Name):
                            node.stores.append((name, element.value.value))
            else:
                self._read(small.target, node)
        elif isinstance(small, cst.Expr):
            self._read(small.value, node)
            self._note_store_call(small.value, node)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                self._read(small.value, node)
            return []
        elif isinstance(small, cst.Raise):
            for part in (small.exc, small.cause):
                if part is not None:
                    self._read(part.item if isinstance(part, cst.From) else part, node)
            return []
        elif isinstance(small, cst.Del):
            self._delete(small.target, node)
        elif isinstance(small, cst.Break):
            return [] if loop is None or loop[1] is None else [loop[1]]
        elif isinstance(small, cst.Continue):
            return [] if loop is None else [loop[0]]
        elif isinstance(small, (cst.Global, cst.Nonlocal)):
            self.reliable = False
        elif isinstance(small, (cst.Import, cst.ImportFrom)):
            names = small.names
            if not isinstance(names, cst.ImportStar):
                for alias in names:
                    bound = alias.asname.name if alias.asname else alias.name
                    name = dotted_name(bound)  # type: ignore[arg-type]
                    if name is not None:
                        node.writes.add(name.split(".", 1)[0])
        else:  # assert, pass, ...
            for child in children(small):
                self._read(child, node)
        return succ

    def _read(self, expression: cst.CSTNode, node: _Node) -> None:
        _collect_reads(expression, node.reads, set(), self.captured)
        for inner in _named_expressions(expression):
            self._target(inner.target, node, inner.value)

    def _target(self, target: cst.BaseExpression, node: _Node, value: Optional[cst.BaseExpression]) -> None:
        if isinstance(target, cst.Name):
            node.writes.add(target.value)
            node.augmented.pop(target.value, None)
            if value is not None:
                node.values[target.value] = value
                if isinstance(value, (cst.List, cst.Tuple, cst.Set)):
                    for element in value.elements:
                        if isinstance(element.value, cst.Name):
                            node.stores.append((target.value, element.value.value))
            else:
                node.values.pop(target.value, None)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._target(element.value, node, None)
        elif isinstance(target, cst.StarredElement):
            self._target(target.value, node, None)
        else:  # `obj.attr = v` / `obj[i] = v` read obj (and store v into it)
            self._read(target, node)
            if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name):
                if isinstance(value, cst.Name):
                    node.stores.append((target.value.value, value.value))

    def _delete(self, target: cst.BaseExpression, node: _Node) -> None:
        if isinstance(target, cst.Name):
            node.writes.add(target.value)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._delete(element.value, node)
        else:
            self._read(target, node)

    @staticmethod
    def _note_store_call(expression: cst.BaseExpression, node: _Node) -> None:
        """``feats.append(x)``: ``feats`` now holds ``x``."""
        if (
            isinstance(expression, cst.Call)
            and isinstance(expression.func, cst.Attribute)
            and isinstance(expression.func.value, cst.Name)
            and expression.func.attr.value in _APPENDERS
        ):
            for arg in expression.args:
                if isinstance(arg.value, cst.Name):
                    node.stores.append((expression.func.value.value, arg.value.value))

    # -- queries ---------------------------------------------------------------------------------
    def statement_index(self, statement: Optional[cst.CSTNode]) -> Optional[int]:
        return None if statement is None else self.index.get(id(statement))

    def definitions(self, name: str, index: int) -> List[Definition]:
        """The assignments of ``name`` that may reach statement ``index`` (before it runs)."""
        found: Dict[int, Definition] = {}
        seen: Set[int] = set()
        stack = list(self.nodes[index].pred)
        if index == self.entry:
            found[ENTRY] = Definition(ENTRY)
        while stack:
            number = stack.pop()
            if number in seen:
                continue
            seen.add(number)
            node = self.nodes[number]
            if name in node.writes:
                found[number] = Definition(number, node.values.get(name), node.augmented.get(name))
                continue
            if number == self.entry:
                found[ENTRY] = Definition(ENTRY)
            stack.extend(node.pred)
        return [found[key] for key in sorted(found)]

    def read_again(self, names: FrozenSet[str], index: int) -> bool:
        """Whether a value held in ``names`` after statement ``index`` may be read later.

        A write of a name ends that name's interest on that path; coming back to ``index``
        through a loop counts as a read (the next iteration sees the value).
        """
        seen: Set[Tuple[int, FrozenSet[str]]] = set()
        names = names - self.nodes[index].writes
        stack = [(successor, names) for successor in self.nodes[index].succ] if names else []
        while stack:
            number, live = stack.pop()
            if (number, live) in seen:
                continue
            seen.add((number, live))
            node = self.nodes[number]
            if any(name in node.reads for name in live):
                return True
            live = live - node.writes
            if live:
                stack.extend((successor, live) for successor in node.succ)
        return False

    def read_between(self, name: str, start: int, end: int) -> bool:
        """Whether ``name`` is read on a path from after ``start`` up to (not including) ``end``."""
        seen: Set[int] = set()
        stack = list(self.nodes[start].succ)
        while stack:
            number = stack.pop()
            if number in seen or number == end:
                continue
            seen.add(number)
            node = self.nodes[number]
            if name in node.reads:
                return True
            if name not in node.writes:
                stack.extend(node.succ)
        return False

    def holders(self, name: str, index: int) -> FrozenSet[str]:
        """``name`` and the names that hold the same tensor at ``index``.

        ``identity = x`` or ``feats.append(x)`` made earlier, while ``x`` had the value it has
        at ``index``, keeps that tensor reachable through ``identity`` / ``feats``.
        """
        reaching = self.definitions(name, index)
        held = {name}
        if len(reaching) == 1 and isinstance(reaching[0].value, cst.Name):
            source, copied_at = reaching[0].value.value, reaching[0].index
            if self.definitions(source, copied_at) == self.definitions(source, index):
                held.add(source)  # `x = identity`: identity still holds the tensor
        for number, node in enumerate(self.nodes):
            pairs = list(node.stores)
            pairs += [(alias, v.value) for alias, v in node.values.items() if isinstance(v, cst.Name)]
            for holder, element in pairs:
                if element == name and holder != name and self.definitions(name, number) == reaching:
                    held.add(holder)
        return frozenset(held)


def _parameter_names(params: cst.Parameters) -> List[str]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            every.append(extra)
    return [param.name.value for param in every]


def _collect_reads(
    root: cst.CSTNode, reads: Dict[str, int], local: Set[str], captured: Set[str]
) -> None:
    """Count the names an expression (or nested definition) reads; skips attribute names."""
    stack: List[Tuple[cst.CSTNode, Set[str], bool]] = [(root, local, False)]
    while stack:
        node, bound, nested = stack.pop()
        node_type = type(node)
        if node_type is cst.Name:
            name = node.value  # type: ignore[attr-defined]
            if name not in bound:
                reads[name] = reads.get(name, 0) + 1
                if nested:
                    captured.add(name)
            continue
        if node_type is cst.Attribute:
            stack.append((node.value, bound, nested))  # type: ignore[attr-defined]
            continue
        if node_type is cst.Arg:
            stack.append((node.value, bound, nested))  # type: ignore[attr-defined]
            continue
        if node_type is cst.Lambda:
            inner = bound | set(_parameter_names(node.params))  # type: ignore[attr-defined]
            stack.append((node.body, inner, True))  # type: ignore[attr-defined]
            continue
        if node_type is cst.FunctionDef or node_type is cst.ClassDef:
            if node_type is cst.FunctionDef:
                inner = bound | set(_parameter_names(node.params))  # type: ignore[attr-defined]
                for param in _all_params(node.params):  # type: ignore[attr-defined]
                    if param.default is not None:
                        stack.append((param.default, bound, nested))
            else:
                inner = bound
                stack.extend((base, bound, nested) for base in node.bases)  # type: ignore[attr-defined]
            stack.extend((d.decorator, bound, nested) for d in node.decorators)  # type: ignore[attr-defined]
            stack.append((node.body, inner, True))  # type: ignore[attr-defined]
            continue
        if node_type in _COMPREHENSIONS:
            inner = bound | _comprehension_targets(node)  # type: ignore[arg-type]
            stack.extend((child, inner, nested) for child in children(node))
            continue
        if node_type is cst.Param or node_type is cst.Parameters:
            continue
        stack.extend((child, bound, nested) for child in children(node))


def _all_params(params: cst.Parameters) -> List[cst.Param]:
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    for extra in (params.star_arg, params.star_kwarg):
        if isinstance(extra, cst.Param):
            every.append(extra)
    return every


def _comprehension_targets(node: cst.BaseComp) -> Set[str]:
    names: Set[str] = set()
    clause: Optional[cst.CompFor] = node.for_in
    while clause is not None:
        for inner in walk(clause.target):
            if isinstance(inner, cst.Name):
                names.add(inner.value)
        clause = clause.inner_for_in
    return names


def _named_expressions(expression: cst.CSTNode) -> List[cst.NamedExpr]:
    if not isinstance(expression, cst.BaseExpression):
        return []
    return [inner for inner in walk(expression) if isinstance(inner, cst.NamedExpr)]


# -- classes -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assignment:
    """``self.<name> = value`` in a method."""

    name: str
    value: cst.BaseExpression
    statement: cst.SimpleStatementLine
    method: cst.FunctionDef
    indent: str  # the statement's indentation, for fixes that remove it
    single_target: bool
    alone: bool  # the only statement of its block: removing it would leave the block empty


@dataclass(frozen=True)
class Reference:
    """A ``self.<name>`` read in a method; ``call`` is set when it is called directly."""

    name: str
    node: cst.Attribute
    call: Optional[cst.Call]
    method: cst.FunctionDef
    statement: Optional[cst.CSTNode]


@dataclass(frozen=True)
class BorrowedUse:
    """``base.part`` where ``base`` is not ``self`` (``enc.layer1``, ``self.encoder.conv1``)."""

    base: str
    part: str
    node: cst.Attribute
    call: Optional[cst.Call]
    method: cst.FunctionDef
    statement: Optional[cst.CSTNode]


STEM_PARTS = frozenset({"conv1", "bn1", "relu", "act1", "maxpool", "layer1", "layer2", "layer3", "layer4"})


class ClassModel:
    """Attributes and their uses for one class (methods directly in its body)."""

    def __init__(self, node: cst.ClassDef, file: "FileModel", indent: str) -> None:
        self.node = node
        self.file = file
        self.methods: List[cst.FunctionDef] = []
        self.self_names: Dict[int, str] = {}  # id(method) -> name of its first parameter
        self.assignments: Dict[str, List[Assignment]] = {}
        self.references: Dict[str, List[Reference]] = {}
        self.borrowed: List[BorrowedUse] = []
        self.constructors: List[Tuple[cst.Call, str, cst.FunctionDef, Optional[cst.CSTNode]]] = []
        body_indent = indent + _block_indent(node.body, file.module)
        for statement in _block_statements(node.body):
            if isinstance(statement, cst.FunctionDef):
                self.methods.append(statement)
        for method in self.methods:
            params = method.params
            positional = [*params.posonly_params, *params.params]
            if not positional or _is_static(method):
                continue
            self.self_names[id(method)] = positional[0].name.value
            method_indent = body_indent + _block_indent(method.body, file.module)
            self._scan_block(method, method.body, method_indent)

    # -- scanning ----------------------------------------------------------------------------------
    def _scan_block(self, method: cst.FunctionDef, suite: cst.BaseSuite, indent: str) -> None:
        statements = list(_block_statements(suite))
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    self._scan_small(method, statement, small, indent, len(statements) == 1)
                continue
            if isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
                # Uses inside a nested function belong to another flow: recorded without one.
                self._scan_expression(method, None, statement)
                continue
            for child in children(statement):
                if isinstance(child, cst.BaseSuite):
                    self._scan_block(method, child, indent + _block_indent(child, self.file.module))
                elif isinstance(child, (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally)):
                    for grandchild in children(child):
                        if isinstance(grandchild, cst.BaseSuite):
                            inner = indent + _block_indent(grandchild, self.file.module)
                            self._scan_block(method, grandchild, inner)
                        else:
                            self._scan_expression(method, statement, grandchild)
                elif isinstance(child, cst.If):  # elif
                    self._scan_block_like(method, child, indent)
                else:
                    self._scan_expression(method, statement, child)

    def _scan_block_like(self, method: cst.FunctionDef, statement: cst.If, indent: str) -> None:
        self._scan_expression(method, statement, statement.test)
        self._scan_block(method, statement.body, indent + _block_indent(statement.body, self.file.module))
        orelse = statement.orelse
        if isinstance(orelse, cst.If):
            self._scan_block_like(method, orelse, indent)
        elif isinstance(orelse, cst.Else):
            self._scan_block(method, orelse.body, indent + _block_indent(orelse.body, self.file.module))

    def _scan_small(
        self,
        method: cst.FunctionDef,
        statement: cst.SimpleStatementLine,
        small: cst.CSTNode,
        indent: str,
        alone: bool,
    ) -> None:
        self_name = self.self_names[id(method)]
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = (
                [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            )
            value = small.value
            for target in targets:
                if isinstance(target, cst.Attribute) and _is_self(target.value, self_name):
                    if value is not None:
                        assignment = Assignment(
                            target.attr.value, value, statement, method, indent,
                            len(targets) == 1 and len(statement.body) == 1, alone,
                        )
                        self.assignments.setdefault(target.attr.value, []).append(assignment)
                else:
                    self._scan_expression(method, statement, target)
            if value is not None:
                self._scan_expression(method, statement, value)
            return
        if isinstance(small, cst.AugAssign) and isinstance(small.target, cst.Attribute):
            target = small.target
            if _is_self(target.value, self_name):
                # `self.x += ...` rebinds the attribute: no single assignment describes it.
                self.assignments.setdefault(target.attr.value, []).append(
                    Assignment(target.attr.value, small.value, statement, method, indent, False, alone)
                )
        self._scan_expression(method, statement, small)

    def _scan_expression(
        self,
        method: cst.FunctionDef,
        statement: Optional[cst.CSTNode],
        root: cst.CSTNode,
    ) -> None:
        self_name = self.self_names[id(method)]
        resolver = self.file.resolver
        stack: List[Tuple[cst.CSTNode, Optional[cst.Call]]] = [(root, None)]
        while stack:
            node, call = stack.pop()
            node_type = type(node)
            if node_type is cst.Call:
                func = node.func  # type: ignore[attr-defined]
                qualified = resolver.constructor(node)  # type: ignore[arg-type]
                if qualified is not None:
                    self.constructors.append((node, qualified, method, statement))  # type: ignore[arg-type]
                stack.extend((arg, None) for arg in node.args)  # type: ignore[attr-defined]
                stack.append((func, node))  # type: ignore[arg-type]
                continue
            if node_type is cst.Attribute:
                value = node.value  # type: ignore[attr-defined]
                name = node.attr.value  # type: ignore[attr-defined]
                if _is_self(value, self_name):
                    self.references.setdefault(name, []).append(
                        Reference(name, node, call, method, statement)  # type: ignore[arg-type]
                    )
                    continue
                if name in STEM_PARTS:
                    base = dotted_name(value)
                    if base is not None and resolver.qualify(value) is None:
                        use = BorrowedUse(base, name, node, call, method, statement)  # type: ignore[arg-type]
                        self.borrowed.append(use)
                stack.append((value, None))
                continue
            if node_type is cst.Arg:
                stack.append((node.value, None))  # type: ignore[attr-defined]
                continue
            stack.extend((child, None) for child in children(node))

    # -- queries ---------------------------------------------------------------------------------
    @property
    def init(self) -> Optional[cst.FunctionDef]:
        for method in self.methods:
            if method.name.value == "__init__":
                return method
        return None

    def self_name(self, method: cst.FunctionDef) -> Optional[str]:
        return self.self_names.get(id(method))

    def single_assignment(self, name: str) -> Optional[Assignment]:
        """The one assignment of ``self.<name>``, made in ``__init__``; None if not so simple."""
        found = self.assignments.get(name, [])
        if len(found) != 1 or found[0].method.name.value != "__init__":
            return None
        return found[0]

    def attribute_part(self, name: str) -> Optional[Part]:
        assignment = self.single_assignment(name)
        if assignment is None:
            return None
        return self.file.resolver.part(assignment.value, self.self_name(assignment.method))

    def attribute_sequence(self, name: str) -> Optional[List[Part]]:
        """The modules ``self.<name>(x)`` runs, in order: one layer, or a Sequential's elements."""
        assignment = self.single_assignment(name)
        if assignment is None:
            return None
        self_name = self.self_name(assignment.method)
        value = assignment.value
        if isinstance(value, cst.Call):
            elements = self.file.resolver.sequential(value, self_name)
            if elements is not None:
                return elements
        return [self.file.resolver.part(value, self_name)]

    def calls(self, name: str) -> List[Reference]:
        return [r for r in self.references.get(name, []) if r.call is not None and r.call.func is r.node]

    def only_called(self, name: str) -> bool:
        """Every reference to ``self.<name>`` is a direct call (nothing else can see it)."""
        references = self.references.get(name, [])
        return bool(references) and all(r.call is not None and r.call.func is r.node for r in references)

    def is_module(self) -> bool:
        if any(method.name.value == "forward" for method in self.methods):
            return True
        for base in self.node.bases:
            qualified = self.file.resolver.qualify(base.value)
            if qualified is not None and qualified.startswith(NN):
                return True
        return False


def _block_statements(suite: cst.BaseSuite) -> Iterable[cst.CSTNode]:
    return suite.body if isinstance(suite, cst.IndentedBlock) else [suite]


def _block_indent(suite: cst.BaseSuite, module: cst.Module) -> str:
    if isinstance(suite, cst.IndentedBlock):
        return suite.indent if suite.indent is not None else module.default_indent
    return ""


def _is_static(method: cst.FunctionDef) -> bool:
    return any(
        isinstance(d.decorator, cst.Name) and d.decorator.value in ("staticmethod", "classmethod")
        for d in method.decorators
    )


# -- producers --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Producer:
    """What made a tensor: its category and a short description for messages."""

    category: Category
    description: str = "unknown code"
    # For in-place activations: this call (or a previous one) runs on the caller's tensor.
    from_parameter: Optional[str] = None


UNKNOWN_PRODUCER = Producer(Category.UNKNOWN)
_FRESH_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply)
_FRESH_AUGMENTED = (cst.AddAssign, cst.SubtractAssign)


class Producers:
    """Classifies what produced a tensor, inside one class (or none) of one file."""

    def __init__(self, file: FileModel, model: Optional[ClassModel]) -> None:
        self.file = file
        self.model = model

    def part(self, part: Part, depth: int = 0) -> Producer:
        if part.layer is not None:
            return Producer(part.layer.category(), f"`{short_name(part.layer.qualified)}`")
        if part.attribute is not None and self.model is not None and depth < 4:
            sequence = self.model.attribute_sequence(part.attribute)
            if sequence:
                inner = self.part(sequence[-1], depth + 1)
                if inner.category is Category.UNKNOWN:
                    return UNKNOWN_PRODUCER
                return Producer(inner.category, f"`self.{part.attribute}` ({inner.description.strip('`')})")
        return UNKNOWN_PRODUCER

    def call(self, call: cst.Call, self_name: Optional[str]) -> Producer:
        func = call.func
        if isinstance(func, cst.Attribute) and _is_self(func.value, self_name):
            return self.part(Part(func, attribute=func.attr.value))
        qualify = self.file.resolver.qualify
        qualified = qualify(func)
        if qualified is not None:
            return self._function(call, qualified)
        if isinstance(func, cst.Attribute) and not _rooted_at(func.value, self_name):
            # A method of a tensor (not of a sub-module such as `self.op.add`).
            method = func.attr.value
            if method in OUTPUT_SAVING_METHODS:
                return Producer(Category.SAVES_OUTPUT, f"`.{method}()`")
            if method in FRESH_METHODS:
                return Producer(Category.FRESH, f"`.{method}()`")
        return UNKNOWN_PRODUCER

    @staticmethod
    def _function(call: cst.Call, qualified: str) -> Producer:
        shown = f"`{short_name(qualified)}`"
        kind = KIND_BY_FUNCTION.get(qualified)
        if kind is not None:
            if kind.name == "relu":
                return Producer(Category.SAVES_OUTPUT, shown)
            if kind.saves is Saves.MASK or has_star_args(call):
                return UNKNOWN_PRODUCER
            arg = argument(call, kind.functional_params.index("inplace") + 1, "inplace")
            inplace = False if arg is None else literal_bool(arg.value)
            if inplace is None:
                return UNKNOWN_PRODUCER
            if inplace:
                category = Category.SAVES_OUTPUT if kind.name in OUTPUT_SAVING_WHEN_INPLACE else Category.UNKNOWN
                return Producer(category, shown)
            return Producer(Category.FRESH, shown)
        if qualified in OUTPUT_SAVING_FUNCTIONS:
            return Producer(Category.SAVES_OUTPUT, shown)
        if qualified in POOL_FUNCTIONS:
            return Producer(Category.POOL, shown)
        if qualified in FRESH_FUNCTIONS:
            return Producer(Category.FRESH, shown)
        return UNKNOWN_PRODUCER

    def value(
        self, expression: cst.BaseExpression, flow: Flow, index: int, self_name: Optional[str], depth: int = 0
    ) -> List[Producer]:
        """Every producer that may have made ``expression``'s value at statement ``index``."""
        if isinstance(expression, cst.Call):
            return [self.call(expression, self_name)]
        if isinstance(expression, cst.BinaryOperation) and isinstance(expression.operator, _FRESH_OPERATORS):
            return [Producer(Category.FRESH, "an arithmetic operation")]
        if not isinstance(expression, cst.Name) or depth > 4:
            return [UNKNOWN_PRODUCER]
        name = expression.value
        found: List[Producer] = []
        for definition in flow.definitions(name, index):
            if definition.index == ENTRY:
                parameter = name if name in flow.parameters[1:] or (
                    name in flow.parameters and self_name is None
                ) else None
                found.append(Producer(Category.UNKNOWN, f"`{name}`", from_parameter=parameter))
            elif definition.augmented is not None:
                fresh = isinstance(definition.augmented, _FRESH_AUGMENTED)
                found.append(Producer(Category.FRESH, "an in-place addition") if fresh else UNKNOWN_PRODUCER)
            elif definition.value is not None:
                found.extend(self.value(definition.value, flow, definition.index, self_name, depth + 1))
            else:
                found.append(UNKNOWN_PRODUCER)
        return found


# -- per file ---------------------------------------------------------------------------------------
class FileModel:
    """Class models and flows of one file, built on demand and cached."""

    def __init__(
        self,
        module: cst.Module,
        qualify: Callable[[cst.BaseExpression], Optional[str]],
        imported: FrozenSet[str] = frozenset(),
    ) -> None:
        self.module = module
        self.imported = imported  # module-level names bound by imports
        self.resolver = Resolver(qualify)
        self._classes: Dict[int, ClassModel] = {}
        self._flows: Dict[int, Flow] = {}
        self._subclassed: Optional[Set[str]] = None
        self._foreign_attributes: Optional[Set[str]] = None

    def class_model(self, node: cst.ClassDef, indent: str) -> ClassModel:
        model = self._classes.get(id(node))
        if model is None:
            model = self._classes[id(node)] = ClassModel(node, self, indent)
        return model

    def flow(self, function: cst.FunctionDef) -> Flow:
        flow = self._flows.get(id(function))
        if flow is None:
            flow = self._flows[id(function)] = Flow(function)
        return flow

    def private_attribute(self, classdef: cst.ClassDef, name: str) -> bool:
        """Whether only ``classdef``'s own methods can reach ``self.<name>`` in this file.

        Not so when a class of this file inherits from it, or when ``obj.<name>`` is read on
        some object other than ``self`` (``self.encoder.relu`` uses an encoder's ``relu`` from
        outside its class). One walk of the file answers both, on first need.
        """
        if self._subclassed is None or self._foreign_attributes is None:
            subclassed: Set[str] = set()
            foreign: Set[str] = set()
            for node in walk(self.module):
                node_type = type(node)
                if node_type is cst.Attribute:
                    head = node.value  # type: ignore[attr-defined]
                    while type(head) is cst.Attribute:
                        head = head.value  # type: ignore[attr-defined]
                    root = head.value if type(head) is cst.Name else None  # type: ignore[attr-defined]
                    own = root == "self" and head is node.value  # type: ignore[attr-defined]
                    if not own and root not in self.imported:
                        foreign.add(node.attr.value)  # type: ignore[attr-defined]
                elif node_type is cst.ClassDef:
                    for base in node.bases:  # type: ignore[attr-defined]
                        dotted = dotted_name(base.value)
                        if dotted is not None:
                            subclassed.add(dotted.rsplit(".", 1)[-1])
            self._subclassed, self._foreign_attributes = subclassed, foreign
        return classdef.name.value not in self._subclassed and name not in self._foreign_attributes

    def functional_prefix(self, bindings_qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[str]:
        """How this file can spell ``torch.nn.functional``: ``F``, ``nn.functional`` or None."""
        candidates: List[Tuple[int, str]] = []
        for statement in self.module.body:
            for node in _import_names(statement):
                qualified = bindings_qualify(cst.Name(node))
                if qualified == "torch.nn.functional":
                    candidates.append((0, node))
                elif qualified == "torch.nn":
                    candidates.append((1, node + ".functional"))
                elif qualified == "torch":
                    candidates.append((2, node + ".nn.functional"))
        return min(candidates)[1] if candidates else None


def _import_names(statement: cst.CSTNode) -> List[str]:
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    names = []
    for small in statement.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                dotted = dotted_name(bound)  # type: ignore[arg-type]
                if dotted is not None and "." not in dotted:
                    names.append(dotted)
    return names


def watched_names(context, qualified_names: FrozenSet[str]) -> FrozenSet[str]:
    """Last components of ``qualified_names`` plus the file's import aliases for them.

    A cheap first test for ``visit_Call``: a call whose function does not end in one of these
    names cannot be one of ``qualified_names``.
    """
    names = {q.rsplit(".", 1)[-1] for q in qualified_names}
    root = context.bindings
    while root.parent is not None:
        root = root.parent
    for local, qualified in root.names.items():
        if qualified is not None and canonical(qualified) in qualified_names:
            names.add(local)
    return frozenset(names)


def terminal_name(func: cst.BaseExpression) -> Optional[str]:
    if isinstance(func, cst.Attribute):
        return func.attr.value
    if isinstance(func, cst.Name):
        return func.value
    return None


def file_model(context) -> FileModel:
    def build() -> FileModel:
        root = context.bindings
        while root.parent is not None:
            root = root.parent
        imported = frozenset(name for name, qualified in root.names.items() if qualified is not None)
        return FileModel(context.module, context.qualify, imported)

    return context.shared("tml.modules", build)


def enclosing(context, node_type: type) -> Optional[cst.CSTNode]:
    """The innermost statement of ``node_type`` around the node being visited."""
    for statement in reversed(context.statement_stack):
        if isinstance(statement, node_type):
            return statement
    return None


def class_indent(context, node: cst.ClassDef) -> str:
    """Indentation of a class statement, from the blocks of the statements around it."""
    indent = ""
    for statement in context.statement_stack:
        if statement is node:
            break
        body = getattr(statement, "body", None)
        if isinstance(body, cst.IndentedBlock):
            indent += _block_indent(body, context.module)
    return indent
