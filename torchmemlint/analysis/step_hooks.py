"""Methods a training framework runs once per batch, inside its own loop: Lightning's
``training_step`` (and the same method of a hand-written trainer's model, which a loop calls
per batch). An attribute of the object (``self.val_loss += loss``,
``self.train_outputs.append(preds)``) outlives each call, so what it accumulates there is kept
across every step of the epoch, as in a written loop (TML502)."""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.training import ScopeFacts
from torchmemlint.tree import scan

# where the framework calls the method with autograd on and backpropagates what it returns
# (validation and test steps run under ``no_grad``)
STEP_HOOKS = frozenset({"training_step"})


def kept_across_steps(facts: ScopeFacts, accumulator: str, seq: int) -> bool:
    """``accumulator`` is an attribute of the object (``self.<name>``) that the step hook does
    not bind afresh before ``seq`` (``self.outputs = []`` first: one step's list)."""
    scope = facts.scope
    if scope.name not in STEP_HOOKS or scope.owner is None or not accumulator.startswith("self."):
        return False
    return not any(
        event.seq < seq and accumulator in event.targets and not event.augmented
        for event in scope.assigns
    )


def returned_as_loss(facts: ScopeFacts, node: cst.BaseExpression) -> bool:
    """``node`` is a name the step hook returns as its loss (``return loss``, ``return {"loss":
    loss}``): the framework backpropagates it, so it carries the step's graph whatever made it
    (``loss = self.w * dis_loss * ratio`` of a helper's ``mse_loss``)."""
    scope = facts.scope
    if scope.name not in STEP_HOOKS or scope.function is None or type(node) is not cst.Name:
        return False
    for returned in scan(scope.function.body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        value = returned.value  # type: ignore[attr-defined]
        if type(value) is cst.Name and value.value == node.value:
            return True
        if type(value) is cst.Dict and any(
            type(element) is cst.DictElement and type(element.key) is cst.SimpleString
            and element.key.evaluated_value == "loss" and type(element.value) is cst.Name
            and element.value.value == node.value
            for element in value.elements
        ):
            return True
    return False
