"""Small facts about what a name in a function may call, for ``CallableModel``: the torch layer
classes a local name is assigned in any arm (``norm_layer = nn.BatchNorm2d if norm == "bn" else
nn.GroupNorm``; what calling it may build), and whether an expression is a module's bound call
(``block.forward``, ``layer.__call__``)."""

from __future__ import annotations

from typing import List

import libcst as cst

from torchmemlint.analysis.factories import assigned_values, parameter
from torchmemlint.analysis.syntax import arms

_NN = "torch.nn."


def local_layer_classes(call: cst.Call, env) -> List[str]:
    """The ``torch.nn`` layer classes ``call``'s function may be: a local name of the function
    around it (not a parameter) assigned only classes, in either arm of ``a if c else b`` or ``a
    or b`` (every arm must be a name or attribute; ``nn.Identity`` counts as one)."""
    func, function = call.func, env.function
    if type(func) is not cst.Name or function is None or parameter(function, func.value) is not None:
        return []
    found: List[str] = []
    for value in assigned_values(function, func.value):
        for arm in arms(value):
            qualified = env.qualify(arm) if type(arm) in (cst.Name, cst.Attribute) else None
            if qualified is None or not qualified.startswith(_NN) or not qualified.rsplit(".", 1)[-1][:1].isupper():
                return []  # not only torch layer classes: what it builds is not known here
            found.append(qualified)
    return found


def bound_call(expr: cst.BaseExpression, env) -> bool:
    """``x.forward`` / ``x.__call__`` of a module ``x`` other than ``self`` itself."""
    return (
        type(expr) is cst.Attribute and expr.attr.value in ("forward", "__call__")
        and not (type(expr.value) is cst.Name and expr.value.value == env.self_name)
    )
