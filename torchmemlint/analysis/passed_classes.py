"""An activation class handed to a builder of another project file: ``build_mlp(obs_dim, n,
hidden, activation=nn.ELU)`` where ``networks/mlp.py`` defines ``def build_mlp(...,
activation=nn.Tanh)`` and builds ``layers.append(activation())`` into the ``nn.Sequential`` it
returns. The class runs where the builder places each instance it makes of it: the activation
sites (``analysis/activations.py``) report it at the argument, where the caller chose it, and
judge it at those places: the ``nn.Sequential`` elements it is
(``FactoryPlacing.built_elements``). A builder of the caller's own file is read there instead
(``factories``: ``activation()`` through what every call passes)."""

from __future__ import annotations

import os
from typing import Any, List, NamedTuple, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.activation_calls import names_read, none_test
from torchmemlint.analysis.classes import Layer
from torchmemlint.analysis.factories import assigned_values
from torchmemlint.analysis.module_flow import receiver
from torchmemlint.analysis.syntax import has_star_args
from torchmemlint.analysis.vocabulary import KIND_BY_MODULE

_DEPTH = 3  # hand-ons followed this deep


class PassedClass(NamedTuple):
    node: cst.BaseExpression  # the class as the caller passes it (``nn.ELU``)
    layer: Layer  # the class, built as the builder builds it (``activation()`` there)
    made: List[Tuple[Any, cst.Call]]  # each place a builder builds it: (its file's analysis, the call)
    shown: str  # the file of the function or class called, relative to the caller's
    callee: str  # its name as called (``build_mlp``)


def passed_classes(file: Any, call: cst.Call) -> List[PassedClass]:
    """The activation classes ``call`` (of a function or class another project file defines)
    passes, each with where it is built: in the callee, or in a function or class the callee
    hands it on to (``VNetwork(n, sizes, nn.ELU)`` passing ``activation`` to ``build_mlp``), up
    to ``_DEPTH`` calls deep; a class read otherwise (kept, tested other than against None) or
    rebound on the way is left out."""
    if file.links is None or type(call.func) is not cst.Name or has_star_args(call):
        return []
    found = []
    for arg in call.args:
        value = arg.value
        if type(value) not in (cst.Name, cst.Attribute):
            continue
        qualified = file.resolver.qualify(value)
        if qualified not in KIND_BY_MODULE:
            continue
        received = receiver(file, value)
        if received is None or received[0] is file:
            continue  # (a builder of this file: ``factories`` reads it there)
        made = _built(*received, 0)
        if not made or len({other.module.code_for_node(c) for other, c in made}) != 1:
            continue  # (built with different arguments at different places: not one layer)
        other = received[0]
        shown = os.path.relpath(other.links.path, os.path.dirname(file.links.path)) if other.links is not None else "?"
        found.append(PassedClass(value, Layer(qualified, made[0][1]), made, shown, call.func.value))
    return found


def _built(file: Any, function: cst.FunctionDef, param: cst.Name, depth: int) -> Optional[List[Tuple[Any, cst.Call]]]:
    """The calls ``param(...)`` in ``function`` of ``file`` and in the callees it hands
    ``param`` on to, when every read of the parameter is one of those (or a test against None)
    and nothing rebinds it; None otherwise."""
    if assigned_values(function, param.value) or depth > _DEPTH:
        return None
    made: List[Tuple[Any, cst.Call]] = []
    for read in names_read(function, param):
        above = file.index.above(read)
        if type(above) is cst.Call and above.func is read:
            made.append((file, above))
            continue
        if none_test(function, read):
            continue
        received = receiver(file, read)
        inner = _built(*received, depth + 1) if received is not None else None
        if inner is None:
            return None
        made.extend(inner)
    return made or None
