"""The layers of the ecosystem's models that their documentation names, for an attribute of a
class that holds one: torchvision's ``ResNet`` (``resnet18(...)`` ... ``wide_resnet101_2(...)``,
or ``ResNet(...)``) has ``conv1`` (Conv2d), ``bn1`` (BatchNorm2d), ``relu``, ``maxpool``,
``avgpool`` (AdaptiveAvgPool2d) and ``fc`` (Linear). Written from torchvision's documentation;
torchvision is never imported.

A class holds one in ``self.<x>`` when a method of it builds one there, or asserts that it is
one (``assert isinstance(self.feature_extractor_fn, ResNet)``: hi-ml-cpath's checkpointing
mixin, whose ``__init__`` only keeps what it is given).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import libcst as cst

from torchmemlint.analysis.checkpoints import _PARAMETRIC_MODULES, SingleOp
from torchmemlint.analysis.module_annotations import unmoved
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import scan

_TORCHVISION = ("torchvision.models.", "torchvision.models.resnet.")
_RESNETS = (
    "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "resnext50_32x4d",
    "resnext101_32x8d", "resnext101_64x4d", "wide_resnet50_2", "wide_resnet101_2", "ResNet",
)
RESNET_NAMES = frozenset(prefix + name for prefix in _TORCHVISION for name in _RESNETS)
RESNET_CLASSES = frozenset(prefix + "ResNet" for prefix in _TORCHVISION)
RESNET_PARTS = {
    "conv1": "torch.nn.Conv2d", "bn1": "torch.nn.BatchNorm2d", "relu": "torch.nn.ReLU",
    "maxpool": "torch.nn.MaxPool2d", "avgpool": "torch.nn.AdaptiveAvgPool2d", "fc": "torch.nn.Linear",
}


def held_op(models: Any, path: Any, env: Any) -> Optional[SingleOp]:
    """The op ``self.<holder>.<part>`` (``path``) is, for TML402, when the class of ``env`` (a
    ``callables.Env``) holds a torchvision ResNet there (``held_part``)."""
    if path is None or len(path) != 2:
        return None
    values = [value for value, _, _ in models._attribute(env.owner, path[0])]
    layer = held_part(env.qualify, env.owner.node, env.self_name, path[0], path[1], values)
    return None if layer is None else SingleOp(layer.rsplit(".", 1)[-1], layer in _PARAMETRIC_MODULES, "BatchNorm" in layer)


def held_part(qualify: Callable[[cst.BaseExpression], Optional[str]], classdef: cst.ClassDef,
              self_name: Optional[str], holder: str, part: str, values: Any) -> Optional[str]:
    """The layer class of ``self.<holder>.<part>`` when the class ``classdef`` holds a
    torchvision ResNet in ``self.<holder>`` (``values``: the expressions ``__init__`` assigns
    to it, maybe none known); None otherwise."""
    layer = RESNET_PARTS.get(part)
    if layer is None or self_name is None:
        return None
    built = [value for value in values if type(value) is cst.Call]
    if built and all(qualify(unmoved(value).func) in RESNET_NAMES for value in built):
        return layer
    for node in scan(classdef.body, (cst.Assert,), (cst.ClassDef,)):
        test = node.test  # type: ignore[attr-defined]
        if (
            type(test) is cst.Call and dotted_name(test.func) == "isinstance" and len(test.args) == 2
            and dotted_name(test.args[0].value) == f"{self_name}.{holder}"
            and qualify(test.args[1].value) in RESNET_CLASSES
        ):
            return layer
    return None
