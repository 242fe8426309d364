"""What annotations say is a module: a parameter annotated ``nn.Module`` (or a module class, or
a tensor function), and a call of a function or method whose return annotation says so
(``self.actor = self.build_actor().to(device)`` with ``def build_actor(self) -> torch.nn.Module``:
an abstract builder its subclasses fill in, maslourl's DDPG).
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


def returns_module(facts: Any, value: cst.BaseExpression) -> bool:
    """``value`` calls (maybe then moved: ``.to(device)``, ``.cuda()``, ``.eval()``) a method of
    the scope's class or a top-level function of the file, every definition of which is
    annotated to return a module."""
    if type(value) is not cst.Call:
        return False
    value = unmoved(value)
    name = dotted_name(value.func) or ""  # type: ignore[attr-defined]
    owner = facts.scope.owner
    functions: List[cst.FunctionDef] = []
    if name.startswith("self.") and name.count(".") == 1 and owner is not None:
        functions = [m.function for m in owner.methods if m.name == name[5:] and m.function is not None]
    elif name and "." not in name:
        functions = [
            s.function for s in facts.walk.scopes
            if s.owner is None and s.name == name and s.function is not None and s.parent is facts.walk.scopes[0]
        ]
    return bool(functions) and all(f.returns is not None and module_type(facts, f.returns.annotation) for f in functions)
