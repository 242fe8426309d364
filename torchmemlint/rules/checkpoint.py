"""TML4xx: missing or misused ``torch.utils.checkpoint``."""

from __future__ import annotations

import libcst as cst

from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, Invalid, NodeEdit, Rule

CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)


def keyword(call: cst.Call, name: str) -> "cst.Arg | None":
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls that
    do not pass `use_reentrant`.

    ## Why is this bad?
    Without the argument torch picks the reentrant variant and warns that the default will
    change. The reentrant variant recomputes every checkpointed segment in backward even when
    that saves nothing, and when none of the segment's inputs requires grad (the image batch
    going into the first layer) the parameters inside it silently get no gradient at all.
    The non-reentrant variant is the one the PyTorch documentation recommends.

    ## Example
    ```python
    from torch.utils.checkpoint import checkpoint

    def forward(self, x):
        return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    Safe: the fix adds `use_reentrant=False`, which computes the same outputs and gradients
    and also gives gradients to parameters whose segment input does not require grad.

    ## Measured
    See TML402 for what a reentrant checkpoint around a single layer costs
    (`benchmarks/memory_figures.py`).
    """

    code = "TML401"
    name = "checkpoint-without-use-reentrant"
    summary = "`checkpoint` without `use_reentrant`: torch falls back to the reentrant variant"
    fix_availability = FixAvailability.ALWAYS

    VALID = (
        "from torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, use_reentrant=False)\n",
        "import torch\ny = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=True)\n",
        "def checkpoint(f, x):\n    return f(x)\ny = checkpoint(block, x)\n",
        "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x, **kwargs)\n",
    )
    INVALID = (
        Invalid(
            "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n",
            fixed="from torch.utils.checkpoint import checkpoint\n"
            "y = checkpoint(block, x, use_reentrant=False)\n",
            line=2,
            column=5,
        ),
        Invalid(
            "import torch.utils.checkpoint as cp\ny = cp.checkpoint_sequential(seq, 2, x)\n",
            fixed="import torch.utils.checkpoint as cp\n"
            "y = cp.checkpoint_sequential(seq, 2, x, use_reentrant=False)\n",
        ),
        Invalid(
            "import torch\n"
            "y = torch.utils.checkpoint.checkpoint(\n    block,\n    x,\n)\n",
            fixed="import torch\n"
            "y = torch.utils.checkpoint.checkpoint(\n    block,\n    x, use_reentrant=False,\n)\n",
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.qualify(node.func) not in CHECKPOINT_FUNCTIONS:
            return
        if keyword(node, "use_reentrant") is not None or has_star_kwargs(node):
            return
        self.report(
            node,
            "`checkpoint` without `use_reentrant`: torch uses the reentrant variant, which "
            "recomputes every segment and gives no gradient to parameters whose segment input "
            "does not require grad; pass `use_reentrant=False`",
            FixSpec(Applicability.SAFE, "Pass `use_reentrant=False`", (self._add_keyword(node),)),
        )

    def _add_keyword(self, call: cst.Call) -> NodeEdit:
        last = call.args[-1] if call.args else None
        if last is None:
            return NodeEdit(call, self.code_for(call.with_changes(args=[_use_reentrant_false()])))
        # Insert after the last argument's value, keeping any trailing comma and layout.
        text = ", use_reentrant=False"
        return NodeEdit(last.value, text, "after")


def _use_reentrant_false() -> cst.Arg:
    return cst.Arg(
        value=cst.Name("False"),
        keyword=cst.Name("use_reentrant"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
