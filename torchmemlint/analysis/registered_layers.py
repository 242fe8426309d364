"""A Sequential subclass that registers a list's layers one by one, in order (rsl_rl's ``MLP``,
copied into robotics packages)::

    class MLP(nn.Sequential):
        def __init__(self, ...):
            super().__init__()
            layers = [nn.Linear(a, b), activation, ...]
            for idx, layer in enumerate(layers):
                self.add_module(f"{idx}", layer)

builds what ``super().__init__(*layers)`` builds: the ``add_module`` call stands for that
Sequential (``Resolver.constructor``), its elements the list spliced (``registered_list``).
Only the loop's one statement, over ``enumerate(<list>)`` or the list itself, adding the loop's
item, in ``__init__`` of a class deriving ``nn.Sequential`` that registers nothing else."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.layer_lists import enclosing_definitions
from torchmemlint.analysis.vocabulary import NN
from torchmemlint.tree import node_index, scan

_NESTED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


def sequential_of_init(module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]], call: cst.Call) -> Optional[str]:
    """``torch.nn.Sequential`` for ``super().__init__(*layers)`` in ``__init__`` of a class
    deriving ``nn.Sequential`` (the Sequential of those layers, as ``nn.Sequential(*layers)``
    would build it), and for ``self.add_module`` over a list there (``registered_list``)."""
    func = call.func
    if type(func) is not cst.Attribute:
        return None
    if func.attr.value == "add_module":
        return NN + "Sequential" if registered_list(module, qualify, call) is not None else None
    inner = func.value
    if not (type(inner) is cst.Call and type(inner.func) is cst.Name and inner.func.value == "super"):
        return None
    function, classdef = enclosing_definitions(module, call)
    if function is None or classdef is None or function.name.value != "__init__":
        return None
    return NN + "Sequential" if any(qualify(base.value) == NN + "Sequential" for base in classdef.bases) else None


def registered_list(module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]], call: cst.Call) -> Optional[Tuple[cst.Arg, cst.For]]:
    """``*<list>`` for ``self.add_module(name, <item>)`` as above, and the loop (the statement
    where the list holds what is registered); None for any other call."""
    func = call.func
    if (
        type(func) is not cst.Attribute or func.attr.value != "add_module" or type(func.value) is not cst.Name
        or len(call.args) != 2 or any(arg.star or arg.keyword for arg in call.args) or type(call.args[1].value) is not cst.Name
    ):
        return None
    index = node_index(module)
    here = index.find(call)
    if here is None:
        return None
    loop = _loop_of(index, call)
    if loop is None:
        return None
    source = _iterated(loop, call.args[1].value.value)
    function = index.function_of(here)
    classdef = index.order[index.scope[function]] if function >= 0 and index.scope[function] >= 0 else None
    init = index.order[function] if function >= 0 else None
    if source is None or type(classdef) is not cst.ClassDef or type(init) is not cst.FunctionDef or init.name.value != "__init__":
        return None
    params = init.params.params
    if not params or params[0].name.value != func.value.value:
        return None  # (``self`` is the first parameter)
    if not any(qualify(base.value) == NN + "Sequential" for base in classdef.bases):
        return None
    registering = [
        node for node in scan(init.body, (cst.Call,), _NESTED)
        if type(node.func) is cst.Attribute and node.func.attr.value in ("add_module", "append", "extend", "insert", "register_module")  # type: ignore[attr-defined]
        and type(node.func.value) is cst.Name and node.func.value.value == func.value.value  # type: ignore[attr-defined]
    ]
    if registering != [call]:
        return None
    return cst.Arg(value=source, star="*"), loop


def _loop_of(index: Any, call: cst.Call) -> Optional[cst.For]:
    """The ``for`` whose body holds the statement ``call`` among simple statements only (a
    counter, ``i += 1``; no ``break`` or ``continue``)."""
    expr = index.above(call)
    line = index.above(expr) if type(expr) is cst.Expr else None
    block = index.above(line) if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None
    loop = index.above(block) if type(block) is cst.IndentedBlock else None
    if type(loop) is not cst.For or loop.body is not block or loop.orelse is not None:
        return None
    simple = all(type(statement) is cst.SimpleStatementLine for statement in block.body)
    return loop if simple and not any(scan(block, (cst.Break, cst.Continue), _NESTED)) else None


def _iterated(loop: cst.For, item: str) -> Optional[cst.Name]:
    """The list a loop runs over, binding ``item`` to each element: ``for item in layers`` or
    ``for i, item in enumerate(layers)``."""
    target, source = loop.target, loop.iter
    if type(target) is cst.Name and target.value == item and type(source) is cst.Name:
        return source
    if (
        type(target) is cst.Tuple and len(target.elements) == 2 and type(target.elements[1].value) is cst.Name
        and target.elements[1].value.value == item and type(source) is cst.Call and type(source.func) is cst.Name
        and source.func.value == "enumerate" and len(source.args) == 1 and type(source.args[0].value) is cst.Name
    ):
        return source.args[0].value
    return None
