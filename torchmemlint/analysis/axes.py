"""The axes of the value graph's tensors (``analysis/values.py``): an axis is an identity, so a
question can follow one axis from the contraction that made it to the softmax over it."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple


class Axis:
    """One axis of a tensor: its identity, and (``side``) which operand of the contraction
    that made it it came from (``left``/``right`` only, ``both``: a batch axis)."""
    __slots__ = ("side",)

    def __init__(self, side: str = "") -> None:
        self.side = side


class JoinedAxis(Axis):
    """The axis at one position of a join whose arms were made by different computations
    (``if c: s = a @ b`` / ``else: s = c @ d``): ``arms``, that position's axis in each arm."""
    __slots__ = ("arms",)

    def __init__(self, arms: Tuple[Axis, ...]) -> None:
        sides = {arm.side for arm in arms}
        super().__init__(sides.pop() if len(sides) == 1 else "")
        self.arms = arms


def joined(values: Sequence[Any]) -> Tuple[Optional[Tuple[Optional[Axis], ...]], Optional[int]]:
    """The axes a join of ``values`` (value graph ``Value``s) has: those of the arms whose axes
    are known, when they agree; when every arm's are known, as many and of one rank, but
    differ, a ``JoinedAxis`` per position where they differ (None where one is not known)."""
    known = [v for v in values if v.axes is not None]
    if not known:
        return None, None
    first = known[0]
    if all(v.axes == first.axes for v in known):
        return first.axes, first.rank
    if len(known) != len(values) or any(len(v.axes) != len(first.axes) or v.rank != first.rank for v in known):  # type: ignore[arg-type]
        return None, None
    axes: List[Optional[Axis]] = []
    for position, axis in enumerate(first.axes):  # type: ignore[arg-type]
        arms = tuple(v.axes[position] for v in known)  # type: ignore[index]
        if all(arm is axis for arm in arms):
            axes.append(axis)
        else:
            axes.append(None if None in arms else JoinedAxis(arms))  # type: ignore[arg-type]
    return tuple(axes), first.rank


def arm_axis(axis: Any, join: Any, arm: int) -> Any:
    """``axis`` of the value ``join`` as it is in the join's input ``arm``."""
    if isinstance(axis, JoinedAxis) and join.position(axis) is not None and len(axis.arms) == len(join.inputs):
        return axis.arms[arm]
    return axis


def squeezed(source: Any, method: str, dim: int) -> Tuple[Optional[Tuple[Optional[Axis], ...]], Optional[int], dict]:
    """The axes, rank and info of ``source.unsqueeze(dim)`` (a new axis of size 1) or
    ``source.squeeze(dim)`` (that axis gone; the code squeezes an axis of size 1): the other axes
    are the same ones. ``info["step"]``: ``("insert", p)`` (``p``: the new axis's negative
    position in the result) or ``("remove", p)`` (the position in ``source``), ``p`` None (and
    ``info["dim"]`` the code's) when ``dim`` counts from the start of a tensor of unknown rank;
    axes None where ``source``'s are not known that far."""
    rank = source.rank
    insert = method == "unsqueeze"
    if dim >= 0:
        if rank is None:  # where the new axis goes is known once the rank is (``similarity.py``)
            return None, None, {"step": ("insert" if insert else "remove", None), "dim": dim}
        dim -= rank + 1 if insert else rank
    new_rank = None if rank is None else rank + (1 if insert else -1)
    axes = None
    known = list(source.axes) if source.axes is not None else None
    if insert and known is not None and -len(known) - 1 <= dim <= -1:
        at = len(known) + 1 + dim  # index in the known axes of the result
        axes = tuple(known[:at] + [Axis("")] + known[at:])
    elif not insert and known is not None and -len(known) <= dim <= -1:
        at = len(known) + dim
        axes = tuple(known[:at] + known[at + 1:])
    return axes, new_rank, {"step": ("insert" if insert else "remove", dim)}


