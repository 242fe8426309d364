"""Where a factory of the file puts its layer: each call of a function that returns a layer
(``def leaky(p=0.1): return nn.LeakyReLU(p)``) that places it as an element of an
``nn.Sequential`` (directly, or through a spliced list: ``layers.append(leaky())``), as
``self.x = leaky()`` in ``__init__``, or as an element of a module list run as a chain; a call
returned by another function (``return leaky(**kwargs)``) stands for that function's calls.
Asked by the activation sites (``analysis/activations.py``), which judge each place."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Tuple

import os
import re

import libcst as cst

from torchmemlint.analysis.chosen_layers import arm_of, arm_off
from torchmemlint.analysis.classes import Layer
from torchmemlint.analysis.factories import parameter
from torchmemlint.analysis.local_values import _rebound
from torchmemlint.analysis.activation_calls import names_read
from torchmemlint.analysis.module_flow import bound_name, dispatched_reads, receiver
from torchmemlint.analysis.module_lists import module_lists
from torchmemlint.analysis.returned_locals import table_entry
from torchmemlint.analysis.syntax import argument, has_star_args, literal_bool, module_itself, terminal_name
from torchmemlint.project import _resolve_relative, module_name, REGISTRY
from torchmemlint.analysis.vocabulary import activation_words, whole_words
from torchmemlint.tree import scan

SEQUENTIAL = "torch.nn.Sequential"
# ``from .layers import leaky`` / ``from models.blocks import *``: a ``from`` import of a module
# that may be the project's (not torch's, nor a few standard modules'); a text gate
_FROM_IMPORT = re.compile(
    r"^[ \t]*from[ \t]+(?:\.|(?!(?:torch|typing|__future__|functools|collections|dataclasses|math|os|abc|"
    r"enum|itertools|numpy|einops|timm|torchvision)\b)\w)[\w.]*[ \t]+import\b",
    re.MULTILINE,
)

# what a call that places its layer is directly inside: ``nn.Sequential(..., f())``,
# ``layers.append(f())``, ``[conv, f()]``, ``[f() for _ in ...]``, ``self.act = f()``
_PLACING = (cst.Arg, cst.Element, cst.ListComp, cst.Assign)


def may_import_factories(text: str, path: Optional[str], key: str, defines: Callable[[str], bool]) -> bool:
    """Whether the file at ``path`` (its source ``text``) may call a factory another file of
    the project defines, of a layer ``defines`` finds in that file's text (``key``: the
    question's name, for the answers kept per run): a ``from`` import of a project module
    whose text may build it, or that imports (``from``, re-exports, ``*``) a project module
    that may, up to ``_REEXPORT_DEPTH`` modules away (further: yes), or that cannot be read.
    Without ``path``, any ``from`` import of a module that may be the project's. Text only:
    no module is parsed (a gate runs before the parse)."""
    if _FROM_IMPORT.search(text) is None:
        return False
    if path is None:
        return True
    index = REGISTRY.index_for(path)
    known: Dict[Tuple[str, str], bool] = index.__dict__.setdefault("_factory_gate", {})
    return _imports_may_define(index, path, text, key, defines, known, _REEXPORT_DEPTH)


_REEXPORT_DEPTH = 3
# `from <dots><module> import <names>` (the names: to the end of the line, or of the brackets)
_FROM_ANY = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^\n]*)", re.MULTILINE)


def _imports_may_define(
    index: Any, path: str, text: str, key: str, defines: Callable[[str], bool],
    known: Dict[Tuple[str, str], bool], depth: int,
) -> bool:
    package = module_name(path)[1]
    for match in _FROM_ANY.finditer(text):
        level, module = len(match.group(1)), match.group(2)
        full = _resolve_relative(package, level, module or None) if level else module
        if not full:
            continue
        names = re.findall(r"\w+", match.group(3).split("#", 1)[0])
        # the module imported from, and each imported name that may be a submodule of it
        for target in [index.module_path(full)] + [index.module_path(f"{full}.{name}") for name in names]:
            if target is not None and _module_may_define(index, target, key, defines, known, depth):
                return True
    return False


def _module_may_define(
    index: Any, path: str, key: str, defines: Callable[[str], bool], known: Dict[Tuple[str, str], bool], depth: int,
) -> bool:
    found = known.get((key, path))
    if found is not None:
        return found
    if depth <= 0:
        return True
    known[(key, path)] = False  # (while it is read: an import cycle adds nothing)
    text = REGISTRY.text_of(path)
    found = text is None or defines(text) or _imports_may_define(index, path, text, key, defines, known, depth - 1)
    known[(key, path)] = found
    return found


class FactoryPlacing:
    """Per file: the places of its factories' calls (cached)."""

    def __init__(self, file: Any) -> None:  # a FileAnalysis
        self.file = file
        self._spots_by: Dict[str, Tuple[List[Tuple[cst.Call, str, Any]], bool]] = {}
        self._element_map: Optional[Dict[int, List[Tuple[Any, Any]]]] = None
        self._built_elements: Dict[int, List[Tuple[Any, Any]]] = {}  # the elements that are calls
        self._foreign: Dict[str, Optional[Tuple[cst.FunctionDef, List[Any], str]]] = {}
        self._definitions: Dict[str, Optional[cst.FunctionDef]] = {}

    def spots(self, name: str, depth: int = 0) -> Tuple[List[Tuple[cst.Call, str, Any]], bool]:
        """Each call of the function ``name`` of the file (``definition``) that puts the layer it
        returns somewhere, as ``(call, kind, data)``: ``"sequence"`` (an element of Sequentials,
        directly or through a spliced list: their orders and its parts), ``"attribute"``
        (``self.x = name(...)`` in ``__init__``: the class model and ``x``), ``"chain"`` (an
        element of the module list ``self.x`` run as a chain: the class model, ``x``, the
        element before it or None) or ``"row"`` (a module of each row of ``self.x``, unpacked
        by a loop: the class model and ``ModuleLists.row``) or ``"flow"`` (bound to a local,
        ``act = leaky()``, or passed to a function or class, ``create_mlp(sizes, n, leaky())``:
        the class model or None, and the nodes that hold it, ``analysis/module_flow.py``); a
        call returned by another function (``return leaky(**kwargs)``) stands for that
        function's calls. And whether every call is one."""
        known = self._spots_by.get(name)
        if known is not None:
            return known
        self._spots_by[name] = ([], False)  # recursion guard
        if self.definition(name) is None:
            return [], False
        index = self.file.index
        order = index.order
        spots: List[Tuple[cst.Call, str, Any]] = []
        every = True
        for here in index.positions(cst.Call):
            other = order[here]
            func = other.func  # type: ignore[attr-defined]
            called = func.value if type(func) is cst.Name else (
                func.attr.value if type(func) is cst.Attribute and type(func.value) is cst.Name
                and func.value.value in ("self", "cls") else None
            )
            if called != name:
                continue
            method = index.function_of(here)
            if method >= 0 and self.superseded(order[method]):  # type: ignore[arg-type]
                continue  # (in a ``def`` a later one replaces: it never runs)
            spot = self.spot(here)
            if spot is None and depth < 4:
                method = index.function_of(here)
                statement = order[self._statement(here)] if self._statement(here) >= 0 else None
                if method >= 0 and returns(statement, other):  # ``return leaky(**kwargs)``
                    outer = order[method].name.value  # type: ignore[attr-defined]
                    inner, inner_every = self.spots(outer, depth + 1) if outer != name else ([], False)
                    spots.extend(inner)
                    every = every and inner_every and bool(inner)
                    continue
            if spot is None:
                every = False
            else:
                spots.append(spot)
        self._spots_by[name] = (spots, every)
        return spots, every

    def definition(self, name: str) -> Optional[cst.FunctionDef]:
        """The definition of the function ``name`` that its calls run: the file's only one; or,
        where the module defines it several times, each a statement of the module itself
        (``def leaky_relu(p=0.1): return nn.LeakyReLU(p)`` written twice), the last: a call
        made in a function runs after the module has run every one of them. None where another
        statement may bind the name (an import, an assignment, a parameter, ``global``: any
        mention but a call, a ``def`` of it or an attribute so named), or a call made while the
        module runs may come before the last ``def``."""
        if name in self._definitions:
            return self._definitions[name]
        candidates = self.file.layer_lists._by_name().get(name, [])
        found: Optional[cst.FunctionDef] = candidates[0] if len(candidates) == 1 else None
        if len(candidates) > 1 and all(any(c is s for s in self.file.module.body) for c in candidates):
            found = candidates[-1]
            index = self.file.index
            order, parent = index.order, index.parent
            last = index.find(found)
            for here in index.positions(cst.Name):
                node = order[here]
                if node.value != name:  # type: ignore[attr-defined]
                    continue
                above = order[parent[here]] if parent[here] >= 0 else None
                if type(above) is cst.FunctionDef and any(above is c for c in candidates):
                    continue
                if type(above) is cst.Attribute and above.attr is node:
                    continue
                if type(above) is cst.Call and above.func is node and (
                    index.function_of(parent[here]) >= 0 or (last is not None and here > last)
                ):
                    continue  # (called in a function, or by the module after the last ``def``)
                found = None
                break
        self._definitions[name] = found
        return found

    def superseded(self, function: cst.FunctionDef) -> bool:
        """Whether a later definition of the module replaces ``function`` (``definition``)."""
        live = self.definition(function.name.value)
        return live is not None and live is not function

    def spot(self, here: int) -> Optional[Tuple[cst.Call, str, Any]]:
        """The place the call at position ``here`` of the index puts what it returns (see
        ``spots``), or None."""
        index = self.file.index
        order = index.order
        call = order[here]
        if id(call) in self.elements():  # ``layers.append(get_act(act))`` ... ``nn.Sequential(*layers)``
            return (call, "sequence", self.elements()[id(call)])  # type: ignore[return-value]
        method = index.function_of(here)
        owner = index.scope[method] if method >= 0 else -1
        above = self._statement(here)
        model = self.file.class_model(order[owner]) if owner >= 0 and type(order[owner]) is cst.ClassDef else None  # type: ignore[arg-type]
        attribute = (
            held_attribute(self.file, order[above], call, model, order[method] if method >= 0 else None)  # type: ignore[arg-type]
            if above >= 0 and model is not None else None
        )
        if attribute is not None:
            return (call, "attribute", (model, attribute))  # type: ignore[return-value]
        if receiver(self.file, call) is not None:  # ``create_mlp(sizes, n, leaky())``: where the callee runs it
            return (call, "flow", (model, [call]))  # type: ignore[return-value]
        local = bound_name(order[above], call, order[method]) if above >= 0 and method >= 0 else None  # type: ignore[arg-type]
        if local is not None:  # ``act = leaky()`` ... ``layers.append(act)``
            reads = [r for r in names_read(order[method], local) if not index.within(r, order[above])]  # type: ignore[arg-type]
            return (call, "flow", (model, reads))  # type: ignore[return-value]
        reads = dispatched_reads(index, order[above], call, order[method]) if above >= 0 and method >= 0 else None  # type: ignore[arg-type]
        if reads is not None:  # ``if activation == "leakyrelu": act = nn.LeakyReLU() elif ...`` ... ``layers.append(act)``
            return (call, "flow", (model, reads))  # type: ignore[return-value]
        if model is None:
            return None
        lists = module_lists(self.file, model)
        holder = lists.holder(call)
        if holder is not None:
            before = lists.chained_before(holder, call)  # type: ignore[arg-type]
            return (call, "chain", (model, holder, before))  # type: ignore[return-value]
        row = lists.row(call)
        if row is not None:  # ``for conv, act in self.layers``, rows ``nn.ModuleList([conv, leaky()])``
            return (call, "row", (model, row))  # type: ignore[return-value]
        return None

    def kept_as(self, model: Any, read: cst.Name) -> Optional[Tuple[Any, str]]:
        """``(model, x)`` when ``read`` (a local naming a module) is the value of ``self.x =
        <read>`` in ``__init__`` of ``model``'s class (``act = nn.LeakyReLU(0.2)`` ...
        ``self.act = act``)."""
        here = self.file.index.find(read)
        statement = self._statement(here) if here is not None else -1
        if statement < 0:
            return None
        method = self.file.index.function_of(here)
        attribute = held_attribute(  # type: ignore[arg-type]
            self.file, self.file.index.order[statement], read, model, self.file.index.order[method] if method >= 0 else None
        )
        return (model, attribute) if attribute is not None else None

    def _statement(self, here: int) -> int:
        """The position of the simple statement around position ``here`` (-1: none)."""
        order, parent = self.file.index.order, self.file.index.parent
        above = parent[here]
        while above >= 0 and type(order[above]) not in (cst.SimpleStatementLine, cst.FunctionDef):
            above = parent[above]
        return above if above >= 0 and type(order[above]) is cst.SimpleStatementLine else -1

    def elements(self) -> Dict[int, List[Tuple[Any, Any]]]:
        """For each call that is an element of an ``nn.Sequential`` of the file (directly, or
        through a spliced list), the Sequential's order and the element's part in it."""
        if self._element_map is None:
            found: Dict[int, List[Tuple[Any, Any]]] = {}
            index, resolver = self.file.index, self.file.resolver
            order, parent = index.order, index.parent
            for here in index.positions(cst.Call):
                call = order[here]
                if resolver.constructor(call) != SEQUENTIAL:  # type: ignore[arg-type]
                    continue
                above = parent[here]
                if above >= 0 and type(order[above]) is cst.Arg and resolver.constructor(order[parent[above]]) == SEQUENTIAL:  # type: ignore[arg-type]
                    continue  # flattened into the Sequential around it
                while above >= 0 and type(order[above]) not in (cst.SimpleStatementLine, cst.FunctionDef):
                    above = parent[above]
                statement = order[above] if above >= 0 and type(order[above]) is cst.SimpleStatementLine else None
                method = index.function_of(here)
                function = order[method] if method >= 0 else None
                owner = index.scope[method] if method >= 0 else -1
                self_name = None
                if owner >= 0 and type(order[owner]) is cst.ClassDef:
                    self_name = self.file.class_model(order[owner]).self_name(function)  # type: ignore[arg-type]
                sequence = resolver.sequential_order(call, self_name, function, statement)  # type: ignore[arg-type]
                for part in sequence.items if sequence is not None else ():
                    if type(part.node) is cst.Call:
                        self._built_elements.setdefault(id(part.node), []).append((sequence, part))
                    if part.layer is None and (type(part.node) in (cst.Call, cst.Name) or part.attribute is not None):
                        # (``nl``: ``_local``; ``self.activation``: a module the constructor was given)
                        found.setdefault(id(part.node), []).append((sequence, part))
            self._element_map = found
        return self._element_map

    def built_elements(self) -> Dict[int, List[Tuple[Any, Any]]]:
        """``elements``, for every call that is an element (a layer read as one too:
        ``activation()`` with ``activation=nn.Tanh`` the parameter's default)."""
        self.elements()
        return self._built_elements

    def foreign(self, call: cst.Call) -> Optional[Tuple[Tuple[cst.Call, str, Any], cst.FunctionDef, List[Any], str, Any]]:
        """For a call of a function another file of the project defines (``from .layers import
        leaky``; ``def leaky(p=0.1): return nn.LeakyReLU(p)`` there) that puts what it returns
        somewhere (``spot``): that place, the function, the layers its ``return`` statements
        construct (``Layer``, read with that file's own analysis), the file, as shown, and its
        analysis."""
        links = self.file.links
        func = call.func
        if links is None or type(func) is not cst.Name or not links.may_come_from_package(func.value):
            return None  # (also a name imported by absolute name from the file's own package)
        here = self.file.index.find(call)
        above = self.file.index.parent[here] if here is not None else -1
        if above < 0 or type(self.file.index.order[above]) not in _PLACING:
            return None  # (a quick test: not an argument, a list element or an assignment)
        located = links.locate(func.value, package=True)
        if located is None or located.kind != "function" or not self._names_activation(located):
            return None  # (a class of the project, an outside name, a file naming no activation)
        spot = self.spot(here)  # type: ignore[arg-type]
        if spot is None:
            return None
        if func.value not in self._foreign:
            self._foreign[func.value] = self._returned_layers(func.value)
        made = self._foreign[func.value]
        return None if made is None else (spot, *made)  # type: ignore[return-value]

    def _names_activation(self, located: Any) -> bool:
        """Whether the file that defines ``located`` may construct an activation (its text
        names one; unknown text: it may): a file that names none is not parsed for nothing."""
        module = located.module
        text = module.text if module is not None else None
        if text is None:
            return True
        key = (module.path, module.digest)
        if key not in _NAMES_ACTIVATION:  # (kept for the run: every file that imports it asks)
            if len(_NAMES_ACTIVATION) > 4096:
                _NAMES_ACTIVATION.clear()
            _NAMES_ACTIVATION[key] = any(True for _ in whole_words(_ACTIVATION_WORDS, text))
        return _NAMES_ACTIVATION[key]

    def _returned_layers(self, name: str) -> Optional[Tuple[cst.FunctionDef, List[Any], str, Any]]:
        """The project function ``name`` (of another file), the layers its ``return``
        statements construct (also as entries of a table they return an item of: ``return
        mapping[name]``, ``returned_locals.table_entry``), that file as shown, and its analysis;
        None when it returns none."""
        found = self.file.links.definition(name, "function", package=True)
        if found is None:
            return None
        other, function = found
        nested = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
        made = [value.value for value in scan(function.body, (cst.Return,), nested)]  # type: ignore[attr-defined]
        if any(type(value) in (cst.Subscript, cst.Call) for value in made):
            made.extend(
                call for call in scan(function.body, (cst.Call,), nested)
                if type(other.index.above(call)) is cst.DictElement and table_entry(other.index, function, call) is not None
            )
        layers = []
        for value in made:
            qualified = other.resolver.qualify(value.func) if type(value) is cst.Call else None
            if qualified is not None and qualified.startswith("torch.nn."):
                layers.append(Layer(qualified, value))
        here = self.file.links.path
        shown = os.path.relpath(other.links.path, os.path.dirname(here)) if other.links is not None else "?"
        return (function, layers, shown, other) if layers else None

    def imported_elsewhere(self, name: str) -> Optional[str]:
        """Another file of the project that may call the top-level function ``name`` of this
        file (``ProjectIndex.importers``); None when none does, or when no project is known."""
        links = self.file.links
        if links is None or not any(f.name.value == name for f in self.file.module.body if type(f) is cst.FunctionDef):
            return None
        others = links.index.importers(links.path, name)
        return others[0].path if others else None


