"""Methods of a model that record no graph: ``model.predict_ligands(pocket, ligands)`` where the
class's ``predict_ligands`` runs its modules inside ``with torch.no_grad():`` (or is decorated
``@torch.no_grad()`` / ``@torch.inference_mode()``). Calling such a method with autograd on keeps
nothing, whatever mode the model is in.

The class is the one the receiver is built from: in this function (``model = VSModel(...)``),
or, for a parameter, in every function of the file that calls this one and passes it (the
``if __name__ == "__main__":`` block that builds ``VSModel`` from another project file, puts it
in evaluation mode and hands it to ``run_virtual_screen(model, loader)``). A class found for
some callers and not for others, or a method not found, is not known: False.
"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.autograd import CallEvent, Scope
from torchmemlint.analysis.module_annotations import unmoved
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _first_param
from torchmemlint.analysis.training import ScopeFacts

_OFF = ("no_grad", "inference_mode")


def without_autograd(function: cst.FunctionDef) -> bool:
    """``function`` turns autograd off around every call it makes on its own object: decorated
    ``@torch.no_grad()`` / ``@torch.inference_mode()``, or each ``self.<x>(...)`` inside a
    ``with torch.no_grad():`` of its body (at least one such call)."""
    if any(_switches_off(decorator.decorator) for decorator in function.decorators):
        return True
    this = _first_param(function)
    if this is None:
        return False
    found = False
    stack: List[tuple] = [(function.body, False)]
    while stack:
        node, off = stack.pop()
        kind = type(node)
        if kind in (cst.FunctionDef, cst.ClassDef, cst.Lambda):
            continue
        if kind is cst.With and any(_switches_off(item.item) for item in node.items):  # type: ignore[attr-defined]
            off = True
        if kind is cst.Call and _rooted(node.func, this):  # type: ignore[attr-defined]
            if not off:
                return False
            found = True
        stack.extend((child, off) for child in node.children)
    return found


def _switches_off(node: cst.BaseExpression) -> bool:
    func = node.func if type(node) is cst.Call else node
    return (dotted_name(func) or "").rsplit(".", 1)[-1] in _OFF


def _rooted(node: cst.BaseExpression, this: str) -> bool:
    if type(node) is not cst.Attribute:
        return False
    while type(node) is cst.Attribute:
        node = node.value
    return type(node) is cst.Name and node.value == this


def receiver_classes(facts: ScopeFacts, receiver: str) -> Optional[List[cst.BaseExpression]]:
    """What builds ``receiver`` (a local name): its constructions in this function, or where it
    is a parameter, what every caller in the file passes for it; None when not known."""
    built = _built(facts.scope, receiver)
    if built:
        return built
    function = facts.scope.function
    if function is None or facts.scope.owner is not None:
        return None
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if receiver not in params:
        return None
    position = params.index(receiver)
    found: List[cst.BaseExpression] = []
    for scope in facts.walk.scopes:
        for call in scope.calls:
            if call.func != facts.scope.name or scope is facts.scope:
                continue
            given = _passed(call, position, receiver)
            classes = _built(scope, given) if given is not None else None
            if not classes:
                return None
            found.extend(classes)
    return found or None


def _passed(call: CallEvent, position: int, name: str) -> Optional[str]:
    args = call.node.args
    if any(arg.star for arg in args):
        return None
    given = next((a.value for a in args if a.keyword is not None and a.keyword.value == name), None)
    positional = [a for a in args if a.keyword is None]
    if given is None and position < len(positional):
        given = positional[position].value
    return dotted_name(given) if given is not None else None


def _built(scope: Scope, name: str) -> List[cst.BaseExpression]:
    return [
        unmoved(value).func for assign in scope.assigns
        if name in assign.targets and type(value := assign.value) is cst.Call
        and not (type(value.func) is cst.Attribute and dotted_name(value.func.value) == name)  # (``model = model.eval()``)
    ]
