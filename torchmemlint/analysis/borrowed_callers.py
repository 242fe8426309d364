"""Whether the file says how a borrowed model runs: a method given a model by its parameter
(``evaluate_and_save_results(self, model, ...)``) is the caller's to judge (``callers.borrowed_model``)
unless the class's own methods call it, all with autograd on, with a model they made
themselves (not one handed on from their own parameters, nor one they see as the model and are
judged for: ``model_helpers.helper_run_model``)."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchmemlint.analysis.training import ScopeFacts


def called_with_grad(facts: ScopeFacts, callee: str) -> bool:
    """Other methods of the class call this one (``self.<method>(...)``), and every such call
    runs with autograd on, given values the caller made, not its own parameters: the file says
    how the borrowed model runs (geogenie's ``self.evaluate_and_save_results(model, ...)`` from
    ``train_test_predict``, which trains that model itself)."""
    owner = facts.scope.owner
    wanted = f"self.{facts.scope.name}"
    found = False
    for scope in owner.methods if owner is not None else ():
        for call in scope.calls:
            if call.func != wanted or scope is facts.scope:
                continue
            if call.ctx.no_grad or scope.grad_work or ScopeFacts(facts.walk, scope).grad_controlled(call.seq):
                return False
            if any(other.attr in ("eval", "train") for other in scope.calls):
                return False  # the caller switches the model: its call is the one judged (``helper_runs``)
            given = _argument_for(facts, call.node, callee)
            if given is None or (type(given) is cst.Name and given.value in {p.name.value for p in scope.params()}):
                return False  # handed on from the caller's own parameters (monai's ``__call__(inputs, network)``): borrowed there too
            if type(given) is cst.Name and ScopeFacts(facts.walk, scope).is_model(given.value):
                return False  # a model to the caller: its call is the model's run (``model_helpers.helper_run_model``)
            found = True
    return found


def _argument_for(facts: ScopeFacts, call: cst.Call, param: str) -> Optional[cst.BaseExpression]:
    """What ``call`` (``self.<method>(...)`` of the scope's method) passes for ``param``."""
    keyword = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == param), None)
    if keyword is not None or any(a.star for a in call.args):
        return keyword
    function = facts.scope.function
    names = [p.name.value for p in (*function.params.posonly_params, *function.params.params)][1:] if function else []
    positional = [a.value for a in call.args if a.keyword is None]
    return positional[names.index(param)] if param in names and names.index(param) < len(positional) else None
