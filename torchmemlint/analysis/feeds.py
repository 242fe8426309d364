"""Whether a call is fed by the output of other calls of the same function: its arguments (or
receiver) hold one of those calls, or a name bound, through the function's assignments before
it in source order, to a value computed from one (``outputs = self.net(x)``, ``z = z[1]``,
``out, attn = model(x)``). A name rebound to anything else stops carrying it.

Asked by TML501: a loss computed from a model output it already reports
(``score = criterion(x, outputs)``) is the same computation, whose memory is the model's,
and is reported once.

And which comprehension a call is the kept element of (``collected_over_loader``): a
comprehension over a loader is a loop whose every iteration's output the list keeps."""

from __future__ import annotations

import re
from typing import AbstractSet, Iterator, List, Optional, Set

import libcst as cst

from torchmemlint.analysis.autograd import (
    _COMPREHENSIONS as _COLLECTING, AssignEvent, CallEvent, FRAMEWORK_NO_GRAD_HOOKS, Scope, _names_in,
)
from torchmemlint.analysis.callers import eval_by_callers, _LOADER_WORDS
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.training import is_eval_name, ScopeFacts
from torchmemlint.tree import children, nodes_of


def fed_by(scope: Scope, call: CallEvent, sources: AbstractSet[int]) -> bool:
    """Whether ``call`` takes a value computed from one of the calls in ``sources`` (ids of
    their ``cst.Call`` nodes) of ``scope``."""
    if not sources:
        return False
    carried: Set[str] = set()
    for event in scope.assigns:
        if event.seq >= call.seq:
            break
        if event.value is None:
            continue
        if _mentions(event.value, sources, carried):
            carried.update(event.targets)
        elif not event.augmented:
            carried.difference_update(event.targets)
    node = call.node
    values = [arg.value for arg in node.args]
    if call.receiver is not None:
        values.append(call.receiver)
    return any(_mentions(value, sources, carried) for value in values)


def _mentions(expr: cst.BaseExpression, sources: AbstractSet[int], carried: Set[str]) -> bool:
    if any(id(call) in sources for call in _calls(expr)):
        return True
    return any(_carried(name, carried) for name in _names_in(expr))


def _carried(name: str, carried: Set[str]) -> bool:
    """``outputs`` and ``outputs.logits`` carry what ``outputs`` holds."""
    while True:
        if name in carried:
            return True
        if "." not in name:
            return False
        name = name.rpartition(".")[0]


def _calls(node: cst.CSTNode) -> Iterator[cst.Call]:
    if type(node) is cst.Call:
        yield node
    if type(node) in (cst.Lambda, cst.FunctionDef):
        return
    for child in children(node):
        yield from _calls(child)


def collected_over_loader(facts: ScopeFacts, call: CallEvent) -> Optional[AssignEvent]:
    """The assignment of a comprehension over a loader (``outputs = [model.step(b) for b in
    val_loader]``) whose kept element ``call`` computes, outside ``torch.no_grad()``, when what
    it collects never reaches a backward of the function: a loop that keeps every iteration's
    output and graph. None otherwise."""
    if not call.ctx.iterating or call.ctx.no_grad or facts.grad_controlled(call.seq):
        return None
    for event in facts.scope.assigns:
        value = event.value
        if type(value) not in _COLLECTING or event.seq < call.seq or event.augmented:
            continue
        kept = (value.key, value.value) if type(value) is cst.DictComp else (value.elt,)  # type: ignore[union-attr]
        if not any(found is call.node for element in kept for found in _calls(element)):
            continue
        if not over_loader(value):
            return None
        if set(event.targets) & facts.backward_losses or any(
            facts.is_training_step(other) for other in facts.scope.calls
            if other.ctx.iterating and any(found is other.node for found in _calls(value))
        ):
            return None
        return event
    return None


def over_loader(value: Optional[cst.BaseExpression]) -> bool:
    """A comprehension one of whose ``for`` clauses iterates something named like a loader,
    a data set or batches."""
    return type(value) in _COLLECTING and any(
        _LOADER_WORDS.search(name) for clause in _for_clauses(value) for name in _names_in(clause.iter)
    )


def iterates_loader(loop: cst.CSTNode) -> bool:
    """A ``for`` loop over something named like a loader, a data set or batches, or over
    batches cut by a batch size (``batched``)."""
    return type(loop) is cst.For and (
        any(_LOADER_WORDS.search(name) for name in _names_in(loop.iter))  # type: ignore[attr-defined]
        or batched(loop.iter)  # type: ignore[attr-defined]
    )


