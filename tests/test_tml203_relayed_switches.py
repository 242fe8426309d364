"""TML203: an activation function that relays its caller's ``inplace`` switch (qste's drop-in
``leaky_relu(inputs, negative_slope=0.01, inplace=False)``: ``if inplace: return
F.leaky_relu(inputs, negative_slope, True)``, then the out-of-place way on ``inputs``;
``_packed_relu``: ``F.relu(inputs, True) if inplace else relu(inputs)``) overwrites nothing
that is read after it: the read after the ``return`` never runs after it, and a helper's read in
the other arm of a conditional expression runs instead of it (``helper_runs`` marks an inlined
helper's values with their call, ``activations._site``).

Still reported: a read in the same ``return`` (``F.relu(x, True) + x``), a helper reading the
tensor after the activation, and a read after an arm that does not return."""

from __future__ import annotations

from marked_cases import lint_cases, marked

CASES = {
    "relayed": """
        import torch.nn.functional as F
        from torch import Tensor


        def relu(inputs: Tensor) -> Tensor:
            return inputs.clamp(min=0)


        def leaky_relu(inputs: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
            if inplace:  # the caller asked for it
                return F.leaky_relu(inputs, negative_slope, True)
            return _LeakyFn.apply(inputs, negative_slope)


        def _packed_relu(inputs: Tensor, inplace: bool = False) -> Tensor:
            return F.relu(inputs, True) if inplace else relu(inputs)

    """,
    "reported": """
        import torch.nn.functional as F


        def scale(x):
            return x * 2


        def same_return(x):
            return F.relu(x, True) + x  # expect: TML203


        def helper_after(x):
            y = F.relu(x, True)  # expect: TML203
            return y + scale(x)


        def arm_without_return(x, inplace=False):
            if inplace:
                y = F.leaky_relu(x, 0.1, True)  # expect: TML203
            else:
                y = F.leaky_relu(x, 0.1)
            return y - x
    """,
}


def test_relayed_switches(tmp_path):
    found = lint_cases(tmp_path, CASES, "TML203")
    for name, source in CASES.items():
        assert set(found[name]) == marked(source), (name, found[name])
