"""What a function of another file of the project returns when the caller's values are its
arguments, asked by a question that needs it (``attention.py``: are the weights a softmax that
an imported ``softmax(x, dim)`` helper writes out?).

The value graph of a function (``values.py``) takes a call of a function it does not see for a
step that keeps the shape of its first tensor argument (a ``helper`` value with
``info["assumed"]``). Here the project (``links.py``) finds where the callee is defined, and
that file's own value graphs run it with the call's values bound to its parameters: its result
is made of the caller's values (the axes of the caller's scores stay the same ``Axis``
objects). The caller's graph is not changed: the run records its uses apart.

A method a base class of another project file defines is run inside the caller's graph instead
(``helper_runs.foreign_method``), its values marked ``info["foreign"]``; ``foreign_steps`` says
that a site made through them gets no fix: the fix can edit only the linted file, and the other
file's code may do more than the value graph keeps (a hook, a dropout).
"""

from __future__ import annotations

import os
from typing import Any, Iterable, List, Optional

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.values import FunctionValues, Value


def foreign_result(graph: FunctionValues, value: Value) -> Optional[Value]:
    """The value ``value`` (an assumed ``helper``: a call of a function the file does not
    define) returns, run in the file of the project that defines the callee; None when the
    callee is not a function of another project file, takes ``*args``, or returns more than one
    value."""
    run = _run(graph, value)
    return run.returns[0] if run is not None and len(run.returns) == 1 else None


def foreign_inspects(graph: FunctionValues, value: Value, given: Value) -> bool:
    """``check_attention_mask_broadcasts(scores, mask)`` alone on its line, a function of another
    project file: it reads only the shape, type or device of ``given`` (one of its arguments,
    a tensor of the caller) and returns nothing, so nothing of ``given`` outlives the call. Run
    in its own file as ``foreign_result`` runs it, every read of ``given`` there is a ``meta``
    value (``scores.shape``) or a test, and no ``return`` gives a value."""
    run = _run(graph, value)
    if run is None or run.returns:
        return False
    reads = run.consumers(given)
    return bool(reads) and all(read in ("test", "meta") if isinstance(read, str) else read.op == "meta" for read in reads)


def _run(graph: FunctionValues, value: Value) -> Optional[FunctionValues]:
    """The callee of ``value`` (an assumed ``helper``), a function of another project file, run
    in its file with the call's values (``value.inputs``) bound to its parameters; None when it
    is not one, or the call passes ``*args``."""
    node = value.node
    if value.op != "helper" or not value.info.get("assumed") or "helper" in value.info or type(node) is not cst.Call:
        return None
    links = getattr(graph.file.analysis, "links", None)
    head = node.func
    while type(head) is cst.Attribute:
        head = head.value
    # the callee as the file spells it at module level (``softmax`` of ``from .utils import softmax``),
    # not a name the function binds (the graph read those)
    dotted = dotted_name(node.func) if type(head) is cst.Name and id(head) not in graph.names else None
    if links is None or dotted is None or any(arg.star for arg in node.args) or len(value.inputs) != len(node.args):
        return None
    found: Any = links.definition(dotted, "function", package=True)  # (asked only on an attention chain)
    if found is None:
        return None
    analysis, function = found
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)]
    positional = [arg for arg in node.args if arg.keyword is None]
    bound = dict(zip(params, value.inputs[: len(positional)]))
    bound.update(zip((arg.keyword.value for arg in node.args if arg.keyword is not None), value.inputs[len(positional):]))
    return FunctionValues(analysis.value_graphs, function, None, bound, 1, [])


def foreign_steps(chain: Iterable[Value]) -> List[str]:
    """Why a site whose scores or weights (``chain``) pass through another file's code has no
    fix: one reason naming the function and its file, or none."""
    for value in chain:
        file = value.info.get("foreign")
        if file is not None and value.function is not None:
            path = getattr(getattr(file.analysis, "links", None), "path", "")
            return ["the scores or weights pass through `%s` of `%s`, another file; the fix edits only this file" % (value.function.name.value, os.path.basename(path))]
    return []
