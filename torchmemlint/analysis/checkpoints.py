"""Checkpoint calls and their segments: the torch vocabulary of what a checkpointed layer
keeps or re-runs (BatchNorm statistics, randomness, single cheap ops), where a call is
and the helpers to describe them (``Found``, ``SingleOp``). Where a call is and what it
recomputes: ``analysis/segments.py``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.syntax import _body_statements, _walk



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
    return isinstance(node, cst.Name) and node.value == "False"


def _is_zero(node: Optional[cst.BaseExpression]) -> bool:
    if isinstance(node, cst.Integer):
        return node.evaluated_value == 0
    if isinstance(node, cst.Float):
        return node.evaluated_value == 0.0
    return False


def _is_checkpoint_call(rule, call: cst.Call) -> Optional[str]:
    """Qualified checkpoint function a call invokes; cheap for every other call."""
    func = call.func
    if isinstance(func, cst.Attribute):
        if func.attr.value not in _CHECKPOINT_ATTRIBUTES:
            return None
    elif not isinstance(func, cst.Name):
        return None
    qualified = rule.qualify(func)
    return qualified if qualified in CHECKPOINT_FUNCTIONS else None























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


def _last_part(qualified: str) -> str:
    return qualified.rsplit(".", 1)[-1]



def _function_op(qualified: Optional[str]) -> Optional[SingleOp]:
    if qualified in _PARAMETRIC_FUNCTIONS or qualified in _PARAMETERLESS_FUNCTIONS:
        stateful = qualified == _F + "batch_norm"
        return SingleOp(f"{_last_part(qualified)}()", qualified in _PARAMETRIC_FUNCTIONS, stateful)
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
    name = _last_part(qualified)
    if qualified in _BATCH_NORMS:
        running = _argument(call, 4, "track_running_stats") if call is not None else None
        return {} if _literal_false(running) else {BATCH_NORM: Found(name, where)}
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
