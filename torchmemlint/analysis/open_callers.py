"""Whether some caller in the file runs a function with autograd on, though another runs it under
``no_grad``.

``ScopeFacts.grad_controlled`` leaves a function alone when any call of it in the file runs with
autograd off (``ScopeWalk.no_grad_callees``, by name): its callers decide. For a model call whose
output reaches only sinks (``callers.only_sinks_reached``), nothing a caller does can train on
that output, so one caller running the function with autograd on is enough to record its graph
for nothing: abimca's ``_get_score_of_models_for_known_sequences`` is wrapped in ``no_grad`` by
``predict`` but called per step by ``fit`` with autograd on, its outputs only made numpy.

A call counts when it is the function's own name called plainly (a top-level function) or on
``self`` in a method of the same class (a method), outside ``no_grad``, in a function that trains
(``.backward()``, ``zero_grad()``, an optimizer's ``step()``), itself or through such calls of
functions that do (abimca's ``fit`` runs ``self.base_model_train_step(x)``): a function that
trains runs with autograd on whoever calls it, while any other caller may itself be run under ``no_grad`` by code
this file does not show (cogdl's ``val_step``, which its trainer wraps in ``no_grad`` in another
file, calling ``eval_step`` as the hook ``test_step`` does)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import framework_hook
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _first_param


def opened_by_a_caller(facts: Any) -> bool:
    """Some call of the scope's function in the file runs it with autograd on (see the module
    docstring); False for a function the file never calls so."""
    scope = facts.scope
    if scope.function is None or not scope.name or scope.no_grad or scope.grad_off_seq is not None or framework_hook(scope.owner, scope.name, scope.bindings):
        return False  # (a hook Lightning runs without autograd stays its own)
    key = (scope.name, id(scope.owner.node) if scope.owner is not None else None)
    return key in _open_calls(facts.walk)


def _open_calls(walk: Any) -> Dict[Tuple[str, Any], bool]:
    """(name, id of the class or None) of every function some call in the file runs with autograd
    on, read once per file."""
    found = getattr(walk, "_open_calls", None)
    if found is not None:
        return found
    opened: Dict[int, List[Tuple[str, Any]]] = {}  # per function: what it calls with autograd on
    for other in walk.scopes:
        if other.no_grad or other.function is None:
            continue
        this = _first_param(other.function) if other.owner is not None else None
        for call in other.calls:
            if call.ctx.no_grad or (other.grad_off_seq is not None and other.grad_off_seq < call.seq):
                continue
            func = call.node.func
            if type(func) is cst.Name:
                opened.setdefault(id(other), []).append((func.value, None))
            elif this is not None and call.receiver is not None and type(call.receiver) is cst.Name and call.receiver.value == this:
                opened.setdefault(id(other), []).append((call.attr, id(other.owner.node)))
    keys = {id(other): (other.name, id(other.owner.node) if other.owner is not None else None) for other in walk.scopes}
    training = {key for key in (keys[id(other)] for other in walk.scopes if id(other) in opened and any(_trains(call) for call in other.calls))}
    changed = True
    while changed:  # (abimca's ``fit`` trains through ``self.base_model_train_step(x)``)
        changed = False
        for number, called in opened.items():
            if keys[number] not in training and any(key in training for key in called):
                training.add(keys[number])
                changed = True
    found = {key: True for number, called in opened.items() if keys[number] in training for key in called}
    walk._open_calls = found  # type: ignore[attr-defined]  # once per file
    return found


def _trains(call: Any) -> bool:
    """``loss.backward()``, ``optimizer.zero_grad()``, ``optimizer.step()``, ``model.zero_grad()``."""
    if call.attr in ("backward", "zero_grad"):
        return True
    receiver = call.receiver
    return call.attr == "step" and type(receiver) in (cst.Name, cst.Attribute) and "opt" in (dotted_name(receiver) or "").lower()
