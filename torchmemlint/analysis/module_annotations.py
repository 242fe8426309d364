"""What annotations say is a module: a parameter annotated ``nn.Module`` (or a module class, or
a tensor function), and a return annotation that says so (``module_type``; a builder annotated
``def build_actor(self) -> torch.nn.Module``, an abstract one its subclasses fill in, maslourl's
DDPG, is read by ``module_builders.py``).
"""

from __future__ import annotations

import re
from typing import Any, List

import libcst as cst

from torchmemlint.analysis.autograd import MODULE_MOVES
from torchmemlint.analysis.names import dotted_name


def module_type(facts: Any, annotation: cst.BaseExpression) -> bool:
    """``annotation`` names a module (``nn.Module``, a module class of the file or the project)
    or a tensor function (``Callable[[Tensor], Tensor]``), possibly ``Optional[...]``
    (``facts``: a ``ScopeFacts``)."""
    for _ in range(2):  # `Optional[X]`
        if not (
            type(annotation) is cst.Subscript and len(annotation.slice) == 1
            and type(annotation.slice[0].slice) is cst.Index
            and (dotted_name(annotation.value) or "").rsplit(".", 1)[-1] == "Optional"
        ):
            break
        annotation = annotation.slice[0].slice.value  # type: ignore[attr-defined]
    if type(annotation) in (cst.Name, cst.Attribute):
        qualified = facts.bindings.qualify(annotation)
        return qualified == "torch.nn.Module" or (
            type(annotation) is cst.Name and annotation.value in facts.walk.module_classes()  # type: ignore[attr-defined]
        ) or facts.walk.project_module_class(annotation)
    if type(annotation) is cst.Subscript and (dotted_name(annotation.value) or "").rsplit(".", 1)[-1] == "Callable":
        text = cst.Module(body=[]).code_for_node(annotation)
        return re.fullmatch(r"(?:typing\.)?Callable\[\[(?:torch\.)?Tensor\],\s*(?:torch\.)?Tensor\]", text) is not None
    return False


def annotated_module(facts: Any, name: str) -> bool:
    """``name`` is a parameter of the scope's function annotated as a module (``first_module:
    torch.nn.Module``, ``dag: dag_module.DagModule`` with ``from torch_dag.core import dag_module``
    in a file of that package), not as a tensor function."""
    for param in facts.scope.params():
        if param.name.value == name and param.annotation is not None:
            annotation = param.annotation.annotation
            if type(annotation) is cst.Subscript and (dotted_name(annotation.value) or "").endswith("Callable"):
                return False
            links = facts.walk.links
            return module_type(facts, annotation) or (
                links is not None and type(annotation) in (cst.Name, cst.Attribute) and links.module_class(dotted_name(annotation), package=True)
            )
    return False


def unmoved(call: cst.Call) -> cst.Call:
    """``VAE(...).to(device).eval()`` -> ``VAE(...)``: the call that built the module, without
    the moves and mode switches chained after it (each returns the same module)."""
    while (
        type(call.func) is cst.Attribute and call.func.attr.value in _CHAINED
        and type(call.func.value) is cst.Call
    ):
        call = call.func.value
    return call


_CHAINED = MODULE_MOVES | {"eval", "train"}


def moved_itself(value: cst.BaseExpression, name: str) -> bool:
    """``model = model.eval()``, ``net = net.to(device).train(False)``: ``name`` bound to
    itself moved or switched (the same module)."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _CHAINED:
        value = value.func.value
    return type(value) in (cst.Name, cst.Attribute) and dotted_name(value) == name


def held_annotation(facts: Any, receiver: str) -> List[cst.BaseExpression]:
    """For ``self.<attr>`` that a method of the class binds only to a parameter annotated with a
    class (``def __init__(self, model: ENFORCE): self.model = model``), that class where it is a
    module class of the file or the project; else nothing."""
    owner = facts.scope.owner
    if owner is None or not receiver.startswith("self.") or receiver.count(".") != 1:
        return []
    found: List[cst.BaseExpression] = []
    for method in owner.methods:
        for event in method.assigns:
            if receiver not in event.targets:
                continue
            params = {param.name.value: param for param in method.params()}
            param = params.get(event.value.value) if type(event.value) is cst.Name else None
            annotation = param.annotation.annotation if param is not None and param.annotation is not None else None
            if type(annotation) not in (cst.Name, cst.Attribute) or facts.bindings.qualify(annotation) == "torch.nn.Module":
                return []  # (bound to anything else: not known)
            found.append(annotation)
    links = facts.walk.links
    return found if found and all(
        module_type(facts, annotation) or (links is not None and links.module_class(dotted_name(annotation), package=True))
        for annotation in found
    ) else []
