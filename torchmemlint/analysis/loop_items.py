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
from torchmemlint.tree import contains

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


_ADDERS = frozenset({"append", "extend", "insert"})
_NO_GRAPH = frozenset({"size", "shape", "dim", "ndim", "numel", "item", "tolist", "argmax", "argmin", "dtype", "device"})


def graph_from_before(analysis: Any, scope: Any, call: Any, loop: cst.CSTNode) -> bool:
    """Whether ``source_before`` finds one."""
    return source_before(analysis, scope, call, loop) is not None


def source_before(analysis: Any, scope: Any, call: Any, loop: cst.CSTNode) -> Optional[Any]:
    """What ``call`` (a ``backward`` in ``loop``) backpropagates reads a result of a call
    made before the loop and never rebound in it (its value graph followed back, through the
    lists it is appended to): every iteration backpropagates through that older graph again,
    so its ``retain_graph=True`` is needed (monitizer's ``acti = model.get_activations(x)``,
    then a backward per layer of ``acti``). A loop-carried value (an RNN's hidden state, rebound
    in the loop) is not one: detaching it is the fix."""
    function = scope.function
    if analysis is None or function is None or type(call.node.func) is not cst.Attribute:
        return None
    graph = analysis.value_graphs.of(function)
    receiver = graph.names.get(id(call.node.func.value)) if type(call.node.func.value) is cst.Name else None
    if receiver is None:
        receiver = next((v for v in graph.values if v.node is call.node.func.value), None)
    rebound = {name for event in scope.assigns if loop in event.ctx.loops for name in event.targets}
    seen, stack = set(), [receiver] if receiver is not None else []
    while stack and len(seen) < 400:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if value.op == "element" and "index" not in value.info:
            continue  # an item of the loop's iterable: made by the iteration
        if value.op == "meta" or value.info.get("scalar") or value.info.get("method") in _NO_GRAPH or (value.op == "member" and value.info.get("name") in _NO_GRAPH):
            continue  # a size, a shape, an index: no graph (``in_size = w.size()[1]``)
        called = value.op == "call" and ("method" in value.info or "qualified" not in value.info) and bool(value.inputs)
        module = called and value.inputs[0].op in ("attribute", "argument", "global", "layer")  # ``self.model.f(x)``
        if (
            module and value.function is function and value.statement is not None
            and not contains(loop, value.statement) and not value.info.get("scalar")
            and value.info.get("method") not in _ADDERS and not rebound.intersection(value.info.get("names") or ())
        ):
            return value
        stack.extend(value.inputs[1:] if module else value.inputs)  # (not the module or object called)
        stack.extend(  # ``items.append(c)``: what the list ``items`` holds
            use.inputs[1] for use in graph.consumers(value)
            if not isinstance(use, str) and use.op == "call" and use.info.get("method") in _ADDERS and use.inputs[:1] == (value,) and len(use.inputs) > 1
        )
    return None
