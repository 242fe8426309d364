"""Dynamic mode: run a model once and measure its training-step memory.

Only this package imports torch.  Names are loaded lazily so that
``torchmemlint.dynamic.errors`` stays importable without torch installed.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DynamicError": "errors",
    "NoTensorOutputError": "errors",
    "LiveTracker": "tracker",
    "MemoryEvent": "tracker",
    "AllocatorEstimate": "tracker",
    "simulate_cuda_caching_allocator": "tracker",
    "StepReport": "measure",
    "CudaFigures": "measure",
    "measure_training_step": "measure",
    "scalar_loss": "measure",
    "count_training_flops": "measure",
    "NumericsReport": "numerics",
    "compare_numerics": "numerics",
    "PlacementResult": "placements",
    "checkpoint_placements": "placements",
    "default_placements": "placements",
    "wrap_modules": "placements",
    "load_target": "target",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    return getattr(importlib.import_module("." + _EXPORTS[name], __name__), name)
