"""A loop over held-out data that runs after a function has finished training.

A script's ``main()`` often trains and then, in the same function, runs the model over the
validation and test loaders to report accuracy, with no ``.eval()`` and no ``no_grad``
(``for data in validation_loader: outputs = net(inputs); pred = outputs.argmax(1)...``). The
function backpropagates, so TML501's sink case (``callers.only_sinks_reached``) would leave it
alone; but nothing trains after that loop, and the loop itself never backpropagates: every
batch records a graph and keeps its activations while the output lives.

``held_out_loop`` answers for a model call: the outermost loop around it iterates something
named for held-out data (``val_loader``, ``validation_loader``, ``testloader``, ``x_test``,
``dev_batches``) in one of its ``for`` clauses, and every training call of the function (a
backward, an optimizer step, a helper that trains) lies before that loop, outside it. The loop
is then the statement ``torch.no_grad()`` wraps. A held-out loop inside an epoch loop, after
the epoch's training (upside-down-rl's ``for st_t, cmd_t, act_t in test_data_loader:`` after
its training batches), is this case too: the next epoch's training reads none of its outputs;
not one with a training call after it in the epoch, nor one that trains inside.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.autograd import _names_in, CallEvent, Frame
from torchmemlint.tree import node_index

# one part of a dotted, snake_case name: a held-out split, alone or joined to what holds it
# (``val``, ``validation``, ``testloader``, ``devset``; not ``device`` nor ``evaluate``)
_HELD_OUT = re.compile(
    r"^(?:val|valid|validation|test|testing|dev|eval|evaluation|holdout|heldout)"
    r"(?:loader|dataloader|dl|set|dataset|data|batches|iter|gen|generator)?s?$",
    re.IGNORECASE,
)


def _held_out_name(name: str) -> bool:
    return any(_HELD_OUT.match(part) for part in re.split(r"[._]", name) if part)


def held_out_loop(facts: Any, event: CallEvent) -> Optional[Frame]:
    """The frame of the outermost loop around ``event`` (in ``facts``, a ``ScopeFacts``) when
    it is a held-out loop after the function's training; None otherwise (also in a function
    that does not train: that case is the sink case's own)."""
    loops = event.ctx.loops
    if not loops or not facts.training_calls:
        return None
    held = next((loop for loop in loops if type(loop) is cst.For and any(_held_out_name(name) for name in _names_in(loop.iter))), None)
    index = node_index(facts.walk.module)
    outer = index.find(held) if held is not None else None
    if outer is None:
        return None
    for call in facts.training_calls:
        here = index.find(call.node)
        if here is None or here >= outer:
            return None  # (a training call inside the loop or after it)
    return next((frame for frame in event.ctx.chain if frame.statement is held), None)
