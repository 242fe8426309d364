"""``map(lambda t: f(t), (q, k, v))`` and comprehensions: one value per element (``analysis/values.py``).

``q, k, v = map(lambda t: t.contiguous(), (q, k, v))`` makes each of the three from its own
element: the lambda's body run with its parameter bound to that element, so that ``q`` is
``q.contiguous()`` (the same data as the argument ``q``, ``fallback.py`` and ``similarity.py``
see it) and not an element of an opaque call. Only a one-parameter lambda over a tuple or list
written out, or a name holding one (each element known); anything else stays a call.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from torchmemlint.analysis.syntax import literal_number


def mapped_call(graph: Any, node: cst.Call, qualified: Optional[str], env: Dict[str, Any]) -> Optional[Any]:
    """The ``tuple`` value of ``map(lambda t: body, items)`` in ``graph`` (``FunctionValues``);
    None for any other call."""
    if qualified is not None or type(node.func) is not cst.Name or node.func.value in env:
        return None
    if node.func.value in ("tuple", "list") and len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
        return comprehension(graph, node.args[0].value, env)  # ``tuple(f(t) for t in (q, k, v))``: the comprehension's value
    if node.func.value != "map":
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


def comprehension(graph: Any, node: cst.BaseExpression, env: Dict[str, Any]) -> Optional[Any]:
    """``(f(t) for t in (q, k, v))`` / ``[f(t) for t in qkv]`` over a tuple whose elements are
    known: the ``tuple`` of ``f`` run on each (as ``map``); ``[f(s) for s in x.split(n, dim=1)]``,
    also zipped with other iterables (``zip(self.biases, x.split(n, dim=1))``): ``parts``, the
    result of ``f`` run on one ``part`` of the split (its axes those of ``x``) standing for every
    part, the other targets elements of what they iterate; over any other iterable, a ``list``
    of ``f`` run on an element of it (as a ``for`` loop binds its target); None for any other
    form (nested ``for``, an ``if`` clause, a target that is not a name)."""
    if type(node) not in (cst.GeneratorExp, cst.ListComp):
        return None
    clause = node.for_in  # type: ignore[attr-defined]
    if clause.inner_for_in is not None or clause.ifs or clause.asynchronous is not None:
        return None
    targets, iterables = [clause.target], [clause.iter]
    zipped = type(clause.iter) is cst.Call and type(clause.iter.func) is cst.Name and clause.iter.func.value == "zip" and "zip" not in env
    if zipped and type(clause.target) is cst.Tuple and len(clause.target.elements) == len(clause.iter.args) and not any(
        arg.keyword is not None or arg.star for arg in clause.iter.args
    ):
        targets, iterables = [element.value for element in clause.target.elements], [arg.value for arg in clause.iter.args]
    if any(type(target) is not cst.Name for target in targets):
        return None
    if len(iterables) == 1 and type(iterables[0]) in (cst.Tuple, cst.List, cst.Name):
        held = env.get(iterables[0].value) if type(iterables[0]) is cst.Name else None  # type: ignore[attr-defined]
        if type(iterables[0]) is not cst.Name and not any(type(e) is cst.StarredElement for e in iterables[0].elements) or (  # type: ignore[attr-defined]
            held is not None and held.op == "tuple" and held.info.get("elements") is not None
        ):
            parts = graph.expression(iterables[0], env).info["elements"]
            results = [graph.expression(node.elt, {**env, targets[0].value: part}) for part in parts]  # type: ignore[attr-defined]
            return graph._new("tuple", results, node, info={"elements": results})
    split = [items for items in iterables if _split(env.get(items.value) if type(items) is cst.Name else None, items) is not None]  # type: ignore[attr-defined]
    if not split and (len(iterables) == 1 or zipped):
        # any other iterable (``[F.elu(conv(x)) for conv in self.convs]``): each target an element
        # of what it iterates, as a ``for`` loop binds it; the ``list`` keeps every result
        inner = dict(env)
        for target, items in zip(targets, iterables):
            inner[target.value] = graph._new("element", [graph.expression(items, env)], items)  # type: ignore[attr-defined]
        return graph._new("list", [graph.expression(node.elt, inner)], node)  # type: ignore[attr-defined]
    if len(split) != 1 or (len(iterables) > 1 and not zipped):
        return None
    inner = dict(env)
    for target, items in zip(targets, iterables):
        held = graph.expression(items, env)
        if items is split[0]:
            dim = _split(held, items)
            inner[target.value] = graph._new("part", [held], target, held.inputs[0].axes, held.inputs[0].rank)  # type: ignore[attr-defined]
        else:
            inner[target.value] = graph._new("element", [held], target)  # type: ignore[attr-defined]
    result = graph.expression(node.elt, inner)  # type: ignore[attr-defined]
    return graph._new("parts", [result], node, result.axes, result.rank, {"dim": dim})


def _split(held: Optional[Any], node: cst.BaseExpression) -> Optional[float]:
    """The ``dim`` of ``x.split(n, dim)`` / ``x.chunk(n, dim)`` written with a constant ``dim``
    (0 when not given), here (``node``) or held by a name (``held``, its value); None for anything else."""
    if held is not None:
        if held.op != "split" or not held.inputs:
            return None
        node = held.node
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute or node.func.attr.value not in ("split", "chunk"):
        return None
    dims = [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "dim"] or [arg.value for arg in node.args[1:2] if arg.keyword is None]
    return literal_number(dims[0]) if dims else 0.0