class CatAxis(Axis):
    """The axis ``torch.cat(parts, dim)`` joins: ``parts``, that axis in each part (each part's
    positions along it, one after the other); its side the parts' side when they share one."""
    __slots__ = ("parts",)

    def __init__(self, parts: Tuple[Axis, ...]) -> None:
        sides = {part.side for part in parts}
        super().__init__(sides.pop() if len(sides) == 1 else "")
        self.parts = parts


def catted(parts: Sequence[Any], dim: Optional[float]) -> Tuple[Optional[Tuple[Optional[Axis], ...]], Optional[int]]:
    """The trailing axes and rank of ``torch.cat(parts, dim)`` (value graph ``Value``s, the
    tuple's elements): a ``CatAxis`` at ``dim``, and at every other known position the axis all
    parts share there (None where they differ); None when ``dim`` or a part's axis at ``dim`` is
    not known."""
    ranks = {part.rank for part in parts}
    rank = ranks.pop() if len(ranks) == 1 else None
    if not parts or dim is None or dim != int(dim) or any(part.axes is None for part in parts):
        return None, rank
    at = int(dim) - (rank or 0) if dim >= 0 else int(dim)
    length = min(len(part.axes) for part in parts)
    if at >= 0 or -at > length:
        return None, rank
    axes: List[Optional[Axis]] = []
    for position in range(-length, 0):
        here = [part.axes[position] for part in parts]
        if position == at:
            axes.append(None if None in here else CatAxis(tuple(here)))
        else:
            axes.append(here[0] if all(axis is here[0] for axis in here) else None)
    return tuple(axes), rank


class PartAxis(Axis):
    """One of the axes ``rearrange`` splits an axis into (``"(b nw) h i j -> b nw h i j"``):
    ``whole``, the split axis, ``at`` its place among the ``of`` parts. A rearrange that merges
    every part back, in order (``"b nw h i j -> (b nw) h i j"``: a window mask added between
    the two), gives ``whole`` again."""
    __slots__ = ("whole", "at", "of")

    def __init__(self, whole: Axis, at: int, of: int) -> None:
        super().__init__(whole.side)
        self.whole, self.at, self.of = whole, at, of


def rearranged_axes(source: Any, groups: Optional[Tuple[List[List[str]], List[List[str]]]]) -> Optional[Tuple[Optional[Axis], ...]]:
    """The axes of ``rearrange(source, pattern)`` (``groups``: the pattern's axis groups,
    ``einsum.parse_rearrange``), as many as the result has: an axis named alone on both sides
    is itself, the parts of a split axis are ``PartAxis``es, and all of them merged back in
    order are the axis they were split from; None at a position otherwise. Where ``source``'s
    axes are not all known: ``kept_trailing``."""
    if groups is None or source.axes is None:
        return None
    before, after = groups
    if len(source.axes) != len(before):
        return kept_trailing(source, groups)
    piece: Dict[str, Optional[Axis]] = {}
    for axis, group in zip(source.axes, before):
        for at, name in enumerate(group):
            piece[name] = axis if len(group) == 1 else PartAxis(axis, at, len(group)) if axis is not None else None
    axes: List[Optional[Axis]] = []
    for group in after:
        parts = [piece[name] for name in group]
        if len(parts) == 1:
            axes.append(parts[0])
            continue
        first = parts[0]
        whole = first.whole if isinstance(first, PartAxis) and first.of == len(parts) else None
        merged = whole is not None and all(isinstance(p, PartAxis) and p.whole is whole and p.at == at for at, p in enumerate(parts))
        axes.append(whole if merged else None)
    return tuple(axes) if any(axis is not None for axis in axes) else None


