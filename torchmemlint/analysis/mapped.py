"""``map(lambda t: f(t), (q, k, v))``: one value per element (``analysis/values.py``).

``q, k, v = map(lambda t: t.contiguous(), (q, k, v))`` makes each of the three from its own
element: the lambda's body run with its parameter bound to that element, so that ``q`` is
``q.contiguous()`` (the same data as the argument ``q``, ``fallback.py`` and ``similarity.py``
see it) and not an element of an opaque call. Only a one-parameter lambda over a tuple or list
written out, or a name holding one (each element known); anything else stays a call.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst


def mapped_call(graph: Any, node: cst.Call, qualified: Optional[str], env: Dict[str, Any]) -> Optional[Any]:
    """The ``tuple`` value of ``map(lambda t: body, items)`` in ``graph`` (``FunctionValues``);
    None for any other call."""
    if qualified is not None or type(node.func) is not cst.Name or node.func.value != "map" or "map" in env:
        return None
    if len(node.args) != 2 or any(arg.keyword is not None or arg.star for arg in node.args):
        return None
    function, items = node.args[0].value, node.args[1].value
    params = function.params if type(function) is cst.Lambda else None
    if params is None or len(params.params) != 1 or params.posonly_params or params.kwonly_params or isinstance(params.star_arg, cst.Param) or params.star_kwarg is not None:
        return None
    if type(items) in (cst.Tuple, cst.List) and any(type(element) is cst.StarredElement for element in items.elements):  # type: ignore[attr-defined]
        return None
    if type(items) is cst.Name:  # ``qkv = (q, k, v)`` before
        held = env.get(items.value)
        if held is None or held.op != "tuple" or held.info.get("elements") is None:
            return None
    elif type(items) not in (cst.Tuple, cst.List):
        return None
    parts = graph.expression(items, env).info["elements"]
    name = params.params[0].name.value
    results = [graph.expression(function.body, {**env, name: part}) for part in parts]  # type: ignore[attr-defined]
    return graph._new("tuple", results, node, info={"elements": results})
