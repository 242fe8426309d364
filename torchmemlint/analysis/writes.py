"""Values written into slices of a tensor, for the value graph (``analysis/values.py``).

``x[s] = x[s].softmax(d)`` over an axis ``d`` that is not the sliced one normalises the rows of
that slice where they are; two such writes over complementary slices of the first axis
(``x[half:]`` then ``x[:half]``: audioldm's in-place softmax, which halves the peak of the
softmax's output) make ``x.softmax(d)``. The graph records the first write as ``written`` and
the second as that ``softmax`` of the tensor before the writes, with ``info["parts"]``: the
intermediate values (they carry nothing else) and ``info["in_place"]``. Any other write into
a slice is left to the caller (a store).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import libcst as cst

Bounds = Tuple[Optional[str], Optional[str]]


def slice_write(graph: Any, target: cst.Subscript, value: Any, env: Dict[str, Any]) -> Optional[Any]:
    """The value ``target``'s name holds after ``target = value`` (a ``values.Value`` of
    ``graph``, a ``values.FunctionValues``), when the write is a row-wise softmax of the same
    slice (see the module doc); None otherwise."""
    name = target.value.value  # type: ignore[attr-defined]
    current = env.get(name)
    bounds = _first_axis_slice(target)
    if current is None or bounds is None or value.op != "softmax" or not value.inputs:
        return None
    read = value.inputs[0]
    if read.op != "index" or read.inputs[0] is not current or _first_axis_slice(read.node) != bounds:
        return None
    dim, rank, known = value.info.get("dim"), current.rank, len(current.axes or ())
    if dim is None or value.info.get("extra") or dim == 0 or (
        dim < 0 and (rank is None or dim + rank <= 0) and -dim >= known
    ):  # over the sliced axis, or an axis not known to be another one (``-1`` of ``a @ b``
        return None  # is not its first: the product has two axes of its own at least)
    limit = bounds[0] if bounds[0] is not None else bounds[1]
    held = env.get(limit or "")  # the value of ``half`` when the limit is a name
    if current.op == "written":
        before = current.info
        if before["dim"] != dim or before["bounds"] != bounds[::-1] or before["held"] is not held:
            return None
        base = current.inputs[0]
        return graph._same(
            "softmax", base, target, dim=dim, axis=base.axis(dim), extra=[], in_place=True,
            parts=(current, *before["parts"], read, value),
        )
    return graph._new(
        "written", [current, value], target, current.axes, current.rank,
        {"bounds": bounds, "dim": dim, "held": held, "parts": (read, value)},
    )


def _first_axis_slice(node: Any) -> Optional[Bounds]:
    """``x[a:]`` -> ("a", None), ``x[:a]`` -> (None, "a"): one slice of the first axis with one
    limit, a name or a number; None for anything else."""
    if type(node) is not cst.Subscript or len(node.slice) != 1:
        return None
    part = node.slice[0].slice
    if type(part) is not cst.Slice or part.step is not None or (part.lower is None) == (part.upper is None):
        return None
    limit = part.lower if part.lower is not None else part.upper
    if type(limit) not in (cst.Name, cst.Integer):
        return None
    text = limit.value  # type: ignore[union-attr]
    return (text, None) if part.lower is not None else (None, text)
