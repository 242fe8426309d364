"""How the value graph (``analysis/values.py``) runs a same-file helper: a function or method
run with its arguments bound (``run_helper``: the value it returns, in terms of the caller's
values; a helper whose several returns all have known axes gives a ``join`` of them, as the
arms of an ``if`` do), which method ``self.name(...)`` calls (the class's own, or one a base class of the
file defines: ``inherited_method``; else one a base class of another project file defines,
``foreign_method``, run with that file's value graphs: its values carry ``info["foreign"]``, the
file that made them), and which arm of an ``if`` a flag the caller passed
selects (``flag_truth``: ``split_heads(key, k=True)`` runs ``if k:``'s arm only)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.axes import joined
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import walk

HELPER_DEPTH = 2
HELPER_NODES = 600
BASE_DEPTH = 4


def run_helper(graph: Any, helper: cst.FunctionDef, node: cst.Call, positional: List[Any], keywords: Dict[str, Any], bound_self: bool, tensor_first: bool, foreign: Optional[Tuple[Any, cst.ClassDef]] = None, owner: Optional[cst.ClassDef] = None, receiver: Optional[Any] = None) -> Any:
    """``helper`` run from ``graph`` (a ``values.FunctionValues``) with its arguments bound
    (``tensor_first``: the first is a tensor, not a size or a constant; ``foreign``: a method
    of another file's class, ``(that file's FileValues, the class)``, from ``foreign_method``;
    ``owner``: the class of this file whose method it is, when not the graph's own; ``receiver``:
    the value its ``self`` is, when known: a held module with its constructor's flags)."""
    params = [p.name.value for p in (*helper.params.posonly_params, *helper.params.params)]
    if bound_self:
        params = params[1:]
    everything = [*positional, *keywords.values()]
    if graph.depth >= HELPER_DEPTH or helper is graph.function or len(walk(helper)) > HELPER_NODES:
        return graph._new("call", everything, node, info={"helper": helper})
    bound = dict(zip(params, positional))
    bound.update(keywords)
    if receiver is not None and bound_self and helper.params.params:
        bound[helper.params.params[0].name.value] = receiver
    file, classdef = foreign if foreign is not None else (graph.file, owner or (graph.classdef if bound_self else None))
    start = len(graph.uses)
    inner = type(graph)(file, helper, classdef, bound, graph.depth + 1, graph.uses)
    graph.uses[start:] = [u._replace(statement=graph._statement) if u.statement is not None else u for u in graph.uses[start:]]  # (sinks at the call)
    for made in (*inner.values, *inner.inlined):
        if foreign is not None:
            made.info.setdefault("foreign", file)  # (a deeper file's own mark kept)
        made.info["site"] = (node, graph._statement)  # where it runs in this graph: the outermost call
    graph._consumers, graph.inlined = None, [*graph.inlined, *inner.values, *inner.inlined]
    if len(inner.returns) > 1 and all(r.axes is not None for r in inner.returns):  # either return: ``if plain: return softmax(s)``
        graph.uses[:] = [u for u in graph.uses if not (u.consumer == "return" and any(u.value is r for r in inner.returns))]
        return graph._new("join", inner.returns, node, *joined(inner.returns), {"returned": helper})
    if len(inner.returns) != 1:  # (what each ``return`` gives: ``ranks`` reads a rank they share)
        return graph._new("call", everything, node, info={"helper": helper, "returns": list(inner.returns)})
    result = inner.returns[0]
    graph.uses[:] = [u for u in graph.uses if not (u.value is result and u.consumer == "return")]
    if result.op == "constant":
        return result
    if result.axes is None and tensor_first:
        # an unknown step on the first argument: assumed to keep its shape (conservatively)
        if result.rank is not None and result.rank != positional[0].rank:  # it says its rank (``x.permute(0, 2, 1, 3)``)
            return graph._new("helper", [result, *everything], node, None, result.rank, {"helper": helper, "assumed": True})
        return graph._new("helper", [result, *everything], node, positional[0].axes, positional[0].rank, {"helper": helper, "assumed": True})
    return graph._same("helper", result, node, everything, helper=helper)


def inherited_method(file: Any, classdef: cst.ClassDef, name: str, depth: int = 0) -> Optional[cst.FunctionDef]:
    """The method ``name`` a base class of ``file`` (a ``values.FileValues``) gives ``classdef``
    (``class RelAttention(Attention)`` calling ``self.attend(...)`` defined in ``Attention``)."""
    for parent in file_bases(file, classdef) if depth < BASE_DEPTH else ():
        found = file.method(parent, name, True, depth + 1)
        if found is not None:
            return found
    return None


def file_bases(file: Any, classdef: cst.ClassDef) -> Iterator[cst.ClassDef]:
    """The base classes of ``classdef`` that ``file`` (a ``values.FileValues``) defines itself."""
    for base in classdef.bases:
        parent = file._classes.get(base.value.value) if type(base.value) is cst.Name and base.keyword is None else None
        if parent is not None and parent is not classdef and file.bindings.qualify(base.value) is None:
            yield parent


def foreign_method(file: Any, classdef: cst.ClassDef, name: str, depth: int = 0) -> Optional[Tuple[Any, cst.ClassDef, cst.FunctionDef]]:
    """The method ``name`` a base class defined in another file of the project gives
    ``classdef`` (a class of ``file``, a ``values.FileValues``), directly or through classes of
    either file (``class CodeGen(JointQKV)`` of ``from .joint_qkv import JointQKV``, itself
    ``class JointQKV(AttentionBridge)`` of ``attention.py``, calling ``self._softmax_pattern(s)``):
    ``(the defining file's FileValues, the base class there, the method)``; None when no base
    that the project index follows (``links.py``: relative and absolute imports, re-exports)
    defines it. Asked after the class and its same-file bases (``inherited_method``)."""
    links = getattr(file.analysis, "links", None)
    if links is None or depth >= BASE_DEPTH:
        return None
    memo = file.__dict__.setdefault("_foreign_methods", {})  # (FileValues.close clears it)
    key = (id(classdef), name)
    if key in memo:
        return memo[key]
    memo[key] = None  # (a cycle of bases ends here)
    found = None
    for base in classdef.bases:
        dotted = dotted_name(base.value) if base.keyword is None else None
        parent = file._classes.get(dotted) if dotted else None
        if parent is not None and file.bindings.qualify(base.value) is None:
            found = foreign_method(file, parent, name, depth + 1) if parent is not classdef else None  # a same-file base's own bases
        elif dotted is not None and (defined := links.definition(dotted, "class", package=True)) is not None:
            theirs, other = defined[0].value_graphs, defined[1]
            method = theirs.method(other, name, True)
            found = (theirs, other, method) if method is not None else foreign_method(theirs, other, name, depth + 1)
        if found is not None:
            break
    memo[key] = found
    return found


def flag_truth(value: Any) -> Optional[bool]:
    """What an ``if``'s test gives when it is ``True``/``False`` (or ``not`` of one): a helper's
    flag its caller passed, or its default; None for anything else."""
    negate = False
    if value.op == "unary" and type(value.node) is cst.UnaryOperation and type(value.node.operator) is cst.Not and value.inputs:
        negate, value = True, value.inputs[0]
    if value.op == "global" and "truth" in value.info:  # ``self.transpose`` of a held module built with ``transpose=True``
        return value.info["truth"] != negate
    name = value.node.value if value.op == "global" and type(value.node) is cst.Name else None
    if name not in ("True", "False"):
        return None
    return (name == "True") != negate
