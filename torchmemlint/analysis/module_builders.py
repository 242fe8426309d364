"""A call of a builder is a module build: a method of the scope's class (or of a class of its
lineage in the file, ``class_lineage.py``: a subclass's override too) or a top-level function of
the file, every definition of which returns a module from each of its ``return``s: a module build
(``return nn.Sequential(*layers)``, ``return Tagger(cfg).to(device)``), a call of another such
builder, or a local bound only to those (``model = Tagger(...); model.load_state_dict(state);
return model``); or is annotated to return one (``def build_actor(self) -> nn.Module``, an abstract
builder its subclasses fill in). dssm's ``self.mlp_left = self.make_mlp_layer(...)``, relaxit's
``self.actor = self._build_actor_network()``, deepmorpheus's ``model = attempt_checkpoint_load(...)``:
the value is a module wherever the code asks what a value is built from
(``callers._builds_module``). A builder that may return anything else (``None``, a parameter, a
tuple, an attribute), yields, or never returns is none.

A deep copy of a module is one too: ``copy.deepcopy(m)`` of a module build or of the model
(``ScopeFacts.is_model``: fastnet's ``self.bestModel = copy.deepcopy(self.model)``, called
where the output only becomes numpy)."""

from __future__ import annotations

from typing import Any, Callable, List

import libcst as cst

from torchmemlint.analysis.class_lineage import lineage
from torchmemlint.analysis.module_annotations import module_type, moved_itself, unmoved
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import terminal_name
from torchmemlint.analysis.training import ScopeFacts
from torchmemlint.tree import scan

Builds = Callable[[Any, cst.BaseExpression], bool]  # ``callers._builds_module``
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def built_by_builder(facts: ScopeFacts, value: cst.BaseExpression, builds: Builds) -> bool:
    """``value`` calls (maybe then moved or switched: ``.to(device)``, ``.eval()``) a builder of
    the file, every definition of which returns a module (see the module docstring)."""
    return _every_definition(facts, value, "module", lambda builder: _returns_modules(builder, builds))


def _every_definition(facts: ScopeFacts, value: cst.BaseExpression, kind: str, read: Callable[[ScopeFacts], bool]) -> bool:
    """``value`` calls a builder of the file (``_definitions``) and ``read`` accepts every
    definition of it (each read once per walk and ``kind``)."""
    if type(value) is not cst.Call:
        return False
    definitions = _definitions(facts, unmoved(value).func)
    if not definitions:
        return False
    known = facts.walk.__dict__.setdefault("_module_builders", {})
    for scope in definitions:
        key = (kind, id(scope.node))
        if key not in known:
            known[key] = False  # (asked again while it is read, by recursion: not known to be one)
            known[key] = read(ScopeFacts(facts.walk, scope))
        if not known[key]:
            return False
    return True


def copied_module(facts: ScopeFacts, value: cst.BaseExpression, builds: Builds) -> bool:
    """``copy.deepcopy(m)`` where ``m`` is a module build or the model (see the module docstring)."""
    if type(value) is not cst.Call or len(value.args) != 1 or value.args[0].star or value.args[0].keyword is not None:
        return False
    func = value.func
    if type(func) not in (cst.Name, cst.Attribute) or facts.bindings.qualify(func) != "copy.deepcopy":
        return False
    copied = value.args[0].value
    name = dotted_name(copied)
    return builds(facts, copied) or (name is not None and facts.is_model(name))


def _definitions(facts: ScopeFacts, func: cst.BaseExpression) -> List[Any]:
    """The scopes ``func`` may run: ``self.<name>`` in a method, the methods named so in the
    class's lineage; a name the function does not bind, the file's top-level functions named so."""
    if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self":
        owner = facts.scope.owner
        if owner is None:
            return []
        name = func.attr.value
        return [m for klass in lineage(facts.walk, owner) for m in klass.methods if m.name == name and m.function is not None]
    if type(func) is not cst.Name or func.value not in facts.walk.defined_names():
        return []
    if any(func.value in event.targets for event in facts.scope.assigns) or facts.bindings.qualify(func) is not None:
        return []
    top = facts.walk.scopes[0] if facts.walk.scopes else None
    return [s for s in facts.walk.scopes if s.owner is None and s.parent is top and s.name == func.value and s.function is not None]


