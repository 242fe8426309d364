"""A Sequential filled by ``add_module``: ``seq = nn.Sequential()`` (or with its first layers; or
``self.layers = nn.Sequential()``) then ``seq.add_module("conv", nn.Conv2d(...))``,
``seq.add_module("bn", nn.BatchNorm2d(...))``, ``seq.add_module("act", nn.LeakyReLU())``, in
the block the Sequential is built in (also in a loop: one round's modules in turn). The modules
run in the order they are added, so each runs on what the one added before it makes."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.factories import single_local_value
from torchmemlint.tree import walk

SEQUENTIAL = "torch.nn.Sequential"


def added_before(file: Any, function: cst.FunctionDef, call: cst.Call) -> Optional[List[cst.BaseExpression]]:
    """Every module that may be added to the same Sequential just before ``call``
    (``seq.add_module(name, call)``), when the Sequential is a local or an attribute of ``self``
    built once in the function and filled only by ``add_module``: going back through the
    modules added before it in the source, each may be the one, until one that comes before it
    in every run (a statement of its block or of a block around it, no loop between: ``for i in
    range(n): seq.add_module(f"{i}fc", nn.Linear(...))``, then under an ``if`` of the loop
    ``seq.add_module(f"{i}act", nn.LeakyReLU(0.2))``; a module added under an ``if`` between
    them, ``if bn: seq.add_module("bn", ...)``, may be the one or not). None when no such module
    is met, or one of those passed is in another loop than ``call`` (the round before may end
    with other modules)."""
    index = file.index
    here = index.find(call)
    parent = index.parent
    arg = parent[here] if here is not None else -1
    adding = parent[arg] if arg >= 0 else -1
    outer = index.order[adding] if adding >= 0 else None
    if type(outer) is not cst.Call or len(outer.args) != 2 or outer.args[1].value is not call:
        return None
    func = outer.func
    if type(func) is not cst.Attribute or func.attr.value != "add_module":
        return None
    key = _key(function, func.value)
    if key is None:
        return None
    built = _built(function, key)
    if type(built) is not cst.Call or file.resolver.qualify(built.func) != SEQUENTIAL:
        return None
    block = _block_of(index, built)
    if block is None:
        return None
    added = [node for node in walk(block) if type(node) is cst.Call and _adds_to(function, node, key)]
    if not any(a is outer for a in added) or _added_elsewhere(function, key, added):
        return None
    position = next(i for i, a in enumerate(added) if a is outer)
    loop = _loop_of(index, outer)
    found: List[cst.BaseExpression] = []
    for before in reversed(added[:position]):
        if len(before.args) != 2 or _loop_of(index, before) is not loop:
            return None
        found.append(before.args[1].value)
        if _runs_before(index, before, outer):
            return found
    return None


def _loop_of(index: Any, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The innermost loop around ``node`` in its function (None: no loop)."""
    here = index.parent[index.find(node)]
    while here is not None and here >= 0:
        found = index.order[here]
        if type(found) in (cst.For, cst.While):
            return found
        if type(found) in (cst.FunctionDef, cst.Lambda):
            return None
        here = index.parent[here]
    return None


def _key(function: cst.FunctionDef, node: cst.BaseExpression) -> Optional[str]:
    """``"seq"`` for a local ``seq``, ``"self.layers"`` for ``self.layers``; else None."""
    if type(node) is cst.Name:
        return node.value
    params = function.params.params
    if type(node) is cst.Attribute and type(node.value) is cst.Name and params and node.value.value == params[0].name.value:
        return "self." + node.attr.value
    return None


def _built(function: cst.FunctionDef, key: str) -> Optional[cst.BaseExpression]:
    if not key.startswith("self."):
        return single_local_value(function, key)
    values = [
        node.value for node in walk(function.body) if type(node) is cst.Assign
        and any(_key(function, target.target) == key for target in node.targets)
    ]
    return values[0] if len(values) == 1 else None


def _adds_to(function: cst.FunctionDef, call: cst.Call, key: str) -> bool:
    func = call.func
    return type(func) is cst.Attribute and func.attr.value == "add_module" and _key(function, func.value) == key


def _runs_before(index: Any, before: cst.Call, call: cst.Call) -> bool:
    """Whether ``before`` is a statement of a block around ``call`` (or of its own), with no
    loop between: it runs, once, before ``call`` whenever ``call`` runs."""
    block = _block_of(index, before)
    here = index.find(call)
    while here is not None and here >= 0:
        node = index.order[here]
        if node is block:
            return True
        if type(node) in (cst.For, cst.While, cst.FunctionDef, cst.Lambda):
            return False
        here = index.parent[here]
    return False


def _block_of(index: Any, node: cst.CSTNode) -> Optional[Any]:
    here = index.find(node)
    while here is not None and here >= 0:
        found = index.order[here]
        if type(found) in (cst.IndentedBlock, cst.Module):
            return found
        here = index.parent[here]
    return None


def _added_elsewhere(function: cst.FunctionDef, key: str, added: List[cst.Call]) -> bool:
    """Whether the function adds to or changes the Sequential anywhere but those calls
    (another ``add_module``, ``insert``/``append``/``extend``, an item assignment)."""
    known = {id(call) for call in added}
    for node in walk(function.body):
        if type(node) is cst.Call and id(node) not in known:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in ("add_module", "insert", "append", "extend", "register_module") \
                    and _key(function, func.value) == key:
                return True
        if type(node) is cst.AssignTarget and type(node.target) is cst.Subscript and _key(function, node.target.value) == key:
            return True
    return False
