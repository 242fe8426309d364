"""Dicts a function keeps as it was given (OpenMMLab's ``norm_cfg=dict(type='BN')``), for
``analysis/configs.py``: a copy of a dict holds what the dict holds (``copy.deepcopy(cfg)``,
``copy.copy(cfg)``, ``cfg.copy()``), so a parameter that the body rebinds only to copies of
itself (``norm_cfg = copy.deepcopy(norm_cfg)``, mmcv/mmpose's guard against mutable defaults)
still holds what its caller passed, or its default; and whether the body may change one key
of it (``cfg['type'] = 'SyncBN'``, ``cfg.update(...)``), after which the value read is not the
one given."""

from __future__ import annotations

from typing import Callable, Optional

import libcst as cst

from torchmemlint.analysis.factories import _literal_key, _local_values, _param
from torchmemlint.tree import scan, walk

_COPY_FUNCTIONS = frozenset({"copy.deepcopy", "copy.copy"})
# dict methods that change it; `pop`/`setdefault` only the key they name, `update` the keys
# it is given as keywords (a positional mapping: any key)
_MUTATORS = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__", "__delitem__", "__ior__"})


def copy_source(value: cst.BaseExpression, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[cst.BaseExpression]:
    """What ``value`` is a copy of: ``x`` for ``copy.deepcopy(x)`` and ``copy.copy(x)`` (however
    ``copy`` is imported) and for ``x.copy()``; None when it is no such copy."""
    if type(value) is not cst.Call:
        return None
    args = value.args
    func = value.func
    if type(func) is cst.Attribute and func.attr.value == "copy" and not args and qualify(func) is None:
        return func.value
    if len(args) == 1 and args[0].keyword is None and not args[0].star and qualify(func) in _COPY_FUNCTIONS:
        return args[0].value
    return None


def copied_parameter(
    function: cst.FunctionDef, name: str, qualify: Callable[[cst.BaseExpression], Optional[str]]
) -> Optional[cst.Param]:
    """The parameter ``name`` of ``function`` when its body rebinds it, and only to copies of
    itself (``norm_cfg = copy.deepcopy(norm_cfg)``): wherever it is read it holds a dict equal
    to what the caller passed, or to the default. None otherwise (not a parameter, never
    rebound: ``factories.parameter``, or rebound to anything else)."""
    param = _param(function, name)
    values = _local_values(function, name) if param is not None else []
    if not values:
        return None
    for value in values:
        source = copy_source(value, qualify)
        if type(source) is not cst.Name or source.value != name:
            return None
    return param


def key_may_change(function: cst.FunctionDef, name: str, key: str) -> bool:
    """Whether ``function`` may change ``name[key]`` of the dict ``name``: assigns, augments or
    deletes that key or a computed one (``cfg['type'] = 'SyncBN'``, ``cfg['type'] += '1d'``), or
    calls a method that may (``cfg.update(d)``, ``cfg.pop('type')``, ``cfg.clear()``; not
    ``cfg.setdefault('eps', 1e-5)`` or ``cfg.update(momentum=0.01)``)."""
    for call in scan(function.body, (cst.Call,)):
        func = call.func  # type: ignore[attr-defined]
        if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != name:
            continue
        method = func.attr.value
        if method not in _MUTATORS:
            continue
        args = call.args  # type: ignore[attr-defined]
        if method == "update":
            if any(arg.keyword is None or arg.keyword.value == key for arg in args):
                return True
        elif method in ("pop", "setdefault"):
            first = args[0].value if args and args[0].keyword is None and not args[0].star else None
            if type(first) is not cst.SimpleString or first.evaluated_value == key:
                return True
        else:
            return True
    for statement in scan(function.body, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del)):
        if type(statement) is cst.Assign:
            targets = [target.target for target in statement.targets]  # type: ignore[attr-defined]
        else:
            targets = [statement.target]  # type: ignore[attr-defined]
        for target in targets:
            for node in walk(target):
                if type(node) is cst.Subscript and type(node.value) is cst.Name and node.value.value == name:
                    written = _literal_key(node, name)
                    if written is None or written == key:
                        return True
    return False
