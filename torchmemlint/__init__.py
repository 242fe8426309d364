"""torchmemlint: find and fix GPU-memory anti-patterns in PyTorch source.

``torchmemlint.profile`` and ``torchmemlint.fit`` (dynamic mode, for notebooks and
scripts) are loaded on first use: importing torchmemlint does not import torch.
"""

from typing import Any

__version__ = "0.1.0"

_DYNAMIC_API = ("profile", "fit", "Report")


def __getattr__(name: str) -> Any:
    if name in _DYNAMIC_API:  # imported by name, on first use: dynamic mode imports the linter
        import importlib

        return getattr(importlib.import_module("torchmemlint.dynamic.api"), name)
    raise AttributeError("module 'torchmemlint' has no attribute %r" % name)


def __dir__() -> list:
    return sorted(list(globals()) + list(_DYNAMIC_API))
