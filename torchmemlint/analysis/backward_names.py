"""Which names of a scope reach a backward (``ScopeFacts.backward_losses``,
``ScopeFacts.scalar_losses``): the receivers and arguments of its backward calls and what they
were computed from, and what a Lightning module's ``training_step`` returns (the trainer
backpropagates it: the loss, or a dict holding it under ``"loss"``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import GRAD_KEEPING_METHODS, Scope, _names_in
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import contains, scan

TRAINER_STEPS = frozenset({"training_step"})  # methods whose return value the trainer backpropagates


def backward_losses(scope: Scope, backward_calls: List) -> Set[str]:  # type: ignore[type-arg]
    """Names whose value reaches a backward: receivers, arguments, a trainer step's returns,
    and what they came from."""
    names: Set[str] = set()
    for call in backward_calls:
        if call.receiver is not None:
            names.update(_names_in(call.receiver))
        for arg in call.node.args:
            names.update(_names_in(arg.value))
    function = scope.function
    if function is not None and scope.owner is not None and scope.name in TRAINER_STEPS:
        for found in scan(function.body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if found.value is not None:  # type: ignore[attr-defined]
                names.update(_names_in(found.value))  # type: ignore[attr-defined]
    changed = True
    while changed:  # `loss = loss_sum / n; loss.backward()` reaches loss_sum too
        changed = False
        for event in scope.assigns:
            if event.value is not None and names.intersection(event.targets):
                new = set(_names_in(event.value)) - names
                if new:
                    names |= new
                    changed = True
    return names


def scalar_losses(backward_calls: List) -> Set[str]:  # type: ignore[type-arg]
    """Names that `.backward()` is called on with no gradient argument: 0-dim tensors."""
    found = set()
    for call in backward_calls:
        if call.attr == "backward" and call.receiver is not None:
            positional = [a for a in call.node.args if a.keyword is None and not a.star]
            receiver = dotted_name(call.receiver)
            if receiver is not None and not positional:
                found.add(receiver)
    return found


def backpropagated_with(scope: Scope, backward_calls: List, name: str, event: Any) -> bool:  # type: ignore[type-arg]
    """Does a backward that reaches ``name`` run with or after ``event`` (an accumulation in a
    loop): later in the scope, or inside one of the loops around it? Not one that ran before
    those loops only (a script's training loop, then an evaluation loop summing its test loss
    into the same name: tests/test_tml502_returned_loss.py)."""
    loops = set(map(id, event.ctx.loops))
    return any(
        (call.seq > event.seq or loops.intersection(map(id, call.ctx.loops))) and name in backward_losses(scope, [call])
        for call in backward_calls
    )


def trained_after_its_loop(scope: Scope, backward_calls: List, call: Any) -> bool:  # type: ignore[type-arg]
    """Does a backward that runs after the loop holding ``call`` (a model call in a loop, outside
    that loop, later in the function) reach what ``call``'s output is bound to in that loop?
    The loop computes the loss the function trains on (GNNExplainer-style mask optimisation
    whose ``loss.backward()`` sits after the loop): its rounds are training, not evaluation."""
    if not call.ctx.loops or not backward_calls:
        return False
    loop = call.ctx.loops[-1]
    after = [c for c in backward_calls if c.seq > call.seq and loop not in c.ctx.loops and _made_in(scope, c, loop)]
    if not after:
        return False
    bound = {
        name for event in scope.assigns
        if loop in event.ctx.loops and event.value is not None and contains(event.value, call.node)
        for name in event.targets
    }
    return bool(bound) and any(bound & {name.split(".", 1)[0] for name in backward_losses(scope, [c])} for c in after)  # (`out.sum`)


def _made_in(scope: Scope, backward: Any, loop: Any) -> bool:
    """Is what ``backward`` is called on last bound, before it, in ``loop`` (``loss_xx`` of the
    last round), not by a later loop reusing the name (an evaluation loop before the training
    loop, both binding ``outputs`` and ``loss``)?"""
    names = set(_names_in(backward.receiver)) if backward.receiver is not None else set()
    names |= {name for arg in backward.node.args for name in _names_in(arg.value)}
    if not names:
        return False
    for name in names:
        last = max((e for e in scope.assigns if name in e.targets and e.seq < backward.seq), key=lambda e: e.seq, default=None)
        if last is None or loop not in last.ctx.loops:
            return False
    return True


def validated_after_step(facts: Any, event: Any, callee: str) -> bool:
    """``event`` calls the model after its ``eval()`` (outside any loop), and every training
    call of the function that may run with it (``ScopeFacts.training_calls``) runs before that
    switch: a validation after the step of a function that trains one epoch (GDmicro's
    ``train``), or the embedding computed after the training loop (STMGraph's
    ``train_STMGraph``), whose output no backward reads."""
    mode = facts.last_mode_change(callee, event.seq)
    if mode is None or mode[1] != "eval" or event.ctx.loops:
        return False
    beside = facts.training_beside(event)
    return bool(beside) and all(call.seq < mode[0] for call in beside)


_ARITHMETIC = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide)


def loss_terms(scope: Scope, backward: Any) -> Dict[str, Tuple[cst.CSTNode, ...]]:
    """The names a backward's loss is a sum (or product) of, each with the loops around its
    last binding before it: ``loss = policy_loss + w * value_loss - c * entropy`` then
    ``loss.backward()`` makes ``policy_loss``, ``value_loss`` and ``entropy`` parts of the
    backpropagated graph, whatever computed them (a static method of the class, a
    distribution's ``entropy()``). Only arithmetic is followed, not a call's arguments (the
    targets of ``criterion(out, y)`` are no loss), and only names bound to a computed value
    (a call somewhere in it: not ``w = 0.5`` nor ``w = self.alpha``)."""
    if backward.attr != "backward" or backward.receiver is None:
        return {}
    loop = backward.ctx.loops[-1] if backward.ctx.loops else None
    # name -> (the loops of its last binding, whether a call computes it, the names it sums)
    graph: Dict[str, Tuple[Tuple[cst.CSTNode, ...], bool, List[str]]] = {}
    pending = _terms(backward.receiver)
    while pending:
        name = pending.pop()
        if name in graph:
            continue
        bindings = [  # (every binding of the round: ``loss = a`` then ``loss = loss + b``)
            e for e in scope.assigns
            if name in e.targets and e.seq < backward.seq and (loop is None or loop in e.ctx.loops)
        ]
        if not bindings or any(e.value is None or e.unpacked or len(e.targets) != 1 for e in bindings):
            continue
        terms = [term for e in bindings for term in _terms(e.value)]
        computed = any(_computed(e.value) for e in bindings)  # type: ignore[arg-type]
        if not computed and not terms:
            continue
        graph[name] = (max(bindings, key=lambda e: e.seq).ctx.loops, computed, terms)
        pending.extend(terms)
    found: Dict[str, Tuple[cst.CSTNode, ...]] = {name: entry[0] for name, entry in graph.items() if entry[1]}
    changed = True
    while changed:  # (``loss = policy_loss``: a sum of computed terms is one too)
        changed = False
        for name, (loops, _, terms) in graph.items():
            if name not in found and any(term in found for term in terms):
                found[name] = loops
                changed = True
    return found


def _terms(node: Optional[cst.BaseExpression]) -> List[str]:
    if type(node) is cst.Name:
        return [node.value]
    if type(node) is cst.BinaryOperation and type(node.operator) in _ARITHMETIC:
        return _terms(node.left) + _terms(node.right)
    if type(node) is cst.UnaryOperation:
        return _terms(node.expression)
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in GRAD_KEEPING_METHODS:  # (``entropy().mean()``)
        return _terms(node.func.value)
    return []


def _computed(node: cst.BaseExpression) -> bool:
    """A value some call computes (not a constant, a name or an attribute read alone)."""
    return any(True for _ in scan(node, (cst.Call,), (cst.Lambda,)))


def backpropagated_term(scope: Scope, backward_calls: List, node: cst.CSTNode, event: Any) -> Optional[Tuple[cst.CSTNode, ...]]:  # type: ignore[type-arg]
    """Where ``event`` (an accumulation of ``node``) reads a name that is a term of the loss a
    backward of its loop backpropagates (``loss_terms``), and nothing binds it again between
    the two (``policy_losses.append(policy_loss)`` after or before ``loss.backward()``: the
    list keeps every round's graph): the loops of the name's binding; None otherwise."""
    if type(node) is not cst.Name:
        return None
    name = node.value
    known = scope.__dict__.setdefault("_loss_terms", {})  # (each backward's terms, once per scope)
    for call in backward_calls:
        if not call.ctx.loops or call.ctx.loops[-1] not in event.ctx.loops:
            continue
        if id(call) not in known:
            known[id(call)] = loss_terms(scope, call)
        loops = known[id(call)].get(name)
        first, last = sorted((call.seq, event.seq))
        if loops is not None and not any(name in e.targets and first < e.seq < last for e in scope.assigns):
            return loops
    return None