def placing_of(file: Any) -> "FactoryPlacing":
    """The ``FactoryPlacing`` of another file of the project (its Sequential elements), kept on
    its analysis."""
    found = getattr(file, "_factory_placing", None)
    if found is None:
        found = file._factory_placing = FactoryPlacing(file)
    return found


def returns(statement: Optional[cst.CSTNode], value: cst.CSTNode) -> bool:
    """``statement`` is ``return <value>``."""
    return (
        type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
        and type(statement.body[0]) is cst.Return and statement.body[0].value is value
    )


def assigned_attribute(statement: cst.CSTNode, value: cst.Call, model: Any) -> Optional[str]:
    """``x`` when ``statement`` is ``self.x = <value>`` (or ``setattr(self, f"x_{i}", <value>)``:
    ``x_{}``, ``named_attributes.py``) in ``__init__`` (or in a method that ``__init__`` calls
    once: ``self._init_layers(dim)``, ``ClassModel.builds``)."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is cst.Expr and type(small.value) is cst.Call:  # ``setattr(self, f"act_{i}", <value>)``
        for name, assignments in model.assignments.items():
            if any(a.statement is statement and a.value is value and model.builds(a.method) for a in assignments):
                return name
        return None
    if type(small) is not cst.Assign or len(small.targets) != 1 or (
        module_itself(small.value) is not value and arm_of(small.value, value) is None
    ):  # (or one of the layers an ``if`` or a table chooses between: ``chosen_layers.py``)
        return None
    target = small.targets[0].target
    for name, assignments in model.assignments.items():
        for assignment in assignments:
            if assignment.statement is statement and model.builds(assignment.method):
                if type(target) is cst.Attribute and target.attr.value == name:
                    return name
    return None


def held_attribute(file: Any, statement: cst.CSTNode, value: cst.BaseExpression, model: Any,
                   method: Optional[cst.CSTNode]) -> Optional[str]:
    """``assigned_attribute``, but None when ``value`` is one arm of what the assignment chooses
    between (``chosen_layers.py``) and that arm is taken only when a caller asks and none does."""
    attribute = assigned_attribute(statement, value, model)
    if attribute is None or type(statement) is not cst.SimpleStatementLine or type(statement.body[0]) is not cst.Assign:
        return attribute
    arms = arm_of(statement.body[0].value, value)  # ``self.act = nn.LeakyReLU() if leaky else nn.ReLU()``
    if arms and type(method) is cst.FunctionDef and arm_off(file, model, method, arms):
        return None
    return attribute


def switch_of(layer: Any, factory: cst.FunctionDef) -> Optional[cst.Param]:
    """The parameter of ``factory`` with a literal default that the layer's ``inplace`` is
    (``nn.LeakyReLU(slope, inplace=inplace)``), never rebound in it."""
    kind = layer.kind
    assert kind is not None
    arg = argument(layer.effective, kind.module_params.index("inplace"), "inplace")
    if arg is None or type(arg.value) is not cst.Name:
        return None
    param = parameter(factory, arg.value.value)
    if param is None or param.default is None or literal_bool(param.default) is None:
        return None
    return param


def forwarded_switch(layer: Any, factory: cst.FunctionDef) -> bool:
    """The layer takes ``inplace`` only through the factory's own ``**kwargs``
    (``nn.LeakyReLU(**kwargs)`` in ``def get_activation(name, **kwargs)``), which the factory
    never rebinds: what each call of the factory passes decides (``forwarded_inplace``)."""
    kind = layer.kind
    assert kind is not None
    call = layer.effective
    spread = factory.params.star_kwarg
    stars = [arg for arg in call.args if arg.star]
    return (
        isinstance(spread, cst.Param) and len(stars) == 1 and stars[0].star == "**"
        and type(stars[0].value) is cst.Name and stars[0].value.value == spread.name.value
        and argument(call, kind.module_params.index("inplace"), "inplace") is None
        and not _rebound(factory, spread.name.value)
    )


def forwarded_inplace(call: cst.Call) -> Optional[bool]:
    """The ``inplace`` a factory call hands on through the factory's ``**kwargs``: its literal
    ``inplace=`` keyword, False when it passes none (the layer's default), None when it spreads
    arguments of its own (``**options``: not known)."""
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == "inplace":
            return literal_bool(arg.value)
    return None if any(arg.star for arg in call.args) else False


def switched(factory: cst.FunctionDef, param: cst.Param, call: cst.Call) -> Tuple[Optional[cst.Arg], Optional[bool]]:
    """What ``call`` of ``factory`` passes for ``param`` and the value ``param`` gets there
    (None: not known, as behind ``**kwargs`` or through another function)."""
    known, arg, value = passed(factory, param, call)
    return arg, literal_bool(value) if known else None


def bound(layer: Any, factory: cst.FunctionDef, call: cst.Call) -> Dict[str, Optional[cst.BaseExpression]]:
    """The layer's parameters that ``factory`` passes one of its own for (``nn.LeakyReLU(slope)``:
    ``negative_slope``), with what each gets at ``call`` (None: not known)."""
    kind = layer.kind
    found: Dict[str, Optional[cst.BaseExpression]] = {}
    for position, name in enumerate(kind.module_params if kind is not None else ()):
        arg = argument(layer.effective, position, name)
        param = parameter(factory, arg.value.value) if arg is not None and type(arg.value) is cst.Name else None
        if param is not None:
            known, _, value = passed(factory, param, call)
            found[name] = value if known else None
    return found


def passed(factory: cst.FunctionDef, param: cst.Param, call: cst.Call) -> Tuple[bool, Optional[cst.Arg], Optional[cst.BaseExpression]]:
    """Whether what ``call`` of ``factory`` gives ``param`` is known, the argument that passes
    it (None: left at its default) and the value (the default's when left)."""
    if terminal_name(call.func) != factory.name.value or has_star_args(call):
        return False, None, None  # behind ``**kwargs``, or a call of another function
    positional = [*factory.params.posonly_params, *factory.params.params]
    if type(call.func) is cst.Attribute and positional:
        positional = positional[1:]  # ``self.act(...)``
    position = next((i for i, p in enumerate(positional) if p is param), None)
    arg = argument(call, position, param.name.value)
    return True, arg, arg.value if arg is not None else param.default


# the names of every activation, whole words (``vocabulary.whole_words``)
_ACTIVATION_WORDS = re.compile(r"(?:%s)\b" % "|".join(activation_words()))
# (path, digest) of a project file -> whether its text names an activation (``_names_activation``)
_NAMES_ACTIVATION: Dict[Tuple[str, str], bool] = {}