# a name for the size of a batch: `batch_size`, `self.eval_batch_size`, `bs`, `bsz`
_BATCH_SIZE = re.compile(r"(?i)(?:^|_)(?:batch_?size|bsz?)$")


def batched(iterated: cst.BaseExpression) -> bool:
    """What a loop iterates is a sequence of batches cut by a batch size: the start of each
    (``range(0, len(data), batch_size)``: the step), their count (``range(n // bs)``,
    ``range(math.ceil(n / batch_size))``: the stop divided by it), or the batches themselves
    (``torch.split(x, batch_size)``, ``chunked(items, bs)``: an argument after the first).
    Not ``range(batch_size)``: the items of one batch."""
    if type(iterated) is not cst.Call:
        return False
    args = [arg.value for arg in iterated.args if arg.keyword is None and not arg.star]
    if dotted_name(iterated.func) == "range":
        if len(args) == 3:
            return _names_batch_size(args[2])
        stop = args[-1] if args else None
        return stop is not None and any(
            type(node) is cst.BinaryOperation and type(node.operator) in (cst.FloorDivide, cst.Divide)
            and _names_batch_size(node.right)
            for node in nodes_of(stop, cst.BinaryOperation)
        )
    return any(_names_batch_size(arg) for arg in args[1:])


def _names_batch_size(node: cst.BaseExpression) -> bool:
    return any(_BATCH_SIZE.search(name.rsplit(".", 1)[-1]) for name in _names_in(node))


def _for_clauses(comprehension: cst.BaseExpression) -> List[cst.CompFor]:
    clauses = []
    clause = getattr(comprehension, "for_in", None)
    while clause is not None:
        clauses.append(clause)
        clause = clause.inner_for_in
    return clauses


def eval_method_over_loader(facts: ScopeFacts, event: CallEvent) -> bool:
    """``model.predict(batch, ...)`` (``ScopeFacts.model_part``) in a loop over a loader, after
    ``model.eval()`` in this scope (or, for a parameter, in every caller: ``eval_by_callers``):
    a method of a module put in evaluation mode, run on every batch, runs its forward
    (pytorch_tabular's ``DeepFeatureExtractor.transform``). Also in any loop of a function
    named for evaluation, after that function's own ``eval()`` (an RL trainer's ``evaluate``
    stepping its environments with ``self.agent.Actor(obs)``: tests/test_tml501_recall.py)."""
    receiver, _, method = (event.func or "").rpartition(".")
    if not receiver or not event.ctx.loops:
        return False
    over_loader = any(iterates_loader(loop) for loop in event.ctx.loops)
    if not over_loader and not is_eval_name(facts.scope.name):
        return False
    if turns_off_autograd(facts, method):
        return False
    mode = facts.last_mode_change(receiver, event.seq)
    if mode is None:  # a parameter its callers put in evaluation mode
        return over_loader and eval_by_callers(facts, receiver) is not None
    return mode[1] == "eval"


# methods of the ecosystem's models that turn autograd off themselves: transformers'
# `GenerationMixin.generate` is decorated with `@torch.no_grad()`
SELF_NO_GRAD_METHODS = frozenset({"generate"})


def turns_off_autograd(facts: ScopeFacts, method: str) -> bool:
    """Whether ``method`` runs without autograd by itself: transformers' ``generate``, which no
    class of this file redefines, or a method every class of the file defining it runs under
    ``no_grad`` (``defined_without_grad``)."""
    if method in SELF_NO_GRAD_METHODS and not _defined(facts, method):
        return True
    return defined_without_grad(facts, method)


def defined_without_grad(facts: ScopeFacts, method: str) -> bool:
    """Every class of the file that defines ``method`` runs it under ``no_grad``
    (``@torch.no_grad() def embed(self, x)``), and one does. Not a method named as a
    framework's hook the framework runs without autograd (``validation_step``): called by
    hand, it runs with autograd on."""
    defined = _defined(facts, method)
    return bool(defined) and not FRAMEWORK_NO_GRAD_HOOKS.match(method) and all(scope.no_grad for scope in defined)


def _defined(facts: ScopeFacts, method: str) -> List[Scope]:
    """The methods named ``method`` of the file's classes (indexed once per file)."""
    walk = facts.walk
    kept = getattr(walk, "_methods_by_name", None)
    if kept is None or kept[0] != len(walk.classes):
        by_name: dict = {}
        for classfacts in walk.classes:
            for scope in classfacts.methods:
                by_name.setdefault(scope.name, []).append(scope)
        kept = walk._methods_by_name = (len(walk.classes), by_name)  # type: ignore[attr-defined]
    return kept[1].get(method, [])
