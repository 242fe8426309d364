"""The text of a module-level string constant a default names (``nonlin: str = DEFAULT_NONLIN``),
defined in the file (``DEFAULT_NONLIN = "elu"``, assigned once) or in another file of the project
it is imported from (``from .constants import DEFAULT_NONLIN``, as the project index resolves
the import: that file's own single assignment, or its own import of it, read through
``ProjectLinks``; parsed only when such a default is asked)."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst


def constant_text(factories: Any, name: cst.Name, depth: int = 0) -> Optional[str]:
    """The string ``name`` holds at module level: its file's one assignment of a string literal,
    or the one of the project module it is imported from; None when not known."""
    factories._index()
    values = factories._module_assignments.get(name.value, [])
    if values:
        if len(values) == 1 and type(values[0]) is cst.SimpleString and isinstance(values[0].evaluated_value, str):
            return values[0].evaluated_value
        return None
    links = factories.links() if factories.links is not None else None
    if links is None or depth > 2:
        return None
    index = links.index
    own = index.module_of(links.path)
    dotted = own.imports.get(name.value) if own is not None else None  # (relative imports resolved)
    if not dotted or "." not in dotted:
        return None
    module, _, attribute = dotted.rpartition(".")
    path = index.module_path(module)
    summary = index.module_of(path) if path is not None else None
    analysis = links.analysis_of(path, summary.digest) if summary is not None else None
    if analysis is None:
        return None
    return constant_text(analysis.factories, cst.Name(attribute), depth + 1)
