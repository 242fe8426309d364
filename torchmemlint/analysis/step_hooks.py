"""Methods a training framework runs once per batch, inside its own loop: Lightning's
``training_step`` (and the same method of a hand-written trainer's model, which a loop calls
per batch). An attribute of the object (``self.val_loss += loss``,
``self.train_outputs.append(preds)``) outlives each call, so what it accumulates there is kept
across every step of the epoch, as in a written loop (TML502)."""

from __future__ import annotations

from torchmemlint.analysis.training import ScopeFacts

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
