"""The mode a helper of the file leaves the model it returns in.

``model = get_model(args)`` where ``get_model`` ends ``model.eval(); return model`` (ThreeDJCG's
visualisation scripts) hands back a module in evaluation mode, as ``model.eval()`` in the caller
would: ``ScopeFacts.last_mode_change`` counts the binding as that switch. Read only where it is
certain: a function of the file (not a method), or of another file of the project it imports
(that file's walk), each of whose ``return`` statements is a
top-level statement returning ``x.eval()`` or a name ``x`` that a top-level ``x.eval()`` before it
switched (no ``x.train(...)`` between)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.model_names import bound_mode, bound_switch, mode_switch, switched_to
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import scan


def returned_in_eval(walk: Any, value: Optional[cst.BaseExpression]) -> Optional[str]:
    """The name of the function of the file that ``value`` calls (``get_model(args)``) when
    what it returns is a module it put in evaluation mode; None otherwise."""
    if type(value) is not cst.Call or type(value.func) is not cst.Name:
        return None
    name = value.func.value
    known = walk.__dict__.setdefault("_returned_in_eval", {})  # (once per function of the file)
    if name not in known:
        known[name] = _in_eval(walk, name)
        links = getattr(walk, "links", None)
        if known[name] is None and links is not None and name not in walk.defined_names():
            # imported from another file of the project (mag_net's ``nn = model(material=m)``,
            # ``from .net import model``): that file's function, read in its own walk
            found = links.definition(name, "function", package=True)
            if found is not None and _in_eval(found[0].scopes, found[1].name.value) is not None:
                known[name] = name
    return known[name]


def _in_eval(walk: Any, name: str) -> Optional[str]:
    functions = [s.function for s in walk.scopes if s.owner is None and s.function is not None and s.name == name]
    if len(functions) != 1 or type(functions[0].body) is not cst.IndentedBlock:
        return None
    body = functions[0].body.body
    nested = list(scan(functions[0].body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)))
    switched = {}  # name -> its mode after each top-level statement read so far
    returns = 0
    for statement in body:
        line = statement.body[0] if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1 else None
        if type(line) is cst.Expr and type(line.value) is cst.Call and (switch := mode_switch(line.value)) is not None:
            switched[switch[0]] = switch[1]
        elif type(line) is cst.Return:
            returned = line.value
            switch = mode_switch(returned) if type(returned) is cst.Call else None
            if switch is not None and switch[1] == "eval":  # ``return model.eval()``
                returns += 1
                continue
            if type(returned) is not cst.Name or switched.get(returned.value) != "eval":
                return None
            returns += 1
    return name if returns and returns == len(nested) else None


def last_mode_change(walk: Any, scope: Any, callee: str, seq: int) -> Optional[Tuple[int, str]]:
    """The last switch of ``callee``'s mode before ``seq`` in ``scope``: ``(seq, "eval" | "train")``
    of ``callee.eval()``, of ``callee = get_model(args)`` (a helper ending ``model.eval()``) or
    of ``callee = cast(nn.Module, torch.load(path)).to(device).eval()``; None when none."""
    last = None
    for call in scope.calls:
        if call.seq >= seq:
            break
        switch = mode_switch(call.node) if call.attr in ("eval", "train") else None
        if switch is not None and switch[0] == callee:
            last = (call.seq, switch[1])
        elif switch is None and call.func is not None and "." not in call.func and left_in_eval(walk, call.node, callee) is not None:
            last = (call.seq, "eval")  # ``check(model, x)``, which switches its parameter to eval
    for event in scope.assigns:
        if event.seq < seq and event.targets == (callee,) and (last is None or event.seq > last[0]):
            mode = bound_mode(event.value) or ("eval" if returned_in_eval(walk, event.value) else None)
            if mode is not None:
                last = (event.seq, mode)
    return last


def left_in_eval(walk: Any, call: cst.Call, callee: str) -> Optional[str]:
    """The name of the top-level function of the file that ``call`` runs (``check(model, x)``)
    when it is handed ``callee`` and leaves that parameter in evaluation mode: a top-level
    statement of its body switches it to eval, and nothing in it switches it back
    (attentionodorify's ``check_accuracy_per_epoch(model, ...)`` ends with the caller's model in
    evaluation mode, as ``model.eval()`` in the caller would); None otherwise."""
    if type(call.func) is not cst.Name or call.func.value not in walk.defined_names() or not any(
        dotted_name(arg.value) == callee for arg in call.args
    ):
        return None
    name = call.func.value
    functions = [s.function for s in walk.scopes if s.owner is None and s.function is not None and s.name == name]
    if len(functions) != 1:
        return None
    params = functions[0].params
    positional = [*params.posonly_params, *params.params]
    given = None
    for index, arg in enumerate(call.args):
        if arg.star or dotted_name(arg.value) != callee:
            continue
        if arg.keyword is not None:
            given = arg.keyword.value
        elif index < len(positional):
            given = positional[index].name.value
    if given is None:
        return None
    known = walk.__dict__.setdefault("_left_in_eval", {})  # (once per function and parameter)
    if (name, given) not in known:
        known[(name, given)] = _leaves_in_eval(functions[0], given)
    return name if known[(name, given)] else None


def _leaves_in_eval(function: cst.FunctionDef, param: str) -> bool:
    switches = [mode_switch(call) for call in scan(function.body, (cst.Call,), (cst.FunctionDef, cst.ClassDef, cst.Lambda))]
    modes = [switch[1] for switch in switches if switch is not None and switch[0] == param]
    if not modes or any(mode != "eval" for mode in modes) or type(function.body) is not cst.IndentedBlock:
        return False
    return any(
        type(statement) is cst.SimpleStatementLine and len(statement.body) == 1 and type(statement.body[0]) is cst.Expr
        and type(statement.body[0].value) is cst.Call and mode_switch(statement.body[0].value) == (param, "eval")
        for statement in function.body.body
    )


def switching_helper(walk: Any, scope: Any, seq: int, callee: str) -> Optional[str]:
    """The helper of the file whose call at ``seq`` left ``callee`` in evaluation mode
    (``left_in_eval``), as ``last_mode_change`` found it; None when the switch is not one."""
    return next((left_in_eval(walk, call.node, callee) for call in scope.calls if call.seq == seq and call.attr is None), None)


def switch_written(scope: Any, seq: int) -> Optional[str]:
    """The mode switch ``last_mode_change`` found at ``seq`` as the code writes it (``eval()``,
    ``train(False)``); None where a helper that returned the model made it, or one given it
    (``switching_helper``)."""
    calls = [call.node for call in scope.calls if call.seq == seq]
    calls += [bound_switch(event.value) for event in scope.assigns if event.seq == seq]
    return next((
        "train(False)" if call.func.attr.value == "train" else "eval()"  # type: ignore[union-attr]
        for call in calls if switched_to(call) is not None
    ), None)
