"""Check that a memory fix keeps a model's numerics (``tests/dynamic/test_verify.py``)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from .inputs import ModelInputs
from .measure import eager, training_loss


@dataclass
class NumericsReport:
    """Differences between two models after one seeded training step.

    Diffs are max absolute differences; ``None`` in ``param_grad_diffs``
    means one side has a gradient and the other has none.  An exception
    raised by either side's step is kept as text in ``error_a``/``error_b``.
    """

    equal: bool
    atol: float
    rtol: float
    output_diff: float = 0.0
    input_grad_diff: float = 0.0
    param_grad_diffs: Dict[str, Optional[float]] = field(default_factory=dict)
    buffer_diffs: Dict[str, float] = field(default_factory=dict)
    differing_outputs: bool = False
    differing_input_grads: bool = False
    differing_params: List[str] = field(default_factory=list)
    differing_buffers: List[str] = field(default_factory=list)
    missing_params: List[str] = field(default_factory=list)
    error_a: Optional[str] = None
    error_b: Optional[str] = None
    # The shapes of each side's output tensors (in the order tree_flatten gives them).
    output_shapes_a: List[List[int]] = field(default_factory=list)
    output_shapes_b: List[List[int]] = field(default_factory=list)


@dataclass
class _StepResult:
    outputs: List[torch.Tensor]
    input_grads: List[Optional[torch.Tensor]]
    param_grads: Dict[str, Optional[torch.Tensor]]
    buffers: Dict[str, torch.Tensor]
    error: Optional[str] = None


def compare_numerics(
    module_a: nn.Module,
    module_b: nn.Module,
    inputs: Union[torch.Tensor, Sequence[torch.Tensor], ModelInputs],
    atol: float = 0.0,
    rtol: float = 0.0,
    seed: int = 0,
    train: bool = True,
) -> NumericsReport:
    """Run one forward/backward step of A and B from the same state and compare.

    ``module_b`` loads ``module_a``'s state_dict strictly before either
    runs (so B is modified; a fix that renames parameters fails here).
    Each forward is seeded identically (dropout).  Compared: outputs, input
    gradients, every parameter gradient by name (a ``None`` on one side
    counts as a difference) and every buffer after the step (catches a
    BatchNorm updated twice).  ``atol``/``rtol`` = 0 demands bitwise equality.
    Use real CPU tensors at small shapes.
    """
    initial_state = copy.deepcopy(module_a.state_dict())
    module_b.load_state_dict(initial_state, strict=True)
    if isinstance(inputs, torch.Tensor):
        inputs = [inputs]
    result_a = _run_step(module_a, inputs, seed, train)
    result_b = _run_step(module_b, inputs, seed, train)

    report = NumericsReport(equal=True, atol=atol, rtol=rtol)
    report.error_a, report.error_b = result_a.error, result_b.error
    report.output_shapes_a = [list(t.shape) for t in result_a.outputs]
    report.output_shapes_b = [list(t.shape) for t in result_b.outputs]
    if result_a.error or result_b.error:
        report.equal = False
        return report

    report.output_diff, report.differing_outputs = _compare_lists(
        result_a.outputs, result_b.outputs, atol, rtol
    )
    report.input_grad_diff, report.differing_input_grads = _compare_lists(
        result_a.input_grads, result_b.input_grads, atol, rtol
    )
    for name in sorted(set(result_a.param_grads) | set(result_b.param_grads)):
        if name not in result_a.param_grads or name not in result_b.param_grads:
            report.missing_params.append(name)
            continue
        diff, differs = _compare(result_a.param_grads[name], result_b.param_grads[name], atol, rtol)
        report.param_grad_diffs[name] = diff
        if differs:
            report.differing_params.append(name)
    for name in sorted(set(result_a.buffers) | set(result_b.buffers)):
        diff, differs = _compare(result_a.buffers.get(name), result_b.buffers.get(name), atol, rtol)
        report.buffer_diffs[name] = diff if diff is not None else float("inf")
        if differs:
            report.differing_buffers.append(name)
    report.equal = not (
        report.differing_outputs
        or report.differing_input_grads
        or report.differing_params
        or report.differing_buffers
        or report.missing_params
    )
    return report


def _run_step(
    module: nn.Module, inputs: Union[Sequence[torch.Tensor], ModelInputs], seed: int, train: bool
) -> _StepResult:
    module.train(train)
    for param in module.parameters():
        param.grad = None
    if isinstance(inputs, ModelInputs):  # an inputs function's batch: args and kwargs, nested
        batch = inputs.map(lambda tensor: tensor.detach().clone().requires_grad_(tensor.is_floating_point()))
        leaves = batch.tensors()
    else:
        leaves = [
            tensor.detach().clone().requires_grad_(tensor.is_floating_point()) for tensor in inputs
        ]
        batch = ModelInputs(tuple(leaves))
    torch.manual_seed(seed)
    try:
        with eager():
            output = batch.call(module)
            training_loss(output).backward()
    except Exception as exc:  # a fix that breaks backward is a finding, not a crash
        return _StepResult([], [], {}, {}, error="%s: %s" % (type(exc).__name__, exc))
    outputs = [t.detach() for t in tree_flatten(output)[0] if isinstance(t, torch.Tensor)]
    return _StepResult(
        outputs=outputs,
        input_grads=[leaf.grad for leaf in leaves],
        param_grads={name: p.grad for name, p in module.named_parameters()},
        buffers={name: b.detach().clone() for name, b in module.named_buffers()},
    )


def _compare(
    a: Optional[torch.Tensor], b: Optional[torch.Tensor], atol: float, rtol: float
) -> Tuple[Optional[float], bool]:
    """Max abs diff (None if exactly one side is missing) and whether it differs."""
    if a is None and b is None:
        return 0.0, False
    if a is None or b is None or a.shape != b.shape:
        return None, True
    # Different dtypes differ, unless a tolerance is given and both are floating (an
    # autocast variant's bfloat16 output against float32's: compared in float64).
    if a.dtype != b.dtype and not (
        (atol or rtol) and a.is_floating_point() and b.is_floating_point()
    ):
        return None, True
    if not a.is_floating_point():
        diff = float((a.long() - b.long()).abs().max()) if a.numel() else 0.0
        return diff, diff != 0
    if a.numel() == 0:
        return 0.0, False
    delta = (a.double() - b.double()).abs()
    diff = float(delta.max())
    same_nan = torch.isnan(a) == torch.isnan(b)
    within = (delta <= atol + rtol * b.double().abs()) | (torch.isnan(a) & torch.isnan(b))
    return diff, not bool(within.all() and same_nan.all())


def _compare_lists(
    a: Sequence[Optional[torch.Tensor]], b: Sequence[Optional[torch.Tensor]], atol: float, rtol: float
) -> Tuple[float, bool]:
    if len(a) != len(b):
        return float("inf"), True
    worst, differs = 0.0, False
    for left, right in zip(a, b):
        diff, item_differs = _compare(left, right, atol, rtol)
        worst = max(worst, diff if diff is not None else float("inf"))
        differs = differs or item_differs
    return worst, differs
