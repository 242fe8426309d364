"""The ``inplace`` a layer built in ``__init__`` gets from a switch of the class's own
configuration: ``self.activation = activation(inplace=inplace)`` (also ``nn.LeakyReLU(0.2,
inplace=inplace)``) with ``def __init__(self, ..., inplace=False)``. Read as a factory's layer
is (``analysis/factories.py``): the parameter's literal default, unless a call of the class in
this file passes another value (a literal, or a parameter of the caller with a literal
default); not known where a call cannot be read or the body rebinds the parameter. A layer so
read is ``configured``: the rules offer no edit of it (the switch is the caller's to set)."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.factories import parameter
from torchmemlint.analysis.syntax import argument, literal_bool


def configured_inplace(factories: Any, layer: Any, function: Optional[cst.FunctionDef]) -> Optional[bool]:
    """The ``inplace`` ``layer`` (a ``Layer`` of ``analysis/classes.py``) gets from a parameter
    of ``function``, an ``__init__`` (None: not such a switch, or not known)."""
    kind = layer.kind
    if function is None or function.name.value != "__init__" or factories is None or kind is None \
            or "inplace" not in kind.module_params:
        return None
    arg = argument(layer.effective, kind.module_params.index("inplace"), "inplace")
    if arg is None or type(arg.value) is not cst.Name:
        return None
    param = parameter(function, arg.value.value)
    value = _literal_default(param)
    if value is None:
        return None
    passed = factories.passed(function, param)
    if passed is None:
        return None  # a call of the class that cannot be read
    for given, caller in passed:
        if given is None:
            continue  # left at the default
        other = literal_bool(given)
        if other is None and type(given) is cst.Name and caller is not None:
            other = _literal_default(parameter(caller, given.value))  # ``inplace=inplace`` passed down
        if other is not value:
            return None  # a call of this file chooses otherwise, or what it chooses is not known
    return value


def _literal_default(param: Optional[cst.Param]) -> Optional[bool]:
    if param is None or param.default is None:
        return None
    return literal_bool(param.default)
