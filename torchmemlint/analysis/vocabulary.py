"""The torch vocabulary: activations and their ``inplace`` switch, what each layer keeps for
backward (measured by `benchmarks/memory_figures.py`), pools, norms."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterator, Optional, Tuple



NN = "torch.nn."
FUNCTIONAL = "torch.nn.functional."


# -- the layer catalogue -------------------------------------------------------------------------
class Saves(str, enum.Enum):
    """What an activation keeps for backward when run out of place (`benchmarks/memory_figures.py`)."""

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
# ``torch.selu(x)``: the ``torch`` functions of activations that save their input, without an
# ``inplace`` parameter; their in-place forms are ``torch.selu_`` (what ``F.selu(x, inplace=True)``
# calls), so the fix adds the underscore.
TORCH_OUT_OF_PLACE: Dict[str, str] = {"torch." + n: n for n in ("selu", "celu", "rrelu")}


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
    "SyncBatchNorm GroupNorm LayerNorm RMSNorm InstanceNorm1d InstanceNorm2d InstanceNorm3d "
    "Upsample UpsamplingNearest2d "
    "UpsamplingBilinear2d GELU Softplus Embedding EmbeddingBag _BatchNorm _InstanceNorm",
)
POOL_MODULES = _names(
    NN,
    "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d "
    "AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d "
    "LPPool1d LPPool2d LPPool3d FractionalMaxPool2d FractionalMaxPool3d",
)
OUTPUT_SAVING_MODULES = _names(NN, "ReLU Sigmoid Tanh Softmax Softmin LogSoftmax Softmax2d")
# PyTorch Geometric's graph convolutions whose ``forward`` (as PyG documents it) ends in a
# linear projection, a sum/mean/max aggregation over the edges and an optional bias, with no
# activation of their own: what they return is a fresh tensor their backward does not read.
# Written from PyG's documentation; torch_geometric is never imported.
_GRAPH_CONVOLUTION_FILES = {  # the class, and the file of ``torch_geometric/nn/conv/`` that defines it
    "GCNConv": "gcn_conv", "GATConv": "gat_conv", "GATv2Conv": "gatv2_conv", "GraphConv": "graph_conv",
    "SAGEConv": "sage_conv", "TransformerConv": "transformer_conv", "ChebConv": "cheb_conv", "RGATConv": "rgat_conv",
    "ResGatedGraphConv": "res_gated_graph_conv", "SGConv": "sg_conv", "TAGConv": "tag_conv", "LEConv": "le_conv",
}
GRAPH_CONVOLUTIONS = frozenset(
    f"torch_geometric.nn.{where}{name}"
    for name, file in _GRAPH_CONVOLUTION_FILES.items()
    for where in ("", "conv.", f"conv.{file}.")
)
# PyTorch Geometric's own dense layers, as PyG documents them: ``Linear`` applies
# ``F.linear`` (with lazy shapes and its own initialisers), ``BatchNorm`` wraps
# ``nn.BatchNorm1d``; neither needs its output in backward.
GRAPH_DENSE_LAYERS = frozenset(
    f"torch_geometric.nn.{where}{name}"
    for where, name in (("", "Linear"), ("dense.", "Linear"), ("dense.linear.", "Linear"), ("", "BatchNorm"), ("norm.", "BatchNorm"), ("norm.batch_norm.", "BatchNorm"))
)
# Shape-preserving layers a stem trace may walk through (TML3xx).
NORM_MODULES = _names(
    NN,
    "BatchNorm1d BatchNorm2d BatchNorm3d SyncBatchNorm GroupNorm LayerNorm InstanceNorm1d "
    "InstanceNorm2d InstanceNorm3d Dropout Dropout1d Dropout2d Dropout3d Identity GELU Sigmoid Tanh",
)

# Packages whose classes are all ``torch.nn.Module`` subclasses, as their documentation says:
# PyG's ``torch_geometric.nn`` (its layers, ``MessagePassing``, models such as ``GAE``) and DGL's
# PyTorch ``dgl.nn``; also transformers' ``PreTrainedModel``. A project class deriving one is a
# module (``class SPACE_Graph(GAE)``). Neither library is imported.
_LIBRARY_MODULE_PACKAGES = ("torch_geometric.nn.", "dgl.nn.pytorch.", "dgl.nn.")


def library_module(qualified: Optional[str]) -> bool:
    """Whether ``qualified`` names a library class documented as an ``nn.Module``."""
    if not qualified:
        return False
    last = qualified.rsplit(".", 1)[-1]
    if last == "PreTrainedModel" and qualified.startswith("transformers."):
        return True
    return last[:1].isupper() and qualified.startswith(_LIBRARY_MODULE_PACKAGES)

FRESH_FUNCTIONS = _names(
    FUNCTIONAL,
    "conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d linear bilinear "
    "batch_norm group_norm layer_norm rms_norm interpolate upsample upsample_nearest "
    "upsample_bilinear gelu softplus",
) | _names(
    "torch.",
    "cat concat concatenate stack add sub subtract mul multiply div divide matmul mm bmm abs clamp "
    "clip pow conv1d conv2d conv3d mean sum einsum tensordot baddbmm addmm addbmm",
) | frozenset({"einops.einsum"})  # (a contraction's backward reads its operands, never its result)
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
# (a reduction's backward needs no output: ``block_outputs.mean(dim=0)`` makes a fresh tensor)
FRESH_METHODS = frozenset({"add", "sub", "mul", "div", "matmul", "mm", "bmm", "clamp", "abs", "pow", "mean", "sum"})
OUTPUT_SAVING_METHODS = frozenset(
    {"relu", "relu_", "sigmoid", "sigmoid_", "tanh", "tanh_", "softmax", "log_softmax", "exp",
     "exp_", "sqrt", "rsqrt", "reciprocal"}
)
# Saving its input when out of place, an in-place activation keeps its result instead.
OUTPUT_SAVING_WHEN_INPLACE = frozenset({"leaky_relu", "elu", "celu", "selu", "rrelu", "relu"})

CONTAINERS = frozenset({NN + "Sequential", NN + "ModuleList"})
# ``nn.Module`` methods that return the module itself (``nn.Linear(...).to(device)``, ``.cuda()``,
# ``.train(False)``, ``.apply(init)``): the call is the module its receiver is
MODULE_METHODS_RETURNING_SELF = frozenset({
    "to", "cuda", "cpu", "xpu", "ipu", "mtia", "float", "double", "half", "bfloat16", "type", "train", "eval",
    "requires_grad_", "apply", "share_memory", "to_empty",
})

# `model.children()` of the ResNets the stem rule knows, in registration order (TML3xx).
TORCHVISION_RESNET_CHILDREN = (
    "conv1", "bn1", "relu", "maxpool", "layer1", "layer2", "layer3", "layer4", "avgpool", "fc",
)
TIMM_RESNET_CHILDREN = (
    "conv1", "bn1", "act1", "maxpool", "layer1", "layer2", "layer3", "layer4", "global_pool", "fc",
)
# The parts of a SENet-style `layer0` stem (Cadene's pretrainedmodels, timm's legacy SENet).
SENET_STEM = frozenset({"conv1", "bn1", "relu1", "conv2", "bn2", "relu2", "conv3", "bn3", "relu3"})


def short_name(qualified: str) -> str:
    """``torch.nn.LeakyReLU`` -> ``nn.LeakyReLU``; ``torch.nn.functional.elu`` -> ``F.elu``."""
    if qualified.startswith(FUNCTIONAL):
        return "F." + qualified[len(FUNCTIONAL):]
    if qualified.startswith(NN):
        return "nn." + qualified[len(NN):]
    return qualified




# -- words for the rules' text gates (Rule.needs) ------------------------------------------------
def activation_words(*saves: Saves) -> Tuple[str, ...]:
    """The names an activation of these kinds is written with (module, function, ``x_``)."""
    kinds = [kind for kind in ACTIVATION_KINDS if not saves or kind.saves in saves]
    words = {kind.module for kind in kinds} | {kind.name for kind in kinds}
    return tuple(sorted(words))


# ``F.relu_``, ``torch.sigmoid_``, ``x.tanh_()``: the in-place forms, always in place.
INPLACE_WORDS: Tuple[str, ...] = tuple(
    sorted({qualified.rsplit(".", 1)[-1] for qualified in INPLACE_FUNCTIONS} | set(INPLACE_METHODS))
)


_WORD_CHARACTER = re.compile(r"\w")


def whole_words(pattern: "re.Pattern[str]", text: str) -> Iterator["re.Match[str]"]:
    """The matches of ``pattern`` (which ends in ``\\b``) that start a word, as if it began
    with ``\\b``: Python's ``re`` tries a pattern that starts with ``\\b`` and an alternation
    at every position, several times slower over a file than one that starts with a literal."""
    for match in pattern.finditer(text):
        start = match.start()
        if start == 0 or _WORD_CHARACTER.match(text, start - 1) is None:
            yield match


# Methods whose result is the same storage (or a same-valued copy) as their receiver.
# Modules that return a view of their input (``nn.Flatten`` a copy where it cannot view): in
# place after one changes its input's storage, which nothing else in a Sequential reads.
VIEW_MODULES = _names(NN, "Flatten Unflatten")
VIEWS = frozenset({
    "view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "transpose", "permute", "t",
    "contiguous", "view_as", "reshape_as", "swapaxes", "movedim",
})
