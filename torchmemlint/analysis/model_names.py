"""What a name or an attribute holds, read from how it is bound: a part of a model reached
through attributes (``model = learn.model.G_B.to(device)``), a callable kept with a lambda
default (``self.post_process = post_process if post_process is not None else lambda x: x``)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchmemlint.analysis.autograd import MODEL_NAME, MODULE_MOVES
from torchmemlint.analysis.names import dotted_name


def model_part_of(expr: Optional[cst.BaseExpression]) -> bool:
    """``learn.model.G_B``, ``trainer.model.to(device)``: an attribute chain through an attribute
    named like a model (a module's part is a module), possibly moved (``.to``, ``.cuda()``)."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in MODULE_MOVES:
        expr = expr.func.value
    dotted = dotted_name(expr) if expr is not None else None
    return dotted is not None and any(MODEL_NAME.match(part) for part in dotted.split(".")[1:])


def lambda_arm(expr: Optional[cst.BaseExpression]) -> bool:  # `f or (lambda x: x)`, `a if c else lambda: 0`
    if type(expr) is cst.IfExp:
        return lambda_arm(expr.body) or lambda_arm(expr.orelse)
    if type(expr) is cst.BooleanOperation:
        return lambda_arm(expr.left) or lambda_arm(expr.right)
    return type(expr) is cst.Lambda
