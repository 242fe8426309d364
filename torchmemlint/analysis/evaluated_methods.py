"""Which module a method call runs, where the function put that module in evaluation mode
before the call (``model.eval(); enc = model.encode_source(src)``): asked by TML501 after every
other reading of the call (a model's own call, a part of it, a helper given it) found nothing.

A method of a module switched to evaluation mode runs its modules, unless it moves, inspects,
trains, saves or configures the model (its name's words say so), handles data (``safe_squeeze``),
is a container's (``model.default_cfg.get(key)``), is private, turns autograd off itself (``feeds.turns_off_autograd``), belongs to a known class where it returns no
submodule's output and runs none of the instance's parts in a loop (``module_calls.
class_method_runs``: ``size_of(x)``; a decoder stepped by ``predict`` returning token ids still
builds every step's graph), or is defined by the
file's module classes without calling anything of the instance (``module_calls.runs_own_parts``:
``validation_epoch_end(outputs)`` stacking what it is given)."""

from __future__ import annotations

import re
from typing import Optional

from torchmemlint.analysis.autograd import CallEvent, MODEL_NAME
from torchmemlint.analysis.feeds import iterates_loader, turns_off_autograd
from torchmemlint.analysis.module_calls import class_method_runs, NOT_OUTPUT_METHODS, runs_own_parts, TENSOR_DATA_METHODS
from torchmemlint.analysis.training import is_eval_name, ScopeFacts


# a module's own methods, a tensor's and a container's (``model.default_cfg.get(key)``), and
# the words of a method that trains, saves or changes a model rather than running it
_NOT_RUNS = NOT_OUTPUT_METHODS | {"apply", "register_buffer", "add_module", "pop", "setdefault", "copy"}
# words of a method that handles data (``safe_squeeze``, ``get_output_size``), not the model
_DATA_WORDS = TENSOR_DATA_METHODS | {"pad", "crop", "shape", "device", "dtype"}
_CHANGES = re.compile(
    r"(?:^|_)(?:fit|train|training|learn|update|optimi[sz]er?|backward|save|load|reset|init|"
    r"initiali[sz]e|set|setup|configure|build|prepare|enable|disable|register|freeze|unfreeze|"
    r"compile|fuse|prune|quantize|export|copy)(?:_|$)"
)


def evaluated_method(facts: ScopeFacts, event: CallEvent) -> Optional[str]:
    """The module a method call runs when the function put that module in evaluation mode
    before it: ``model.eval(); enc = model.encode_source(src)`` (or a part of it,
    ``model.model.get_audio_embedding(x)``), anywhere in the function (in a loop over a loader:
    ``eval_method_over_loader``). The module switched (``model``); None otherwise, and for
    the methods the module docstring names as no runs."""
    receiver, _, method = (event.func or "").rpartition(".")
    if not receiver or not event.node.args or method.startswith("_"):
        return None
    switched = _switched(facts, receiver, event.seq)  # (asked first: most receivers never are)
    if switched is None or (
        method in _NOT_RUNS or _CHANGES.search(method) or not _DATA_WORDS.isdisjoint(method.split("_"))
        or turns_off_autograd(facts, method)
        or class_method_runs(facts, receiver, method) is False or runs_own_parts(facts, method) is False
    ):
        return None
    return switched


def _switched(facts: ScopeFacts, receiver: str, seq: int) -> Optional[str]:
    """``receiver`` or the module it is a part of (``model`` of ``model.model``: every part
    between them named as a model), when the function switched it to evaluation mode before
    ``seq`` (``self`` itself excluded: the class's own methods are judged where they run)."""
    parts = receiver.split(".")
    for end in range(len(parts), 0, -1):
        head = ".".join(parts[:end])
        if head == "self":
            return None
        if head not in facts.model_names:
            if not MODEL_NAME.match(parts[end - 1]):
                return None  # a part of the module not named as one (``model.fairness_metric``): may be no module
            continue  # (every receiver of a switch is one: ``model_names.named_models``)
        mode = facts.last_mode_change(head, seq)
        if mode is not None:
            return head if mode[1] == "eval" else None
    return None


def in_evaluation(facts: ScopeFacts, event: CallEvent) -> bool:
    """The call is evaluation code's: its function is named for evaluation, it runs in a loop
    over a loader, or it is a script's (top-level code) that trains nothing. Elsewhere (an RL
    ``rollout`` handing the action to ``env.step``) what the output reaches decides."""
    return (
        is_eval_name(facts.scope.name) or any(iterates_loader(loop) for loop in event.ctx.loops)
        or (facts.scope.function is None and not facts.training_calls)
    )
