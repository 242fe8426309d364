"""A Sequential filled by ``add_module``: ``seq = nn.Sequential()`` (or with its first layers) then ``seq.add_module("conv",
nn.Conv2d(...))``, ``seq.add_module("bn", nn.BatchNorm2d(...))``, ``seq.add_module("act",
nn.LeakyReLU())``, each a statement of the block the Sequential is built in. The modules run
in the order they are added, so each runs on what the one added before it makes."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.factories import single_local_value
from torchmemlint.tree import walk

SEQUENTIAL = "torch.nn.Sequential"


def added_before(file: Any, function: cst.FunctionDef, call: cst.Call) -> Optional[cst.BaseExpression]:
    """The module added to the same local Sequential just before ``call`` (``seq.add_module(name,
    call)``), when the Sequential is a local built once and filled only by ``add_module``
    statements of its own block, and ``call`` is not the first added; else None."""
    index = file.index
    here = index.find(call)
    parent = index.parent
    arg = parent[here] if here is not None else -1
    adding = parent[arg] if arg >= 0 else -1
    outer = index.order[adding] if adding >= 0 else None
    if type(outer) is not cst.Call or len(outer.args) != 2 or outer.args[1].value is not call:
        return None
    func = outer.func
    if type(func) is not cst.Attribute or func.attr.value != "add_module" or type(func.value) is not cst.Name:
        return None
    name = func.value.value
    built = single_local_value(function, name)
    if type(built) is not cst.Call or file.resolver.qualify(built.func) != SEQUENTIAL:
        return None
    block = _block_of(index, built)
    if block is None:
        return None
    added: List[cst.Call] = []
    for statement in block.body:
        for small in statement.body if type(statement) is cst.SimpleStatementLine else ():
            value = small.value if type(small) is cst.Expr else None
            if type(value) is cst.Call and _adds_to(value, name):
                added.append(value)
    if not any(a is outer for a in added) or _added_elsewhere(function, name, added):
        return None
    position = next(i for i, a in enumerate(added) if a is outer)
    if position == 0 or len(added[position - 1].args) != 2:
        return None
    return added[position - 1].args[1].value


def _adds_to(call: cst.Call, name: str) -> bool:
    func = call.func
    return (
        type(func) is cst.Attribute and func.attr.value == "add_module"
        and type(func.value) is cst.Name and func.value.value == name
    )


def _block_of(index: Any, node: cst.CSTNode) -> Optional[Any]:
    here = index.find(node)
    while here is not None and here >= 0:
        found = index.order[here]
        if type(found) in (cst.IndentedBlock, cst.Module):
            return found
        here = index.parent[here]
    return None


def _added_elsewhere(function: cst.FunctionDef, name: str, added: List[cst.Call]) -> bool:
    """Whether the function adds to or changes the Sequential anywhere but those statements
    (another ``add_module``, ``insert``/``append``/``extend``, an item assignment)."""
    known = {id(call) for call in added}
    for node in walk(function.body):
        if type(node) is cst.Call and id(node) not in known:
            func = node.func
            if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == name and \
                    func.attr.value in ("add_module", "insert", "append", "extend", "register_module"):
                return True
        if type(node) is cst.AssignTarget and type(node.target) is cst.Subscript:
            target = node.target.value
            if type(target) is cst.Name and target.value == name:
                return True
    return False
