"""Layers built at module level and used by the classes of the file: ``ACT = nn.LeakyReLU(0.2)``
(one instance every class that reads ``ACT`` runs: ``self.act = ACT``, an element of
``nn.Sequential(..., ACT, ...)``), an entry of a module-level dict a class selects by a literal
key or a parameter's default (``self.act = ACTIVATION[activation]``, ``activation="leaky_relu"``),
or ``activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]``
that one class keeps as a module list (``self.activate_functions = activate_functions``, run
element by element next to ``self.layers[i]``). Asked by the activation sites
(``analysis/activations.py``) for a construction outside any function."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.module_lists import module_lists


def _assigned_name(statement: Optional[cst.CSTNode]) -> Optional[cst.Assign]:
    """The statement when it is ``name = <value>`` (one plain target)."""
    small = statement.body[0] if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1 else None
    if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.targets[0].target) is not cst.Name:
        return None
    return small


def _reads(index: Any, assign: cst.Assign) -> Optional[List[cst.Name]]:
    """Every read of the assigned name in the file; None when it is rebound, a parameter or an
    import of that name exists (the reads would not all be this value)."""
    target = assign.targets[0].target
    name = target.value  # type: ignore[union-attr]
    reads: List[cst.Name] = []
    for node in index.of_types(0, (cst.Name,)):
        if node.value != name or node is target:
            continue
        parent = index.above(node)
        if type(parent) is cst.Attribute and parent.attr is node:
            continue  # ``self.act`` names an attribute, not the module-level name
        if type(parent) in (cst.Param, cst.AssignTarget, cst.ImportAlias) or (
            type(parent) in (cst.FunctionDef, cst.ClassDef) and parent.name is node  # type: ignore[union-attr]
        ):
            return None
        reads.append(node)
    return reads


def module_level_reads(file: Any, statement: Optional[cst.CSTNode], call: cst.Call) -> Optional[Tuple[str, List[Tuple[Any, List[cst.Name]]]]]:
    """``(name, [(class model or None, reads in it)])`` for ``name = <call>`` at module level,
    the reads grouped by the class whose method holds them (None: a read in no method)."""
    assign = _assigned_name(statement)
    if assign is None:
        return None
    index = file.index
    reads: Optional[List[Any]] = None
    if assign.value is call:
        reads = _reads(index, assign)
    elif type(assign.value) is cst.Dict:  # ``ACTIVATION = {"leaky_relu": nn.LeakyReLU(), ...}``
        reads = _selected(index, assign, call)
    if not reads:
        return None
    groups: Dict[int, Tuple[Any, List[cst.Name]]] = {}
    for read in reads:
        scope = index.scope[index.find(read)]  # the innermost def or class around the read
        above = index.scope[scope] if scope >= 0 and type(index.order[scope]) is cst.FunctionDef else -1
        owner = index.order[above] if above >= 0 and type(index.order[above]) is cst.ClassDef else None
        model = file.class_model(owner) if owner is not None else None
        groups.setdefault(id(owner), (model, []))[1].append(read)
    return assign.targets[0].target.value, list(groups.values())  # type: ignore[union-attr]


def _selected(index: Any, assign: cst.Assign, call: cst.Call) -> Optional[List[cst.Subscript]]:
    """The reads ``NAME[key]`` of the module-level dict ``NAME`` whose key selects the entry
    ``call`` (a literal key, or a parameter whose default is that key: ``ACTIVATION[activation]``
    with ``activation="leaky_relu"``); None when a read's key cannot be told."""
    key = next((e.key for e in assign.value.elements if type(e) is cst.DictElement and e.value is call), None)  # type: ignore[union-attr]
    if type(key) is not cst.SimpleString:
        return None
    reads = _reads(index, assign)
    selected = []
    for read in reads or ():
        subscript = index.above(read)
        if type(subscript) is not cst.Subscript or subscript.value is not read or len(subscript.slice) != 1:
            return None
        given = subscript.slice[0].slice
        chosen = _key_value(index, read, given.value) if type(given) is cst.Index else None
        if chosen is None:
            return None
        if chosen == key.evaluated_value or type(given.value) is cst.Name:  # (a caller may pass this key)
            selected.append(subscript)
    return selected or None


def _key_value(index: Any, read: cst.Name, key: cst.BaseExpression) -> Optional[str]:
    """A string key: written, or the default of the enclosing function's parameter it names."""
    if type(key) is cst.SimpleString:
        return key.evaluated_value  # type: ignore[return-value]
    if type(key) is not cst.Name:
        return None
    here = index.scope[index.find(read)]
    function = index.order[here] if here >= 0 and type(index.order[here]) is cst.FunctionDef else None
    params = function.params if function is not None else None
    param = next((p for p in (*params.params, *params.kwonly_params) if p.name.value == key.value), None) if params else None
    default = param.default if param is not None else None
    return default.evaluated_value if type(default) is cst.SimpleString else None  # type: ignore[return-value]


def list_holder(file: Any, statement: Optional[cst.CSTNode], call: cst.Call) -> Optional[Tuple[Any, str]]:
    """``(class model, attribute)`` when ``call`` is an element of ``name = [...]`` at module
    level that exactly one class keeps as the module list ``self.<attribute>``, and every read
    of ``name`` is such an assignment in that class."""
    assign = _assigned_name(statement)
    if assign is None or type(assign.value) not in (cst.List, cst.Tuple) or not any(
        e.value is call for e in assign.value.elements  # type: ignore[union-attr]
    ):
        return None
    holders = [
        (model, holder)
        for model in (file.class_model(c) for c in file.module.body if type(c) is cst.ClassDef)
        for holder in [module_lists(file, model).holder(call)] if holder is not None
    ]
    if len(holders) != 1:
        return None
    index = file.index
    reads = _reads(index, assign)
    if not reads or any(
        type(index.above(read)) is not cst.Assign or not index.within(read, holders[0][0].node) for read in reads
    ):
        return None
    return holders[0]
