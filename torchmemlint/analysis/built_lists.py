"""The calls of module instances a comprehension builds into a module list (``forward_calls.py``).

``self.layer = nn.ModuleList([BertLayer(config, i) for i in range(n)])`` (or ``nn.Sequential(*[...])``,
run by the file element by element, never whole): every element of
``self.layer`` is an instance of the class. A list built empty and filled by ``append``s
(``self.layers = nn.ModuleList()``, ``self.layers.append(LFM2Block(config))``, maybe of other
classes too) holds some: each call of an element may be one of theirs. When every other read of the attribute in the file
is ``len(self.layer)``, a loop over it (``for m in self.layer``, ``for i, m in
enumerate(self.layer)``), an element bound to a local (``m = self.layer[i]``) or called
(``self.layer[i](x)``) or a member of one read (``self.layer[i].attention``), and every read of such a local is a use below, these are all the calls
the file makes of the instances:
- ``m(...)``;
- a checkpoint of it (``torch.utils.checkpoint.checkpoint(m, x, mask)``, ``m.__call__`` or
  ``m.forward``, transformers' ``self._gradient_checkpointing_func(m.__call__, x, mask)``),
  which calls it with the arguments after the function;
- a checkpoint of a closure a factory of the same function makes of it (transformers'
  ``def create_custom_forward(module): def custom_forward(*inputs): return module(*inputs,
  past_key_value, output_attentions)``), which calls it with the checkpoint's arguments in
  place of ``*inputs`` and the closure's own after them (names of the function around).
Each call is given as its arguments with the function whose names they are. Anything else:
not known (None).
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.analysis.checkpoints import _CHECKPOINT_KEYWORDS, CALL, HF_CHECKPOINT_ATTRIBUTE, checkpoint_wrapper
from torchmemlint.analysis.looped_instances import MODULE_LISTS
from torchmemlint.tree import walk

Calls = List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]


def built_list(assign: cst.Assign, name: str) -> Optional[str]:
    """The attribute ``assign`` binds to a module list whose elements a comprehension makes by
    calling the class ``name`` (``self.layers = nn.ModuleList([Block(c) for _ in range(n)])``)."""
    value = assign.value
    if len(assign.targets) != 1 or type(assign.targets[0].target) is not cst.Attribute or type(value) is not cst.Call:
        return None
    func = value.func
    short = func.value if type(func) is cst.Name else (func.attr.value if type(func) is cst.Attribute else None)
    if short not in MODULE_LISTS or len(value.args) != 1 or value.args[0].keyword is not None:
        return None
    # (``nn.Sequential(*[...])``: its elements too; where the Sequential itself is called, it
    # calls them, a read of the attribute ``element_calls`` does not know: not known then)
    made = value.args[0].value
    if (value.args[0].star and not (short == "Sequential" and value.args[0].star == "*")) or type(made) not in (cst.ListComp, cst.GeneratorExp):
        return None
    element = made.elt  # type: ignore[attr-defined]
    if type(element) is not cst.Call or type(element.func) is not cst.Name or element.func.value != name:
        return None
    return assign.targets[0].target.attr.value  # type: ignore[attr-defined]


def appended_list(call: cst.Call, name: str) -> Optional[str]:
    """The attribute ``call`` appends an instance of the class ``name`` to
    (``self.layers.append(LFM2Block(config))``, its only argument)."""
    func = call.func
    if type(func) is not cst.Attribute or func.attr.value != "append" or type(func.value) is not cst.Attribute or len(call.args) != 1:
        return None
    made = call.args[0].value
    if call.args[0].keyword is not None or call.args[0].star or type(made) is not cst.Call or type(made.func) is not cst.Name or made.func.value != name:
        return None
    return func.value.attr.value


def list_building(analysis: Any, nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]], attributes: Set[str]) -> Optional[Set[int]]:
    """The statements that build the module lists ``attributes`` filled by ``append`` (``self.layers
    = nn.ModuleList()``, then each ``self.layers.append(Block(c))``, of whatever class): their ids,
    or None when such a list is also bound to something else or grown otherwise."""
    index = analysis.index
    found: Set[int] = set()
    for node, _ in nodes:
        if type(node) is not cst.Attribute or node.attr.value not in attributes:
            continue
        parent = index.above(node)
        if type(parent) is cst.AssignTarget:
            assign = index.above(parent)
            value = assign.value if type(assign) is cst.Assign else None
            short = value.func.value if type(value) is cst.Call and type(value.func) is cst.Name else (
                value.func.attr.value if type(value) is cst.Call and type(value.func) is cst.Attribute else None)
            if short not in MODULE_LISTS or value.args:  # type: ignore[union-attr]
                return None
            found.add(id(assign))
        elif type(parent) is cst.Attribute and parent.value is node and parent.attr.value in ("append", "extend", "insert"):
            call = index.above(parent)
            if type(call) is not cst.Call or parent.attr.value != "append" or len(call.args) != 1 or type(call.args[0].value) is not cst.Call:
                return None  # (``extend(blocks)``: modules it does not show)
            found.add(id(call))
    return found


def element_calls(analysis: Any, nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]], built: Set[str], builds: Set[int]) -> Optional[Calls]:
    """The calls of the elements of the attributes ``built`` (``nodes``: the file's nodes outside
    the class, each with its function; ``builds``: the ids of the assignments that build them);
    None when an attribute or a local holding an element is read otherwise."""
    index = analysis.index
    calls: Calls = []
    for node, where in nodes:
        if type(node) is not cst.Attribute or node.attr.value not in built:
            continue
        parent = index.above(node)
        if type(parent) is cst.AssignTarget:
            if id(index.above(parent)) not in builds:
                return None  # assigned otherwise too
            continue
        if type(parent) is cst.Attribute and parent.value is node and id(index.above(parent)) in builds:
            continue  # ``self.layers.append(Block(c))``: built
        if type(parent) is cst.Arg and type(call := index.above(parent)) is cst.Call and type(call.func) is cst.Name:
            if call.func.value == "len":
                continue
            loop = index.above(call)
            if call.func.value == "enumerate" and type(loop) is cst.For and loop.iter is call and type(loop.target) is cst.Tuple and len(loop.target.elements) == 2:
                found = _local_calls(analysis, where, loop.target.elements[1].value)
            else:
                return None
        elif type(parent) is cst.For and parent.iter is node:
            found = _local_calls(analysis, where, parent.target)
        elif type(parent) is cst.Subscript and parent.value is node:
            above = index.above(parent)
            if type(above) is cst.Call and above.func is parent:
                found = [(above.args, where)]
            elif type(above) is cst.Assign and above.value is parent and len(above.targets) == 1:
                found = _local_calls(analysis, where, above.targets[0].target)
            elif type(above) is cst.Attribute and above.value is parent and above.attr.value not in ("forward", "__call__"):
                continue  # a member of an element (``self.encoder.layer[i].attention.prune_heads(h)``)
            else:
                return None
        else:
            return None
        if found is None:
            return None
        calls.extend(found)
    return calls if calls else None  # (a list the file builds and never runs: run elsewhere, with what it does not show)


def _local_calls(analysis: Any, function: Optional[cst.FunctionDef], target: cst.BaseExpression) -> Optional[Calls]:
    """The calls made of the module ``function`` binds once to the name ``target``."""
    if function is None or type(target) is not cst.Name:
        return None
    name = target.value
    index = analysis.index
    calls: Calls = []
    for node in walk(function.body):
        if type(node) is not cst.Name or node.value != name or node is target:
            continue
        parent = index.above(node)
        if type(parent) is cst.Call and parent.func is node:
            calls.append((parent.args, function))
            continue
        if type(parent) is cst.Attribute and parent.value is node and parent.attr.value in ("__call__", "forward"):
            node, parent = parent, index.above(parent)
        if type(parent) is cst.Arg and parent.keyword is None and not parent.star and _type_test(index.above(parent), parent):
            continue  # ``isinstance(layer, LFM2ConvBlock)``: reads its class only
        found = _checkpointed(analysis, function, node, parent)
        if found is None:
            return None  # rebound, or read otherwise (``m.training``, passed on)
        calls.append((found, function))
    return calls


def _type_test(call: Optional[cst.CSTNode], arg: cst.Arg) -> bool:
    """``call`` is ``isinstance(<arg>, ...)`` / ``type(<arg>)``."""
    return type(call) is cst.Call and type(call.func) is cst.Name and call.args[0] is arg and (
        (call.func.value == "isinstance" and len(call.args) == 2) or (call.func.value == "type" and len(call.args) == 1)
    )


def _checkpointed(analysis: Any, function: cst.FunctionDef, node: cst.CSTNode, parent: Optional[cst.CSTNode]) -> Optional[Sequence[cst.Arg]]:
    """The arguments the module ``node`` is called with when ``parent`` (the ``Arg`` holding it)
    is the function a checkpoint call runs, directly or through a closure factory of ``function``."""
    index = analysis.index
    if type(parent) is not cst.Arg or parent.keyword is not None or parent.star:
        return None
    call = index.above(parent)
    closure: Optional[cst.Call] = None
    if type(call) is cst.Call and call.args[0] is parent and type(call.func) is cst.Name and len(call.args) == 1:
        closure = call  # ``create_custom_forward(m)``
        parent = index.above(closure)
        if type(parent) is not cst.Arg or parent.keyword is not None or parent.star:
            return None
        call = index.above(parent)
    if type(call) is not cst.Call or not call.args or call.args[0] is not parent or not _checkpoints(analysis, call):
        return None
    given = [arg for arg in call.args[1:] if arg.keyword is None or arg.keyword.value not in _CHECKPOINT_KEYWORDS]
    if any(arg.star for arg in given):
        return None
    if closure is None:
        return given
    return _through_closure(function, closure.func.value, [arg for arg in given if arg.keyword is None])  # type: ignore[attr-defined]


def _checkpoints(analysis: Any, call: cst.Call) -> bool:
    func = call.func
    if type(func) is cst.Attribute and func.attr.value == HF_CHECKPOINT_ATTRIBUTE:
        return True
    wrapper = checkpoint_wrapper(func, analysis.bindings.qualify, analysis.callables)
    return wrapper is not None and wrapper.form == CALL


def _through_closure(function: cst.FunctionDef, factory_name: str, given: List[cst.Arg]) -> Optional[Sequence[cst.Arg]]:
    """``def factory(module): def inner(*inputs): return module(*inputs, a, b); return inner``,
    defined in ``function``: the arguments ``module`` is called with when the closure is run
    with ``given``: those, then ``a, b`` (names of ``function``: neither ``factory`` nor
    ``inner`` binds anything else)."""
    factories = [n for n in walk(function.body) if type(n) is cst.FunctionDef and n.name.value == factory_name]
    if len(factories) != 1:
        return None
    factory = factories[0]
    params = factory.params
    if len(params.params) != 1 or params.star_arg is not cst.MaybeSentinel.DEFAULT or params.kwonly_params or params.star_kwarg or params.posonly_params:
        return None
    module = params.params[0].name.value
    body = factory.body.body
    if len(body) != 2 or type(body[0]) is not cst.FunctionDef or type(body[1]) is not cst.SimpleStatementLine:
        return None
    inner, returned = body[0], body[1].body[0]
    if type(returned) is not cst.Return or type(returned.value) is not cst.Name or returned.value.value != inner.name.value:
        return None
    star = inner.params.star_arg
    if type(star) is not cst.Param or inner.params.params or inner.params.posonly_params or inner.params.kwonly_params:
        return None
    statements = inner.body.body
    small = statements[0].body[0] if len(statements) == 1 and type(statements[0]) is cst.SimpleStatementLine else None
    if type(small) is not cst.Return or type(small.value) is not cst.Call:
        return None
    run = small.value
    if type(run.func) is not cst.Name or run.func.value != module or not run.args:
        return None
    first, rest = run.args[0], run.args[1:]
    if first.star != "*" or type(first.value) is not cst.Name or first.value.value != star.name.value:
        return None
    bound = {module, star.name.value, inner.name.value}
    if type(inner.params.star_kwarg) is cst.Param:
        bound.add(inner.params.star_kwarg.name.value)
    for arg in rest:
        if arg.star or any(type(n) is cst.Name and n.value in bound for n in (arg.value, *walk(arg.value))):
            return None
    return [*given, *rest]
