"""Helpers of the file that run a model for their caller (TML501).

A call of a helper is the model's run, judged at the caller (the helper's own call of the model
is left to its callers: ``callers.borrowed_model``), when the helper trains nothing, keeps
autograd as its caller has it, and

- takes the model as a parameter and calls it (``self.ddpm_step(model, x, t)``, guided
  diffusion's ``p_sample(model, x, t)``), or hands it to a library function that runs it
  (``LIBRARY_RUNNERS``: monai's ``sliding_window_inference(image, roi, n, predictor=model)``,
  which is itself such a run of the model where the code calls it), or
- is a method that runs a module its class holds and returns what the module made, with its
  graph (``def _encode_decode(self, cover): generated = self.encoder(cover, payload); decoded =
  self.decoder(generated); return generated, payload, decoded``, called from a validation loop):
  in a class that is no module, or, in a module class, where the caller switched that part to
  evaluation first (``self.net.eval(); res = self.forward(x)``). A method that detaches what it
  returns, switches the module to evaluation itself or is named for evaluation is judged
  itself, so its callers make no second report of the same forward.
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from torchmemlint.analysis.autograd import CallEvent
from torchmemlint.analysis.module_calls import _TRAINING_CALLS, module_attribute
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.returned_mode import last_mode_change
from torchmemlint.analysis.syntax import _first_param, sole_return
from torchmemlint.analysis.training import ScopeFacts, is_eval_name
from torchmemlint.tree import nodes_of


# Library functions that run a module handed to them: qualified name -> (position among the
# positional arguments, keyword) of the module. monai's sliding-window inference runs the
# predictor on every window and stitches the outputs: with autograd on, every window's graph
# stays alive through the stitched result (``tests/test_tml501_library_runners.py``).
LIBRARY_RUNNERS = {
    "monai.inferers.sliding_window_inference": (3, "predictor"),
    "monai.inferers.utils.sliding_window_inference": (3, "predictor"),
}


def library_run(facts: ScopeFacts, call: CallEvent) -> Optional[str]:
    """The module a library function of ``LIBRARY_RUNNERS`` runs at ``call``, when the code
    names it plainly (a name the function sees as a model, or ``model``-like); None otherwise."""
    name = _handed_to_runner(facts, call)
    return name if name is not None and facts.is_model(name) else None


def _handed_to_runner(facts: ScopeFacts, call: CallEvent) -> Optional[str]:
    func = call.node.func
    spec = LIBRARY_RUNNERS.get(facts.bindings.qualify(func) or "") if type(func) in (cst.Name, cst.Attribute) else None
    if spec is None or any(arg.star for arg in call.node.args):
        return None
    position, keyword = spec
    positional = [arg for arg in call.node.args if arg.keyword is None]
    arg = next((a for a in call.node.args if a.keyword is not None and a.keyword.value == keyword), None)
    if arg is None and position < len(positional):
        arg = positional[position]
    return arg.value.value if arg is not None and type(arg.value) is cst.Name else None


def helper_run_model(facts: ScopeFacts, event: CallEvent) -> Optional[str]:
    """The model ``event`` runs through a helper of the file: ``self.ddpm_step(model, x, t)``
    (or ``p_sample(model, x, t)``) where the method (function) takes it as a parameter and calls
    it with autograd on, without training (purediffusion's samplers, guided diffusion's
    ``p_sample_loop`` -> ``p_sample``): the helper's own call of it is left to its callers
    (``callers.borrowed_model``), so the caller's call of the helper is the model's run. The
    argument's name, when the caller sees it as a model (``ScopeFacts.is_model``); None
    otherwise."""
    func = event.func
    if func is None or any(arg.star for arg in event.node.args):
        return None
    if (run := library_run(facts, event)) is not None:
        return run
    name = func[5:] if func.startswith("self.") else func
    if "." in name or not name:
        return None
    owner = facts.scope.owner if func.startswith("self.") else None
    for scope in facts.walk.scopes:
        function = scope.function
        if function is None or scope.name != name or scope is facts.scope or (scope.owner is not owner):
            continue
        if scope.no_grad or scope.grad_work or scope.grad_off_seq is not None:
            return None
        params = scope.params()
        if owner is not None and params:
            params = params[1:]
        for position, arg in enumerate(event.node.args):
            keyword = arg.keyword.value if arg.keyword is not None else None
            param = next((p for p in params if p.name.value == keyword), None) if keyword else (params[position] if position < len(params) else None)
            if param is None or type(arg.value) is not cst.Name or not facts.is_model(arg.value.value):
                continue
            runs = [
                call for call in scope.calls
                if call.func in (param.name.value, param.name.value + ".forward") or _handed_to_runner(facts, call) == param.name.value
            ]
            trains = any(call.attr in _TRAINING_CALLS for call in scope.calls)
            if any(call.ctx.loops for call in runs):
                return None  # (a helper that loops over what it runs the model on is judged itself)
            if runs and not trains and all(not call.ctx.no_grad for call in runs):
                return arg.value.value
        if owner is None:
            return None
        return (_wrapped_module(facts, scope) if not event.node.args[1:] else None) or _own_module_run(facts, scope, event.seq)
    return None


def _wrapped_module(facts: ScopeFacts, scope) -> Optional[str]:  # type: ignore[no-untyped-def]
    """``self.model`` when the method ``scope`` only returns what the class's module gives its
    argument (``def action_probabilities(self, state): return self.model(FloatTensor(state))``):
    its caller's call of the method is the module's run (a policy's ``predict`` drawing
    actions from it)."""
    value = sole_return(scope.function)
    if type(value) is not cst.Call or len(scope.calls) > 3:
        return None
    name = dotted_name(value.func)
    this = _first_param(scope.function)
    if not name or not this or not name.startswith(this + ".") or name.count(".") != 1:
        return None
    attribute = "self." + name.split(".", 1)[1]
    return attribute if facts.is_model(attribute) and module_attribute(facts, attribute[5:]) else None


def _own_module_run(facts: ScopeFacts, scope, seq: int) -> Optional[str]:  # type: ignore[no-untyped-def]
    """``self.encoder`` when the method ``scope`` runs modules its class holds outside loops,
    with autograd on, trains nothing, and returns what they made, in a class that is no module
    (a trainer, a pipeline) or, in a module class, one the caller switched to evaluation before
    ``seq`` (steganogan's ``_encode_decode``:
    ``generated = self.encoder(cover, payload)``, ``decoded = self.decoder(generated)``,
    ``return generated, payload, decoded``): the first module it runs."""
    if any(call.attr in _TRAINING_CALLS for call in scope.calls):
        return None
    if scope.owner is None or is_eval_name(scope.name):
        return None  # (an evaluation method is judged itself: ``wavedp``'s ``predict_probability``)
    module = scope.owner.node.name.value in facts.walk.module_classes()
    runs = [
        call for call in scope.calls
        if call.func is not None and call.func.startswith("self.") and call.func.count(".") == 1
        and module_attribute(facts, call.func[5:])
    ]
    if not runs or any(call.ctx.no_grad or call.ctx.loops for call in runs):
        return None
    if any(last_mode_change(facts.walk, scope, call.func, call.seq) is not None for call in runs):
        return None  # (``self.model.eval(); out = self.model(x)`` in the helper: judged there)
    if module:  # a module's own method: its callers decide about autograd (``as_model``), unless
        # this one switched the part it runs to evaluation (``self.net.eval(); self.forward(x)``)
        runs = [call for call in runs if (facts.last_mode_change(call.func, seq) or (0, ""))[1] == "eval"]
        if not runs:
            return None
    nodes = {id(call.node) for call in runs}
    made: Set[str] = set()
    for event in scope.assigns:  # (in the order they run)
        if event.value is not None and _made_of(event.value, nodes, made):
            made.update(event.targets)
    returned = [node.value for node in nodes_of(scope.function.body, cst.Return) if node.value is not None]
    return runs[0].func if any(_made_of(value, nodes, made) for value in returned) else None


def _made_of(expression: cst.BaseExpression, runs: Set[int], made: Set[str]) -> bool:
    """``expression`` holds one of the ``runs`` or a name bound to what they made, with its
    graph: not through ``.detach()``, ``.numpy()``, ``.item()`` or ``.tolist()`` (a helper that
    returns numbers is judged itself, where its output reaches only those ends)."""
    if any(type(call.func) is cst.Attribute and call.func.attr.value in _DETACHED for call in nodes_of(expression, cst.Call)):
        return False
    names: List[cst.CSTNode] = [*nodes_of(expression, cst.Name), *nodes_of(expression, cst.Call)]
    return any(
        id(node) in runs or (type(node) is cst.Name and node.value in made)
        for node in names
    )


_DETACHED = frozenset({"detach", "numpy", "item", "tolist"})
