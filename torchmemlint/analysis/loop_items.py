"""Where a tensor a loop backpropagates comes from: made in this iteration, or an item of a
collection made before the loop (TML503's ``retain_graph=True`` in a loop is needed there).

``for name, loss in per_head.items(): torch.autograd.grad(loss, h, retain_graph=True)`` and
``for name in names: loss = losses[name]; torch.autograd.grad(loss, params, retain_graph=True)``
backpropagate losses the caller (or the code before the loop) computed: their graphs are older
than the iteration, shared with the others, and the caller's ``backward`` goes through them
again (``tests/test_loop_rules.py``).
"""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.autograd import AssignEvent

# methods of a collection that hand out what it holds
_ITEMS = frozenset({"items", "values", "get"})


def last_binding(scope: Any, name: str, seq: int) -> Optional[AssignEvent]:
    """The last binding of ``name`` in ``scope`` (an ``autograd.Scope``) before event ``seq``."""
    last = None
    for event in scope.assigns:
        if event.seq < seq and name in event.targets:
            last = event
    return last


def taken_from_before(scope: Any, event: AssignEvent, loop: cst.CSTNode, seq: int) -> bool:
    """``event`` (a binding in ``loop``) takes an item of a collection bound before the loop, or
    a parameter: ``loop``'s own target over ``losses.items()``, ``loss = losses[name]``."""
    source = event.node.iter if event.node is loop and type(loop) is cst.For else event.value
    while type(source) in (cst.Subscript, cst.Attribute, cst.Call):
        if type(source) is cst.Call:
            func = source.func
            if type(func) is not cst.Attribute or func.attr.value not in _ITEMS:
                return False  # computed here
            source = func.value
        else:
            source = source.value
    if type(source) is not cst.Name or source is event.value:
        return False  # (``loss = total``: an alias, judged where ``total`` is made)
    before = last_binding(scope, source.value, seq)
    return before is None or loop not in before.ctx.loops
