"""Checkpoint calls and their segments: the torch vocabulary of what a checkpointed layer
keeps or re-runs (BatchNorm statistics, randomness, single cheap ops), where a call is
and the helpers to describe them (``Found``, ``SingleOp``). Where a call is and what it
recomputes: ``analysis/segments.py``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.module_lists import unwrap
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _body_statements, _walk


CHECKPOINT = "torch.utils.checkpoint.checkpoint"
CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"
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


def _prefixed(prefix: str, *names: str) -> frozenset:
    return frozenset(prefix + name for name in names)


_DIMS = ("1d", "2d", "3d")
# Layers that keep at most one tensor of their input's size for backward (max pooling is
# left out: it also keeps int64 indices, which a checkpoint does drop).
_PARAMETRIC_MODULES = _prefixed(
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
_PARAMETERLESS_MODULES = _prefixed(
    _NN,
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "SELU", "CELU", "GELU", "SiLU", "Mish", "Sigmoid",
    "Tanh", "Softplus", "Softsign", "Hardswish", "Hardsigmoid", "Hardtanh", "Hardshrink",
    "Softshrink", "Tanhshrink", "LogSigmoid", "Threshold", "Softmax", "LogSoftmax", "Softmin",
    "GLU", "LocalResponseNorm",
    *(f"AvgPool{d}" for d in _DIMS),
    *(f"AdaptiveAvgPool{d}" for d in _DIMS),
    *(f"InstanceNorm{d}" for d in _DIMS),
)  # fmt: skip
_PARAMETRIC_FUNCTIONS = _prefixed(
    _F,
    *(f"conv{d}" for d in _DIMS),
    *(f"conv_transpose{d}" for d in _DIMS),
    "linear", "batch_norm", "layer_norm", "group_norm", "rms_norm", "prelu",
) | _prefixed("torch.", "conv1d", "conv2d", "conv3d")  # fmt: skip
_PARAMETERLESS_FUNCTIONS = _prefixed(
    _F,
    "relu", "relu6", "leaky_relu", "elu", "selu", "celu", "gelu", "silu", "mish", "sigmoid",
    "tanh", "softplus", "hardswish", "hardsigmoid", "hardtanh", "softmax", "log_softmax", "glu",
    *(f"avg_pool{d}" for d in _DIMS),
    *(f"adaptive_avg_pool{d}" for d in _DIMS),
) | _prefixed("torch.", "relu", "sigmoid", "tanh")  # fmt: skip

_BATCH_NORMS = _prefixed(
    _NN, "SyncBatchNorm", *(f"{lazy}BatchNorm{d}" for lazy in ("", "Lazy") for d in _DIMS)
)
_INSTANCE_NORMS = _prefixed(_NN, *(f"{lazy}InstanceNorm{d}" for lazy in ("", "Lazy") for d in _DIMS))
_DROPOUT_MODULES = _prefixed(
    _NN, "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"
)
_TRANSFORMER_LAYERS = _prefixed(_NN, "TransformerEncoderLayer", "TransformerDecoderLayer")
_RANDOM_FUNCTIONS = _prefixed(_F, "gumbel_softmax") | _prefixed(
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
_CONTAINERS = _prefixed(_NN, "Sequential", "ModuleList")
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


def _literal_false(node: Optional[cst.BaseExpression]) -> bool:
    return type(node) is cst.Name and node.value == "False"


def _is_zero(node: Optional[cst.BaseExpression]) -> bool:
    if type(node) is cst.Integer:
        return node.evaluated_value == 0
    if type(node) is cst.Float:
        return node.evaluated_value == 0.0
    return False


@dataclass(frozen=True)
class Wrapper:
    """What a checkpointing function does with its arguments, as far as TML401-404 need it.

    ``form``: ``CALL`` (``checkpoint(f, *args)``), ``SEQUENTIAL`` (torch's
    ``checkpoint_sequential(functions, segments, x)``: all but the last segment), ``SEQ``
    (timm's ``checkpoint_seq(functions, x)``: every element, the last kept out by
    ``skip_last=True``) or ``MODULE`` (``checkpoint_wrapper(module)``: a module whose every
    call is checkpointed). A project's own helper that hands its parameter to one of them is
    one too (``analysis/helpers.py``). ``reentrant``: the variant when the call does not choose one (None:
    set elsewhere, timm's ``set_reentrant_ckpt``/``TIMM_REENTRANT_CKPT``, default off).
    ``use_reentrant``: the call takes that keyword; ``torch_keywords``: it passes torch's other
    checkpoint keywords (``preserve_rng_state``, ``context_fn``) on.
    """

    name: str  # how messages call it
    form: str
    reentrant: Optional[bool]
    use_reentrant: bool = True
    torch_keywords: bool = True
    position: int = 0  # where the callable (module) is among the positional arguments
    # False: called through a name that may also hold something else (``self.maybe_ckpt =
    # checkpoint if ... else lambda f, x: f(x)``), which takes none of its keywords
    sole: bool = True

    @property
    def omitted_use_reentrant_is_reentrant(self) -> bool:
        """TML401's premise: the call takes `use_reentrant` and is reentrant without it."""
        return self.use_reentrant and self.reentrant is True


CALL, SEQUENTIAL, SEQ, MODULE = "call", "sequential", "seq", "module"
APPLY = "apply"  # torch's `apply_activation_checkpointing(model, ...)`: ``analysis/applied.py``
_TIMM_CHECKPOINT = Wrapper("checkpoint", CALL, None)
_TIMM_CHECKPOINT_SEQ = Wrapper("checkpoint_seq", SEQ, None, torch_keywords=False)
_DEEPSPEED = Wrapper("deepspeed.checkpointing.checkpoint", CALL, True, False, False)
_CHECKPOINT_WRAPPER = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.checkpoint_wrapper"
WRAPPERS: Dict[str, Wrapper] = {
    CHECKPOINT: Wrapper("checkpoint", CALL, True),
    CHECKPOINT_SEQUENTIAL: Wrapper("checkpoint_sequential", SEQUENTIAL, True),
    # timm: thin wrappers of torch's, non-reentrant unless timm's config says otherwise;
    # `checkpoint` passes its other keywords on, `checkpoint_seq` takes none.
    **{
        f"timm.models.{module}{name}": wrapper
        for module in ("", "_manipulate.", "helpers.")
        for name, wrapper in (("checkpoint", _TIMM_CHECKPOINT), ("checkpoint_seq", _TIMM_CHECKPOINT_SEQ))
    },
    # torch's module wrapper: CheckpointImpl.NO_REENTRANT by default, keywords passed on.
    _CHECKPOINT_WRAPPER: Wrapper("checkpoint_wrapper", MODULE, False, False),
    # torch's `apply_activation_checkpointing(model, checkpoint_wrapper_fn, check_fn)`: every
    # submodule `check_fn` accepts wrapped by the wrapper function (`checkpoint_wrapper`, whose
    # keywords reach torch's checkpoint), in place
    "torch.distributed.algorithms._checkpoint.checkpoint_wrapper.apply_activation_checkpointing": Wrapper(
        "apply_activation_checkpointing", APPLY, False, False
    ),
    # deepspeed: `checkpoint(function, *args)`, an autograd.Function (reentrant), which saves
    # and restores the RNG states itself and takes no keywords.
    "deepspeed.checkpointing.checkpoint": _DEEPSPEED,
    "deepspeed.runtime.activation_checkpointing.checkpointing.checkpoint": _DEEPSPEED,
    # fairscale's module wrapper: every call checkpointed by its own autograd.Function
    # (reentrant); it takes none of torch's keywords (`offload_to_cpu` instead).
    **{
        f"fairscale.nn.{module}checkpoint_wrapper": Wrapper("checkpoint_wrapper", MODULE, True, False, False)
        for module in ("", "checkpoint.", "checkpoint.checkpoint_activations.", "misc.", "misc.checkpoint_activations.")
    },
}
# transformers: `gradient_checkpointing_enable()` sets `_gradient_checkpointing_func` (a partial
# of torch's checkpoint, its variant chosen there) on every module of the model that has
# `gradient_checkpointing`; its modules call it on themselves, `self.<it>(layer.__call__, x)`.
HF_CHECKPOINT_ATTRIBUTE = "_gradient_checkpointing_func"
HF_CHECKPOINT = Wrapper(HF_CHECKPOINT_ATTRIBUTE, CALL, None, use_reentrant=False, torch_keywords=False)
# Through any module alias the functions are reached as `<alias>.checkpoint(...)`.
_WRAPPER_ATTRIBUTES = frozenset(name.rsplit(".", 1)[-1] for name in WRAPPERS)
# timm's own files import them relatively: `from ._manipulate import checkpoint_seq` (and
# timm 0.6 `from .helpers import checkpoint_seq`; `helpers.checkpoint` is too common a name).
_RELATIVE_NAMES = {"_manipulate": ("checkpoint", "checkpoint_seq"), "helpers": ("checkpoint_seq",)}


def relative_wrappers(module: cst.Module) -> Dict[str, Wrapper]:
    """Names bound by ``from ._manipulate import checkpoint, checkpoint_seq`` (timm's files)."""
    found: Dict[str, Wrapper] = {}
    for statement in module.body:
        if type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is not cst.ImportFrom or not small.relative or small.module is None:
                continue
            names = _RELATIVE_NAMES.get(small.module.value) if type(small.module) is cst.Name else None
            if names is None or type(small.names) is cst.ImportStar:
                continue
            for alias in small.names:
                if type(alias.name) is not cst.Name or alias.name.value not in names:
                    continue
                wrapper = WRAPPERS.get(f"timm.models._manipulate.{alias.name.value}")
                bound = alias.asname.name if alias.asname is not None else alias.name
                if wrapper is not None and type(bound) is cst.Name:
                    found[bound.value] = wrapper
    return found


def checkpoint_wrapper(func: cst.BaseExpression, qualify, models) -> Optional[Wrapper]:
    """The checkpointing function (torch, timm, deepspeed) that calling ``func`` invokes, with
    ``qualify`` the names of the call's scope and ``models`` the file's ``CallableModel``."""
    qualified = qualify(func)
    if qualified is not None:
        return WRAPPERS.get(qualified)
    if type(func) is cst.Name and func.value in _WRAPPER_ATTRIBUTES:
        if func.value not in models.functions:
            return models.relative_wrappers.get(func.value)
    return None


def partial_wrapper(value: cst.BaseExpression, qualify, models) -> Optional[Wrapper]:
    """The checkpointing function ``functools.partial(checkpoint, use_reentrant=False)`` (of
    any wrapper, keywords only) is: the variant its keywords choose, which its calls need not
    choose again."""
    if type(value) is not cst.Call or qualify(value.func) != _PARTIAL:
        return None
    positional = _positional(value)
    if len(positional) != 1 or positional[0].star or type(positional[0].value) not in (cst.Name, cst.Attribute):
        return None  # (a bound positional argument would be what it checkpoints)
    wrapper = checkpoint_wrapper(positional[0].value, qualify, models)
    if wrapper is None or not (keyword(value, "use_reentrant") or keyword(value, "checkpoint_impl") or has_star_kwargs(value)):
        return wrapper
    return replace(wrapper, reentrant=reentrant(wrapper, value), use_reentrant=False)


def reentrant(wrapper: Wrapper, call: cst.Call) -> Optional[bool]:
    """Whether this call runs the reentrant variant; None when the file does not say."""
    if wrapper.form == MODULE:
        if keyword(call, "checkpoint_fn") is not None:
            return None  # its own checkpoint function: `checkpoint_impl` is ignored
        impl = keyword(call, "checkpoint_impl")
        if impl is None:
            return wrapper.reentrant
        name = dotted_name(impl.value) or ""
        last = name.rsplit(".", 1)[-1]
        return {"REENTRANT": True, "NO_REENTRANT": False}.get(last)
    if not wrapper.use_reentrant:
        return wrapper.reentrant
    arg = keyword(call, "use_reentrant")
    if arg is None:
        return None if has_star_kwargs(call) else wrapper.reentrant
    if type(arg.value) is cst.Name and arg.value.value in ("True", "False"):
        return arg.value.value == "True"
    return None


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


# `nn.Identity()`: runs nothing, so a value that is one op or else the identity is that op
IDENTITY = SingleOp("Identity", False)


def agreed(ops: List[Optional[SingleOp]]) -> Optional[SingleOp]:
    """The one op all of ``ops`` are, leaving out identities (None: not all the same op)."""
    real = [op for op in ops if op != IDENTITY]
    if not real or not all(op is not None and op == real[0] for op in real):
        return IDENTITY if ops and len(real) == 0 else None
    return real[0]


def _last_part(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]


def _function_op(qualified: Optional[str]) -> Optional[SingleOp]:
    if qualified in _PARAMETRIC_FUNCTIONS or qualified in _PARAMETERLESS_FUNCTIONS:
        stateful = qualified == _F + "batch_norm"
        return SingleOp(f"{_last_part(qualified)}()", qualified in _PARAMETRIC_FUNCTIONS, stateful)
    return None


# torch functions that build the module class they are given with the remaining arguments
_INSTANTIATORS = frozenset({"torch.nn.utils.skip_init", "torch.nn.utils.init.skip_init"})


def _is_none(value: cst.BaseExpression) -> bool:
    """``None``: never what a call runs (calling it raises), so not a value a call can see."""
    return type(value) is cst.Name and value.value == "None"


def instantiated(call: cst.Call, qualify) -> cst.Call:
    """The constructor call a builder stands for: ``skip_init(nn.Linear, d, 4 * d)`` builds
    ``nn.Linear(d, 4 * d)`` (without initialising it), ``weight_norm(nn.Conv2d(...))`` returns
    the ``nn.Conv2d(...)`` it is given; any other call is itself."""
    call = unwrap(call, qualify)
    positional = _positional(call)
    if not positional or positional[0].star or qualify(call.func) not in _INSTANTIATORS:
        return call
    first = positional[0]
    return cst.Call(first.value, [arg for arg in call.args if arg is not first])


def _lambda_call(function: cst.Lambda) -> Optional[cst.Call]:
    """The body call of ``lambda a, b: op(a, b, k=v)``: parameters passed first, in order."""
    return _forwarding_call(function.params, function.body)


def _single_return_call(function: cst.FunctionDef, skip: int = 0) -> Optional[cst.Call]:
    """The call of ``def f(a): return op(a, k=v)``, as for a lambda; ``skip``: leading
    parameters not forwarded (a method's ``self``: ``def _fn(self, h): return self.fc(h)``)."""
    statements = _body_statements(function.body)
    if len(statements) != 1 or type(statements[0]) is not cst.SimpleStatementLine:
        return None
    small = statements[0].body[0]
    if type(small) is not cst.Return or small.value is None:
        return None
    return _forwarding_call(function.params, small.value, skip)


def _forwarding_call(params: cst.Parameters, call: cst.BaseExpression, skip: int = 0) -> Optional[cst.Call]:
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.kwonly_params
        or params.star_kwarg
    ):
        return None
    names = [param.name.value for param in [*params.posonly_params, *params.params]][skip:]
    if any(param.default is not None for param in params.params) or not names:
        return None
    if type(call) is not cst.Call or len(call.args) < len(names):
        return None
    for arg, name in zip(call.args, names):
        if (
            arg.keyword is not None
            or arg.star
            or not (type(arg.value) is cst.Name and arg.value.value == name)
        ):
            return None
    for arg in call.args[len(names) :]:
        if any(type(node) is cst.Name and node.value in names for node in _walk(arg)) or (
            type(arg.value) is cst.Name and arg.value.value in names
        ):
            return None
    return call


