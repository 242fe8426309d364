"""A parameter every caller passes an activation module for: ``def create_mlp(sizes, n,
activation)`` placing ``activation`` after each Linear (``layers.extend([fc_layer(n, size),
activation])`` ... ``nn.Sequential(*layers)``), and every call of it in the project, in this file
or in the files that import it, passing a layer: built there (``nn.ELU()``), returned by a
factory of the project (``nonlinearity(cfg)``, every ``return`` of which builds a torch layer),
a local bound once to one (``activation = nonlinearity(cfg)``) or the caller's own such
parameter (``ConvEncoderImpl(..., activation)``), followed up to ``_DEPTH`` callers. Each layer
the parameter may hold then runs at the element: asked by the activation sites
(``analysis/activations.py``), which judge it there."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import Layer
from torchmemlint.analysis.factories import parameter, single_local_value
from torchmemlint.analysis.placing import switch_of, switched
from torchmemlint.analysis.syntax import argument
from torchmemlint.tree import scan

_DEPTH = 3
_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
# (layer, whether this caller leaves it out of place: True, False or None when not known)
Passed = List[Tuple[Layer, Optional[bool]]]


def parameter_layers(file: Any, elements: Any) -> List[Tuple[cst.Name, cst.FunctionDef, cst.Name, Passed]]:
    """Each Sequential element of ``file`` (``elements``: ``FactoryPlacing.elements()``) that is
    a parameter of the top-level function it is in, with the function, the parameter and the
    layers every caller passes for it (none found: not listed)."""
    found = []
    index = file.index
    for node_id in elements:
        here = index.position.get(node_id)
        node = index.order[here] if here is not None else None
        if type(node) is not cst.Name or file.links is None:
            continue
        method = index.function_of(here)
        function = index.order[method] if method >= 0 else None
        if not any(function is statement for statement in file.module.body):
            continue  # (a top-level function: its callers are found by name)
        param = parameter(function, node.value)  # type: ignore[arg-type]
        if param is None or param.default is not None:
            continue
        passed = _callers_pass(file, function, param, 0)  # type: ignore[arg-type]
        if passed:
            found.append((node, function, param.name, passed))
    return found


def _callers_pass(file: Any, function: cst.FunctionDef, param: cst.Param, depth: int, skip: int = 0,
                  name: Optional[str] = None) -> Optional[Passed]:
    """The layers every call of ``function`` (of ``file``; ``name``: how it is called, a class's
    name for its ``__init__``, ``skip`` its ``self``) passes for ``param``; None when a call
    passes something else, or the function may be called where it is not seen."""
    name = name or function.name.value
    params = [*function.params.posonly_params, *function.params.params][skip:]
    if depth > _DEPTH or function.params.star_arg is not cst.MaybeSentinel.DEFAULT or file.links is None:
        return None
    position = next((i for i, p in enumerate(params) if p is param), None)
    found: Passed = []
    analyses = [file]
    for other in file.links.index.importers(file.links.path, name):
        kept = file.links.analysis_of(other.path, other.digest) if other.error is None else None
        if kept is None:
            return None
        analyses.append(kept)
    for analysis in analyses:
        if analysis is not file and (name in analysis.callables.functions or name in analysis.callables.classes):
            return None  # (its own function of that name)
        for here in analysis.index.positions(cst.Name):
            node = analysis.index.order[here]
            if node.value != name:  # type: ignore[attr-defined]
                continue
            above = analysis.index.order[analysis.index.parent[here]] if here is not None and analysis.index.parent[here] >= 0 else None
            if type(above) is cst.Call and above.func is node:
                if any(a.star for a in above.args):
                    return None
                arg = argument(above, position, param.name.value)
                method = analysis.index.function_of(here)
                inner = _layers(analysis, arg.value, analysis.index.order[method] if method >= 0 else None, depth) \
                    if arg is not None else None
                if inner is None:
                    return None
                found.extend(inner)
            elif type(above) not in (cst.ImportAlias, cst.FunctionDef, cst.ClassDef) and not (
                type(above) is cst.Attribute and above.attr is node
            ):
                return None  # (the function handed on: called where it is not seen)
    return found or None


def _layers(file: Any, value: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[Passed]:
    """The layers ``value`` (an argument in ``function`` of ``file``) may be: see the module."""
    if type(value) is cst.Name and function is not None:
        param = parameter(function, value.value)
        if param is not None:  # the caller's own parameter: what its callers pass
            owner = file.index.scope[file.index.find(function)] if file.index.find(function) is not None else -1
            if owner >= 0 and type(file.index.order[owner]) is cst.ClassDef and function.name.value == "__init__":
                return _callers_pass(file, function, param, depth + 1, 1, file.index.order[owner].name.value)
            if any(function is statement for statement in file.module.body):
                return _callers_pass(file, function, param, depth + 1)
            return None
        bound = single_local_value(function, value.value)
        return _layers(file, bound, None, depth) if bound is not None else None
    if type(value) is not cst.Call:
        return None
    layer = file.resolver.layer(value, function)
    if layer is not None:
        return [(layer, layer.inplace())] if layer.kind is not None else None
    return _factory_layers(file, value)


def _factory_layers(file: Any, call: cst.Call) -> Optional[Passed]:
    """The layers a factory of the project returns (``nonlinearity(cfg)``), every ``return``
    of it building a torch layer, with what this call leaves their ``inplace`` switch at."""
    func = call.func
    if type(func) is not cst.Name:
        return None
    found = file.callables.functions.get(func.value)
    other, factory = (file, found) if found is not None else (
        file.links.definition(func.value, "function", package=True) or (None, None) if file.links is not None else (None, None)
    )
    if factory is None:
        return None
    layers: Passed = []
    for ret in scan(factory.body, (cst.Return,), _NESTED):
        made = ret.value  # type: ignore[attr-defined]
        qualified = other.resolver.qualify(made.func) if type(made) is cst.Call else None
        if qualified is None or not qualified.startswith("torch.nn."):
            return None
        layer = Layer(qualified, made)
        switch = switch_of(layer, factory) if layer.kind is not None and layer.inplace() is None else None
        layers.append((layer, switched(factory, switch, call)[1] if switch is not None else layer.inplace()))
    return layers or None
