"""TML4xx: missing or misused ``torch.utils.checkpoint``.

Besides the call itself, most of these rules need to know what a checkpointed callable
runs: ``checkpoint(self.block, x)`` is followed to ``self.block = Block(...)`` in
``__init__``, through ``nn.Sequential(...)`` contents, to ``class Block`` in the same file
and its ``__init__``/``forward``. That analysis is per class, built lazily the first time a
checkpoint call needs it, and shared by the rules through ``context.shared``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst

from torchmemlint.findings import Applicability
from torchmemlint.names import Bindings
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule, RuleOption

CHECKPOINT = "torch.utils.checkpoint.checkpoint"
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
CHECKPOINT_FUNCTIONS = frozenset({CHECKPOINT, CHECKPOINT_SEQUENTIAL})
# Through any module alias the functions are reached as `<alias>.checkpoint(...)`.
_CHECKPOINT_ATTRIBUTES = frozenset({"checkpoint", "checkpoint_sequential"})
# Keywords `checkpoint` consumes itself; every other keyword is passed to the function.
_CHECKPOINT_KEYWORDS = frozenset(
    {
        "use_reentrant",
        "preserve_rng_state",
        "context_fn",
        "determinism_check",
        "debug",
        "early_stop",
    }
)

# -- torch vocabulary ---------------------------------------------------------------------
_NN = "torch.nn."
_F = "torch.nn.functional."


def _names(prefix: str, *names: str) -> frozenset:
    return frozenset(prefix + name for name in names)


_DIMS = ("1d", "2d", "3d")
# Layers that keep at most one tensor of their input's size for backward (max pooling is
# left out: it also keeps int64 indices, which a checkpoint does drop).
_PARAMETRIC_MODULES = _names(
    _NN,
    *(f"Conv{d}" for d in _DIMS),
    *(f"ConvTranspose{d}" for d in _DIMS),
    *(f"LazyConv{d}" for d in _DIMS),
    *(f"BatchNorm{d}" for d in _DIMS),
    "Linear",
    "LazyLinear",
    "SyncBatchNorm",
    "LayerNorm",
    "GroupNorm",
    "RMSNorm",
    "PReLU",
)
_PARAMETERLESS_MODULES = _names(
    _NN,
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid",
    "Tanh", "Softplus", "Softsign", "Hardswish", "Hardsigmoid", "Hardtanh", "Hardshrink",
    "Softshrink", "Tanhshrink", "LogSigmoid", "Threshold", "Softmax", "LogSoftmax", "Softmin",
    "GLU", "LocalResponseNorm",
    *(f"AvgPool{d}" for d in _DIMS),
    *(f"AdaptiveAvgPool{d}" for d in _DIMS),
    *(f"InstanceNorm{d}" for d in _DIMS),
)  # fmt: skip
_PARAMETRIC_FUNCTIONS = _names(
    _F,
    *(f"conv{d}" for d in _DIMS),
    *(f"conv_transpose{d}" for d in _DIMS),
    "linear", "batch_norm", "layer_norm", "group_norm", "rms_norm", "prelu",
) | _names("torch.", "conv1d", "conv2d", "conv3d")  # fmt: skip
_PARAMETERLESS_FUNCTIONS = _names(
    _F,
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid",
    "tanh", "softplus", "hardswish", "hardsigmoid", "hardtanh", "softmax", "log_softmax", "glu",
    *(f"avg_pool{d}" for d in _DIMS),
    *(f"adaptive_avg_pool{d}" for d in _DIMS),
) | _names("torch.", "relu", "sigmoid", "tanh")  # fmt: skip

_BATCH_NORMS = _names(
    _NN, "SyncBatchNorm", *(f"{lazy}BatchNorm{d}" for lazy in ("", "Lazy") for d in _DIMS)
)
_INSTANCE_NORMS = _names(_NN, *(f"{lazy}InstanceNorm{d}" for lazy in ("", "Lazy") for d in _DIMS))
_DROPOUT_MODULES = _names(
    _NN, "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"
)
_TRANSFORMER_LAYERS = _names(_NN, "TransformerEncoderLayer", "TransformerDecoderLayer")
_RANDOM_FUNCTIONS = _names(_F, "gumbel_softmax") | _names(
    "torch.",
    "bernoulli", "rand", "rand_like", "randn", "randn_like", "randint", "randint_like",
    "randperm", "multinomial", "normal", "poisson",
)  # fmt: skip
# name -> (position of p, position of `training`, default of `training`)
_DROPOUT_FUNCTIONS = {
    _F + "dropout": (1, 2, True),
    _F + "dropout1d": (1, 2, True),
    _F + "dropout2d": (1, 2, True),
    _F + "dropout3d": (1, 2, True),
    _F + "alpha_dropout": (1, 2, False),
    _F + "feature_alpha_dropout": (1, 2, False),
    _F + "rrelu": (None, 3, False),
    "torch.dropout": (1, 2, None),
}
# In-place samplers called as tensor methods: `x.new_empty(shape).bernoulli_(keep)`.
_RANDOM_METHODS = frozenset(
    {
        "bernoulli_",
        "uniform_",
        "normal_",
        "exponential_",
        "random_",
        "geometric_",
        "cauchy_",
        "log_normal_",
    }
)
_CONTAINERS = _names(_NN, "Sequential", "ModuleList")
# TML405: what makes a module a block (a conv-norm-act triple is not one).
_BLOCK_MIN_LAYERS = 4
_BLOCK_NAME_SUFFIXES = ("Block", "Bottleneck", "Stage", "EncoderLayer", "DecoderLayer", "Residual")
_PARTIAL = "functools.partial"

BATCH_NORM = "batch_norm"
RANDOM = "random"


# -- small syntax helpers -----------------------------------------------------------------
def keyword(call: cst.Call, name: str) -> Optional[cst.Arg]:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def _argument(call: cst.Call, position: Optional[int], name: str) -> Optional[cst.BaseExpression]:
    """The value passed for a parameter, by keyword or by plain position."""
    found = keyword(call, name)
    if found is not None:
        return found.value
    if position is None:
        return None
    positional = [arg for arg in call.args if arg.keyword is None]
    if any(arg.star for arg in positional[: position + 1]):
        return None
    return positional[position].value if position < len(positional) else None


def _positional(call: cst.Call) -> List[cst.Arg]:
    return [arg for arg in call.args if arg.keyword is None and arg.star != "**"]


def _is_false(node: Optional[cst.BaseExpression]) -> bool:
    return isinstance(node, cst.Name) and node.value == "False"


def _is_zero(node: Optional[cst.BaseExpression]) -> bool:
    if isinstance(node, cst.Integer):
        return node.evaluated_value == 0
    if isinstance(node, cst.Float):
        return node.evaluated_value == 0.0
    return False


def _is_checkpoint_call(rule: Rule, call: cst.Call) -> Optional[str]:
    """Qualified checkpoint function a call invokes; cheap for every other call."""
    func = call.func
    if isinstance(func, cst.Attribute):
        if func.attr.value not in _CHECKPOINT_ATTRIBUTES:
            return None
    elif not isinstance(func, cst.Name):
        return None
    qualified = rule.qualify(func)
    return qualified if qualified in CHECKPOINT_FUNCTIONS else None


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below ``node``, not entering nested classes."""
    stack = list(node.children)
    while stack:
        child = stack.pop()
        yield child
        if not isinstance(child, cst.ClassDef):
            stack.extend(child.children)


