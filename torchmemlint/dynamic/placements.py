"""Where to put activation checkpointing: measure candidate placements.

Saved-bytes reductions overstate peak reductions (a saved tensor freed before
the peak does not lower it), so
each placement is judged by the measured training-step peak and the extra
FLOPs of recomputation.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .errors import DynamicError
from .measure import (
    InputSpec,
    ModuleSource,
    build_module,
    count_training_flops,
    measure_training_step,
)

NO_CHECKPOINT = "none"


class CheckpointWrapper(nn.Module):
    """Runs the wrapped module under ``torch.utils.checkpoint.checkpoint``."""

    def __init__(self, module: nn.Module, use_reentrant: bool = False) -> None:
        super().__init__()
        self.module = module
        self.use_reentrant = use_reentrant

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return checkpoint(self.module, *args, use_reentrant=self.use_reentrant, **kwargs)


@dataclass
class PlacementResult:
    name: str
    wrapped: List[str]
    peak_bytes: int
    kept_after_forward: int
    grad_bytes: int  # lower than the baseline's when wrapped layers get no gradient
    flops: int
    peak_change: float  # relative to no checkpointing; -0.3 = 30 % lower
    flops_ratio: float


def find_stages(model: nn.Module) -> List[str]:
    """Outermost ``Sequential``/``ModuleList`` containers of blocks (e.g. a
    ResNet's ``layer1..layer4``): two or more children, each with children."""
    stages: List[str] = []
    for name, mod in model.named_modules():
        if not name or any(name.startswith(stage + ".") for stage in stages):
            continue
        children = list(mod.children())
        if (
            isinstance(mod, (nn.Sequential, nn.ModuleList))
            and len(children) >= 2
            and all(any(True for _ in child.children()) for child in children)
        ):
            stages.append(name)
    return stages


def default_placements(model: nn.Module) -> Dict[str, List[str]]:
    """Every block, each stage, the first stage, early and late stages, the
    first half of all blocks.  A ``ModuleList`` cannot be called, so its
    "stage" is its blocks.  Placements that wrap the same modules are listed once."""
    stages = find_stages(model)
    blocks_of = {
        stage: ["%s.%s" % (stage, name) for name, _ in model.get_submodule(stage).named_children()]
        for stage in stages
    }

    def units(selected: Sequence[str]) -> List[str]:
        paths: List[str] = []
        for stage in selected:
            is_callable = not isinstance(model.get_submodule(stage), nn.ModuleList)
            paths.extend([stage] if is_callable else blocks_of[stage])
        return paths

    all_blocks = [block for stage in stages for block in blocks_of[stage]]
    half = (len(stages) + 1) // 2
    candidates = {
        "every block": all_blocks,
        "each stage": units(stages),
        "first stage": units(stages[:1]),
        "early stages": units(stages[:half]),
        "late stages": units(stages[half:]),
        "early blocks": all_blocks[: (len(all_blocks) + 1) // 2],
    }
    placements: Dict[str, List[str]] = {}
    seen = set()
    for name, paths in candidates.items():
        key = tuple(sorted(paths))
        if paths and key not in seen:
            seen.add(key)
            placements[name] = paths
    return placements


def wrap_modules(model: nn.Module, paths: Sequence[str], use_reentrant: bool = False) -> nn.Module:
    """Wrap the modules at ``paths`` in ``CheckpointWrapper``, in place.

    ``"layer1.*"`` means every child of ``layer1``.  A module registered
    under several parents (``self.conv2 = self.encoder.layer1``) is replaced
    under all of them, so the forward that is actually called is wrapped.
    """
    targets: List[nn.Module] = []
    for path in paths:
        if path.endswith(".*"):
            targets.extend(_get(model, path[:-2]).children())
        else:
            targets.append(_get(model, path))
    wrapped = {id(target): CheckpointWrapper(target, use_reentrant) for target in targets}
    for parent in list(model.modules()):
        if isinstance(parent, CheckpointWrapper):
            continue
        for child_name, child in list(parent._modules.items()):
            if child is not None and id(child) in wrapped:
                parent._modules[child_name] = wrapped[id(child)]
    return model


def checkpoint_placements(
    model: ModuleSource,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    placements: Optional[Mapping[str, Sequence[str]]] = None,
    dtype: Union[str, torch.dtype] = torch.float32,
    device: str = "fake",
    round_to: int = 512,
    use_reentrant: bool = False,
) -> List[PlacementResult]:
    """Measure the training-step peak and FLOPs for each checkpoint placement.

    ``placements`` maps a label to module paths to wrap (``"layer1"``,
    ``"layer1.*"`` for each of its children); by default ``default_placements``.
    A factory is called afresh per placement; a module instance is left
    untouched (its structure is copied, its tensors shared).
    Returns the placements best first (lowest peak, then fewest FLOPs),
    including the unwrapped baseline as ``"none"``.
    """
    if placements is None:
        placements = default_placements(_build_probe(model))
        if not placements:
            raise DynamicError("no Sequential/ModuleList stages of blocks found; pass placements")
    candidates: Dict[str, Sequence[str]] = {NO_CHECKPOINT: []}
    candidates.update(placements)
    measured = []
    for name, paths in candidates.items():
        variant = _wrapped_model(model, paths, use_reentrant)
        report = measure_training_step(
            variant, input_shapes, dtype=dtype, device=device, round_to=round_to
        )
        flops = count_training_flops(variant, input_shapes, dtype=dtype)
        measured.append((name, list(paths), report, flops))
    baseline, baseline_flops = measured[0][2], measured[0][3]
    results = [
        PlacementResult(
            name=name,
            wrapped=paths,
            peak_bytes=report.peak_bytes,
            kept_after_forward=report.kept_after_forward,
            grad_bytes=report.grad_bytes,
            flops=flops,
            peak_change=_relative(report.peak_bytes, baseline.peak_bytes),
            flops_ratio=flops / baseline_flops if baseline_flops else 1.0,
        )
        for name, paths, report, flops in measured
    ]
    return sorted(results, key=lambda result: (result.peak_bytes, result.flops))


def _wrapped_model(model: ModuleSource, paths: Sequence[str], use_reentrant: bool) -> ModuleSource:
    """A factory for factories; for an instance, a copy of its module
    structure that shares the parameter and buffer tensors (cheap, and the
    fake-mode measurement substitutes fake copies of them anyway)."""
    if isinstance(model, nn.Module):
        shared = {id(t): t for t in list(model.parameters()) + list(model.buffers())}
        return wrap_modules(copy.deepcopy(model, memo=shared), paths, use_reentrant)

    def build() -> nn.Module:
        return wrap_modules(build_module(model), paths, use_reentrant)

    return build


def _build_probe(model: ModuleSource) -> nn.Module:
    if isinstance(model, nn.Module):
        return model
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():  # only the structure is needed
        return build_module(model)


def _get(model: nn.Module, path: str) -> nn.Module:
    try:
        return model.get_submodule(path)
    except AttributeError as exc:
        raise DynamicError("no submodule %r to checkpoint" % path) from exc


def _relative(value: int, baseline: int) -> float:
    return (value - baseline) / baseline if baseline else 0.0
