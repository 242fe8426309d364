"""Dropout probabilities the file pins to 0 (``zero_probability``): a literal 0, or a parameter
defaulting to 0 that every call leaves so, followed up through the callers that pass their own
such parameter (moved out of ``layer_lists.py``, which reads the layer lists)."""

from __future__ import annotations

from typing import Any, Optional

import libcst as cst

from torchmemlint.analysis.flag_importers import constructions_elsewhere
from torchmemlint.analysis.syntax import literal_number
from torchmemlint.tree import nodes_of


def zero_probability(
    module: cst.Module,
    function: Optional[cst.FunctionDef],
    owner: Optional[cst.ClassDef],
    value: cst.BaseExpression,
    factories=None,
    depth: int = 0,
    analysis: Any = None,
) -> bool:
    """Whether the dropout probability ``value`` is 0 here: a literal 0, or a parameter of
    ``function`` whose default is 0 and that every call of it in this file (at least one)
    leaves out or passes as 0, or passes down from the caller's own such parameter
    (``Block(dim, drop=drop_rate)`` in a model whose ``drop_rate=0.`` is never changed).
    For ``__init__`` the calls are those of the class's name. With ``analysis`` (the file's), a
    class built nowhere in its file is judged by its constructions in the files importing it
    (``flag_importers``; none: by its default), and ``self.hparams.<name>`` in ``__init__`` is
    its parameter ``<name>`` (Lightning's ``save_hyperparameters``)."""
    number = literal_number(value)
    if number is not None:
        return number == 0
    if analysis is not None and function is not None and (named := _hyperparameter(function, value)) is not None:
        value = named
    if function is None or type(value) is not cst.Name or depth > 4:
        return False
    params = function.params
    positional = [*params.posonly_params, *params.params]
    param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == value.value), None)
    if param is None or param.default is None or literal_number(param.default) != 0:
        return False
    if _rebound(function, value.value):
        return False
    passed = factories.passed(function, param) if factories is not None else None
    if passed == [] and analysis is not None and function.name.value == "__init__":
        passed = constructions_elsewhere(analysis, function, param)
        return passed is not None and all(given is None or literal_number(given) == 0 for _, given, _ in passed)
    if not passed:
        return False  # not read, or called from elsewhere: the probability is not known here
    for given, caller in passed:
        if given is None or literal_number(given) == 0:
            continue
        if caller is not None and zero_probability(module, caller, None, given, factories, depth + 1, analysis):
            continue
        return False
    return True


def _hyperparameter(function: cst.FunctionDef, value: cst.BaseExpression) -> Optional[cst.Name]:
    """``self.hparams.name`` (or ``self.hparams["name"]``) in ``__init__``, ``name`` one of its
    parameters, ``self.hparams`` never assigned there: that parameter's name."""
    if function.name.value != "__init__" or not function.params.params:
        return None
    first = function.params.params[0].name.value
    if type(value) is cst.Attribute:
        base, name = value.value, value.attr.value
    elif type(value) is cst.Subscript and len(value.slice) == 1 and type(value.slice[0].slice) is cst.Index:
        key = value.slice[0].slice.value
        base, name = value.value, key.evaluated_value if type(key) is cst.SimpleString else None
    else:
        return None
    if not (type(base) is cst.Attribute and base.attr.value == "hparams" and type(base.value) is cst.Name and base.value.value == first):
        return None
    if not isinstance(name, str) or not any(p.name.value == name for p in (*function.params.params, *function.params.kwonly_params)):
        return None
    for node in nodes_of(function.body, cst.Assign, cst.AnnAssign):
        targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        if any(type(t) is cst.Attribute and t.attr.value == "hparams" for t in targets):
            return None  # ``self.hparams = hparams``: a namespace given, not the parameters
    return cst.Name(name)


def _rebound(function: cst.FunctionDef, name: str) -> bool:
    for node in nodes_of(function.body, cst.Assign, cst.AugAssign, cst.AnnAssign):
        targets = (
            [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]
        )
        if any(type(t) is cst.Name and t.value == name for t in targets):
            return True
    return False