def _body_statements(block: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return block.body if isinstance(block, cst.IndentedBlock) else ()


def _child_blocks(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly inside an if/for/while/with/try statement."""
    if not isinstance(statement, (cst.If, cst.For, cst.While, cst.With, cst.Try)):
        return
    yield _body_statements(statement.body)
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:  # else / elif chain
        yield _body_statements(orelse.body)
        orelse = getattr(orelse, "orelse", None)
    for handler in getattr(statement, "handlers", ()):
        yield _body_statements(handler.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield _body_statements(final.body)


def _flat_statements(statements: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Statements of a block and of the if/for/with/try blocks inside it (not of defs)."""
    for statement in statements:
        yield statement
        for block in _child_blocks(statement):
            yield from _flat_statements(block)


def _small_statements(statements: Sequence[cst.CSTNode]) -> Iterator[cst.BaseSmallStatement]:
    for statement in _flat_statements(statements):
        if isinstance(statement, cst.SimpleStatementLine):
            yield from statement.body


def _first_param(function: cst.FunctionDef) -> Optional[str]:
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


def _scope_of(function: Union[cst.FunctionDef, cst.Lambda], parent: Bindings) -> Bindings:
    """The names a function body sees, as the engine binds them during its traversal."""
    scope = Bindings(parent)
    scope.bind_parameters(function.params)
    if isinstance(function, cst.FunctionDef):
        scope.bind_statements(_body_statements(function.body))
    return scope


def _root(scope: Bindings) -> Bindings:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def _self_attribute(node: cst.BaseExpression, self_name: Optional[str]) -> Optional[List[str]]:
    """``["a", "b"]`` for ``self.a.b``; None for anything else."""
    parts: List[str] = []
    while isinstance(node, cst.Attribute):
        parts.append(node.attr.value)
        node = node.value
    if (
        self_name is None
        or not parts
        or not (isinstance(node, cst.Name) and node.value == self_name)
    ):
        return None
    return list(reversed(parts))


# -- per-file model of the classes ---------------------------------------------------------
class ClassModel:
    """What ``__init__`` of one class builds: ``self.x = ...`` values, children, locals."""

    def __init__(self, node: cst.ClassDef, scope: Bindings) -> None:
        self.node = node
        self.name = node.name.value
        self.scope = scope
        self.methods: Dict[str, cst.FunctionDef] = {
            statement.name.value: statement
            for statement in _body_statements(node.body)
            if isinstance(statement, cst.FunctionDef)
        }
        self.attributes: Dict[str, List[cst.BaseExpression]] = {}
        self.children: List[cst.BaseExpression] = []  # super().__init__(*...), add_module, append
        self.locals: Dict[str, List[cst.BaseExpression]] = {}
        self.defaults: Dict[str, cst.BaseExpression] = {}
        # `blocks.append(x)` / `self.blocks.append(x)` in __init__, with the loop around it.
        self.appends: Dict[str, List[Tuple[Optional[cst.For], cst.BaseExpression]]] = {}
        self.attribute_appends: Dict[str, List[Tuple[Optional[cst.For], cst.BaseExpression]]] = {}
        init = self.methods.get("__init__")
        self.init_scope = _scope_of(init, scope) if init is not None else scope
        self.self_name = _first_param(init) if init is not None else None
        if init is not None:
            self._read_init(init)

    def _read_init(self, init: cst.FunctionDef) -> None:
        for param in [*init.params.params, *init.params.kwonly_params]:
            if param.default is not None:
                self.defaults[param.name.value] = param.default
        statements = _body_statements(init.body)
        for small in _small_statements(statements):
            if isinstance(small, cst.Assign):
                for target in small.targets:
                    self._assign(target.target, small.value)
            elif isinstance(small, cst.AnnAssign) and small.value is not None:
                self._assign(small.target, small.value)
            elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                self._read_call(small.value)
        self._read_appends(statements, None)

    def _read_appends(self, statements: Sequence[cst.CSTNode], loop: Optional[cst.For]) -> None:
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    call = small.value if isinstance(small, cst.Expr) else None
                    if not (
                        isinstance(call, cst.Call)
                        and isinstance(call.func, cst.Attribute)
                        and call.func.attr.value == "append"
                        and len(call.args) == 1
                    ):
                        continue
                    owner = call.func.value
                    path = _self_attribute(owner, self.self_name)
                    if isinstance(owner, cst.Name) and owner.value != self.self_name:
                        self.appends.setdefault(owner.value, []).append((loop, call.args[0].value))
                    elif path is not None and len(path) == 1:
                        self.attribute_appends.setdefault(path[0], []).append(
                            (loop, call.args[0].value)
                        )
            else:
                for block in _child_blocks(statement):
                    self._read_appends(block, statement if isinstance(statement, cst.For) else loop)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        path = _self_attribute(target, self.self_name)
        if path is not None and len(path) == 1:
            self.attributes.setdefault(path[0], []).append(value)
        elif isinstance(target, cst.Name):
            self.locals.setdefault(target.value, []).append(value)

    def _read_call(self, call: cst.Call) -> None:
        func = call.func
        path = _self_attribute(func, self.self_name)
        if path == ["add_module"] and len(call.args) == 2:
            self.children.append(call.args[1].value)
        elif path == ["append"] and len(call.args) == 1:
            self.children.append(call.args[0].value)
        elif (
            isinstance(func, cst.Attribute)
            and func.attr.value == "__init__"
            and isinstance(func.value, cst.Call)
            and isinstance(func.value.func, cst.Name)
            and func.value.func.value == "super"
        ):
            self.children.extend(arg.value for arg in call.args if arg.star != "**")

    def init_env(self) -> "Env":
        return Env(self.init_scope, self, self.self_name)

    def method_env(self, method: cst.FunctionDef) -> "Env":
        return Env(_scope_of(method, self.scope), self, _first_param(method))


@dataclass(frozen=True)
class Env:
    """Where an expression is evaluated: its scope and the class its `self` belongs to."""

    scope: Bindings
    owner: Optional[ClassModel]
    self_name: Optional[str]

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.scope.qualify(node)


@dataclass(frozen=True)
class Found:
    """A layer or op with a trait (BatchNorm statistics, randomness), and where it is."""

    what: str  # "BatchNorm2d", "dropout()"
    where: str  # "Block.bn", "Block.forward"; "" inside the checkpointed lambda itself

    def located(self) -> str:
        return f" (`{self.where}`)" if self.where else ""


@dataclass(frozen=True)
class SingleOp:
    name: str  # "Conv2d", "relu()"
    parametric: bool
    # Updates running statistics in forward (BatchNorm): the recomputation updates them again.
    stateful: bool = False


def _short(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


class FileModels:
    """Classes and functions of one file, followed on demand (results cached)."""

    MAX_DEPTH = 8

    def __init__(self, module: cst.Module, root: Bindings) -> None:
        self.module = module
        self.root = root
        self.classes: Dict[str, cst.ClassDef] = {}
        self.functions: Dict[str, cst.FunctionDef] = {}
        for statement in _flat_statements(module.body):
            if isinstance(statement, cst.ClassDef):
                self.classes[statement.name.value] = statement
            elif isinstance(statement, cst.FunctionDef):
                self.functions[statement.name.value] = statement
        self._models: Dict[int, ClassModel] = {}
        self._class_contents: Dict[int, Dict[str, Found]] = {}
        self._in_progress: Set[int] = set()
        self._mentions: Dict[int, bool] = {}
        self._layer_counts: Dict[int, int] = {}

    # -- lookups ---------------------------------------------------------------------------
    def model(self, node: cst.ClassDef, scope: Bindings) -> ClassModel:
        key = id(node)
        if key not in self._models:
            self._models[key] = ClassModel(node, scope)
        return self._models[key]

    def local_class(self, func: cst.BaseExpression, env: Env) -> Optional[ClassModel]:
        """The model of a class of this file named by ``func`` (not shadowed by an import)."""
        if not isinstance(func, cst.Name) or func.value not in self.classes:
            return None
        if env.scope.lookup(func.value) is not None:  # imported under that name
            return None
        return self.model(self.classes[func.value], self.root)

    def local_function(self, func: cst.BaseExpression, env: Env) -> Optional[cst.FunctionDef]:
        if not isinstance(func, cst.Name) or func.value not in self.functions:
            return None
        if env.scope.lookup(func.value) is not None:
            return None
        return self.functions[func.value]

    def follow(
        self, expr: cst.BaseExpression, env: Env
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """The ``__init__`` values of ``self.a`` / ``self.a.b``; None when not a self attribute."""
        path = _self_attribute(expr, env.self_name)
        if path is None or env.owner is None:
            return None
        values = self._attribute(env.owner, path[0])
        for name in path[1:]:
            deeper = []
            for value, value_env, _ in values:
                inner = (
                    self.local_class(value.func, value_env) if isinstance(value, cst.Call) else None
                )
                if inner is not None:
                    deeper.extend(self._attribute(inner, name))
            values = deeper
        return values

    def _attribute(
        self, model: ClassModel, name: str, depth: int = 0
    ) -> List[Tuple[cst.BaseExpression, Env, str]]:
        """``self.<name>`` as ``__init__`` sets it, or else a base class of this file does."""
        values = model.attributes.get(name)
        if values:
            return [(value, model.init_env(), f"{model.name}.{name}") for value in values]
        found: List[Tuple[cst.BaseExpression, Env, str]] = []
        if depth < self.MAX_DEPTH:
            for base in model.node.bases:
                parent = self.local_class(base.value, Env(model.scope, None, None))
                if parent is not None and parent is not model:
                    found.extend(self._attribute(parent, name, depth + 1))
        return found

    @staticmethod
    def appended(
        expr: cst.BaseExpression, env: Env
    ) -> List[Tuple[Optional[cst.For], cst.BaseExpression]]:
        """What ``__init__`` appends to ``self.x`` (``self.x.append(Block())``)."""
        path = _self_attribute(expr, env.self_name)
        if path is None or len(path) != 1 or env.owner is None:
            return []
        return env.owner.attribute_appends.get(path[0], [])

    def _appended_elements(
        self, expr: cst.BaseExpression, env: Env
    ) -> List[Tuple[cst.BaseExpression, Env, str]]:
        appended = self.appended(expr, env)
        if not appended or env.owner is None:
            return []
        where = f"{env.owner.name}.{_self_attribute(expr, env.self_name)[0]}[...]"
        return [(value, env.owner.init_env(), where) for _, value in appended]

    def mentions_checkpoint(self, node: cst.ClassDef) -> bool:
        """Whether a class says "checkpoint" anywhere: it handles checkpointing itself."""
        key = id(node)
        if key not in self._mentions:
            self._mentions[key] = "checkpoint" in self.module.code_for_node(node).lower()
        return self._mentions[key]

    # -- elements of containers ------------------------------------------------------------
    def elements(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int = 0
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """The modules a container expression holds; None when it is not a known container."""
        if depth > self.MAX_DEPTH:
            return None
        followed = self.follow(expr, env)
        if followed is not None:
            found: List[Tuple[cst.BaseExpression, Env, str]] = []
            for value, value_env, value_where in followed:
                inner = self.elements(value, value_env, value_where, depth + 1)
                if inner is None:
                    return None
                found.extend(inner)
            found.extend(self._appended_elements(expr, env))
            return found if followed else None
        if isinstance(expr, cst.Call) and env.qualify(expr.func) in _CONTAINERS:
            found = []
            for arg in expr.args:
                if arg.keyword is not None or arg.star == "**":
                    continue
                inner = (
                    self._listed(arg.value, env, where, depth + 1)
                    if arg.star or len(expr.args) == 1
                    else None
                )
                if inner is None and arg.star:
                    return None
                found.extend(
                    inner if inner is not None else [(arg.value, env, f"{where}[{len(found)}]")]
                )
            return found
        return None

    def _listed(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """Elements of a list literal, comprehension or OrderedDict passed to a container."""
        if depth > self.MAX_DEPTH:
            return None
        if isinstance(expr, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            return [(e.value, env, f"{where}[{i}]") for i, e in enumerate(expr.elements)]
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            return [(expr.elt, env, f"{where}[...]")]
        if isinstance(expr, cst.Call) and env.qualify(expr.func) == "collections.OrderedDict":
            pairs = self._listed(expr.args[0].value, env, where, depth + 1) if expr.args else None
            if pairs is None:
                return None
            values = []
            for pair, pair_env, _ in pairs:
                if not (isinstance(pair, cst.Tuple) and len(pair.elements) == 2):
                    return None
                values.append((pair.elements[1].value, pair_env, f"{where}.{self._label(pair)}"))
            return values
        if (
            isinstance(expr, cst.Name)
            and env.owner is not None
            and env.scope is env.owner.init_scope
        ):
            owner = env.owner
            values = owner.locals.get(expr.value, [])
            listed = [self._listed(value, env, where, depth + 1) for value in values]
            appended = [
                (value, env, f"{where}[...]") for _, value in owner.appends.get(expr.value, ())
            ]
            if not values or any(item is None for item in listed):
                return None
            return [element for item in listed for element in item] + appended
        return None

    @staticmethod
    def _label(pair: cst.Tuple) -> str:
        key = pair.elements[0].value
        return key.evaluated_value if isinstance(key, cst.SimpleString) else "..."

    # -- contents: traits reachable from a callable -----------------------------------------
    def contents(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int = 0
    ) -> Dict[str, Found]:
        """Traits (BATCH_NORM, RANDOM) of what calling ``expr`` may run, first found each."""
        found: Dict[str, Found] = {}
        if depth > self.MAX_DEPTH:
            return found

        def merge(more: Dict[str, Found]) -> None:
            for trait, item in more.items():
                found.setdefault(trait, item)

        followed = self.follow(expr, env)
        if followed is not None:
            for value, value_env, value_where in followed:
                merge(self.contents(value, value_env, value_where, depth + 1))
            for value, value_env, value_where in self._appended_elements(expr, env):
                merge(self.contents(value, value_env, value_where, depth + 1))
            path = _self_attribute(expr, env.self_name)
            if not followed and env.owner is not None and path is not None and len(path) == 1:
                method = env.owner.methods.get(path[0])
                if method is not None:
                    merge(self.function_contents(method, env.owner.method_env(method), depth + 1))
            return found
        if isinstance(expr, cst.IfExp):
            merge(self.contents(expr.body, env, where, depth + 1))
            merge(self.contents(expr.orelse, env, where, depth + 1))
        elif isinstance(expr, cst.Subscript):
            merge(self.contents(expr.value, env, where, depth + 1))
        elif isinstance(expr, cst.Lambda):
            merge(
                self.function_contents(
                    expr, Env(_scope_of(expr, env.scope), env.owner, env.self_name), depth + 1
                )
            )
        elif isinstance(expr, cst.Call):
            merge(self._call_contents(expr, env, where, depth))
        elif isinstance(expr, (cst.Name, cst.Attribute)):
            function = self.local_function(expr, env)
            if function is not None:
                merge(
                    self.function_contents(
                        function, Env(_scope_of(function, self.root), None, None), depth + 1
                    )
                )
            else:
                merge(_function_traits(env.qualify(expr), None, where))
        return found

    def _call_contents(self, call: cst.Call, env: Env, where: str, depth: int) -> Dict[str, Found]:
        qualified = env.qualify(call.func)
        if qualified in _CONTAINERS:
            found: Dict[str, Found] = {}
            for element, element_env, element_where in (
                self.elements(call, env, where, depth + 1) or ()
            ):
                for trait, item in self.contents(
                    element, element_env, element_where, depth + 1
                ).items():
                    found.setdefault(trait, item)
            return found
        if qualified == _PARTIAL and call.args:
            return self.contents(call.args[0].value, env, where, depth + 1)
        if qualified is not None and qualified.startswith(_NN) and not qualified.startswith(_F):
            return _module_traits(qualified, call, where)
        local = self.local_class(call.func, env)
        return self.class_contents(local, depth + 1) if local is not None else {}

    def class_contents(self, model: ClassModel, depth: int) -> Dict[str, Found]:
        key = id(model.node)
        if key in self._class_contents:
            return self._class_contents[key]
        if key in self._in_progress or depth > self.MAX_DEPTH:
            return {}
        self._in_progress.add(key)
        found: Dict[str, Found] = {}
        parts: List[Dict[str, Found]] = []
        for base in model.node.bases:
            qualified = model.scope.qualify(base.value)
            if qualified is not None and qualified.startswith(_NN):
                parts.append(_module_traits(qualified, None, model.name))
            else:
                parent = self.local_class(base.value, Env(model.scope, None, None))
                if parent is not None:
                    parts.append(self.class_contents(parent, depth + 1))
        init_env = model.init_env()
        for name, values in model.attributes.items():
            for value in values:
                parts.append(self.contents(value, init_env, f"{model.name}.{name}", depth + 1))
        for index, child in enumerate(model.children):
            parts.append(self.contents(child, init_env, f"{model.name}[{index}]", depth + 1))
        forward = model.methods.get("forward")
        if forward is not None:
            parts.append(self.function_contents(forward, model.method_env(forward), depth + 1))
        for part in parts:
            for trait, item in part.items():
                found.setdefault(trait, item)
        self._in_progress.discard(key)
        self._class_contents[key] = found
        return found

    def function_contents(
        self, function: Union[cst.FunctionDef, cst.Lambda], env: Env, depth: int
    ) -> Dict[str, Found]:
        """Traits of the calls in a function body and of the `self` modules it uses."""
        found: Dict[str, Found] = {}
        if depth > self.MAX_DEPTH:
            return found
        label = self._function_label(function, env)
        for node in _walk(function.body if isinstance(function, cst.FunctionDef) else function):
            more: Dict[str, Found] = {}
            if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name):
                path = _self_attribute(node, env.self_name)
                if path is not None and env.owner is not None:
                    method = env.owner.methods.get(path[0])
                    if method is None:
                        more = self.contents(node, env, label, depth + 1)
                    elif method is not function:
                        more = self.function_contents(
                            method, env.owner.method_env(method), depth + 1
                        )
            elif isinstance(node, cst.Call):
                func = node.func
                if isinstance(func, cst.Attribute) and func.attr.value in _RANDOM_METHODS:
                    qualified = env.qualify(func)
                    if qualified is None or not qualified.startswith("torch.nn.init."):
                        more = {RANDOM: Found(f".{func.attr.value}()", label)}
                else:
                    more = _function_traits(env.qualify(func), node, label)
                    helper = self.local_function(func, env)
                    if not more and helper is not None and helper is not function:
                        more = self.function_contents(
                            helper, Env(_scope_of(helper, self.root), None, None), depth + 1
                        )
            for trait, item in more.items():
                found.setdefault(trait, item)
        return found

    @staticmethod
    def _function_label(function: Union[cst.FunctionDef, cst.Lambda], env: Env) -> str:
        if isinstance(function, cst.Lambda):
            return ""
        name = function.name.value
        return f"{env.owner.name}.{name}" if env.owner is not None else f"{name}()"

    # -- size of a block ---------------------------------------------------------------------
    def layer_count(self, expr: cst.BaseExpression, env: Env, depth: int = 0) -> int:
        """How many torch layers constructing ``expr`` builds, as far as it can be followed."""
        if depth > self.MAX_DEPTH:
            return 0
        if isinstance(expr, cst.IfExp):
            return max(
                self.layer_count(expr.body, env, depth + 1),
                self.layer_count(expr.orelse, env, depth + 1),
            )
        if not isinstance(expr, cst.Call):
            return 0
        qualified = env.qualify(expr.func)
        if qualified in _CONTAINERS:
            elements = self.elements(expr, env, "", depth + 1) or ()
            return sum(
                self.layer_count(element, element_env, depth + 1)
                for element, element_env, _ in elements
            )
        if qualified is not None and qualified.startswith(_NN) and not qualified.startswith(_F):
            return 1
        local = self.local_class(expr.func, env)
        return self.class_layer_count(local, depth + 1) if local is not None else 0

    def class_layer_count(self, model: ClassModel, depth: int) -> int:
        key = id(model.node)
        if key not in self._layer_counts:
            self._layer_counts[key] = 0  # a class that contains itself counts once
            env = model.init_env()
            total = sum(
                max(self.layer_count(value, env, depth + 1) for value in values)
                for values in model.attributes.values()
            )
            total += sum(self.layer_count(child, env, depth + 1) for child in model.children)
            appended = [value for items in model.attribute_appends.values() for _, value in items]
            total += sum(self.layer_count(value, env, depth + 1) for value in appended)
            self._layer_counts[key] = total
        return self._layer_counts[key]

    # -- single cheap ops ------------------------------------------------------------------
    def single_op(self, expr: cst.BaseExpression, env: Env, depth: int = 0) -> Optional[SingleOp]:
        """The one cheap layer or op that calling ``expr`` runs, if that is all it runs."""
        if depth > self.MAX_DEPTH:
            return None
        followed = self.follow(expr, env)
        if followed is not None:
            ops = [self.single_op(value, value_env, depth + 1) for value, value_env, _ in followed]
            if ops and all(op is not None and op == ops[0] for op in ops):
                return ops[0]
            return None
        if isinstance(expr, cst.Call):
            qualified = env.qualify(expr.func)
            if qualified in _PARAMETRIC_MODULES or qualified in _PARAMETERLESS_MODULES:
                stateful = BATCH_NORM in _module_traits(qualified, expr, "")
                return SingleOp(_short(qualified), qualified in _PARAMETRIC_MODULES, stateful)
            return None
        if isinstance(expr, cst.Lambda):
            call = _lambda_call(expr)
            if call is None:
                return None
            return self.single_op(
                call.func, Env(_scope_of(expr, env.scope), env.owner, env.self_name), depth + 1
            )
        if isinstance(expr, (cst.Name, cst.Attribute)):
            function = self.local_function(expr, env)
            if function is not None:
                call = _single_return_call(function)
                inner = Env(_scope_of(function, self.root), None, None)
                return self.single_op(call.func, inner, depth + 1) if call is not None else None
            return _function_op(env.qualify(expr))
        return None

    def element_op(self, container: cst.BaseExpression, env: Env) -> Optional[SingleOp]:
        """The single op every element of a container is, if they all are the same one."""
        elements = self.elements(container, env, "")
        if not elements:
            return None
        ops = [self.single_op(element, element_env) for element, element_env, _ in elements]
        return ops[0] if all(op is not None and op == ops[0] for op in ops) else None


def _function_op(qualified: Optional[str]) -> Optional[SingleOp]:
    if qualified in _PARAMETRIC_FUNCTIONS or qualified in _PARAMETERLESS_FUNCTIONS:
        stateful = qualified == _F + "batch_norm"
        return SingleOp(f"{_short(qualified)}()", qualified in _PARAMETRIC_FUNCTIONS, stateful)
    return None


def _lambda_call(function: cst.Lambda) -> Optional[cst.Call]:
    """The body call of ``lambda a, b: op(a, b, k=v)``: parameters passed first, in order."""
    return _forwarding_call(function.params, function.body)


def _single_return_call(function: cst.FunctionDef) -> Optional[cst.Call]:
    """The call of ``def f(a): return op(a, k=v)``, as for a lambda."""
    statements = _body_statements(function.body)
    if len(statements) != 1 or not isinstance(statements[0], cst.SimpleStatementLine):
        return None
    small = statements[0].body[0]
    if not isinstance(small, cst.Return) or small.value is None:
        return None
    return _forwarding_call(function.params, small.value)


def _forwarding_call(params: cst.Parameters, call: cst.BaseExpression) -> Optional[cst.Call]:
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.kwonly_params
        or params.star_kwarg
    ):
        return None
    names = [param.name.value for param in [*params.posonly_params, *params.params]]
    if any(param.default is not None for param in params.params) or not names:
        return None
    if not isinstance(call, cst.Call) or len(call.args) < len(names):
        return None
    for arg, name in zip(call.args, names):
        if (
            arg.keyword is not None
            or arg.star
            or not (isinstance(arg.value, cst.Name) and arg.value.value == name)
        ):
            return None
    for arg in call.args[len(names) :]:
        if any(isinstance(node, cst.Name) and node.value in names for node in _walk(arg)) or (
            isinstance(arg.value, cst.Name) and arg.value.value in names
        ):
            return None
    return call


def _module_traits(qualified: str, call: Optional[cst.Call], where: str) -> Dict[str, Found]:
    """Traits of constructing ``torch.nn.<Layer>(...)`` with these arguments."""
    name = _short(qualified)
    if qualified in _BATCH_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        return {} if _is_false(running) else {BATCH_NORM: Found(name, where)}
    if qualified in _INSTANCE_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        tracked = isinstance(running, cst.Name) and running.value == "True"
        return {BATCH_NORM: Found(name, where)} if tracked else {}
    if qualified in _DROPOUT_MODULES:
        p = _argument(call, 0, "p") if call is not None else None
        return {} if _is_zero(p) else {RANDOM: Found(name, where)}
    if qualified == _NN + "RReLU":
        return {RANDOM: Found(name, where)}
    if qualified in _TRANSFORMER_LAYERS:
        p = _argument(call, 3, "dropout") if call is not None else None
        return {} if _is_zero(p) else {RANDOM: Found(name, where)}
    if qualified == _NN + "MultiheadAttention":
        p = _argument(call, 2, "dropout") if call is not None else None
        return {} if p is None or _is_zero(p) else {RANDOM: Found(name, where)}
    return {}


def _function_traits(
    qualified: Optional[str], call: Optional[cst.Call], where: str
) -> Dict[str, Found]:
    """Traits of calling a functional op (``call`` is None when it is passed, not called)."""
    if qualified is None:
        return {}
    label = f"{_short(qualified)}()"
    if qualified == _F + "batch_norm":
        training = _argument(call, 5, "training") if call is not None else None
        return {} if training is None or _is_false(training) else {BATCH_NORM: Found(label, where)}
    if qualified in _DROPOUT_FUNCTIONS:
        p_position, training_position, training_default = _DROPOUT_FUNCTIONS[qualified]
        if call is None:
            return {RANDOM: Found(label, where)} if training_default else {}
        p = _argument(call, p_position, "p") if p_position is not None else None
        training = _argument(
            call, training_position, "training" if qualified != "torch.dropout" else "train"
        )
        if _is_zero(p) or _is_false(training) or (training is None and not training_default):
            return {}
        return {RANDOM: Found(label, where)}
    if qualified in _RANDOM_FUNCTIONS:
        return {RANDOM: Found(label, where)}
    if qualified == _F + "scaled_dot_product_attention" and call is not None:
        p = _argument(call, 4, "dropout_p")
        return {} if p is None or _is_zero(p) else {RANDOM: Found(label, where)}
    return {}


def file_models(rule: Rule) -> FileModels:
    context = rule.context
    return context.shared(
        "checkpoint.models", lambda: FileModels(context.module, _root(context.bindings))
    )


class _ClassTrackingRule(Rule):
    """A rule that knows the class and method a node is in (for resolving ``self.x``)."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._classes: List[Tuple[cst.ClassDef, Bindings]] = []
        self._functions: List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append((node, self.context.bindings))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = None
        if self._classes:
            candidate = self._classes[-1][0]
            if any(statement is node for statement in _body_statements(candidate.body)):
                owner = candidate
        self._functions.append((node, owner))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def call_env(self) -> Env:
        """The environment of the node being visited: its scope and `self`'s class."""
        for function, owner in reversed(self._functions):
            if owner is not None:
                scope = next(scope for node, scope in self._classes if node is owner)
                model = file_models(self).model(owner, scope)
                return Env(self.context.bindings, model, _first_param(function))
        return Env(self.context.bindings, None, None)

    def loop_container(self, name: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """``self.blocks`` when ``name`` is the variable of an enclosing ``for`` over it."""
        if not isinstance(name, cst.Name):
            return None
        function = self._functions[-1][0] if self._functions else None
        for statement in reversed(self.context.statement_stack):
            if statement is function:
                break
            if not isinstance(statement, cst.For):
                continue
            target, iterable = statement.target, statement.iter
            if (
                isinstance(iterable, cst.Call)
                and isinstance(iterable.func, cst.Name)
                and iterable.func.value == "enumerate"
                and iterable.args
                and isinstance(target, cst.Tuple)
                and len(target.elements) == 2
            ):
                target, iterable = target.elements[1].value, iterable.args[0].value
            if isinstance(target, cst.Name) and target.value == name.value:
                return iterable
        return None

    def callable_contents(self, call: cst.Call, function: str) -> Tuple[Dict[str, Found], str]:
        """Traits of what a checkpoint call recomputes, and how to name its callable."""
        positional = _positional(call)
        if not positional or positional[0].star:
            return {}, ""
        target = positional[0].value
        models = file_models(self)
        env = self.call_env()
        label = f"`{self.code_for(target)}`" if not isinstance(target, cst.Lambda) else "the lambda"
        container = self.loop_container(target)
        if container is not None:
            label += f" (an element of `{self.code_for(container)}`)"
            return models.contents(container, env, label), label
        if function == CHECKPOINT_SEQUENTIAL:
            segments = _recomputed_segments(models.elements(target, env, label), positional)
            if segments is not None:
                found: Dict[str, Found] = {}
                for element, element_env, where in segments:
                    for trait, item in models.contents(element, element_env, where).items():
                        found.setdefault(trait, item)
                return found, label
        return models.contents(target, env, label), label


def _recomputed_segments(
    elements: Optional[List[Tuple[cst.BaseExpression, Env, str]]], positional: Sequence[cst.Arg]
) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
    """The modules `checkpoint_sequential` checkpoints: all but its last segment, which runs
    normally. None unless the module list and the segment count are both known."""
    if elements is None or any(where.endswith("[...]") for _, _, where in elements):
        return None  # built by a comprehension or appends: the length is not known here
    segments = positional[1].value if len(positional) > 1 else None
    if not isinstance(segments, cst.Integer) or int(segments.evaluated_value) < 1:
        return None
    count = int(segments.evaluated_value)
    return elements[: len(elements) // count * (count - 1)]


# -- TML401 ---------------------------------------------------------------------------------
class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls that
    do not pass `use_reentrant`.

    ## Why is this bad?
    Without the argument torch (2.13) picks the reentrant variant and warns that the default
    will change. The reentrant variant recomputes every checkpointed segment in backward even
    when that saves nothing, and when none of the segment's inputs requires grad (the image
    batch going into the first layer, or the output of a frozen backbone) the parameters inside
    it silently get no gradient at all. The non-reentrant variant is the one the PyTorch
    documentation recommends.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix adds `use_reentrant=False`. When a segment input requires grad both
    variants give the same outputs and gradients (tested in `tests/test_checkpoint_rules.py`),
    but when none does, the reentrant variant leaves the segment's parameters without
    gradients and the non-reentrant one trains them: the fix corrects that, which changes the
    gradients, so it is offered only with `--unsafe-fixes`. The non-reentrant variant also
    checks that the recomputation matches the forward and raises if it does not.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0): with the stem
    conv checkpointed reentrantly, the model's gradients total 46,720,416 bytes instead of
    46,758,048: the stem conv's weight gets none. `tests/test_checkpoint_rules.py` shows both
    sides of the fix: identical gradients when the segment input requires grad, a gradient
    instead of None when it does not.
    """

    code = "TML401"
    name = "checkpoint-without-use-reentrant"
    summary = "`checkpoint` without `use_reentrant`: torch falls back to the reentrant variant"
    fix_availability = FixAvailability.ALWAYS

    def visit_Call(self, node: cst.Call) -> None:
        if _is_checkpoint_call(self, node) is None:
            return
        if keyword(node, "use_reentrant") is not None or has_star_kwargs(node):
            return
        self.report(
            node,
            "`checkpoint` without `use_reentrant`: torch uses the reentrant variant, which "
            "recomputes every segment and gives no gradient to parameters whose segment input "
            "does not require grad; pass `use_reentrant=False`",
            FixSpec(Applicability.UNSAFE, "Pass `use_reentrant=False`", (self._add_keyword(node),)),
        )

    def _add_keyword(self, call: cst.Call) -> NodeEdit:
        last = call.args[-1] if call.args else None
        if last is None:
            return NodeEdit(call, self.code_for(call.with_changes(args=[_use_reentrant_false()])))
        # Insert after the last argument's value, keeping any trailing comma and layout.
        return NodeEdit(last.value, ", use_reentrant=False", "after")


def _use_reentrant_false() -> cst.Arg:
    return cst.Arg(
        value=cst.Name("False"),
        keyword=cst.Name("use_reentrant"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )


def _reentrant(call: cst.Call) -> Optional[bool]:
    """True/False for a literal or omitted `use_reentrant`; None when it is computed."""
    arg = keyword(call, "use_reentrant")
    if arg is None:
        return True
    if isinstance(arg.value, cst.Name) and arg.value.value in ("True", "False"):
        return arg.value.value == "True"
    return None


# -- TML402 ---------------------------------------------------------------------------------
class SingleOpCheckpoint(_ClassTrackingRule):
    """
    ## What it does
    Flags `checkpoint(f, x)` where `f` is a single cheap layer or op: a `Conv*d`, `Linear`,
    normalisation, activation or average-pool module (`self.conv1` is followed to
    `self.conv1 = nn.Conv2d(...)` in `__init__`; an inline `nn.Conv2d(...)`; the elements of a
    `ModuleList` iterated by a `for` loop), a functional op such as `F.relu`, or a lambda that
    only calls one of those.

    ## Why is this bad?
    Checkpointing saves memory by dropping the activations *inside* a segment and keeping only
    its inputs. A single op keeps at most one tensor of its input's size for backward, and the
    checkpoint has to keep the input anyway, so the peak does not move. With the
    reentrant variant (`use_reentrant=True`, or the argument omitted) the op is also recomputed
    in backward, and when its input does not require grad (the image batch going into the
    first conv) its weights get no gradient at all: the layer is silently never trained.
    Checkpointing does not cache anything to disk; it recomputes.

    ## Example
    ```python
    import torch.utils.checkpoint as checkpoint

    def forward(self, x):
        x = checkpoint.checkpoint(self.conv1, x)  # self.conv1 = nn.Conv2d(...)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        x = self.conv1(x)
        return x
    ```
    To save memory, checkpoint whole blocks, for example each residual block of the early,
    high-resolution stages (see TML405).

    ## Fix safety
    The fix calls the op directly. It is safe when the call passes `use_reentrant=False`: the
    non-reentrant variant either stops before the op runs again (a conv keeps only its inputs)
    or recomputes exactly the values it had, so outputs and gradients are identical with and
    without it (tested in `tests/test_checkpoint_rules.py`). It is unsafe otherwise:
    unwrapping a reentrant checkpoint gives the op's parameters the gradients the reentrant
    variant dropped when its input did not require grad. That is the bug being fixed, but it
    changes training, so it needs `--unsafe-fixes`. A checkpointed BatchNorm is
    recomputed even by the non-reentrant variant (its saved statistics come out of the op), so
    unwrapping it halves its running-statistics updates (TML403): unsafe as well. No fix is
    offered when the call passes `context_fn` or `**kwargs`, or when a lambda cannot be inlined.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0): checkpointing
    the stem conv leaves the peak (1,399,049,640 B) and the memory kept after forward
    (1,381,268,996 B) unchanged in both variants, and reentrantly the stem conv's weight gets no
    gradient. With every conv of resnet18 wrapped on its own (the seed's pattern) the peak
    moves by 0.00 % (non-reentrant) / +0.46 % (reentrant), and the reentrant variant costs
    x1.296 FLOPs (+30 %) because it recomputes every conv in backward.
    `tests/test_checkpoint_rules.py` reproduces the missing gradient and proves the safe fix.
    """

    code = "TML402"
    name = "single-op-checkpoint"
    summary = "`checkpoint` around a single cheap layer saves no memory"
    fix_availability = FixAvailability.SOMETIMES

    def visit_Call(self, node: cst.Call) -> None:
        if _is_checkpoint_call(self, node) != CHECKPOINT:
            return
        positional = _positional(node)
        if len(positional) < 2 or positional[0].star:
            return  # no inputs: not a call that runs
        target = positional[0].value
        models = file_models(self)
        env = self.call_env()
        container = self.loop_container(target)
        if container is not None:
            op = models.element_op(container, env)
        else:
            op = models.single_op(target, env)
        if op is None:
            return
        reentrant = _reentrant(node)
        self.report(
            node, self._message(node, target, op, reentrant), self._fix(node, target, op, reentrant)
        )

    def _message(
        self, call: cst.Call, target: cst.BaseExpression, op: SingleOp, reentrant: Optional[bool]
    ) -> str:
        body = _lambda_call(target) if isinstance(target, cst.Lambda) else None
        name = self.code_for(body.func if body is not None else target)
        message = (
            f"`checkpoint` around a single `{op.name}` saves no memory: the op keeps at most "
            "one input-sized tensor for backward and checkpoint keeps its input anyway"
        )
        if reentrant is False:
            return message + f"; call `{name}` directly"
        variant = "the reentrant variant" if reentrant else "if reentrant, it"
        message += f"; {variant} recomputes it in backward (+30 % FLOPs for every conv of resnet18)"
        if op.parametric:
            inputs = _positional(call)[1:]
            source = self._input_origin(inputs[0].value) if inputs else None
            if source is not None:
                message += (
                    f", and its input is {source}: if that is the data batch (no requires_grad), "
                    f"`{name}` gets no gradient at all"
                )
            else:
                message += (
                    f" and gives `{name}` no gradient whenever its input does not require grad"
                )
        return message + f"; call `{name}` directly"

    def _input_origin(self, value: cst.BaseExpression) -> Optional[str]:
        """ "`x`, the argument of `forward`" when ``value`` is an untouched function argument."""
        if not isinstance(value, cst.Name) or not self._functions:
            return None
        function = self._functions[-1][0]
        params = [
            param.name.value for param in (*function.params.posonly_params, *function.params.params)
        ]
        if value.value not in params[1 if self._functions[-1][1] is not None else 0 :]:
            return None
        for statement in _body_statements(function.body):
            if any(statement is active for active in self.context.statement_stack):
                break
            if _assigns(statement, value.value):
                return None
        return f"`{value.value}`, the argument of `{function.name.value}`"

    def _fix(
        self, call: cst.Call, target: cst.BaseExpression, op: SingleOp, reentrant: Optional[bool]
    ) -> Optional[FixSpec]:
        if has_star_kwargs(call) or keyword(call, "context_fn") is not None:
            return None
        doomed = {0} | {
            index
            for index, arg in enumerate(call.args)
            if arg.keyword is not None and arg.keyword.value in _CHECKPOINT_KEYWORDS
        }
        extra: Sequence[cst.Arg] = ()
        if isinstance(target, cst.Lambda):
            body = _lambda_call(target)
            kept = [arg for index, arg in enumerate(call.args) if index not in doomed]
            params = len(target.params.params)
            if body is None or len(kept) != params or any(arg.keyword or arg.star for arg in kept):
                return None
            function, extra = body.func, body.args[params:]
        else:
            function = target
        edits = _delete_arguments(call, doomed)
        function_code = self.code_for(function)
        extra_code = ", ".join(
            self.code_for(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
            for arg in extra
        )
        if edits is None or "\n" in function_code or "\n" in extra_code:
            return None
        edits.append(NodeEdit(call.func, function_code))
        if extra_code:
            last_kept = max(index for index in range(len(call.args)) if index not in doomed)
            edits.append(NodeEdit(call.args[last_kept].value, ", " + extra_code, "after"))
        safe = reentrant is False and not op.stateful
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        return FixSpec(applicability, "Call the op without `checkpoint`", tuple(edits))


def _delete_arguments(call: cst.Call, doomed: Set[int]) -> Optional[List[NodeEdit]]:
    """Edits that remove some arguments of a call and keep its layout (trailing comma, lines).

    An argument's range covers its comma and the whitespace after it, so an argument followed
    by a kept one goes whole. The last one loses only its text: its comma and whitespace then
    close the call as before, and the last kept argument's comma goes instead.
    """
    kept = [index for index in range(len(call.args)) if index not in doomed]
    last_kept = kept[-1] if kept else -1
    last_doomed = max(doomed)
    edits: List[NodeEdit] = []
    for index in sorted(doomed):
        arg = call.args[index]
        if index != last_doomed or last_kept > last_doomed:
            edits.append(NodeEdit(arg, ""))
            continue
        if arg.star:
            return None
        parts = (arg.keyword, arg.equal, arg.value) if arg.keyword is not None else (arg.value,)
        edits.extend(NodeEdit(part, "") for part in parts if isinstance(part, cst.CSTNode))
        if not kept and isinstance(arg.comma, cst.Comma):
            edits.append(NodeEdit(arg.comma, ""))
    if kept and last_kept < last_doomed and isinstance(call.args[last_kept].comma, cst.Comma):
        edits.append(NodeEdit(call.args[last_kept].comma, ""))
    return edits


def _assigns(statement: cst.CSTNode, name: str) -> bool:
    """Whether a statement (re)binds ``name`` (assignment, for target, with-as, walrus)."""
    for node in [statement, *_walk(statement)]:
        targets: List[cst.BaseExpression] = []
        if isinstance(node, cst.Assign):
            targets = [target.target for target in node.targets]
        elif isinstance(node, (cst.AnnAssign, cst.AugAssign, cst.For)):
            targets = [node.target]
        elif isinstance(node, cst.NamedExpr):
            targets = [node.target]
        elif isinstance(node, cst.AsName):
            targets = [node.name]
        for target in targets:
            if any(isinstance(n, cst.Name) and n.value == name for n in [target, *_walk(target)]):
                return True
    return False


# -- TML403 ---------------------------------------------------------------------------------
class BatchNormInCheckpoint(_ClassTrackingRule):
    """
    ## What it does
    Flags `checkpoint(f, ...)` and `checkpoint_sequential(f, ...)` where `f` contains a
    BatchNorm layer (or `F.batch_norm(..., training=...)`): `self.block` is followed to its
    `__init__` value, through `nn.Sequential(...)` contents and classes defined in the same
    file (their `__init__` modules and the functions their `forward` calls).

    ## Why is this bad?
    In train mode BatchNorm updates its running statistics on every forward call, and
    checkpointing calls the segment's forward twice: once in forward, once when backward
    recomputes it. `num_batches_tracked` advances by 2 per step and the running mean moves
    0.19·μ instead of 0.1·μ with momentum 0.1, so the statistics used at evaluation drift from
    what the same training without checkpointing gives. Gradients are not affected. Both the
    reentrant and the non-reentrant variant do this.

    ## Example
    ```python
    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)

    def forward(self, x):  # in the model
        return checkpoint(self.block, x, use_reentrant=False)  # self.block = Block(64)
    ```

    ## Use instead
    Keep BatchNorm outside the checkpointed segment, or use the non-reentrant variant with a
    `context_fn` whose recomputation context sets BatchNorm `momentum` to 0 and restores
    `num_batches_tracked` (bitwise-identical statistics and gradients were measured this way);
    GroupNorm/LayerNorm keep no running statistics.

    ## Fix safety
    No fix: moving a layer out of a segment or writing a `context_fn` changes the model's
    code structure.

    ## Measured
    `benchmarks/memory_figures.py` (torch 2.13.0), BatchNorm in a checkpointed segment, train
    mode, momentum 0.1, one step: num_batches_tracked 2 instead of 1 and running_mean 1.9 times
    the value without checkpointing (0.19·μ instead of 0.1·μ), in both variants; parameter
    gradients equal. `tests/test_checkpoint_rules.py` reproduces all three on its fixture.
    """

    code = "TML403"
    name = "batchnorm-in-checkpoint"
    summary = "BatchNorm inside a checkpointed segment updates its running statistics twice"

    def visit_Call(self, node: cst.Call) -> None:
        function = _is_checkpoint_call(self, node)
        if function is None:
            return
        found, label = self.callable_contents(node, function)
        item = found.get(BATCH_NORM)
        if item is None:
            return
        self.report(
            _positional(node)[0].value,
            f"{label} contains `{item.what}`{item.located()}: in train mode its running "
            "statistics are updated again when checkpoint recomputes the segment in backward "
            "(num_batches_tracked +2 per step, running_mean moves 0.19·μ instead of 0.1·μ with "
            "momentum 0.1; gradients unaffected); keep BatchNorm outside the segment or "
            "recompute with momentum 0 via `context_fn`",
        )


# -- TML404 ---------------------------------------------------------------------------------
class CheckpointRandomWithoutRngState(_ClassTrackingRule):
    """
    ## What it does
    Flags `preserve_rng_state=False` on a `checkpoint`/`checkpoint_sequential` call whose
    segment runs dropout or another random op: `nn.Dropout*`, `nn.RReLU`, transformer layers
    with dropout, `F.dropout`, `torch.rand*`/`torch.bernoulli`, `.bernoulli_()` and other
    in-place samplers, reached through `self.x`, `nn.Sequential(...)` and classes of the
    same file as for TML403.

    ## Why is this bad?
    Backward recomputes the segment. Without the saved RNG state the recomputation draws new
    dropout masks, so the gradients are computed for a different network than the one that
    produced the output: they are wrong, while the forward output and the loss look normal.
    The recomputation also consumes the global random stream, shifting every later random
    number.

    ## Example
    ```python
    y = checkpoint(self.mlp, x, use_reentrant=False, preserve_rng_state=False)
    # self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), ...)
    ```

    ## Use instead
    ```python
    y = checkpoint(self.mlp, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix removes the argument, which restores the gradients of the model without
    checkpointing (tested in `tests/test_checkpoint_rules.py`). That changes the gradients
    (from wrong to right) and the random numbers every later step draws (the recomputation no
    longer consumes the global generator), so it is not behaviour-preserving.

    ## Measured
    `benchmarks/memory_figures.py` (torch 2.13.0), a Linear-ReLU-Dropout-Linear segment: with
    `preserve_rng_state=True` (the default) the gradients are bitwise equal to the model without
    checkpointing; with `False` the output is identical but three parameters get different
    gradients (max abs difference 0.035; memory-facts §3.5 saw 36.8 on another net: the size
    depends on the model). `tests/test_checkpoint_rules.py` reproduces the difference and shows
    that the fix restores the gradients of the model without checkpointing.
    """

    code = "TML404"
    name = "checkpoint-random-without-rng-state"
    summary = (
        "`preserve_rng_state=False` around dropout: recomputed masks differ, gradients are wrong"
    )
    fix_availability = FixAvailability.ALWAYS

    def visit_Call(self, node: cst.Call) -> None:
        function = _is_checkpoint_call(self, node)
        if function is None:
            return
        argument = keyword(node, "preserve_rng_state")
        if argument is None or not _is_false(argument.value):
            return
        found, label = self.callable_contents(node, function)
        item = found.get(RANDOM)
        if item is None:
            return
        self.report(
            argument,
            f"`preserve_rng_state=False` but {label} runs `{item.what}`{item.located()}: "
            "the recomputation in backward draws different random numbers, so the gradients "
            "are wrong while the output and the loss are unchanged; remove the argument",
            self._removal(node, argument),
        )

    @staticmethod
    def _removal(call: cst.Call, argument: cst.Arg) -> Optional[FixSpec]:
        edits = _delete_arguments(
            call, {next(i for i, arg in enumerate(call.args) if arg is argument)}
        )
        if edits is None:
            return None
        return FixSpec(Applicability.UNSAFE, "Remove `preserve_rng_state=False`", tuple(edits))


# -- TML405 ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Stack:
    node: cst.CSTNode  # where to report
    description: str  # "the 12 blocks of `self.blocks`"
    count: int
    statement: cst.CSTNode  # reported while the traversal is in it, for `# noqa` rows


class DeepStackWithoutCheckpoint(Rule):
    """
    ## What it does
    Suggests activation checkpointing for a module whose `forward` runs a deep stack of
    blocks with no checkpointing anywhere in the class: `for blk in self.blocks: x = blk(x)`
    or `x = self.blocks(x)` over an `nn.ModuleList`/`nn.Sequential` built in `__init__`
    (a literal list, `[Block() for _ in range(depth)]`, `*` splats, a list filled by
    `append` in a `for` loop), or a chain `x = self.layer1(x)`, `x = self.layer2(x)`, ...
    A block is a class of this file or an `nn.Sequential` that builds at least 4 torch
    layers, a torch transformer layer, a `_make_layer`-style method returning an
    `nn.Sequential`, or an imported class named `...Block`, `...Bottleneck`, `...Stage`,
    `...EncoderLayer`, `...DecoderLayer` or `...Residual`; single layers, conv-norm-act triples
    and unknown factories (`norm_layer(...)`) are not. The number of blocks must be known
    (literal, or an `__init__` default such as `depth=12`) and at least
    `checkpoint-min-blocks` (default 4). Classes that mention checkpointing at all
    (`checkpoint_seq`, `self.grad_checkpointing`, ...) and blocks that checkpoint themselves
    are left alone.

    Off by default: a missing checkpoint is not a defect, only an option when training runs
    out of memory; enable it with `--extend-select TML405`.

    ## Why is this bad?
    Every block keeps its activations for backward; checkpointing a block keeps only its
    input and recomputes the rest in backward. Where to checkpoint matters: the peak is set
    during the backward of the early, high-resolution stages, so checkpointing only the last
    (deepest) stages barely moves it, while checkpointing every block or the early stages
    does, at a compute cost.

    ## Example
    ```python
    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x
    ```

    ## Use instead
    ```python
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x
    ```
    `torchmemlint profile FILE:Model --input-shape ...` measures the peak of candidate
    placements on your shapes (the profiler answers this rule with placements).

    ## Fix safety
    No fix: where to checkpoint is a trade of compute for memory that depends on the shapes.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0), peak of a
    training step with non-reentrant checkpointing: every BasicBlock -30.6 % (x1.32 compute),
    layer1 only -19.6 % (x1.09), layer3+layer4 only -1.0 % (x1.15) although the memory kept
    after forward drops 11.6 %. Reentrant: every block -26.9 %, layer3+layer4 +0.1 %.
    """

    code = "TML405"
    name = "deep-stack-without-checkpoint"
    summary = "A deep stack of blocks runs without activation checkpointing"
    default_enabled = False
    options = (
        RuleOption(
            "checkpoint-min-blocks",
            int,
            4,
            "TML405: report a stack only when it has at least this many blocks.",
        ),
    )

    def __init__(self, context) -> None:
        super().__init__(context)
        # Stacks found when their class is entered, reported once the traversal reaches their
        # statement (so that a `# noqa` on that statement applies). Keyed by statement id.
        self._pending: Dict[int, Stack] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        forward = next(
            (
                statement
                for statement in _body_statements(node.body)
                if isinstance(statement, cst.FunctionDef) and statement.name.value == "forward"
            ),
            None,
        )
        if forward is None:
            return
        models = file_models(self)
        model = models.model(node, self.context.bindings)
        minimum = self.option("checkpoint-min-blocks")
        stacks = [stack for stack in self._stacks(model, forward) if stack.count >= minimum]
        if stacks and not models.mentions_checkpoint(node):
            self._pending.update((id(stack.statement), stack) for stack in stacks)

    def visit_For(self, node: cst.For) -> None:
        self._report_pending(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        self._report_pending(node)

    def _report_pending(self, statement: cst.CSTNode) -> None:
        stack = self._pending.pop(id(statement), None) if self._pending else None
        if stack is None:
            return
        self.report(
            stack.node,
            f"`forward` runs {stack.description} without activation checkpointing; if "
            "training runs out of memory, checkpoint each block or the early "
            "high-resolution stages, not the deepest ones (resnet18: every block -30.6 % "
            "peak at x1.32 compute, layer3+layer4 -1.0 %); measure placements with "
            "`torchmemlint profile`",
        )

    def _stacks(self, model: ClassModel, forward: cst.FunctionDef) -> Iterator[Stack]:
        models = file_models(self)
        env = model.method_env(forward)
        statements = _body_statements(forward.body)
        for statement in _flat_statements(statements):
            stack = None
            if isinstance(statement, cst.For):
                stack = self._loop_stack(statement, env)
            elif isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    value = getattr(small, "value", None)
                    if isinstance(value, cst.Call) and models.follow(value.func, env):
                        stack = self._container_stack(statement, value, value.func, env)
            if stack is not None:
                yield stack
        chain = self._chain(statements, env)
        if chain:
            line, first, names = chain
            described = ", ".join(f"`{name}`" for name in names)
            yield Stack(first, f"a chain of {len(names)} blocks ({described})", len(names), line)

    def _loop_stack(self, loop: cst.For, env: Env) -> Optional[Stack]:
        target, iterable = loop.target, loop.iter
        if (
            isinstance(iterable, cst.Call)
            and isinstance(iterable.func, cst.Name)
            and iterable.func.value == "enumerate"
            and iterable.args
            and isinstance(target, cst.Tuple)
            and len(target.elements) == 2
        ):
            target, iterable = target.elements[1].value, iterable.args[0].value
        if not isinstance(target, cst.Name):
            return None
        chained = any(
            _feeds_itself(small, target.value)
            for small in _small_statements(_body_statements(loop.body))
        )
        return self._container_stack(loop, iterable, iterable, env) if chained else None

    def _container_stack(
        self, statement: cst.CSTNode, node: cst.CSTNode, container: cst.BaseExpression, env: Env
    ) -> Optional[Stack]:
        counted = self._container_count(container, env)
        if counted is None:
            return None
        count, notes = counted
        note = f" ({'; '.join(notes)})" if notes else ""
        return Stack(
            node, f"the {count} blocks of `{self.code_for(container)}`{note}", count, statement
        )

    def _container_count(
        self, expr: cst.BaseExpression, env: Env
    ) -> Optional[Tuple[int, List[str]]]:
        """Known number of block-like elements of a self container, and notes on defaults."""
        models = file_models(self)
        followed = models.follow(expr, env)
        if not followed or len(followed) != 1:
            return None
        value, value_env, _ = followed[0]
        if not (isinstance(value, cst.Call) and value_env.qualify(value.func) in _CONTAINERS):
            return None
        counted = self._count_elements(value, value_env)
        if counted is not None and env.owner is not None:
            counted = self._count_appends(models.appended(expr, env), env.owner, *counted)
        return counted if counted is not None and counted[0] else None

    def _count_elements(self, container: cst.Call, env: Env) -> Optional[Tuple[int, List[str]]]:
        total, notes = 0, []
        for arg in container.args:
            if arg.keyword is not None or arg.star == "**":
                continue
            value = arg.value
            if arg.star or (
                len(container.args) == 1
                and isinstance(
                    value, (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp, cst.Name)
                )
            ):
                counted = self._count_listed(value, env, 0)
                if counted is None:
                    return None
                total += counted[0]
                notes.extend(counted[1])
            elif self._is_block(value, env):
                total += 1
        return total, notes

    def _count_listed(
        self, expr: cst.BaseExpression, env: Env, depth: int
    ) -> Optional[Tuple[int, List[str]]]:
        if depth > FileModels.MAX_DEPTH:
            return None
        owner = env.owner
        if isinstance(expr, (cst.List, cst.Tuple)):
            if any(isinstance(e, cst.StarredElement) for e in expr.elements):
                return None
            return sum(1 for e in expr.elements if self._is_block(e.value, env)), []
        if isinstance(expr, (cst.ListComp, cst.GeneratorExp)):
            loop = expr.for_in
            if loop.inner_for_in is not None or loop.ifs or not self._is_block(expr.elt, env):
                return None
            return self._range_count(loop.iter, env)
        if isinstance(expr, cst.Name) and owner is not None and env.scope is owner.init_scope:
            values = owner.locals.get(expr.value, [])
            if len(values) != 1:
                return None
            base = self._count_listed(values[0], env, depth + 1)
            if base is None:
                return None
            total, notes = base
            return self._count_appends(owner.appends.get(expr.value, ()), owner, total, notes)
        return None

    def _count_appends(
        self,
        appends: Sequence[Tuple[Optional[cst.For], cst.BaseExpression]],
        owner: ClassModel,
        total: int,
        notes: List[str],
    ) -> Optional[Tuple[int, List[str]]]:
        """Add the blocks appended in ``__init__``: once, or once per `range` loop turn."""
        env = owner.init_env()
        for loop, element in appends:
            if not self._is_block(element, env):
                continue
            if loop is None:
                total += 1
                continue
            counted = self._range_count(loop.iter, env)
            if counted is None or _encloses_loop(owner, loop):
                return None
            total += counted[0]
            notes = notes + counted[1]
        return total, notes

    def _range_count(self, expr: cst.BaseExpression, env: Env) -> Optional[Tuple[int, List[str]]]:
        if not (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Name)
            and expr.func.value == "range"
        ):
            return None
        if env.scope.lookup("range") is not None or len(expr.args) not in (1, 2):
            return None
        bounds = [self._int(arg.value, env) for arg in expr.args]
        if any(bound is None for bound in bounds):
            return None
        values = [bound[0] for bound in bounds]
        notes = [note for bound in bounds for note in bound[1]]
        count = values[0] if len(values) == 1 else values[1] - values[0]
        return max(count, 0), notes

    def _int(self, expr: cst.BaseExpression, env: Env) -> Optional[Tuple[int, List[str]]]:
        if isinstance(expr, cst.Integer):
            return int(expr.evaluated_value), []
        owner = env.owner
        if not isinstance(expr, cst.Name) or owner is None or env.scope is not owner.init_scope:
            return None
        values = owner.locals.get(expr.value, [])
        if len(values) == 1 and isinstance(values[0], cst.Integer):
            return int(values[0].evaluated_value), []
        default = owner.defaults.get(expr.value)
        if not values and isinstance(default, cst.Integer):
            return int(default.evaluated_value), [f"`{expr.value}` defaults to {default.value}"]
        return None

    def _is_block(self, expr: cst.BaseExpression, env: Env) -> bool:
        """Whether ``expr`` builds a block worth checkpointing on its own.

        That is a class of this file or an `nn.Sequential` holding at least
        `_BLOCK_MIN_LAYERS` torch layers, a torch transformer layer, a method returning an
        `nn.Sequential` (a `_make_layer` stage), or an imported class named like a block.
        Unknown callables (`norm_layer(...)`, `create_conv2d(...)`) are not blocks.
        """
        if not isinstance(expr, cst.Call):
            return False
        models = file_models(self)
        local = models.local_class(expr.func, env)
        if local is not None:
            return (
                not models.mentions_checkpoint(local.node)
                and models.layer_count(expr, env) >= _BLOCK_MIN_LAYERS
            )
        qualified = env.qualify(expr.func)
        if qualified is not None and qualified.startswith("torch."):
            if qualified == _NN + "Sequential":
                return models.layer_count(expr, env) >= _BLOCK_MIN_LAYERS
            return qualified in _TRANSFORMER_LAYERS
        path = _self_attribute(expr.func, env.self_name)
        if path is not None:
            method = (
                env.owner.methods.get(path[0]) if env.owner is not None and len(path) == 1 else None
            )
            return method is not None and _returns_sequential(method, env.owner.scope)
        function = models.local_function(expr.func, env)
        if function is not None:
            return _returns_sequential(function, models.root) and any(
                models.layer_count(ret, Env(_scope_of(function, models.root), None, None))
                >= _BLOCK_MIN_LAYERS
                for ret in _returned(function)
            )
        name = (
            expr.func.attr.value
            if isinstance(expr.func, cst.Attribute)
            else getattr(expr.func, "value", "")
        )
        return name.endswith(_BLOCK_NAME_SUFFIXES)

    def _chain(
        self, statements: Sequence[cst.CSTNode], env: Env
    ) -> Optional[Tuple[cst.CSTNode, cst.Call, List[str]]]:
        """The longest `v = self.a(v)` chain of block-like attributes in the forward body:
        the statement and call of its first block, and the blocks' names."""
        best: Optional[Tuple[cst.CSTNode, cst.Call, List[str]]] = None
        variable: Optional[str] = None
        first: Optional[Tuple[cst.CSTNode, cst.Call]] = None
        names: List[str] = []
        for statement in statements:
            link = _chain_link(statement, env.self_name)
            if link is None:
                # A compound statement may run the chain conditionally: start over after it.
                if not isinstance(statement, cst.SimpleStatementLine) or (
                    variable is not None and variable in _simple_targets(statement)
                ):
                    variable, first, names = None, None, []
                continue
            target, argument, call, attribute = link
            if argument != variable:
                first, names = None, []
            variable = target
            if self._is_block_attribute(attribute, env):
                first = first or (statement, call)
                names.append(f"self.{attribute}")
                if best is None or len(names) > len(best[2]):
                    best = (*first, list(names))
        return best if best is not None and len(best[2]) > 1 else None

    def _is_block_attribute(self, attribute: str, env: Env) -> bool:
        owner = env.owner
        values = owner.attributes.get(attribute, []) if owner is not None else []
        return len(values) == 1 and self._is_block(values[0], owner.init_env())


def _simple_targets(statement: cst.SimpleStatementLine) -> Set[str]:
    """Names a simple statement line assigns to directly."""
    names: Set[str] = set()
    for small in statement.body:
        if isinstance(small, cst.Assign):
            targets = [target.target for target in small.targets]
        elif isinstance(small, (cst.AnnAssign, cst.AugAssign)):
            targets = [small.target]
        else:
            continue
        for target in targets:
            elements = target.elements if isinstance(target, (cst.Tuple, cst.List)) else [target]
            names.update(e.value for e in elements if isinstance(e, cst.Name))
            names.update(
                e.value.value
                for e in elements
                if isinstance(e, cst.BaseElement) and isinstance(e.value, cst.Name)
            )
    return names


def _chain_link(
    statement: cst.CSTNode, self_name: Optional[str]
) -> Optional[Tuple[str, str, cst.Call, str]]:
    """(target, argument, call, attribute) for a statement `target = self.attribute(argument)`."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):
        return None
    call = small.value
    if (
        not isinstance(call, cst.Call)
        or not call.args
        or not isinstance(call.args[0].value, cst.Name)
    ):
        return None
    path = _self_attribute(call.func, self_name)
    if path is None or len(path) != 1:
        return None
    return small.targets[0].target.value, call.args[0].value.value, call, path[0]


def _returned(function: cst.FunctionDef) -> List[cst.BaseExpression]:
    return [
        node.value
        for node in _walk(function.body)
        if isinstance(node, cst.Return) and node.value is not None
    ]


def _returns_sequential(function: cst.FunctionDef, parent: Bindings) -> bool:
    scope = _scope_of(function, parent)
    returns = _returned(function)
    return bool(returns) and all(
        isinstance(value, cst.Call) and scope.qualify(value.func) == _NN + "Sequential"
        for value in returns
    )


def _feeds_itself(small: cst.BaseSmallStatement, function: str) -> bool:
    """Whether a statement is `x = ...function(x, ...)...`: each call takes the last output."""
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
    elif isinstance(small, cst.AugAssign):
        target = small.target
    else:
        return False
    if not isinstance(target, cst.Name):
        return False
    return any(
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Name)
        and node.func.value == function
        and node.args
        and isinstance(node.args[0].value, cst.Name)
        and node.args[0].value.value == target.value
        for node in [small.value, *_walk(small.value)]
    )


def _encloses_loop(owner: ClassModel, loop: cst.For) -> bool:
    """Whether an `append` loop sits inside another loop (its count then multiplies)."""
    init = owner.methods.get("__init__")
    if init is None:
        return True
    for statement in _flat_statements(_body_statements(init.body)):
        if isinstance(statement, (cst.For, cst.While)) and statement is not loop:
            if any(node is loop for node in _walk(statement)):
                return True
    return False
