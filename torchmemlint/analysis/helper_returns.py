"""What a same-file helper returns of the tensors a scope hands it (``ScopeFacts``).

``pred, truth = process_raw_pred(batch[i], out[i], n)``, where ``process_raw_pred`` is a
function of this file (or ``self._select(out)``, a plain method of the scope's own class) that
slices, gathers or reshapes its ``raw_pred`` parameter and returns it beside something else:
the helper's own scope is replayed (``ScopeFacts`` over the walk's scope of that function) with
each parameter bound to what the caller knows of its argument, and its single ``return`` read,
element by element when it returns a tuple. Only values that stay what the caller gave keep
the caller's loops (a plain method that runs its own instance, ``outputs = self(x)``, is read so
even when nothing the caller knows goes in: voodoonet's ``fwd_pass`` returning its loss, its
``self`` the model there); what the helper computes itself (a model run or a loss inside it) carries
the helper's own loops, so the caller's loop questions do not take it for one of their
iterations' values. Conservative: one level deep, a single ``return`` as the last statement
of the body, no ``yield``, no ``*args`` at the call, no decorator; anything else is unknown.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import AssignEvent, Ctx, Scope
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import _first_param, _small_statements
from torchmemlint.tree import nodes_of


def helper_returns(facts: Any, call: cst.Call, ctx: Ctx) -> Any:
    """What ``call`` returns when it runs a helper of this file on values ``facts`` (a
    ``ScopeFacts``) knows: a ``training.Value``, a tuple of them (None where unknown) for a
    returned tuple, or None."""
    if facts.depth > 0 or ctx.no_grad or any(arg.star for arg in call.args):
        return None
    given = [(arg.keyword.value if arg.keyword else None, facts.value_of(arg.value, ctx)) for arg in call.args]
    models = [  # the model handed in (`_run_batch(batch, model, collate)`): the helper runs it
        (arg.keyword.value if arg.keyword else None, index) for index, arg in enumerate(call.args)
        if facts.is_model(dotted_name(arg.value))
    ]
    nothing = all(value is None for _, value in given) and not models
    if nothing and type(call.func) is not cst.Attribute:
        return None  # nothing the caller knows goes in (a method on ``self`` may run its module)
    found = _helper_scope(facts, call.func)
    if found is None:
        return None
    scope, bound_self = found
    function = scope.function
    assert function is not None
    itself = bound_self and _runs_itself(function)
    # nothing the caller knows goes in: a plain method may still make its own loss or output
    # (rlprop's ``loss = self.optimize(transitions)``: runs ``self.policy_net``, backward, and
    # returns the loss), which the replay below finds; a module-level function cannot
    if nothing and not bound_self:
        return None
    own = nothing and not itself
    returned = _single_return(function)
    if returned is None or scope.no_grad or scope is facts.scope:
        return None
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    if bound_self:
        params = params[1:]
    by_keyword = {p.name.value for p in (*function.params.params, *function.params.kwonly_params)}
    positional = [value for keyword, value in given if keyword is None]
    if len(positional) > len(params):
        return None
    seeded = dict(zip(params, positional))
    for keyword, value in given:
        if keyword is not None:
            if keyword not in by_keyword:
                return None
            seeded[keyword] = value
    inner = type(facts)(facts.walk, scope)
    if inner.forward:
        return None
    inner.depth = facts.depth + 1
    inner.env.update({name: value for name, value in seeded.items() if value is not None})
    handed = {keyword if keyword is not None else params[index] for keyword, index in models if keyword or index < len(params)}
    if itself:
        handed.add(_first_param(function))  # type: ignore[arg-type]  (``outputs = self(x)``: the module's run)
    inner.model_names.update(handed)
    for _ in inner.replay():
        pass
    end = Ctx()
    # handed only the model, the helper's outputs are what it returns of calling it, not what a
    # method of the model makes of them (`model.validation_epoch_end(outputs)`: numbers)
    # (a method running its own module: what it returns is what its scope makes of the run)
    kept = _run_on(function, handed) if all(value is None for _, value in given) and not itself and not own else None
    if type(returned) in (cst.Tuple, cst.List):
        elements = returned.elements  # type: ignore[attr-defined]
        if any(type(element) is not cst.Element for element in elements):
            return None
        return tuple(
            _at_call(inner.value_of(element.value, end), ctx) if kept is None or kept(element.value) else None
            for element in elements
        )
    return _at_call(inner.value_of(returned, end), ctx) if kept is None or kept(returned) else None


def _runs_itself(method: cst.FunctionDef) -> bool:
    """The method calls its own instance (``outputs = self(x)``): it runs the module, whose
    outputs and losses it returns are the caller's to know (voodoonet's ``fwd_pass``)."""
    this = _first_param(method)
    return this is not None and any(
        type(call.func) is cst.Name and call.func.value == this for call in nodes_of(method.body, cst.Call))  # type: ignore[attr-defined]


def _made(bound: Dict[str, cst.BaseExpression], models: Set[str], node: cst.BaseExpression, depth: int = 0) -> bool:
    """``_run_on``'s question of one expression (``bound``: the body's plain assignments)."""
    if depth > 8:
        return False
    if type(node) is cst.Name:
        value = bound.get(node.value)
        return value is not None and _made(bound, models, value, depth + 1)
    if type(node) in (cst.Subscript, cst.Attribute):
        return _made(bound, models, node.value, depth + 1)  # type: ignore[attr-defined]
    if type(node) is not cst.Call:
        return False
    func = node.func  # type: ignore[attr-defined]
    if type(func) is cst.Name:
        return func.value in models
    if type(func) is not cst.Attribute:
        return False
    if type(func.value) is cst.Name and func.value.value in ("torch", "F"):
        args = node.args  # type: ignore[attr-defined]
        return bool(args) and _made(bound, models, args[0].value, depth + 1)
    return _made(bound, models, func.value, depth + 1) and not (type(func.value) is cst.Name and func.value.value in models)


def _run_on(function: cst.FunctionDef, models: Set[str]) -> Callable[[cst.BaseExpression], bool]:
    """Whether an expression of ``function`` is what calling one of its parameters ``models``
    returned (``model(x)``), or a tensor method, part or torch function of that (``out.sigmoid()``,
    ``out[0]``, ``torch.sigmoid(out)``), through the body's plain assignments."""
    bound: Dict[str, cst.BaseExpression] = {}
    for small in _small_statements(function.body.body):  # type: ignore[attr-defined]
        if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
            bound[small.targets[0].target.value] = small.value  # type: ignore[attr-defined]

    return partial(_made, bound, models)