def kept_trailing(source: Any, groups: Optional[Tuple[List[List[str]], List[List[str]]]]) -> Optional[Tuple[Optional[Axis], ...]]:
    """The trailing axes of ``rearrange(source, pattern)`` (``groups``: the pattern's axis groups,
    ``einsum.parse_rearrange``) that stay themselves: ``"b (w n) r -> b w n r"`` keeps ``r``, the
    last axis, named alone at the end of both sides; None when none is known to."""
    if groups is None or source.axes is None:
        return None
    kept = 0
    for before, after in zip(reversed(groups[0]), reversed(groups[1])):
        if len(before) != 1 or before != after or kept >= len(source.axes):
            break
        kept += 1
    return tuple(source.axes[-kept:]) if kept else None


def cat_layout(name: str, positional: Sequence[Any], keywords: Dict[str, Any]) -> Tuple[Optional[Tuple[Optional[Axis], ...]], Optional[int]]:
    """``catted`` for ``torch.cat((a, b), dim)`` / ``torch.concat`` of a tuple or list written out
    (``dim`` a constant, 0 when not given), the axes of the split tensor for the ``parts`` of a
    comprehension over its split along ``dim`` (``mapped.py``); ``torch.stack`` (a new axis) and
    others: not known."""
    if name == "torch.stack" or not positional:
        return None, None
    dim = positional[1] if len(positional) > 1 else keywords.get("dim")
    number = 0.0 if dim is None else dim.info.get("number") if dim.op == "constant" else None
    if positional[0].op == "parts":  # ``torch.cat([f(s) for s in x.split(n, dim=1)], dim=1)``: ``x``'s axes, its parts rejoined
        return (positional[0].axes, positional[0].rank) if number is not None and number == positional[0].info["dim"] else (None, None)
    if positional[0].op != "tuple" or positional[0].info.get("elements") is None:
        return None, None
    return catted(positional[0].info["elements"], number)


def implicit_softmax_dim(rank: Optional[int]) -> Optional[int]:
    """The axis ``F.softmax(x)`` / ``nn.Softmax()`` take without ``dim`` from an input of ``rank``
    axes (torch's legacy choice, ``_get_softmax_dim``): 0 for 0-, 1- and 3-D input, else 1; None
    when the rank is unknown."""
    return None if rank is None else 0 if rank in (0, 1, 3) else 1


def tensorish(value: Any) -> bool:
    """Whether a value of the value graph may be a tensor (not a size, a constant, a module's
    attribute or a dtype's limits)."""
    if value.op in ("element", "index") and value.inputs and value.inputs[0].op == "meta":
        return False  # ``B, L, E = x.shape``, ``x.shape[-1]``: sizes
    return value.op not in ("constant", "meta", "attribute", "global", "member", "unknown", "finfo") and not value.info.get("scalar")


def relabel(graph: Any, source: Any, node: Any, dims: List[int], transpose: bool) -> Any:
    """``transpose(a, b)`` (``transpose=True``) or ``permute(*dims)``: the same axes, reordered."""
    if transpose:
        rank = source.rank
        norm = [d if d < 0 else (d - rank if rank is not None else None) for d in dims]
        axes = None
        if None not in norm and source.axes is not None and all(-len(source.axes) <= d for d in norm):  # type: ignore[operator]
            known = list(source.axes)
            a, b = norm
            known[a], known[b] = known[b], known[a]  # type: ignore[index]
            axes = tuple(known)
        swap = None not in norm and sorted(norm) == [-2, -1]  # type: ignore[type-var]
        return graph._new("relabel", [source], node, axes, rank, {"swap": swap, "dims": tuple(dims), "transpose": True})
    rank = len(dims)
    if source.rank is not None and source.rank != rank:
        return graph._new("reshape", [source], node)
    norm = [d - rank if d >= 0 else d for d in dims]
    axes = tuple(source.axis(d) for d in norm) if source.axes is not None else None
    swap = rank >= 2 and norm[:-2] == list(range(-rank, -2)) and norm[-2:] == [-1, -2]
    return graph._new("relabel", [source], node, axes, rank, {"swap": swap, "dims": tuple(dims)})
