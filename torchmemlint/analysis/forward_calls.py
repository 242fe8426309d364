"""What the calls of a module's ``forward`` in its file pass a parameter (``analysis/flags.py``).

A module's ``forward`` is called through ``__call__``: ``self.attend(q, k, v, mask=mask)``
where ``__init__`` set ``self.attend = Attend(...)``. Its calls are known when every reference
to the class outside its own body is such a construction assigned to one attribute
(``self.<holder> = Cls(...)``; not subclassed, passed, stored or called as a local),
and every use of those attributes is a call or that assignment: then these calls are all the
file makes of it; or a local instance put into a module list of the class that builds it
(``attn = Cls(...)``, ``self.layers.append(ModuleList([attn, ff]))``) that is only iterated, its
elements only called (``for attn, ff in self.layers: attn(x)``: ``looped_instances.py``).
Anything else: not known (None).
"""

from __future__ import annotations

from typing import Any, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.looped_instances import looped_calls, placed

Passed = List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]


def forward_passed(graph: Any, function: cst.FunctionDef, param: cst.Param) -> Optional[Passed]:
    """What each call of ``function`` (the ``forward`` of ``graph``'s class) made through an
    attribute holding an instance passes for ``param`` (None: left at the default), with the
    function that makes the call; None when the calls are not known (see the module doc)."""
    classdef = graph.classdef
    if function is not graph.function or classdef is None:
        return None
    analysis = graph.file.analysis
    name = classdef.name.value
    if analysis.callables.classes.get(name) is not classdef:
        return None
    nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]] = []
    _collect(analysis.module, classdef, None, nodes)
    references = sum(1 for node, _ in nodes if type(node) is cst.Name and node.value == name)
    holders: Set[str] = set()
    lists: Set[str] = set()  # ``self.layers``, into which a local instance is put (``ModuleList([attn, ff])``)
    kept = 0
    for node, where in nodes:
        if type(node) is cst.Assign and type(node.value) is cst.Call and type(node.value.func) is cst.Name and node.value.func.value == name:
            target = node.targets[0].target if len(node.targets) == 1 else None
            if type(target) is cst.Attribute:
                holders.add(target.attr.value)
            elif type(target) is cst.Name and where is not None and (held := placed(where, target.value)) is not None:
                lists.add(held)
                kept += 1
            else:
                return None
            references -= 1
    if references or not (holders or lists) or holders & lists:
        return None  # the class is also used otherwise (a base, a local instance, a factory)
    calls = [(node, where) for node, where in nodes if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in holders]
    uses = sum(1 for node, _ in nodes if type(node) is cst.Attribute and node.attr.value in holders)
    if uses != len(calls) + len(holders) or len(holders) != sum(
        1 for node, _ in nodes if type(node) is cst.Assign and type(node.value) is cst.Call and type(node.value.func) is cst.Name and node.value.func.value == name
    ) - kept:
        return None  # an attribute read otherwise (``self.attend.flash = True``) or assigned twice
    if lists and (looped := looped_calls(nodes, lists)) is None:
        return None
    calls += looped if lists else []
    params = [*function.params.posonly_params, *function.params.params][1:]
    index = next((i for i, p in enumerate(params) if p is param), None)
    found: Passed = []
    for call, where in calls:
        if any(arg.star for arg in call.args):
            return None
        positional = [arg.value for arg in call.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        value = keywords.get(param.name.value)
        if value is None and index is not None and index < len(positional):
            value = positional[index]
        found.append((value, where))
    return found


def _collect(node: cst.CSTNode, skip: cst.ClassDef, function: Optional[cst.FunctionDef], out: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]]) -> None:
    """Every node of ``node`` but ``skip``'s, with the function it is in."""
    for child in node.children:
        if child is skip:
            continue
        out.append((child, function))
        _collect(child, skip, child if type(child) is cst.FunctionDef else function, out)
