"""What a name or an attribute holds, read from how it is bound: a part of a model reached
through attributes (``model = learn.model.G_B.to(device)``), a callable kept with a lambda
default (``self.post_process = post_process if post_process is not None else lambda x: x``);
the models a scope names: its parameters named like one, what it switches to evaluation or
training mode, and in a nested function (a closure) those of the function around it it reads."""

from __future__ import annotations

from typing import Any, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import _is_false, MODEL_NAME, MODULE_MOVES
from torchmemlint.analysis.names import dotted_name


def model_part_of(expr: Optional[cst.BaseExpression]) -> bool:
    """``learn.model.G_B``, ``trainer.model.to(device)``: an attribute chain through an attribute
    named like a model (a module's part is a module), possibly moved (``.to``, ``.cuda()``)."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in MODULE_MOVES:
        expr = expr.func.value
    dotted = dotted_name(expr) if expr is not None else None
    return dotted is not None and any(MODEL_NAME.match(part) for part in dotted.split(".")[1:])


def moved_name(expr: Optional[cst.BaseExpression]) -> Optional[str]:
    """The dotted name a chain of moves starts from (``model.to(device)`` -> ``model``: each
    move returns the module itself); the dotted name of anything else, None if it has none."""
    while type(expr) is cst.Call and type(expr.func) is cst.Attribute and expr.func.attr.value in MODULE_MOVES:
        expr = expr.func.value
    return dotted_name(expr) if expr is not None else None


def lambda_arm(expr: Optional[cst.BaseExpression]) -> bool:  # `f or (lambda x: x)`, `a if c else lambda: 0`
    if type(expr) is cst.IfExp:
        return lambda_arm(expr.body) or lambda_arm(expr.orelse)
    if type(expr) is cst.BooleanOperation:
        return lambda_arm(expr.left) or lambda_arm(expr.right)
    return type(expr) is cst.Lambda


def named_models(scope: Any) -> Set[str]:
    """The names ``scope`` (``autograd.Scope``) holds models under: parameters named like a
    model, receivers of ``.eval()`` / ``.train(mode)``; in a nested function, also those of the
    function around it that it reads without binding them itself (``def model_predict(data):
    return detach_to_numpy(model(to_tensor(data)))`` inside ``def search(sample, model)``:
    tests/test_tml501_closures.py)."""
    names = _named_in(scope)
    parent = scope.parent
    if parent is not None and parent.function is not None:
        own = scope.bindings.names
        names |= {name for name in _named_in(parent) if name.partition(".")[0] not in own}
    return names


def _named_in(scope: Any) -> Set[str]:
    names = {p.name.value for p in scope.params() if MODEL_NAME.match(p.name.value)}
    containers: Set[str] = set()
    for call in scope.calls:
        if call.attr in ("eval", "train") and call.receiver is not None:
            receiver = moved_name(call.receiver)  # (``model.to(device).eval()``)
            if receiver is not None and not (call.node.args and (call.attr == "eval" or not _mode_only(call.node))):
                if receiver == "self" and scope.owner is not None and not scope.owner.node.bases:
                    continue  # `self.eval()` of a class deriving from nothing: its own `eval`, no module's
                names.add(receiver)
                containers |= _iterated(call, receiver)
    if containers:  # ``netC = networks["classifier_k"]`` after ``for net in networks.values(): net.eval()``
        for event in scope.assigns:
            value = event.value
            if len(event.targets) == 1 and not event.augmented and type(value) is cst.Subscript and dotted_name(value.value) in containers:
                names.add(event.targets[0])
    return names


def _iterated(call: Any, receiver: str) -> Set[str]:
    """The container whose items a loop around ``call`` binds to ``receiver`` (``for net in
    networks.values():`` or ``for net in nets:``, then ``net.eval()``): its items are models."""
    for loop in call.ctx.loops:
        if type(loop) is cst.For and type(loop.target) is cst.Name and loop.target.value == receiver:
            items = loop.iter
            if type(items) is cst.Call and type(items.func) is cst.Attribute and items.func.attr.value == "values" and not items.args:
                items = items.func.value
            container = dotted_name(items)
            return {container} if container is not None else set()
    return set()


def _mode_only(call: cst.Call) -> bool:  # what `nn.Module.train(mode=True)` accepts
    arg = call.args[0] if len(call.args) == 1 else None
    return arg is not None and not arg.star and (arg.keyword is None or arg.keyword.value == "mode")


def mode_switch(call: cst.Call) -> Optional[Tuple[str, str]]:
    """``(receiver, "eval" | "train")`` for ``x.eval()``, ``x.train()``, ``x.train(False)`` (an
    ``eval`` with arguments is not ``nn.Module.eval()``); None for anything else."""
    mode = switched_to(call)
    receiver = moved_name(call.func.value) if mode is not None else None  # type: ignore[attr-defined]
    return None if receiver is None or mode is None else (receiver, mode)  # (``model.to(device).eval()`` switches ``model``)


def switched_to(call: cst.BaseExpression) -> Optional[str]:
    """``"eval"`` or ``"train"`` for a call of ``eval()`` or ``train(flag)`` on anything
    (``cast(nn.Module, torch.load(path)).eval()``); None for any other expression."""
    func = getattr(call, "func", None)
    if type(call) is not cst.Call or type(func) is not cst.Attribute or func.attr.value not in ("eval", "train"):
        return None
    if func.attr.value == "eval":
        return None if call.args else "eval"
    return "eval" if call.args and _is_false(call.args[0].value) else "train"


def bound_switch(value: Optional[cst.BaseExpression]) -> Optional[cst.Call]:
    """The mode switch a bound value ends in, past the moves chained after it (``model =
    from_pretrained(name).eval().to(device)``: the ``eval()``; torchao's SmoothQuant example);
    None when it ends in none (``switched_to``)."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in MODULE_MOVES:
        value = value.func.value
    return value if value is not None and switched_to(value) is not None else None  # type: ignore[return-value]


def bound_mode(value: Optional[cst.BaseExpression]) -> Optional[str]:
    """``"eval"`` / ``"train"`` for a bound value that ends in a mode switch (``bound_switch``)."""
    switch = bound_switch(value)
    return None if switch is None else switched_to(switch)
