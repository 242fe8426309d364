"""Module instances kept in a module list and called in a loop over it (``forward_calls.py``).

``attn = Attention(...)`` in a method that puts the local, alone or among others, into a list of
the class (``self.layers.append(ModuleList([attn, ff]))``, ``self.blocks = nn.ModuleList([attn])``)
and uses it nowhere else: its instances are the list's elements. When every read of that
attribute in the file is such a placement, an assignment, or a ``for`` over it whose names (``for
attn, ff in self.layers:``) are only called, in that loop's body, the calls of those names are
every call of the instances (with the calls of the other elements: more calls, never fewer).
"""

from __future__ import annotations

from typing import Any, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.tree import path_to, walk

MODULE_LISTS = frozenset({"ModuleList", "Sequential"})
PLACING = frozenset({"append", "extend"})


def placed(function: cst.FunctionDef, local: str) -> Optional[str]:
    """The attribute of ``self`` (``function``'s first parameter) into which ``function`` puts
    the module bound once to ``local``, its only other use; None when not so."""
    params = function.params.params
    if not params:
        return None
    owner, holder, bound = params[0].name.value, None, 0
    for name in walk(function.body):
        if type(name) is not cst.Name or name.value != local:
            continue
        path = path_to(function, name) or []
        if len(path) > 1 and type(path[-2]) is cst.AssignTarget:
            bound += 1
            continue
        at = len(path) - 2
        while at > 0 and (type(path[at]) in (cst.Element, cst.List, cst.Tuple, cst.Arg) or _short(path[at]) in MODULE_LISTS):
            at -= 1
        top = path[at] if at >= 0 else None
        target = None
        if type(top) is cst.Call and type(top.func) is cst.Attribute and top.func.attr.value in PLACING:
            target = top.func.value
        elif type(top) is cst.Assign and len(top.targets) == 1:
            target = top.targets[0].target
        if type(target) is not cst.Attribute or type(target.value) is not cst.Name or target.value.value != owner:
            return None
        if holder not in (None, target.attr.value):
            return None
        holder = target.attr.value
    return holder if bound == 1 else None


def looped_calls(nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]], lists: Set[str]) -> Optional[List[Tuple[cst.Call, Optional[cst.FunctionDef]]]]:
    """The calls of the names the ``for`` loops over ``self.<list>`` bind (``nodes``: the file's
    nodes outside the class, each with its function); None when such an attribute or name is
    read otherwise."""
    reads = sum(1 for node, _ in nodes if type(node) is cst.Attribute and node.attr.value in lists)
    known, calls = 0, []
    for node, where in nodes:
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in PLACING and _listed(node.func.value, lists):
            known += 1
        elif type(node) is cst.Assign and len(node.targets) == 1 and _listed(node.targets[0].target, lists):
            known += 1
        elif type(node) in (cst.For, cst.CompFor) and _listed(node.iter, lists):
            known += 1
            found = _loop_calls(node, where)
            if found is None:
                return None
            calls.extend((call, where) for call in found)
    return calls if known == reads else None


def _loop_calls(loop: Any, function: Optional[cst.FunctionDef]) -> Optional[List[cst.Call]]:
    """The calls of the names ``loop`` binds, in its body; None when they are read otherwise or
    elsewhere in ``function``."""
    target = loop.target
    elements = [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else [target]
    if type(loop) is not cst.For or function is None or any(type(e) is not cst.Name for e in elements):
        return None
    names = {e.value for e in elements}
    calls = [n for n in walk(loop.body) if type(n) is cst.Call and type(n.func) is cst.Name and n.func.value in names]
    reads = sum(1 for n in walk(function.body) if type(n) is cst.Name and n.value in names) - len(elements)
    return calls if reads == len(calls) else None


def _listed(node: cst.CSTNode, lists: Set[str]) -> bool:
    return type(node) is cst.Attribute and node.attr.value in lists


def _short(node: cst.CSTNode) -> Optional[str]:
    if type(node) is not cst.Call:
        return None
    func = node.func
    return func.value if type(func) is cst.Name else (func.attr.value if type(func) is cst.Attribute else None)
