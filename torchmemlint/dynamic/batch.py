"""The batch of a profile's inputs, and the same inputs at another batch.

Shared by the verification (how a fix's saving scales) and the budget (the
largest batch); importing it does not import torch.
"""

from __future__ import annotations

from typing import Any

from .errors import DynamicError


def batch_of(input_shapes: Any) -> int:
    """The batch: an inputs function's ``batch_size``, else the first dimension,
    shared by every input shape."""
    from .inputs import InputsFunction
    from .measure import _normalise_specs

    if isinstance(input_shapes, InputsFunction):
        return input_shapes.batch
    specs = _normalise_specs(input_shapes)
    firsts = {spec[0] if spec and isinstance(spec[0], int) else None for spec in specs}
    if len(firsts) != 1 or None in firsts:
        raise DynamicError(
            "the batch is the first dimension of every input shape; these differ or are missing: "
            + ", ".join("x".join(str(d) for d in spec) for spec in specs)
        )
    batch = firsts.pop()
    if batch <= 0:
        raise DynamicError(
            "the batch (first dimension of the input shape) must be positive, got %d" % batch
        )
    return batch


def with_batch(input_shapes: Any, batch: int) -> Any:
    """The same inputs at ``batch``: shapes with that first dimension, or the
    inputs function called with that ``batch_size``."""
    from .inputs import InputsFunction
    from .measure import _normalise_specs

    if isinstance(input_shapes, InputsFunction):
        return input_shapes.at(batch)
    return [[batch, *spec[1:]] for spec in _normalise_specs(input_shapes)]
