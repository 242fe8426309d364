"""Functions of the file that build a container of the modules they are given:

    def Sequential(*modules):
        modules = [*filter(exists, modules)]
        if len(modules) == 0:
            return nn.Identity()
        return nn.Sequential(*modules)

A call of one is that container of its arguments: ``Sequential(conv, act)`` is
``nn.Sequential(conv, act)``, ``Layers(a, b)`` of ``def Layers(*m): return nn.ModuleList(m)``
is ``nn.ModuleList([a, b])``. A function qualifies when it is defined once at module level,
takes its modules as ``*args`` (keyword-only parameters with defaults aside), never changes
them other than by copying or filtering them (``list(m)``, ``[*m]``, ``filter(f, m)``,
``[x for x in m if ...]``), and every ``return`` gives the container of them, or, for the
degenerate cases, ``nn.Identity()`` or one of them (``m[0]``). Anything else it returns (a
wrapper, a container of other modules) leaves it a function like any other."""

from __future__ import annotations

from typing import Callable, Dict, Optional, Set

import libcst as cst

from torchmemlint.analysis.vocabulary import NN
from torchmemlint.tree import scan

SEQUENTIAL = NN + "Sequential"
MODULE_LIST = NN + "ModuleList"
_COPIES = frozenset({"list", "tuple", "builtins.list", "builtins.tuple"})
_FILTERS = frozenset({"filter", "builtins.filter"})
_PRUNED = (cst.FunctionDef, cst.ClassDef, cst.Lambda)


class ContainerHelpers:
    """The container helpers of one file by name (found on the first question)."""

    def __init__(self, module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self.module = module
        self.qualify = qualify
        self._found: Optional[Dict[str, str]] = None

    def container(self, name: str) -> Optional[str]:
        """``torch.nn.Sequential`` / ``torch.nn.ModuleList`` when the module-level function
        ``name`` builds that container of its ``*args``; None otherwise."""
        if self._found is None:
            self._found = self._find()
        return self._found.get(name)

    def _find(self) -> Dict[str, str]:
        defined: Dict[str, int] = {}
        candidates = []
        for statement in self.module.body:
            if type(statement) is cst.FunctionDef:
                defined[statement.name.value] = defined.get(statement.name.value, 0) + 1
                if type(statement.params.star_arg) is cst.Param:
                    candidates.append(statement)
            elif type(statement) is cst.ClassDef:
                defined[statement.name.value] = defined.get(statement.name.value, 0) + 1
        found: Dict[str, str] = {}
        for function in candidates:
            if defined[function.name.value] == 1:
                kind = _builds(function, self.qualify)
                if kind is not None:
                    found[function.name.value] = kind
        return found


def _builds(function: cst.FunctionDef, qualify) -> Optional[str]:
    """The container ``function`` builds of its ``*args`` (see the module's docstring)."""
    params = function.params
    star = params.star_arg
    assert type(star) is cst.Param
    if params.params or params.posonly_params or params.star_kwarg is not None:
        return None
    if any(param.default is None for param in params.kwonly_params):
        return None
    derived = _derived_names(function, star.name.value, qualify)
    if derived is None:
        return None
    kinds: Set[str] = set()
    returns = scan(function.body, (cst.Return,), _PRUNED)
    for statement in returns:
        value = statement.value  # type: ignore[attr-defined]
        kind = _container_of(value, derived, qualify) if value is not None else None
        if kind is not None:
            kinds.add(kind)
        elif not _degenerate(value, derived, qualify):
            return None
    return kinds.pop() if len(kinds) == 1 else None


def _derived_names(function: cst.FunctionDef, varargs: str, qualify) -> Optional[Set[str]]:
    """The local names that hold the ``*args`` or a copy or filtering of them; None when the
    ``*args`` name itself is given anything else (or changed in place, ``modules.append``)."""
    assigned: Dict[str, list] = {}
    for node in scan(function.body, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.WithItem), _PRUNED):
        kind = type(node)
        if kind is cst.Assign:
            for target in node.targets:  # type: ignore[attr-defined]
                name = target.target.value if type(target.target) is cst.Name else None
                if name is None:
                    continue
                assigned.setdefault(name, []).append(node.value)  # type: ignore[attr-defined]
        elif kind is cst.AnnAssign:
            if type(node.target) is cst.Name:  # type: ignore[attr-defined]
                assigned.setdefault(node.target.value, []).append(node.value)  # type: ignore[attr-defined]
        elif kind is cst.AugAssign:
            if type(node.target) is cst.Name:  # type: ignore[attr-defined]
                assigned.setdefault(node.target.value, []).append(None)  # type: ignore[attr-defined]
        elif kind is cst.For:
            if type(node.target) is cst.Name:  # type: ignore[attr-defined]
                assigned.setdefault(node.target.value, []).append(None)  # type: ignore[attr-defined]
        elif type(node.asname) is cst.AsName and type(node.asname.name) is cst.Name:  # type: ignore[attr-defined]
            assigned.setdefault(node.asname.name.value, []).append(None)  # type: ignore[attr-defined]
    derived = {varargs}
    changed = True
    while changed:
        changed = False
        for name, values in assigned.items():
            if name not in derived and all(v is not None and _copy_of(v, derived, qualify) for v in values):
                derived.add(name)
                changed = True
    if any(name in derived and not all(v is not None and _copy_of(v, derived, qualify) for v in values)
           for name, values in assigned.items()):
        return None
    for node in scan(function.body, (cst.Call, cst.Subscript), _PRUNED):
        if type(node) is cst.Subscript:
            base = node.value  # type: ignore[attr-defined]
            if type(base) is cst.Name and base.value in derived and not _read_only(function, node):
                return None  # ``modules[0] = x``, ``del modules[1]``: another list
            continue
        func = node.func  # type: ignore[attr-defined]
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value in derived:
            return None  # ``modules.append(extra)``, ``modules.insert(0, x)``: another list
    return derived


