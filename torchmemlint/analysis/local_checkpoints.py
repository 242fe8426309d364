"""A local that a function binds to a checkpointing function, maybe in one branch only:

    if self.training:
        checkpoint = torch.utils.checkpoint.checkpoint
    else:
        checkpoint = checkpointByPass
    for l in self.layers:
        z = checkpoint(l, z)

(transkun). ``local_alias`` reads every binding of the name in the function's own body as
``factories._local_values`` finds them (not in nested functions, lambdas or classes, whose
names are their own): an assignment of a checkpointing function (``checkpoint``,
``partial(checkpoint, ...)``) is one; any other binding (another value, a nested ``def`` of the
name, an augmented assignment, a tuple, ``for``, ``with`` or ``import`` target, a walrus) is "other", and
makes the wrapper not ``sole`` (the fix's keywords may not suit that value). ``global`` or
``nonlocal`` of the name, a parameter of that name, or two different checkpointing functions:
not read (None)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable, Optional, Set

import libcst as cst

from torchmemlint.analysis.checkpoints import Wrapper, checkpoint_wrapper, partial_wrapper
from torchmemlint.analysis.factories import _local_values, _param, assigned_values
from torchmemlint.tree import scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
_BOUND_BY_NODE = (cst.For, cst.AsName, cst.AugAssign, cst.NamedExpr)  # (``factories._local_values`` gives the node)


def local_alias(function: cst.FunctionDef, name: str, qualify: Callable[[cst.BaseExpression], Optional[str]],
                models: Any) -> Optional[Wrapper]:
    if _param(function, name) is not None or any(
        any(n.name.value == name for n in node.names)  # type: ignore[attr-defined]
        for node in scan(function.body, (cst.Global, cst.Nonlocal), _NESTED, strict=True)
    ):
        return None
    values = _local_values(function, name)  # assignments; a loop, ``with``, augmented or walrus binding: its node
    plain = [value for value in values if type(value) not in _BOUND_BY_NODE]
    found: Set[Wrapper] = set()
    other = len(plain) < len(values) or len(assigned_values(function, name)) > len(plain)  # (or a tuple target)
    for value in plain:
        wrapper = checkpoint_wrapper(value, qualify, models) if type(value) in (cst.Name, cst.Attribute) else (
            partial_wrapper(value, qualify, models)
        )
        if wrapper is None:
            other = True
        else:
            found.add(wrapper)
    if len(found) != 1:
        return None
    wrapper = next(iter(found))
    return replace(wrapper, sole=False) if other or _defined(function, name) else wrapper


def _defined(function: cst.FunctionDef, name: str) -> bool:
    """A nested ``def``/``class`` of ``name`` (``def checkpoint(f, *args): return f(*args)`` in the
    other branch), or a plain ``import name``, binds it too."""
    if any(node.name.value == name for node in scan(function.body, (cst.FunctionDef, cst.ClassDef), (cst.Lambda,), strict=True)):  # type: ignore[attr-defined]
        return True
    for node in scan(function.body, (cst.Import,), _NESTED, strict=True):
        for alias in node.names:  # type: ignore[attr-defined]
            head = alias.name
            while type(head) is cst.Attribute:
                head = head.value
            if alias.asname is None and type(head) is cst.Name and head.value == name:
                return True
    return False
