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
trains runs with autograd on whoever calls it, while any other caller may itself be run under
``no_grad`` by code this file does not show (cogdl's ``val_step``, which its trainer wraps in
``no_grad`` in another file, calling ``eval_step`` as the hook ``test_step`` does)."""

from __future__ import annotations

from typing import Any, Dict, List, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import framework_hook
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _first_param


def opened_by_training_caller(facts: Any) -> bool:
    """Some call of the scope's function in the file, from a function that trains, runs it with
    autograd on (see the module docstring)."""
    scope = facts.scope
    if scope.function is None or not scope.name or scope.no_grad or scope.grad_off_seq is not None or framework_hook(scope.owner, scope.name, scope.bindings):
        return False  # (a hook Lightning runs without autograd stays its own)
    return _key(scope) in _open_calls(facts.walk)


def _key(scope: Any) -> Tuple[str, Any]:
    return scope.name, id(scope.owner.node) if scope.owner is not None else None


def _open_calls(walk: Any) -> Set[Tuple[str, Any]]:
    """(name, id of the class or None) of every function that a function that trains calls with
    autograd on, read once per file."""
    found = getattr(walk, "_open_calls", None)
    if found is not None:
        return found
    functions = [scope for scope in walk.scopes if scope.function is not None and not scope.no_grad]
    opened: Dict[int, List[Tuple[str, Any]]] = {}  # per function: what it calls with autograd on
    for other in functions:
        this = _first_param(other.function) if other.owner is not None else None
        for call in other.calls:
            if call.ctx.no_grad or (other.grad_off_seq is not None and other.grad_off_seq < call.seq):
                continue
            func = call.node.func
            if type(func) is cst.Name:
                opened.setdefault(id(other), []).append((func.value, None))
            elif this is not None and type(call.receiver) is cst.Name and call.receiver.value == this:
                opened.setdefault(id(other), []).append((call.attr, id(other.owner.node)))
    training = {_key(other) for other in functions if any(_trains(call) for call in other.calls)}
    changed = True
    while changed:  # (abimca's ``fit`` trains through ``self.base_model_train_step(x)``)
        changed = False
        for other in functions:
            if _key(other) not in training and any(key in training for key in opened.get(id(other), ())):
                training.add(_key(other))
                changed = True
    found = {key for other in functions if _key(other) in training for key in opened.get(id(other), ())}
    walk._open_calls = found  # type: ignore[attr-defined]  # once per file
    return found


def _trains(call: Any) -> bool:
    """``loss.backward()``, ``optimizer.zero_grad()``, ``optimizer.step()``, ``model.zero_grad()``."""
    if call.attr in ("backward", "zero_grad"):
        return True
    receiver = call.receiver
    return call.attr == "step" and type(receiver) in (cst.Name, cst.Attribute) and "opt" in (dotted_name(receiver) or "").lower()
