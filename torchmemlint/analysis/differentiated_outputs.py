"""Model outputs the code differentiates after the call.

A physics-informed network is evaluated and its output differentiated with respect to its
input: ``u_pred = model_test(xg, elems)`` then ``eps = Strain(u_pred, xg)``, a helper of the
project whose body runs ``torch.autograd.grad(u[0, :], x, create_graph=True)``; or the
function itself runs ``torch.autograd.grad(u_pred.sum(), x)``. Under ``torch.no_grad()`` the
output carries no graph and ``autograd.grad`` raises, so TML501 does not report that call,
even after ``.eval()`` (``tests/test_tml501_differentiated_outputs.py``).

The output is read where it is an argument, or the name it is bound to is one, of a call in its
function: ``torch.autograd.grad`` itself (its ``outputs``), or a function of the file, a method
on ``self`` or a function imported from another project file (``callers.helper_of``) whose
parameter it binds is read in the ``outputs`` of a ``torch.autograd.grad`` of its body."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.callers import helper_of
from torchmemlint.analysis.gradient_models import evaluates_gradient_model
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.sinks import bound_parameter, Helper
from torchmemlint.tree import nodes_of


def gradients_wanted(facts: Any, event: Any, analysis: Any) -> bool:
    """Whether the module call ``event`` needs autograd for gradients it computes: the file may
    evaluate a model whose forward differentiates (``gradient_models``), or the code
    differentiates this call's output."""
    return evaluates_gradient_model(analysis) or output_differentiated(facts, event, analysis)


def output_differentiated(facts: Any, event: Any, analysis: Any) -> bool:
    """Whether the output of the module call ``event`` (a ``CallEvent`` of the scope of
    ``facts``, a ``ScopeFacts``) is differentiated by ``torch.autograd.grad`` (module doc)."""
    if analysis is None or facts.scope.function is None:
        return False
    bound = {
        target for assign in facts.scope.assigns if assign.value is event.node and not assign.unpacked
        for target in assign.targets if "." not in target
    }
    resolve = None
    for call in facts.scope.calls:
        for arg in call.node.args:
            if not (arg.value is event.node or (type(arg.value) is cst.Name and arg.value.value in bound)):
                continue
            if _grad_call(call.node, facts.bindings.qualify):
                if _outputs(call.node) is arg:
                    return True
                continue
            if resolve is None:
                resolve = helper_of(facts, analysis)
            helper = resolve(call.node)
            name = None if helper is None else bound_parameter(helper, call.node, arg)
            if name is not None and _differentiates(helper, name, facts.bindings.qualify):  # type: ignore[arg-type]
                return True
    return False


def _grad_call(call: cst.Call, qualify: Any) -> bool:
    func = call.func
    if type(func) not in (cst.Name, cst.Attribute):
        return False
    if (dotted_name(func) or "").endswith("autograd.grad"):
        return True
    return qualify(func) == "torch.autograd.grad"


def _outputs(call: cst.Call) -> Optional[cst.Arg]:
    """The argument ``torch.autograd.grad(outputs, inputs, ...)`` differentiates."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "outputs":
            return arg
    first = call.args[0] if call.args else None
    return first if first is not None and first.keyword is None and not first.star else None


def _differentiates(helper: Helper, name: str, qualify: Any) -> bool:
    """A ``torch.autograd.grad`` of the helper's body reads the parameter ``name`` in its
    ``outputs`` (``u[0, :]``, ``u.sum()``)."""
    qualify = helper.qualify or qualify
    for call in nodes_of(helper.function.body, cst.Call):
        if not _grad_call(call, qualify):  # type: ignore[arg-type]
            continue
        outputs = _outputs(call)  # type: ignore[arg-type]
        if outputs is not None and any(n.value == name for n in nodes_of(outputs.value, cst.Name)):  # type: ignore[attr-defined]
            return True
    return False


__all__ = ["gradients_wanted", "output_differentiated"]
