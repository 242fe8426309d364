"""``self.f(x)`` in a method, and a call of a ``functools.partial``: what runs (``analysis/values.py``).

``self.f(x)`` runs a method of the class (or one a base class of the file defines, else one a
base class of another project file defines, run there: ``helper_runs.foreign_method``) as a
helper; an attribute ``__init__`` gives layers (one, or a Sequential's; or a base class of the
file's ``__init__``, when the class assigns none) runs those layers; an
attribute ``__init__`` gives a function runs that function: ``functools.partial(F.softmax,
dim=-1)`` (the partial's preset arguments before the call's), ``torch.sigmoid``, a same-file
function or a partial of one, or either of two by a constructor flag (Mega's
``partial(F.softmax, dim=-1) if not laplacian_attn_fn else LaplacianAttnFn()``: a ``join`` of
both calls, an arm that is not a function a module of unknown kind, ``info["held"]`` the
method that chose, for ``arm_off``). Any other attribute called on a tensor is a module of
unknown kind, which keeps its input's axes (conservatively). A local ``partial(f, ...)`` called
later is ``f`` called with the preset arguments too (``partial_call``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.axes import joined, tensorish
from torchmemlint.analysis.helper_runs import BASE_DEPTH, file_bases, foreign_method, run_helper
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import nodes_of

PARTIAL = "functools.partial"


def attribute_call(graph: Any, name: str, node: cst.Call, positional: List[Any], keywords: Dict[str, Any], tensorish: bool) -> Optional[Any]:
    """The value of ``self.<name>(...)`` in ``graph`` (``FunctionValues``; ``tensorish``: one
    positional argument, a tensor); None when nothing here says (an ordinary call)."""
    file = graph.file
    method = file.method(graph.classdef, name, inherited=True)
    if method is not None:
        return graph._helper(method, node, positional, keywords, bound_self=True)
    assignment = file.analysis.class_model(graph.classdef).single_assignment(name) if graph.classdef is not None else None
    if assignment is not None and _holds_function(file, assignment.value):
        return _applied(graph, assignment.value, assignment.method, node, positional, keywords, name, tensorish)
    parts = file.attribute_parts(graph.classdef, name)
    if parts is None and graph.classdef is not None:
        parts = _inherited_parts(file, graph.classdef, name, 0)
    if parts is not None and len(positional) == 1 and (not keywords or _flags_only(file, parts, keywords)):
        if len(parts) == 1 and not (getattr(getattr(parts[0], "layer", parts[0]), "qualified", None) or "").startswith("torch.") and (
            held := _held_module_call(graph, name, node, positional, keywords)
        ) is not None:
            return held  # ``self.attention_matmul([q, k])``: the forward of the file's class, computed from its input
        return graph._layers(parts, positional[0], node, name)
    if graph.classdef is not None and (positional or keywords) and (held := _held_module_call(graph, name, node, positional, keywords)) is not None:
        return held  # ``self.make_causal(attn, q, k)``: the forward of the file's class it holds
    if graph.classdef is not None and (positional or keywords) and (found := foreign_method(file, graph.classdef, name)) is not None:
        return graph._helper(found[2], node, positional, keywords, bound_self=True, foreign=found[:2])  # a base class of another file's
    if tensorish and not keywords:  # a submodule the file does not show
        return graph._same("module", positional[0], node, [], assumed=True, attribute=name)
    return None


def _held_module_call(graph: Any, name: str, node: cst.Call, positional: List[Any], keywords: Dict[str, Any]) -> Optional[Any]:
    """``self.<name>(attn, q, k)`` where ``__init__`` assigns ``self.<name>`` an instance of a
    class of this file (or, in the arms of an ``if``/``else``, one of several: ``Causal(...)`` or
    ``NonCausal()``): each class's ``forward`` run with the arguments, its own ``self``; a
    ``join`` of them. None when any assignment is something else, or a forward runs parts of
    its own module (``_runs_own_parts``)."""
    file = graph.file
    model = file.analysis.class_model(graph.classdef)
    found = model.assignments.get(name, [])
    if not found or len(found) > 2 or (len(found) > 1 and not model.exclusive_assignments(name)):
        return None
    held = []
    for assignment in found:  # (all known before any is run: a run adds to the graph)
        value = assignment.value
        made = value.func if type(value) is cst.Call else None
        classdef = file._classes.get(made.value) if type(made) is cst.Name and file.bindings.qualify(made) is None else None
        home = file
        if classdef is None and (defined := held_class(file, made)) is not None:
            home, classdef = defined  # ``smodules.TfMatmulModule(...)``: a class of another file of the project
        forward = home.method(classdef, "forward", inherited=True) if classdef is not None else None
        if forward is None or classdef is graph.classdef or _runs_own_parts(forward):
            return None
        held.append((home, classdef, forward, _receiver(graph, constructor_flags(home, classdef, value), node)))
    first = bool(positional) and tensorish(positional[0])
    runs = [
        run_helper(graph, forward, node, positional, keywords, True, first, owner=classdef, receiver=receiver,
                   foreign=None if home is file else (home, classdef))
        for home, classdef, forward, receiver in held
    ]
    for run in runs:
        if run.node is node:  # (what the call made, not a constant the forward returns)
            run.info["held"] = name  # the layer analyses read the call itself (``producers.Producers.of``)
    if len(runs) == 1:
        return runs[0]
    axes, rank = joined(runs)
    return graph._new("join", runs, node, axes, rank, {"held": name})


def listed_layer(file: Any, classdef: Optional[cst.ClassDef], func: cst.BaseExpression, self_name: Optional[str]) -> Optional[Any]:
    """The torch layer every element of ``self.<name>`` is, for ``self.<name>[i](x)``, where
    ``__init__`` builds it as ``nn.ModuleList([nn.Linear(...) for _ in range(n)])`` or a list of
    calls of one torch layer class: that layer (a ``resolve.Layer``); None otherwise."""
    if type(func) is not cst.Subscript or type(func.value) is not cst.Attribute or classdef is None:
        return None
    owner = func.value.value
    if type(owner) is not cst.Name or owner.value != self_name:
        return None
    parts = file.attribute_parts(classdef, func.value.attr.value)
    layer = getattr(parts[0], "layer", None) if parts and len(parts) == 1 else None
    call = getattr(layer, "call", None)
    if layer is None or layer.qualified != "torch.nn.ModuleList" or type(call) is not cst.Call or len(call.args) != 1:
        return None
    listed = call.args[0].value
    elements = [listed.elt] if type(listed) is cst.ListComp else [e.value for e in listed.elements] if type(listed) is cst.List else []
    layers = [file.resolver.layer(e) if type(e) is cst.Call else None for e in elements]
    kinds = {getattr(found, "qualified", None) for found in layers}
    if not layers or None in layers or len(kinds) != 1 or not str(kinds.pop()).startswith("torch.nn."):
        return None
    return layers[0]


def held_class(file: Any, made: Any) -> Optional[Tuple[Any, cst.ClassDef]]:
    """The class another file of the project defines that ``made`` (the callee of a constructor
    call) names: ``(that file's FileValues, the class)``; None when the project index does not know it."""
    links = getattr(file.analysis, "links", None)
    dotted = dotted_name(made) if type(made) in (cst.Name, cst.Attribute) else None
    if links is None or dotted is None or (defined := links.definition(dotted, "class", package=True)) is None:
        return None
    return defined[0].value_graphs, defined[1]


def constructor_flags(file: Any, classdef: cst.ClassDef, call: cst.Call) -> Dict[str, cst.BaseExpression]:
    """``self.<attr>`` that ``__init__`` sets once from a parameter, where ``call`` (which builds
    ``classdef``) passes a literal for it or leaves its literal default (``True``/``False``, a
    number, a tuple of numbers): ``TfMatmulModule(transpose=True, normalize=False)`` gives
    ``{"transpose": True, "normalize": False}``, ``PermuteModule(perm=(0, 2, 1))`` ``{"perm": (0, 2, 1)}``
    (as the expressions written)."""
    init = file.method(classdef, "__init__")
    if init is None or any(arg.star for arg in call.args):
        return {}
    params = [*init.params.posonly_params, *init.params.params][1:]
    given: Dict[str, cst.BaseExpression] = {p.name.value: arg.value for p, arg in zip(params, (a for a in call.args if a.keyword is None))}
    given.update({arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None})
    for param in (*params, *init.params.kwonly_params):
        if param.name.value not in given and param.default is not None:
            given[param.name.value] = param.default
    literals = {name: value for name, value in given.items() if _literal(value)}
    flags = {}
    for attribute, assignments in file.analysis.class_model(classdef).assignments.items():
        value = assignments[0].value
        if len(assignments) == 1 and assignments[0].method is init and type(value) is cst.Name and value.value in literals:
            flags[attribute] = literals[value.value]
    return flags


def _literal(value: cst.BaseExpression) -> bool:
    """``True``, ``False``, a number (maybe negative), a tuple or list of them."""
    if type(value) is cst.Name:
        return value.value in ("True", "False")
    if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus:
        value = value.expression
    if type(value) in (cst.Integer, cst.Float):
        return True
    return type(value) in (cst.Tuple, cst.List) and bool(value.elements) and all(
        type(element) is cst.Element and _literal(element.value) for element in value.elements
    )


def _receiver(graph: Any, flags: Dict[str, cst.BaseExpression], node: cst.Call) -> Optional[Any]:
    """The ``self`` a held module's forward runs with, knowing its constructor's literals (None: none known)."""
    return graph._new("argument", node=node, info={"name": "self", "flags": flags}) if flags else None


def _runs_own_parts(forward: cst.FunctionDef) -> bool:
    """``forward`` calls something of its own module (``self.dropout(input)``,
    ``self.propagate(...)``, ``self.lin.weight.t()``): a layer with parts, which the layer
    analyses read as one call; only a forward computed from its arguments and its own tensors
    (a mask buffer, ``torch.matmul(a, b)``) is run in the caller's graph."""
    params = forward.params.params
    this = params[0].name.value if params else None
    for call in nodes_of(forward, cst.Call):
        func = call.func  # type: ignore[attr-defined]
        while type(func) is cst.Attribute:
            func = func.value
        if type(func) is cst.Name and func.value == this:
            return True
    return False


def _inherited_parts(file: Any, classdef: cst.ClassDef, name: str, depth: int) -> Optional[List[Any]]:
    """The layers a base class of this file assigns to ``self.<name>`` when the class assigns
    none itself (``class Masked(MultiHeadAttention)`` reading the parent's ``self.key_weights``)."""
    if depth >= BASE_DEPTH or file.analysis.class_model(classdef).assignments.get(name):
        return None
    for parent in file_bases(file, classdef):
        parts = file.attribute_parts(parent, name)
        if parts is None:
            parts = _inherited_parts(file, parent, name, depth + 1)
        if parts is not None:
            return parts
    return None


def _flags_only(file: Any, parts: List[Any], keywords: Dict[str, Any]) -> bool:
    """``self.dropout(w, force_mc=mc)`` where ``self.dropout`` holds one instance of a class of
    this file whose ``forward`` takes each keyword as a parameter with a literal default other
    than None (``force_mc: bool = False``): flags, never a second tensor (a mask defaults to None)."""
    node = parts[0].node if len(parts) == 1 else None
    classdef = file._classes.get(node.func.value) if type(node) is cst.Call and type(node.func) is cst.Name else None
    forward = file.method(classdef, "forward") if classdef is not None else None
    if forward is None:
        return False
    defaults = {p.name.value: p.default for p in (*forward.params.params, *forward.params.kwonly_params)}
    return all(type(defaults.get(keyword)) in _FLAG_DEFAULTS or _is_bool(defaults.get(keyword)) for keyword in keywords)


_FLAG_DEFAULTS = (cst.Integer, cst.Float, cst.SimpleString)


def _is_bool(node: Any) -> bool:
    return type(node) is cst.Name and node.value in ("True", "False")


def partial_call(graph: Any, callee: Any, node: cst.Call, positional: List[Any], keywords: Dict[str, Any]) -> Optional[Any]:
    """``p(x)`` where ``callee`` is the value of ``p = partial(f, *preset, **named)``: ``f``
    called with the preset arguments first; None when ``callee`` is no such value."""
    made = callee.node
    if callee.op != "call" or callee.info.get("qualified") != PARTIAL or type(made) is not cst.Call or any(a.star for a in made.args):
        return None
    count = sum(1 for a in made.args if a.keyword is None)
    if count == 0 or made.args[0].keyword is not None or len(callee.inputs) != len(made.args):
        return None
    preset = list(callee.inputs[1:count])
    named = {a.keyword.value: value for a, value in zip(made.args[count:], callee.inputs[count:]) if a.keyword is not None}
    return graph._call_value(callee.inputs[0], node, [*preset, *positional], {**named, **keywords})


def arm_off(graph: Any, join: Any, arm: int) -> bool:
    """Does arm ``arm`` of a ``join`` that ``attribute_call`` made (the attribute holds either of
    two functions by a constructor flag) run only behind a flag off by default (``flags.py``)?"""
    from torchmemlint.analysis.flags import off_by_default  # flags reads the factories, which read the value graph's users

    held = join.info.get("held")
    if held is None or join.info.get("test") is None:
        return False
    return off_by_default(graph.file.of(held), join.info["test"], join.info["branches"][arm])


def _holds_function(file: Any, value: cst.BaseExpression) -> bool:
    """Is ``value`` (or an arm of it, an ``if`` of two) a function: a partial, a torch
    function, a same-file function?"""
    if type(value) is cst.IfExp:
        return _holds_function(file, value.body) or _holds_function(file, value.orelse)
    if type(value) is cst.Call:
        return file.bindings.qualify(value.func) == PARTIAL and bool(value.args) and value.args[0].keyword is None
    if type(value) is cst.Name and file.function_named(value.value) is not None:
        return True
    qualified = file.bindings.qualify(value) if type(value) in (cst.Name, cst.Attribute) else None
    return qualified is not None and qualified.startswith("torch.") and qualified.rsplit(".", 1)[-1][:1].islower()


def _applied(graph: Any, value: cst.BaseExpression, method: cst.FunctionDef, node: cst.Call,
             positional: List[Any], keywords: Dict[str, Any], name: str, tensorish: bool) -> Any:
    """``value`` (an expression of ``method``, ``__init__``) called at ``node`` with these arguments."""
    if type(value) is cst.IfExp:
        arms = [_applied(graph, arm, method, node, positional, keywords, name, tensorish) for arm in (value.body, value.orelse)]
        axes, rank = joined(arms)
        return graph._new("join", arms, node, axes, rank, {"test": value.test, "branches": (True, False), "held": method})
    if _holds_function(graph.file, value):  # its names read at module level: ``__init__``'s locals are not known here
        return graph._call_value(graph.expression(value, {}), node, positional, keywords)
    if tensorish and not keywords:  # ``LaplacianAttnFn()``: a module of unknown kind
        return graph._same("module", positional[0], node, [], assumed=True, attribute=name)
    return graph._new("call", [*positional, *keywords.values()], node, info={"attribute": name})
