"""Names a file gets from another module of its project through ``from .torch_core import *``
(or the module named in full: ``from torchfusion.gan.layers.layers import *``)
(fastai v1: ``layers.py`` star-imports ``torch_core``, which star-imports ``imports/torch.py``,
where ``import torch, torch.nn.functional as F`` and ``from torch import nn`` are written): the
file reads ``torch.bmm``, ``F.softmax`` and ``nn.Conv1d`` without importing them itself.

Python's ``import *`` binds every public name of the module (its ``__all__`` when it has one;
the project summary does not keep ``__all__``, so every public name is taken: a name the file
reads is one the module gives it). Only what those modules import from torch and the few
libraries the analyses name (einops, functools, math) is bound here, in the file's own table
and where the file binds nothing of that name: a project module's own functions and classes
stay for the project index to follow (``analysis/links.py``), as names the file does not bind.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Set

from torchmemlint.analysis.names import Bindings

# ``from .x import *``, ``from . import *``, or a module of the project named in full
# (``from torchfusion.gan.layers.layers import *``); not one of the libraries' own modules
_PROJECT_STAR = re.compile(
    r"^[ \t]*from[ \t]+(?:\.[\w.]*|(?!(?:torch|einops|functools|math)\b)[A-Za-z_][\w.]*)[ \t]+import[ \t]+\*", re.MULTILINE
)
_LIBRARIES = ("torch", "einops", "functools", "math")
_DEPTH = 6  # star imports followed this deep


def has_project_star(text: Optional[str]) -> bool:
    """A cheap test of the text: ``from .x import *`` (or ``from . import *``, or ``from
    package.module import *``, which may be a module of the project) somewhere."""
    return text is not None and _PROJECT_STAR.search(text) is not None


def expand_star_imports(bindings: Bindings, path: str, index: Any) -> None:
    """Bind in ``bindings`` (the file's table) the library names the project modules that the
    file at ``path`` star-imports import themselves, through their own star imports."""
    summary = index.by_path.get(os.path.abspath(path)) if index is not None else None
    if summary is None:
        return
    found: Dict[str, str] = {}
    _visit_stars(summary, 0, index, found, set())
    for name, target in found.items():
        if not bindings.is_bound(name):
            bindings.names[name] = target


def _visit_stars(module: Any, depth: int, index: Any, found: Dict[str, str], seen: Set[str]) -> None:
    """The library names the modules ``module`` star-imports import, into ``found``, and
    those of the modules they star-import (``_DEPTH`` deep)."""
    for star in module.star:
        if star in seen or depth > _DEPTH or star not in index.by_name:
            continue  # (an outside module: ``from torch.nn import *`` is the file's own star module)
        seen.add(star)
        source = index.by_name[star]
        for name, target in source.imports.items():
            if not name.startswith("_") and target.split(".", 1)[0] in _LIBRARIES:
                found.setdefault(name, target)
        _visit_stars(source, depth + 1, index, found, seen)


# ``from mlagents.torch_utils import torch, nn``: a name a library module is usually bound to,
# imported from a module that is not the library's (ML-Agents' shim re-exports torch's)
_SHIM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+(?!torch\b|einops\b|functools\b|math\b)\.*[\w.]*[ \t]+import[ \t]+[^\n]*\b(torch|nn|F|functional|einsum|rearrange)\b",
    re.MULTILINE,
)


def may_import_reexports(text: Optional[str]) -> bool:
    """A cheap test of the text for ``bind_reexports``."""
    return text is not None and _SHIM_IMPORT.search(text) is not None


def bind_reexports(bindings: Bindings, path: str, index: Any) -> None:
    """Bind in ``bindings`` the names the file at ``path`` imports by name from a project module
    that itself imports them from torch or the libraries above (``from mlagents.torch_utils
    import torch, nn``, ``torch_utils/__init__.py`` doing ``import torch`` and ``from torch import
    nn``): as if the file imported them there (through up to ``_DEPTH`` such modules)."""
    summary = index.by_path.get(os.path.abspath(path)) if index is not None else None
    if summary is None:
        return
    for local, imported in summary.imports.items():
        if local not in bindings.names or bindings.names[local] not in (None, imported):
            continue  # (bound otherwise in the file: that binding stands)
        target = imported
        for _ in range(_DEPTH):
            module, _, name = target.rpartition(".")
            source = index.by_name.get(module) if module else None
            if source is None or source is summary or not source.imports.get(name):
                break
            target = source.imports[name]
            if target.split(".", 1)[0] in _LIBRARIES:
                bindings.names[local] = target
                break