# timm layers that hold a BatchNorm (timm 1.0: `ConvNormAct(..., norm_layer=nn.BatchNorm2d)`
# by default, aliases `ConvBnAct`/`ConvNormActAa`; `BatchNormAct2d` subclasses BatchNorm2d).
_TIMM_LAYERS = ("timm.layers.", "timm.models.layers.")
_TIMM_CONV_NORM_ACT = frozenset({"ConvNormAct", "ConvBnAct", "ConvNormActAa"})


# Blocks and networks of torchvision and timm that hold BatchNorm2d unless the call chooses
# another `norm_layer` (their documented default): the ResNet blocks, and torchvision's ResNet
# constructors. Written from the libraries' documentation; they are never imported.
_RESNETS = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
    "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2", "ResNet",
)
_BATCH_NORM_BLOCKS: Dict[str, int] = {  # qualified name -> position of `norm_layer`
    **{f"torchvision.models.{module}{name}": 7 for module in ("", "resnet.") for name in ("BasicBlock", "Bottleneck")},
    **{f"timm.models.{module}{name}": 99 for module in ("", "resnet.") for name in ("BasicBlock", "Bottleneck")},
    **{f"torchvision.models.{module}{name}": 99 for module in ("", "resnet.") for name in _RESNETS},
}


# OpenMMLab (mmcv) builders that take the norm layer as a config dict: qualified name ->
# (position, keyword) of that config. `build_norm_layer(cfg, num_features, postfix)` returns
# `(name, layer)`; `ConvModule(..., conv_cfg=None, norm_cfg=None, ...)` has no norm by default.
# Written from mmcv's documentation; mmcv is never imported.
_MMCV_CNN = ("mmcv.cnn.", "mmcv.cnn.bricks.")
NORM_CONFIG_BUILDERS: Dict[str, tuple] = {
    **{f"{prefix}build_norm_layer": (0, "cfg") for prefix in (*_MMCV_CNN, "mmcv.cnn.bricks.norm.")},
    **{f"{prefix}ConvModule": (9, "norm_cfg") for prefix in (*_MMCV_CNN, "mmcv.cnn.bricks.conv_module.")},
}
# The config `type`s mmcv's norm registry maps to BatchNorm layers (running statistics).
_BATCH_NORM_CONFIG_TYPES = frozenset({"BN", "BN1d", "BN2d", "BN3d", "SyncBN", "MMSyncBN", "NaiveSyncBN"})


