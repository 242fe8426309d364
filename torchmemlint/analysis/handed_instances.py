"""The calls of a module instance a factory function of the file builds and hands out
(``forward_calls.py``): ``model = LFM2ForCausalLM(config)`` ... ``return model`` in ``def
create_lfm2_model(...)``. Where the file calls the factory (``model = create_lfm2_model(size)``
in a demo), the instance's calls are those of the names it binds the result to (``model(x)``);
other files' calls are theirs, as for a class the file never builds. The instance may have
members read (``model.parameters()``, ``model.eval()``, ``model.config.vocab_size``) but not its
``forward``; anything else (passed on, stored, returned by the caller) is not known (None)."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

import libcst as cst

from torchmemlint.tree import walk

Calls = List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]


def handed_out(analysis: Any, function: Optional[cst.FunctionDef], assign: cst.Assign) -> Optional[Calls]:
    """The calls of the instance ``assign`` (``local = Cls(...)`` in ``function``, a top-level
    function) binds, when ``function`` only returns it (see the module doc); None otherwise."""
    index = analysis.index
    if function is None or type(index.above(function)) is not cst.Module or len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if type(target) is not cst.Name:
        return None
    calls: Calls = []
    returned = _reads(index, function, target.value, calls, exclude=target)
    if returned is None or not returned:
        return None
    for at in index.positions(cst.Name):  # every use of the factory's name in the file
        node = index.order[at]
        if node.value != function.name.value or node is function.name:
            continue
        call = index.above(node)
        bound = index.above(call) if type(call) is cst.Call and call.func is node else None
        if type(bound) is not cst.Assign or len(bound.targets) != 1 or type(bound.targets[0].target) is not cst.Name:
            return None  # (``return create(...)``, ``run(create(...))``: handed on further)
        caller = index.function_of(at)
        if caller < 0 or _reads(index, index.order[caller], bound.targets[0].target.value, calls, exclude=bound.targets[0].target) != 0:
            return None
    return calls


def _reads(index: Any, function: cst.FunctionDef, name: str, calls: Calls, exclude: cst.Name) -> Optional[int]:
    """How many ``return name`` ``function`` has, adding each ``name(...)`` to ``calls``; None
    when ``name`` is bound again or read otherwise than those and members other than ``forward``."""
    returns = 0
    for node in walk(function.body):
        if type(node) is not cst.Name or node.value != name or node is exclude:
            continue
        parent = index.above(node)
        if type(parent) is cst.Return:
            returns += 1
        elif type(parent) is cst.Call and parent.func is node:
            calls.append((parent.args, function))
        elif type(parent) is cst.Attribute and parent.value is node and parent.attr.value not in ("forward", "__call__"):
            continue
        else:
            return None  # (bound again, passed on, stored)
    return returns

