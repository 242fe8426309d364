"""Is a name plainly a module where the code calls it after ``.eval()``? Named like a model, bound
to an instance of a module class or a torch layer, a copy of one (``copy.deepcopy(self)``,
``self.__class__(...)`` in a module class), or a parameter annotated as a module."""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.autograd import MODEL_NAME
from torchmemlint.analysis.callers import _builds_module, _self_name
from torchmemlint.analysis.module_annotations import annotated_module
from torchmemlint.analysis.module_builders import built_by_builder
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.training import ScopeFacts

COPIES = frozenset({"copy.deepcopy"})


def plainly_a_module(facts: ScopeFacts, callee: str, seen: frozenset = frozenset()) -> bool:
    """Named like a model (`model`, `net`, `self.model`, `*_model`), or bound here (`self.x`:
    in a method of the class) to an instance of a module class of this file or the project, to
    a torch layer or to a copy of a module, or a parameter annotated as a module."""
    if MODEL_NAME.match(callee.rsplit(".", 1)[-1]):
        return True
    modules = facts.walk.module_classes()
    owner = facts.scope.owner
    if owner is not None and callee == _self_name(facts) and owner.node.name.value in modules:
        return True  # `self.eval(); return self(x)` in a method of a module class
    scopes = owner.methods if callee.startswith("self.") and callee.count(".") == 1 and owner is not None else [facts.scope]
    for event in (event for scope in scopes for event in scope.assigns):
        if event.targets != (callee,) or type(event.value) is not cst.Call:
            continue
        func = event.value.func
        qualified = facts.bindings.qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
        if (qualified or "").startswith("torch.nn.") or (
            type(func) is cst.Name and func.value in modules and qualified is None
        ) or facts.walk.project_module_class(func) or built_by_builder(facts, event.value, _builds_module) or _copied(facts, event.value, seen | {callee}):
            return True
    return annotated_module(facts, callee)  # ``def compare(first: nn.Module, ...)``


def _copied(facts: ScopeFacts, value: cst.Call, seen: frozenset) -> bool:
    """``copy.deepcopy(m)`` of a module (``self`` in a module class, a name plainly a module),
    or ``self.__class__(...)`` / ``type(self)(...)`` in a method of a module class (``seen``: the
    names asked on the way, so that ``a = deepcopy(b)``, ``b = deepcopy(a)`` ends)."""
    func = value.func
    own = _self_name(facts)
    modular = own is not None and facts.scope.owner is not None and facts.scope.owner.node.name.value in facts.walk.module_classes()
    if type(func) is cst.Attribute and func.attr.value == "__class__" and type(func.value) is cst.Name:
        return modular and func.value.value == own
    if type(func) is cst.Call and dotted_name(func.func) == "type" and len(func.args) == 1:
        return modular and dotted_name(func.args[0].value) == own
    qualified = facts.bindings.qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
    if qualified not in COPIES or len(value.args) != 1:
        return False
    copied = dotted_name(value.args[0].value)
    if copied is None or copied in seen:
        return False
    return (modular and copied == own) or plainly_a_module(facts, copied, seen)