def norm_config_traits(qualified: str, config_type: Optional[str], where: str) -> Dict[str, Found]:
    """Traits of an mmcv builder whose norm config says ``type=config_type`` (None: unknown)."""
    if config_type not in _BATCH_NORM_CONFIG_TYPES:
        return {}
    return {BATCH_NORM: Found(f"{_last_part(qualified)}(type='{config_type}')", where)}


def ecosystem_block_traits(qualified: str, call: Optional[cst.Call], where: str) -> Dict[str, Found]:
    """A torchvision/timm ResNet block or network built with its default BatchNorm2d."""
    position = _BATCH_NORM_BLOCKS.get(qualified)
    if position is None or call is None:
        return {}
    positional = [arg for arg in call.args if arg.keyword is None]
    if keyword(call, "norm_layer") is not None or has_star_kwargs(call) or len(positional) > position:
        return {}  # another norm layer, or one the call's arguments may choose
    if any(arg.star for arg in positional):
        return {}
    return {BATCH_NORM: Found(f"{_last_part(qualified)} (its default BatchNorm2d)", where)}


# The batch norms of e2cnn and escnn (equivariant networks): `InnerBatchNorm(in_type, eps,
# momentum, affine, track_running_stats=True)` and `IIDBatchNorm1d/2d/3d` (the same arguments)
# keep running statistics, as a torch BatchNorm does (InnerBatchNorm holds a torch BatchNorm3d).
# Written from their documentation; neither is imported.
_EQUIVARIANT_BATCH_NORMS = frozenset(
    f"{package}.nn.{name}" for package in ("e2cnn", "escnn")
    for name in ("InnerBatchNorm", "IIDBatchNorm1d", "IIDBatchNorm2d", "IIDBatchNorm3d")
)


