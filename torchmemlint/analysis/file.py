"""``FileAnalysis``: the per-file entry point of the shared analysis."""

from __future__ import annotations

from typing import Any, Dict

import libcst as cst

from torchmemlint.analysis.names import Bindings


class FileAnalysis:
    """Everything the rules may ask about one file, each part built on first need."""

    def __init__(self, module: cst.Module, bindings: Bindings) -> None:
        self.module = module
        self.bindings = bindings  # module-level bindings
        self._parts: Dict[str, Any] = {}
