"""A local that a function binds to a checkpointing function, maybe in one branch only:

    if self.training:
        checkpoint = torch.utils.checkpoint.checkpoint
    else:
        checkpoint = checkpointByPass
    for l in self.layers:
        z = checkpoint(l, z)

(transkun). ``local_alias`` reads every binding of the name in the function's own body (not
in nested functions, lambdas or classes, whose names are their own): an assignment of a
checkpointing function (``checkpoint``, ``partial(checkpoint, ...)``) is one; any other
binding (another value, a nested ``def`` of the name, an annotated or augmented assignment of
something else, a tuple, ``for``, ``with`` or ``import`` target, a walrus) is "other", and
makes the wrapper not ``sole`` (the fix's keywords may not suit that value). ``global`` or
``nonlocal`` of the name, a parameter of that name, or two different checkpointing functions:
not read (None)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, List, Optional, Set

import libcst as cst

from torchmemlint.analysis.checkpoints import Wrapper, checkpoint_wrapper, partial_wrapper
from torchmemlint.tree import children

_NESTED = (cst.FunctionDef, cst.Lambda, cst.ClassDef)


def local_alias(function: cst.FunctionDef, name: str, qualify: Callable[[cst.BaseExpression], Optional[str]],
                models: Any) -> Optional[Wrapper]:
    if any(param.name.value == name for param in _params(function)):
        return None
    found: Set[Wrapper] = set()
    other = False
    stack: List[cst.CSTNode] = list(children(function.body))
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in _NESTED:
            if kind is not cst.Lambda and node.name.value == name:  # type: ignore[attr-defined]
                other = True  # ``def checkpoint(f, *args): return f(*args)`` in the other branch
            if kind is cst.FunctionDef:
                stack.extend(d.decorator for d in node.decorators)  # type: ignore[attr-defined]
            continue
        if kind in (cst.Global, cst.Nonlocal) and any(n.name.value == name for n in node.names):  # type: ignore[attr-defined]
            return None
        if kind is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                if type(target.target) is cst.Name and target.target.value == name:
                    wrapper = _wrapper(node.value, qualify, models)  # type: ignore[attr-defined]
                    if wrapper is None:
                        other = True
                    else:
                        found.add(wrapper)
                elif _binds(target.target, name):
                    other = True
        elif kind is cst.AnnAssign:
            if _binds(node.target, name):  # type: ignore[attr-defined]
                value = node.value  # type: ignore[attr-defined]
                wrapper = _wrapper(value, qualify, models) if value is not None and type(node.target) is cst.Name else None  # type: ignore[attr-defined]
                if wrapper is None:
                    other = True
                else:
                    found.add(wrapper)
        elif kind is cst.AugAssign and _binds(node.target, name):  # type: ignore[attr-defined]
            other = True
        elif kind in (cst.For, cst.CompFor) and _binds(node.target, name):  # type: ignore[attr-defined]
            other = True
        elif kind is cst.WithItem and node.asname is not None and _binds(node.asname.name, name):  # type: ignore[attr-defined]
            other = True
        elif kind is cst.NamedExpr and _binds(node.target, name):  # type: ignore[attr-defined]
            other = True
        elif kind in (cst.Import, cst.ImportFrom) and _imports(node, name):
            other = True
        elif kind is cst.ExceptHandler and node.name is not None and _binds(node.name.name, name):  # type: ignore[attr-defined]
            other = True
        stack.extend(children(node))
    if len(found) != 1:
        return None
    wrapper = next(iter(found))
    return replace(wrapper, sole=False) if other else wrapper


def _wrapper(value: cst.BaseExpression, qualify: Callable[[cst.BaseExpression], Optional[str]], models: Any) -> Optional[Wrapper]:
    if type(value) in (cst.Name, cst.Attribute):
        return checkpoint_wrapper(value, qualify, models)
    return partial_wrapper(value, qualify, models)


def _binds(target: cst.CSTNode, name: str) -> bool:
    """``target`` (of an assignment, a loop, ``with ... as``) binds ``name``."""
    if type(target) is cst.Name:
        return target.value == name
    if type(target) in (cst.Tuple, cst.List):
        return any(_binds(element.value, name) for element in target.elements)  # type: ignore[attr-defined]
    if type(target) is cst.StarredElement:
        return _binds(target.value, name)
    return False


def _imports(node: cst.CSTNode, name: str) -> bool:
    names = node.names  # type: ignore[attr-defined]
    if type(names) is cst.ImportStar:
        return False
    for alias in names:
        bound = alias.asname.name if alias.asname is not None else alias.name
        while type(bound) is cst.Attribute:
            bound = bound.value
        if type(bound) is cst.Name and bound.value == name:
            return True
    return False


def _params(function: cst.FunctionDef) -> List[cst.Param]:
    params = function.params
    star = [params.star_arg] if type(params.star_arg) is cst.Param else []
    kwargs = [params.star_kwarg] if params.star_kwarg is not None else []
    return [*params.posonly_params, *params.params, *params.kwonly_params, *star, *kwargs]
