"""Activation layers an OpenMMLab builder makes from a config dict: mmcv's
``build_activation_layer(cfg)`` builds the ``torch.nn`` activation its registry maps
``cfg['type']`` to, with the dict's other keys as its keywords (``dict(type='LeakyReLU',
negative_slope=0.1)`` builds ``nn.LeakyReLU(negative_slope=0.1)``, out of place unless the dict
says ``inplace=True``). Read for ``analysis/factories.py``: the config is a literal dict
(``dict(type=...)``, ``{'type': ...}``) or a parameter whose default is one, followed as a
factory parameter is (what every call of the function in the file passes, else the default,
not ``certain``). Written from mmcv's documentation; mmcv is never imported."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.vocabulary import NN

_MMCV_CNN = ("mmcv.cnn.", "mmcv.cnn.bricks.", "mmcv.cnn.bricks.activation.")
# the builders, qualified: position and keyword of the config
CONFIG_BUILDERS: Dict[str, Tuple[int, str]] = {f"{prefix}build_activation_layer": (0, "cfg") for prefix in _MMCV_CNN}
# the config types mmcv's activation registry maps to torch.nn layers of the same name
_TORCH_TYPES = frozenset({"ReLU", "LeakyReLU", "PReLU", "RReLU", "ReLU6", "ELU", "Sigmoid", "Tanh", "SiLU", "GELU"})


def config_argument(call: cst.Call, qualified: Optional[str]) -> Optional[cst.BaseExpression]:
    """The config ``call`` of a builder passes (None: not a builder, or not passed plainly)."""
    spec = CONFIG_BUILDERS.get(qualified or "")
    if spec is None or any(arg.star for arg in call.args) or len(call.args) != 1:
        return None
    arg = call.args[0]
    if arg.keyword is not None and arg.keyword.value != spec[1]:
        return None
    return arg.value


def literal_config(node: cst.BaseExpression, is_dict) -> Optional[Tuple[str, Tuple[cst.Arg, ...]]]:
    """``("torch.nn.<type>", keywords)`` for a literal config dict whose ``type`` is one of the
    registry's torch layers (``is_dict``: whether a call's function is the builtin ``dict``)."""
    pairs = []
    if type(node) is cst.Call and is_dict(node.func):
        for arg in node.args:
            if arg.star or arg.keyword is None:
                return None
            pairs.append((arg.keyword.value, arg.value))
    elif type(node) is cst.Dict:
        for element in node.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            key = element.key.evaluated_value
            if not isinstance(key, str) or not key.isidentifier():
                return None
            pairs.append((key, element.value))
    else:
        return None
    kind = next((value for key, value in pairs if key == "type"), None)
    if type(kind) is not cst.SimpleString or kind.evaluated_value not in _TORCH_TYPES:
        return None
    keywords = tuple(
        cst.Arg(value=value, keyword=cst.Name(key), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")))
        for key, value in pairs if key != "type"
    )
    return f"{NN}{kind.evaluated_value}", keywords