def timm_layer_traits(qualified: str, call: Optional[cst.Call], where: str) -> Dict[str, Found]:
    """Traits of constructing one of timm's norm layers, when the call keeps its BatchNorm (or
    a torchvision/timm ResNet block or network: ``ecosystem_block_traits``; or an e2cnn/escnn
    batch norm that tracks running statistics)."""
    if qualified in _EQUIVARIANT_BATCH_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        return {} if _literal_false(running) else {BATCH_NORM: Found(_last_part(qualified), where)}
    if qualified in _BATCH_NORM_BLOCKS:
        return ecosystem_block_traits(qualified, call, where)
    if not qualified.startswith(_TIMM_LAYERS):
        return {}
    name = _last_part(qualified)
    if name == "BatchNormAct2d":
        return _module_traits(_NN + "BatchNorm2d", call, where)
    if name in _TIMM_CONV_NORM_ACT and call is not None:
        if keyword(call, "norm_layer") is not None or has_star_kwargs(call):
            return {}  # another norm layer, or one the call's `**kwargs` may choose
        return {BATCH_NORM: Found(f"{name} (its default BatchNorm2d)", where)}
    return {}


def _module_traits(qualified: str, call: Optional[cst.Call], where: str) -> Dict[str, Found]:
    """Traits of constructing ``torch.nn.<Layer>(...)`` with these arguments."""
    name = _last_part(qualified)
    if qualified in _BATCH_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        return {} if _literal_false(running) else {BATCH_NORM: Found(name, where)}
    if qualified in _INSTANCE_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        tracked = type(running) is cst.Name and running.value == "True"
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
    label = f"{_last_part(qualified)}()"
    if qualified == _F + "batch_norm":
        training = _argument(call, 5, "training") if call is not None else None
        return {} if training is None or _literal_false(training) else {BATCH_NORM: Found(label, where)}
    if qualified in _DROPOUT_FUNCTIONS:
        p_position, training_position, training_default = _DROPOUT_FUNCTIONS[qualified]
        if call is None:
            return {RANDOM: Found(label, where)} if training_default else {}
        p = _argument(call, p_position, "p") if p_position is not None else None
        training = _argument(
            call, training_position, "training" if qualified != "torch.dropout" else "train"
        )
        if _is_zero(p) or _literal_false(training) or (training is None and not training_default):
            return {}
        return {RANDOM: Found(label, where)}
    if qualified in _RANDOM_FUNCTIONS:
        return {RANDOM: Found(label, where)}
    if qualified == _F + "scaled_dot_product_attention" and call is not None:
        p = _argument(call, 4, "dropout_p")
        return {} if p is None or _is_zero(p) else {RANDOM: Found(label, where)}
    return {}
