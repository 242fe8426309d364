"""Are the two operands of an attention's scores laid out alike, q and k, not a tensor times a
weight matrix (``analysis/attention.py`` asks it of the value graph)?"""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.ranks import rank as value_rank
from torchmemlint.analysis.values import FunctionValues, Value


def similarity(graph: FunctionValues, scores: Value) -> bool:
    """Are the two operands of the scores laid out alike (q and k, each (…, position, feature)
    where each was made, the feature at the same place), not a tensor times a weight matrix
    (``x @ w``)?

    The contracted axis is followed back through transposes, permutes (``k.permute(0, 2, 3, 1)``
    of a (b, s, h, d) projection is (b, h, d, s): its feature is still the last axis of what
    it was made from) and ``.contiguous()`` to where each operand was made (``_origin``). A
    rearrange that moves the features past the positions (``"b c h w -> b (h w) c"``) is a
    transpose of the map it was made from, or the tokens' own layout: alike either way."""
    specs = scores.info["specs"]
    if len(scores.info["contracted"]) != 1:
        return True  # several feature axes (an einsum over d and m): the letters say it
    if all(_projected(operand) for operand in scores.inputs[:2]):
        return True  # both made by layers of the module (``self.WK(y).view(b, n, d, l)``): q and k in any layout
    feature = scores.info["contracted"][0]
    hint = {"torch.bmm": 3, "bmm": 3, "torch.mm": 2, "mm": 2}.get(scores.info.get("spelling"))  # ``bmm``: 3-D operands
    for through_rearrange, every_step in ((False, False), (True, False), (False, True)):
        found = []
        for side in (0, 1):
            spec = list(specs[side])
            if feature not in spec[-2:]:
                return "..." not in spec
            position = spec.index(feature) - len(spec)
            found.append(_origin(graph, scores.inputs[side], position, through_rearrange, every_step, hint) == -1)
        if found[0] == found[1]:
            return True
    return False


def _projected(value: Value) -> bool:
    """Was ``value`` made by an ``nn`` layer (``nn.Linear``, ``nn.Conv2d``: a projection, not a
    weight matrix), through reshapes, transposes and axis-keeping steps?"""
    for _ in range(16):
        if value.op == "linear":
            return True
        if value.op not in ("reshape", "relabel", "same", "cast", "unary", "activation") and not (
            value.op == "helper" and value.info.get("elementwise")
        ) or not value.inputs:
            return False
        value = value.inputs[0]
    return False


def _arms(value: Value) -> Optional[List[Value]]:
    """The values a join or a ``torch.cat``/``stack`` of parts written out is made of (each laid
    out as the whole: a cat joins them along one axis), None for any other value. A ``cat`` of
    the parts one tensor is split into (``torch.cat(torch.split(q, d, dim=-1), dim=0)``: heads
    moved to the batch axis, GMAN) is laid out as that tensor: neither step moves an axis."""
    if value.op == "join" and value.inputs:
        return list(value.inputs)
    whole = _split_source(value.inputs[0]) if value.op == "cat" and value.inputs else None
    if whole is not None:
        return [whole]
    if value.op == "cat" and value.inputs and value.inputs[0].op == "tuple" and type(value.node) is cst.Call:
        func = value.node.func
        if type(func) is cst.Attribute and func.attr.value in ("cat", "concat") and value.inputs[0].info.get("elements"):
            return list(value.inputs[0].info["elements"])
    return None


def _split_source(parts: Value) -> Optional[Value]:
    """The tensor ``parts`` is split from: ``torch.split(x, n, dim)``, ``x.split(n, dim)``,
    ``x.chunk(n, dim)`` (every part keeps the tensor's rank and the order of its axes)."""
    node = parts.node
    if parts.op not in ("call", "split") or type(node) is not cst.Call or type(node.func) is not cst.Attribute or not parts.inputs:
        return None
    if node.func.attr.value not in ("split", "chunk", "tensor_split"):
        return None
    return parts.inputs[0]  # ``torch.split(x, ...)``'s first argument, ``x.split(...)``'s receiver


def _origin(graph: FunctionValues, value: Value, position: int, through_rearrange: bool, every_step: bool, hint: Optional[int] = None) -> int:
    """The (negative) position, in the tensor ``value`` was made from by transposes, permutes and
    axis-keeping steps (``every_step``; else: swaps of the last two axes only, up to the first
    other step), of ``value``'s axis at ``position``. ``hint``: the rank the contraction says
    its operands have (``bmm``: 3), which these steps keep (``unsqueeze``/``squeeze`` change it by
    one, and move the axes after the one they add or drop)."""
    for _ in range(16):
        info = value.info
        arms = _arms(value)
        if arms:  # an ``if``'s join, a ``torch.cat`` along another axis: where every arm or part agrees
            found = {_origin(graph, arm, position, through_rearrange, every_step, hint) for arm in arms}
            return found.pop() if len(found) == 1 else position
        if not every_step and (value.op != "relabel" or not info.get("swap")) and not (value.op == "reshape" and through_rearrange):
            return position
        if (value.op in ("same", "cast", "scale", "unary", "activation") or value.op == "helper" and (
            info.get("helper") is not None or info.get("elementwise")
        )) and value.inputs:
            value = value.inputs[0]  # (a same-file helper: what it returned, ``x.permute(0, 2, 3, 1)``; ``.to(dtype)``;
            # ``q * scale``; steps on each element, ``-F.logsigmoid(-k)``, ``torch.sigmoid(k)``)
            continue
        if value.op == "reshape" and through_rearrange and info.get("swap") and position in (-1, -2):
            position, value = -3 - position, value.inputs[0]
            continue
        if value.op == "reshape" and every_step and info.get("step"):  # ``unsqueeze(d)``/``squeeze(d)``
            kind, at = info["step"]
            if at is None:  # ``d`` from the start: the result has the rank the contraction says (``bmm``: 3)
                if hint is None:
                    return position
                at = info["dim"] - hint - (1 if kind == "remove" else 0)
            if kind == "insert" and position == at:
                return position  # the new axis: made here
            position = position + (1 if kind == "insert" and position < at else 0) - (1 if kind == "remove" and position <= at else 0)
            hint = None if hint is None else hint + (-1 if kind == "insert" else 1)  # the rank before the step
            value = value.inputs[0]
            continue
        if value.op != "relabel":
            return position
        dims = list(info.get("dims", ()))
        rank = value.rank if value.rank is not None else value_rank(graph, value)
        rank = hint if rank is None else rank
        norm = [d - rank if d >= 0 else d for d in dims] if rank is not None else dims  # type: ignore[operator]
        if any(d >= 0 for d in norm):  # the rank is not known: only a swap of the last two is
            if not (info.get("swap") and position in (-1, -2)):
                return position
            position = -3 - position
        elif info.get("transpose") and len(norm) == 2:
            position = norm[1] if position == norm[0] else (norm[0] if position == norm[1] else position)
        elif rank is not None and len(norm) == rank and -rank <= position:
            position = norm[position]
        else:
            return position
        value = value.inputs[0]
    return position