def builds_loss(facts: ScopeFacts, value: cst.BaseExpression) -> bool:
    """``value`` calls a builder of the file every ``return`` of which builds a loss (a class
    named ``...Loss``: parlai's ``self.criterion = self.build_criterion()`` returning
    ``torch.nn.CrossEntropyLoss(...)``): a loss, as ``module_calls.loss_module`` reads one built in place."""
    return _every_definition(
        facts, value, "loss", lambda builder: _returns(builder.scope.function, lambda node: _module(builder, node, _loss_build))
    )


def _loss_build(facts: ScopeFacts, value: cst.BaseExpression) -> bool:
    return type(value) is cst.Call and (dotted_name(unmoved(value).func) or "").endswith("Loss")


def _returns(function: cst.FunctionDef, returned: Callable[[cst.BaseExpression], bool]) -> bool:
    """Every ``return`` of ``function`` (not of a function nested in it) returns a value that
    ``returned`` accepts; a generator, or a function that never returns, does not."""
    found = scan(function.body, (cst.Return, cst.Yield), _NESTED, strict=True)
    if not found or any(type(node) is cst.Yield for node in found):
        return False
    return all(node.value is not None and returned(node.value) for node in found)  # type: ignore[attr-defined]


def _returns_modules(facts: ScopeFacts, builds: Builds) -> bool:
    """Every ``return`` returns a module (or the builder is annotated so), and the builder
    freezes nothing (``extractor.requires_grad_(False)``: a frozen network records no graph of its
    own, which a module built in place and frozen there shows the rules)."""
    function = facts.scope.function
    assert function is not None
    if any(call.attr == "requires_grad_" for call in facts.scope.calls) or any(
        target.endswith(".requires_grad") for event in facts.scope.assigns for target in event.targets
    ):
        return False
    if function.returns is not None and module_type(facts, function.returns.annotation):
        return True
    return _returns(function, lambda node: _module(facts, node, builds))


def _module(facts: ScopeFacts, value: cst.BaseExpression, builds: Builds) -> bool:
    """A module build, or a local of the builder bound only to module builds (and to itself
    moved: ``model = model.to(device)``)."""
    if builds(facts, value):
        return True
    if type(value) is not cst.Name:
        return False
    name = value.value
    assigned = [event for event in facts.scope.assigns if name in event.targets]
    built = [event for event in assigned if event.value is None or not moved_itself(event.value, name)]
    return bool(built) and all(
        event.value is not None and not event.augmented and not event.unpacked and builds(facts, event.value)
        for event in built
    )


def loss_module(facts: ScopeFacts, callee: str) -> bool:
    """``callee`` (``self.loss``, ``criterion``) is only ever bound, in its class or the scope, to a loss: a
    ``...Loss(...)`` class (``nn.MSELoss()``, a project's ``MaskedLogCoshLoss``) or a builder of losses
    (``module_builders.builds_loss``). A loss records a graph only from its inputs: their makers are judged."""
    if callee.startswith("self.") and "." not in callee[5:]:
        owner = facts.scope.owner
        events = [e for method in owner.methods for e in method.assigns] if owner is not None else []
    elif "." not in callee:
        events = list(facts.scope.assigns)
    else:
        return False
    bound = [e for e in events if callee in e.targets]
    return bool(bound) and all(
        not e.augmented and type(e.value) is cst.Call and ((terminal_name(e.value.func) or "").endswith("Loss") or builds_loss(facts, e.value))
        for e in bound
    )