def _read_only(function: cst.FunctionDef, subscript: cst.CSTNode) -> bool:
    """``subscript`` is not the target of an assignment or a ``del`` of ``function``."""
    for node in scan(function.body, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.Del), _PRUNED):
        if type(node) is cst.Assign:
            targets = [t.target for t in node.targets]  # type: ignore[attr-defined]
        else:
            targets = [node.target]  # type: ignore[attr-defined]
        if any(t is subscript for t in targets):
            return False
    return True


def _copy_of(value: cst.BaseExpression, derived: Set[str], qualify) -> bool:
    """``value`` holds the same modules as a derived name, in order, maybe fewer."""
    kind = type(value)
    if kind is cst.Name:
        return value.value in derived  # type: ignore[attr-defined]
    if kind in (cst.List, cst.Tuple):
        elements = value.elements  # type: ignore[attr-defined]
        return len(elements) == 1 and type(elements[0]) is cst.StarredElement and _copy_of(elements[0].value, derived, qualify)
    if kind in (cst.ListComp, cst.GeneratorExp):
        comp = value.for_in  # type: ignore[attr-defined]
        return (
            comp.inner_for_in is None and type(comp.target) is cst.Name and type(value.elt) is cst.Name  # type: ignore[attr-defined]
            and value.elt.value == comp.target.value and _copy_of(comp.iter, derived, qualify)  # type: ignore[attr-defined]
        )
    if kind is cst.Call:
        args = value.args  # type: ignore[attr-defined]
        if any(arg.keyword is not None or arg.star for arg in args):
            return False
        name = _builtin(value.func, qualify)  # type: ignore[attr-defined]
        if name in _COPIES and len(args) == 1:
            return _copy_of(args[0].value, derived, qualify)
        if name in _FILTERS and len(args) == 2:
            return _copy_of(args[1].value, derived, qualify)
    return False


def _builtin(func: cst.BaseExpression, qualify) -> Optional[str]:
    qualified = qualify(func)
    if qualified is None and type(func) is cst.Name:
        return func.value  # (qualify gives None for a builtin too)
    return qualified


def _container_of(value: cst.BaseExpression, derived: Set[str], qualify) -> Optional[str]:
    """``nn.Sequential(*modules)`` / ``nn.ModuleList(modules)`` of a derived name."""
    if type(value) is not cst.Call:
        return None
    qualified = qualify(value.func)
    args = value.args
    if qualified == SEQUENTIAL and len(args) == 1 and args[0].star == "*" and _copy_of(args[0].value, derived, qualify):
        return SEQUENTIAL
    if qualified == MODULE_LIST and len(args) == 1 and not args[0].star and args[0].keyword is None and _copy_of(args[0].value, derived, qualify):
        return MODULE_LIST
    return None


def _degenerate(value: Optional[cst.BaseExpression], derived: Set[str], qualify) -> bool:
    """``nn.Identity()`` (no module given) or ``modules[0]`` (one given)."""
    if type(value) is cst.Call:
        return qualify(value.func) == NN + "Identity" and not value.args
    if type(value) is cst.Subscript and type(value.value) is cst.Name and value.value.value in derived:
        if len(value.slice) != 1 or type(value.slice[0].slice) is not cst.Index:
            return False
        index = value.slice[0].slice.value
        return type(index) is cst.Integer and index.value in ("0",) or (
            type(index) is cst.UnaryOperation and type(index.operator) is cst.Minus
            and type(index.expression) is cst.Integer and index.expression.value == "1"
        )
    return False
