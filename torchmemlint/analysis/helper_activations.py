"""An activation a same-file helper applies to its argument and returns (SPADE's and GAN
stability code's ``def actvn(self, x): return F.leaky_relu(x, 2e-1)``, called as
``self.conv_0(self.actvn(self.norm_0(x)))``): it runs on what each call passes, so it is judged
at every call of the helper in the file, in the caller's value graph, which runs the helper
with the call's arguments (``helper_runs.py``). Known only when the helper reads its argument
nowhere else and only returns the activation's result, the file names the helper only in
calls (``self.<name>(...)`` in the class's methods for a method, ``<name>(...)`` for a
function), and no file importing this one reads it."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.activation_calls import changes_in_place, dropouts_only
from torchmemlint.analysis.activation_sites import Site, Use
from torchmemlint.tree import node_index


def helper_uses(sites: Any, site: Site, function: cst.FunctionDef) -> Optional[List[Use]]:
    """The uses of ``site``'s activation at each call of ``function``, the helper holding it
    (``sites``: the file's ``InplaceAnalysis``); None when not known at every one."""
    graph = sites.file.values(function)
    if not graph.reliable:
        return None
    facts = sites._facts(graph)
    activation = next((v for v in facts.made.get(id(site.node), ()) if v.op == "activation"), None)
    if activation is None or not activation.inputs or activation.inputs[0].op != "argument":
        return None
    source = activation.inputs[0]
    if any(reader is not activation for _, reader in facts.reads.get(id(source), ())):
        return None  # the helper reads its argument again
    if any(reader != "return" for _, reader in facts.reads.get(id(activation), ())) or not facts.reads.get(id(activation)):
        return None  # the helper does more with the result than return it
    calls = _calls(sites.file, function)
    if not calls:
        return None
    uses: List[Use] = []
    for call, caller, classdef in calls:
        model = sites.file.class_model(classdef) if classdef is not None else None
        theirs = sites.file.values(caller)
        if not theirs.reliable:
            return None
        wrapper = next((v for v in theirs.values if v.node is call and v.op == "helper" and v.inputs), None)
        ran = wrapper.inputs[0] if wrapper is not None else None
        if ran is None or ran.op != "activation" or ran.node is not site.node or not ran.inputs:
            return None
        their_facts = sites._facts(theirs)
        self_name = model.self_name(caller) if model is not None else None
        use = sites._use_of(their_facts, ran.inputs[0], ran, site.node, None, caller, model, self_name, wrapper)
        reads = their_facts.reads.get(id(wrapper), ())
        use.to_dropout = dropouts_only(sites.file, reads, model, wrapper)
        use.to_inplace = use.to_inplace or changes_in_place(wrapper, reads, model, their_facts.reads)
        uses.append(use)
    return uses


def _calls(file: Any, function: cst.FunctionDef) -> Optional[List[tuple]]:
    """``(call, calling function, its class)`` for every mention of the helper in the file, each
    a call of it from a function (a method's through its class's ``self``; another class's
    ``self.<name>`` calls its own method of that name); None when one is not."""
    name = function.name.value
    index = node_index(file.module)
    order, parent = index.order, index.parent
    here = index.find(function)
    if here is None:
        return None
    owner = index.scope[here]
    method = owner >= 0 and type(order[owner]) is cst.ClassDef
    found = []
    for position in [*index.positions(cst.Name), *index.positions(cst.Attribute)]:
        node = order[position]
        if type(node) is cst.Name and (node.value != name or node is function.name or type(order[parent[position]]) is cst.Attribute):
            continue
        if type(node) is cst.Attribute and node.attr.value != name:  # type: ignore[attr-defined]
            continue
        call = order[parent[position]] if parent[position] >= 0 else None
        if type(call) is cst.FunctionDef and call.name is node:  # another definition of that name
            above = index.scope[parent[position]]
            if above >= 0 and above != owner and type(order[above]) is cst.ClassDef:
                continue  # another class's own method
            return None
        caller = index.function_of(position)
        if caller < 0:
            return None
        inside = index.scope[caller]
        classdef = order[inside] if inside >= 0 and type(order[inside]) is cst.ClassDef else None
        on_self = type(node) is cst.Attribute and _on_self(node, order[caller])  # type: ignore[arg-type]
        if on_self and classdef is not None and inside != owner and _defines(classdef, name):  # type: ignore[arg-type]
            continue  # another class's own method of that name
        if type(call) is not cst.Call or call.func is not node:  # type: ignore[attr-defined]
            return None
        if method != (type(node) is cst.Attribute) or (method and (not on_self or inside != owner)):
            return None
        found.append((call, order[caller], classdef))
    links = file.links
    if links is not None and (links.read_by_importers(name) if method else links.may_name(name)):
        return None
    return found


def _on_self(node: cst.Attribute, method: cst.CSTNode) -> bool:
    params = method.params.params  # type: ignore[attr-defined]
    return type(node.value) is cst.Name and bool(params) and params[0].name.value == node.value.value


def _defines(classdef: cst.ClassDef, name: str) -> bool:
    body = classdef.body.body if type(classdef.body) is cst.IndentedBlock else ()
    return any(type(statement) is cst.FunctionDef and statement.name.value == name for statement in body)
