"""Is a constructor flag turned on by every construction in the other files of the project?

lucidrains' ``Attend(flash=False)`` keeps its SDPA path behind ``if self.flash:``, off by its own
default, while every model of the package builds it as ``Attend(flash=flash)`` in
``Attention.__init__(self, flash=True)`` or with ``flash=flash_attn`` where ``flash_attn=True``:
SDPA runs by default. ``analysis/flags.py`` reads the constructions of the class's own file; when
there are none, the class's constructions in the files that import it decide (``turned_on``):
each must pass the flag a value that is on, a literal ``True`` or a parameter of the constructing
function that is on itself (its default ``True`` and every call of that function, in its file and
in the files importing its class, passing on or leaving it; ``Attention(flash=True)``, or left at
``flash=True``), followed through ``DEPTH`` constructors. A construction that leaves the flag at
its default, passes anything else or cannot be read (a file that imports the module itself, a
star or an unreadable file, a local class of the same name) keeps the flag off: the eager path
stays the default one.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.factories import parameter
from torchmemlint.analysis.syntax import literal_bool

DEPTH = 6


def turned_on(analysis: Any, init: cst.FunctionDef, param: cst.Param, depth: int = 0) -> bool:
    """Does every construction, in the project's other files, of the top-level class whose
    ``__init__`` is ``init`` (in ``analysis``'s file) pass ``param`` a value that is on, and is
    there at least one?"""
    sites = constructions_elsewhere(analysis, init, param)
    return bool(sites) and all(value is not None and _on(theirs, value, caller, depth) for theirs, value, caller in sites)


def constructions_elsewhere(analysis: Any, init: cst.FunctionDef, param: cst.Param) -> Optional[List[Tuple[Any, Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
    """``(analysis of the file, value passed, function passing it)`` for each construction of
    ``init``'s class in the files importing it; None when one cannot be read."""
    links = analysis.links
    owner = next((
        c for c in analysis.module.body
        if type(c) is cst.ClassDef and type(c.body) is cst.IndentedBlock and any(s is init for s in c.body.body)
    ), None)
    if links is None or owner is None or init.name.value != "__init__":
        return None
    importing = links.importing(owner.name.value)
    if importing is None:
        return None  # unread, or the module itself or a star imported: its calls are not known
    found: List[Tuple[Any, Optional[cst.BaseExpression], Optional[cst.FunctionDef]]] = []
    for theirs, names in importing:
        for name in names:
            passed = theirs.factories.passed_to(name, init, param)
            if passed is None:
                return None
            found.extend((theirs, value, caller) for value, caller in passed)
    return found


def may_turn_on(analysis: Any, init: cst.FunctionDef, param: cst.Param) -> bool:
    """May a construction, in the project's other files, of the class whose ``__init__`` is
    ``init`` pass ``param`` something other than ``False`` or ``None`` (or not be read)?"""
    sites = constructions_elsewhere(analysis, init, param)
    return sites is None or any(
        value is not None and literal_bool(value) is not False and not (type(value) is cst.Name and value.value == "None")
        for _, value, _ in sites
    )


def _on(analysis: Any, value: cst.BaseExpression, caller: Optional[cst.FunctionDef], depth: int) -> bool:
    """``value``, passed in ``caller`` (of ``analysis``'s file), is on: ``True``, or a parameter
    of ``caller`` whose value is on unless a caller turns it off (``_parameter_on``)."""
    if literal_bool(value) is True:
        return True
    if type(value) is not cst.Name or caller is None or depth >= DEPTH:
        return False
    param = parameter(caller, value.value)
    return param is not None and _parameter_on(analysis, caller, param, depth + 1)


def _parameter_on(analysis: Any, function: cst.FunctionDef, param: cst.Param, depth: int) -> bool:
    """Every call of ``function`` passes ``param`` a value that is on, or leaves it at a default
    of ``True``: the calls of its file and, for a constructor, those of the files importing its
    class (a class built nowhere: its default)."""
    passed = analysis.factories.passed(function, param)
    if passed is None:
        return False
    default_on = literal_bool(param.default) is True
    if not all(_on(analysis, value, caller, depth) if value is not None else default_on for value, caller in passed):
        return False
    if function.name.value != "__init__" or analysis.links is None:
        return default_on or bool(passed)
    elsewhere = constructions_elsewhere(analysis, function, param)
    if elsewhere is None:
        return False
    if not passed and not elsewhere:
        return default_on
    return all(_on(theirs, value, caller, depth) if value is not None else default_on for theirs, value, caller in elsewhere)
