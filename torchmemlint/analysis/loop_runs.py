"""Whether a ``for`` loop runs its body at least once, so that what it rebinds comes only from
its body (``for block, shortcut in zip(self.blocks, self.shortcuts): x = shortcut(x) + block(x)``
then ``return x``: MelGAN's ``ResStack`` returns an addition, never its input).

A loop over a list written out, ``range(n)`` with a literal ``n >= 1`` and the like
(``layer_lists._never_empty``), or over a module container the class builds once in
``__init__`` with at least one element: ``nn.ModuleList([...])`` / ``nn.Sequential(...)``
written out, or a list comprehension over such an iterable; ``zip``/``enumerate`` of those."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.layer_lists import enclosing_definitions
from torchmemlint.analysis.list_reads import _never_empty

_CONTAINERS = frozenset({"torch.nn.ModuleList", "torch.nn.Sequential"})


def runs_at_least_once(file: Any, model: Any, loop: cst.CSTNode) -> bool:
    """The ``for`` statement ``loop`` (in a method of ``model``'s class, or any function of
    ``file``) runs its body at least once."""
    if type(loop) is not cst.For:
        return False
    function, _ = enclosing_definitions(file.module, loop)
    if function is None:
        return False
    self_name = model.self_name(function) if model is not None else None
    return _non_empty(file, model, function, self_name, loop.iter, 0)


def _non_empty(file: Any, model: Any, function: cst.FunctionDef, self_name: Optional[str], node: cst.BaseExpression, depth: int) -> bool:
    if depth > 3:
        return False
    if _never_empty(function, node):
        return True
    if type(node) is cst.Call and type(node.func) is cst.Name and node.args and not any(a.star or a.keyword for a in node.args):
        if node.func.value == "zip" or (node.func.value in ("enumerate", "reversed", "list", "tuple") and len(node.args) == 1):
            return all(_non_empty(file, model, function, self_name, a.value, depth + 1) for a in node.args)
        return False
    if (
        model is None or self_name is None or type(node) is not cst.Attribute
        or type(node.value) is not cst.Name or node.value.value != self_name
    ):
        return False
    assignment = model.single_assignment(node.attr.value)
    if assignment is None:
        return False
    return _built_non_empty(file, assignment.method, assignment.value)


def _built_non_empty(file: Any, method: cst.FunctionDef, value: cst.BaseExpression) -> bool:
    """``nn.ModuleList([a, b])``, ``nn.ModuleList([Block(i) for i in range(3)])``,
    ``nn.Sequential(a, b)``: a container with at least one module."""
    container = file.resolver.qualify(value.func) if type(value) is cst.Call else None
    if container not in _CONTAINERS:
        return False
    args = value.args  # type: ignore[attr-defined]
    if container == "torch.nn.Sequential":
        return bool(args) and all(not a.star and a.keyword is None for a in args)
    if len(args) != 1 or args[0].star or args[0].keyword is not None:
        return False
    inner = args[0].value
    if type(inner) is cst.ListComp:
        comprehension = inner.for_in
        return (
            comprehension.inner_for_in is None and not comprehension.ifs
            and _never_empty(method, comprehension.iter)
        )
    return _never_empty(method, inner)