def _at_call(value: Any, ctx: Ctx) -> Any:
    """A value the helper makes afresh (a loss of what it is given: no loop of the caller's
    known) is computed where the call is: in each run of its loops. One made of what the
    caller gives keeps that value's loops."""
    return replace(value, loops=ctx.loops) if value is not None and not value.loops else value


def returned_by(facts: Any, call: cst.Call, ctx: Ctx) -> Any:
    """``helper_returns``, read once per call (kept on ``facts.returned``)."""
    if id(call) not in facts.returned:
        facts.returned[id(call)] = helper_returns(facts, call, ctx)
    return facts.returned[id(call)]


def unpacked(facts: Any, event: AssignEvent) -> Optional[List[Any]]:
    """What ``a, b = ...`` gives each name when it can be told element by element: the
    expressions of a tuple written there (``out, target = model(x), y``), or what a helper
    returns as a tuple (``Value`` or None each)."""
    value = event.value
    if type(value) in (cst.Tuple, cst.List):
        elements = value.elements  # type: ignore[union-attr]
        return [e.value for e in elements] if all(type(e) is cst.Element for e in elements) else None
    if type(value) is cst.Call and not facts.forward and not event.ctx.no_grad:
        returned = returned_by(facts, value, event.ctx)
        return list(returned) if type(returned) is tuple else None
    return None


def _helper_scope(facts, func: cst.BaseExpression) -> Optional[Tuple[Scope, bool]]:
    """The walk's scope of the function ``func`` names (a module-level function of this file,
    not shadowed where the call is), or of a plain method of the scope's class called on its
    first parameter; with whether ``self`` is bound."""
    walk = facts.walk
    if type(func) is cst.Name:
        name = func.value
        module = walk.scopes[0] if walk.scopes else None
        if module is None or _binder(facts.scope.bindings, name) is not module.bindings:
            return None
        if module.bindings.names.get(name) is not None:
            return None  # an import
        definitions = [
            statement for statement in module.node.body
            if type(statement) is cst.FunctionDef and statement.name.value == name
        ]
        if len(definitions) != 1 or definitions[0].decorators or definitions[0].asynchronous:
            return None
        scope = next((s for s in walk.scopes if s.node is definitions[0]), None)
        return None if scope is None else (scope, False)
    owner, function = facts.scope.owner, facts.scope.function
    if type(func) is not cst.Attribute or owner is None or function is None:
        return None
    receiver = dotted_name(func.value)
    params = [*function.params.posonly_params, *function.params.params]
    if receiver is None or not params or receiver != params[0].name.value or function.decorators:
        return None
    methods: List[Scope] = [m for m in owner.methods if m.name == func.attr.value]
    if len(methods) != 1:
        return None
    method = methods[0].function
    if method is None or method.decorators or method.asynchronous:
        return None
    return methods[0], True


def _binder(bindings, name: str):
    """The innermost ``Bindings`` that binds ``name``."""
    scope = bindings
    while scope is not None:
        if name in scope.names:
            return scope
        scope = scope.parent
    return None


def _single_return(function: cst.FunctionDef) -> Optional[cst.BaseExpression]:
    """The value of the function's only ``return``, the last statement of its body; None when
    it returns elsewhere too, yields, or defines functions of its own."""
    body = function.body
    if type(body) is not cst.IndentedBlock or not body.body:
        return None
    if nodes_of(body, cst.Yield, cst.FunctionDef, cst.Lambda, cst.ClassDef):
        return None
    returns = nodes_of(body, cst.Return)
    last = body.body[-1]
    if len(returns) != 1 or type(last) is not cst.SimpleStatementLine or last.body[-1] is not returns[0]:
        return None
    return returns[0].value  # type: ignore[attr-defined]
