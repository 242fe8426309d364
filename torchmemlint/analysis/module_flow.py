"""Where a module instance held by a name runs: ``act = nonlinearity(cfg)`` (or a layer passed
as ``activation``) read as an element of ``nn.Sequential`` lists (``layers.append(act)`` ...
``nn.Sequential(*layers)``), kept as ``self.act = act``, or passed on to a parameter of a
function or class of this file or of another project file (``ConvEncoderImpl(..., act)``,
``create_mlp(sizes, n, act)`` imported from ``.model_utils``), added to a module list that
``forward`` runs in turn (``self.layers.append(act)``), followed there to the reads of
that parameter. One instance may run at many places: each is a place where it runs on what
precedes it. Asked by the activation sites (``analysis/activations.py``) for a layer bound to
a local, passed as an argument, or received as a parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.activation_calls import names_read, none_test
from torchmemlint.analysis.factories import _param, assigned_values, parameter
from torchmemlint.analysis.module_lists import module_lists
from torchmemlint.analysis.named_layers import binds
from torchmemlint.tree import nodes_of

_DEPTH = 4  # calls followed this deep (a parameter passed on to another builder ...)


@dataclass
class Flow:
    """Every place the instance runs, as far as it is followed: Sequential elements (the
    analysis of the file they are in, the order, the element), ``self.x = name`` in the class
    being read (``(model, x)``); complete when every read of the name is one of them."""

    elements: List[Tuple[Any, Any, Any]] = field(default_factory=list)
    kept: List[Tuple[Any, str]] = field(default_factory=list)
    complete: bool = True
    # ``self.x = name`` followed to where ``self.x`` is placed: (the file's analysis, the class,
    # ``x``), complete only while nothing outside the class reaches ``self.x``
    privates: List[Tuple[Any, cst.ClassDef, str]] = field(default_factory=list)
    # ``self.layers.append(act)`` in ``__init__``, ``self.layers`` a module list ``forward`` runs
    # in turn: (the file's analysis, the class model, ``layers``, the read)
    chains: List[Tuple[Any, Any, str, cst.Name]] = field(default_factory=list)


def module_flow(file: Any, reads: List[cst.CSTNode], model: Any, placing_of: Callable[[Any], Any], depth: int = 0) -> Flow:
    """Where the instance that each of ``reads`` (nodes of ``file`` that hold it: the names read,
    or the expression that builds it) is run; ``model``: the class the reads are in, whose
    ``self.x = name`` keeps it (``FactoryPlacing.kept_as``); ``placing_of(file)``: the
    ``FactoryPlacing`` of a file (its Sequential elements)."""
    flow = Flow(complete=bool(reads))
    placing = placing_of(file)
    for read in reads:
        placed = placing.elements().get(id(read))
        if placed:
            flow.elements.extend((file, sequence, part) for sequence, part in placed)
            continue
        lists = module_lists(file, model) if model is not None and type(read) is cst.Name else None
        holder = lists.holder(read) if lists is not None else None
        if holder is not None:  # an element of ``self.<holder>``: run in turn, after the one before it
            if lists.chained(holder):  # type: ignore[union-attr]
                flow.chains.append((file, model, holder, read))
                flow.privates.append((file, model.node, holder))
            else:
                flow.complete = False
            continue
        kept = placing.kept_as(model, read) if model is not None and type(read) in (cst.Name, cst.Subscript) else None
        if kept is not None:  # ``self.act = act``: run where ``self.act`` is
            placed = attribute_reads(*kept) if depth < _DEPTH else None
            if placed is None:
                flow.kept.append(kept)  # (called: the caller judges the calls)
                continue
            inner = module_flow(file, placed, kept[0], placing_of, depth + 1)
            _merge(flow, inner)
            flow.privates.append((file, kept[0].node, kept[1]))
            continue
        received = receiver(file, read) if depth < _DEPTH else None
        if received is None:
            flow.complete = False
            continue
        other, function, param = received
        if assigned_values(function, param.value):
            flow.complete = False  # (rebound in the callee: what runs there is not this one)
            continue
        inner = module_flow(other, [r for r in names_read(function, param) if not none_test(function, r)],
                            _owner(other, function), placing_of, depth + 1)
        if other is not file and inner.kept:  # (another file's calls: not judged from here)
            inner.complete, inner.kept = False, []
        _merge(flow, inner)  # ``ConvBlock(..., activation=act)`` keeping it as ``self.activation``: run where that is
    return flow


def _merge(flow: Flow, inner: Flow) -> None:
    flow.elements.extend(inner.elements)
    flow.privates.extend(inner.privates)
    flow.chains.extend(inner.chains)
    flow.kept.extend(kept for kept in inner.kept if kept not in flow.kept)
    flow.complete = flow.complete and inner.complete


def _owner(file: Any, function: cst.FunctionDef) -> Any:
    """The class model of the class whose ``__init__`` ``function`` is (None otherwise): what
    keeps a module the constructor is given (``self.activation = activation``)."""
    if function.name.value != "__init__":
        return None
    here = file.index.find(function)
    owner = file.index.scope[here] if here is not None else -1
    classdef = file.index.order[owner] if owner >= 0 else None
    return file.class_model(classdef) if type(classdef) is cst.ClassDef else None


def attribute_reads(model: Any, attribute: str) -> Optional[List[cst.CSTNode]]:
    """The reads of ``self.<attribute>`` in the methods of ``model``'s class that may place the
    module it holds (``mlp.append(self.activation)``, ``MLP(..., activation=self.activation)``),
    the tests against None left out; None when one of them calls it (``self.act(x)``: judged
    as a call of the attribute) or there are none."""
    references = model.references.get(attribute, [])
    if not references or any(r.call is not None and r.call.func is r.node for r in references):
        return None
    return [r.node for r in references if not none_test(r.method, r.node)] or None


def receiver(file: Any, node: cst.CSTNode) -> Optional[Tuple[Any, cst.FunctionDef, cst.Name]]:
    """For ``node`` passed as an argument of a call of a function or class of ``file``, or of
    another project file (``links``): the analysis of the file that defines it, the function
    that receives it (a class's ``__init__``) and the parameter. None for a call of anything
    else, a ``*args``/``**kwargs`` on either side, or an argument past the parameters."""
    index = file.index
    here = index.find(node)
    above = index.parent[here] if here is not None else -1
    if above < 0 or type(index.order[above]) is not cst.Arg:
        return None
    arg, outer = index.order[above], index.order[index.parent[above]]
    if arg.star or type(outer) is not cst.Call or type(outer.func) is not cst.Name:  # type: ignore[attr-defined]
        return None
    if any(a.star for a in outer.args):  # type: ignore[attr-defined]
        return None
    name = outer.func.value  # type: ignore[attr-defined]
    callables = file.callables
    other, target = file, callables.functions.get(name) or callables.classes.get(name)
    if target is None and file.links is not None:
        found = file.links.definition(name, "function", package=True) or file.links.definition(name, "class", package=True)
        if found is not None:
            other, target = found
    skip = 0
    if type(target) is cst.ClassDef:
        target = next((f for f in target.body.body if type(f) is cst.FunctionDef and f.name.value == "__init__"), None)
        skip = 1
    if type(target) is not cst.FunctionDef or target.params.star_arg is not cst.MaybeSentinel.DEFAULT \
            or target.params.posonly_params or target.params.star_kwarg is not None:
        return None
    params = list(target.params.params)[skip:]
    if arg.keyword is not None:  # type: ignore[attr-defined]
        chosen = next((p for p in [*params, *target.params.kwonly_params] if p.name.value == arg.keyword.value), None)  # type: ignore[attr-defined]
    else:
        position = next(i for i, a in enumerate(a for a in outer.args if a.keyword is None) if a is arg)  # type: ignore[attr-defined]
        chosen = params[position] if position < len(params) else None
    return (other, target, chosen.name) if chosen is not None else None


def _single_target(statement: cst.CSTNode, value: cst.BaseExpression) -> Optional[cst.Name]:
    """``act`` when ``statement`` is the line ``act = <value>`` alone (one plain name bound)."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or small.value is not value or len(small.targets) != 1:
        return None
    target = small.targets[0].target
    return target if type(target) is cst.Name else None


def bound_name(statement: cst.CSTNode, value: cst.BaseExpression, function: cst.FunctionDef) -> Optional[cst.Name]:
    """``act`` for ``act = <value>``, ``act`` bound nowhere else in ``function`` (nor a parameter
    of it, unless the statement rebinds it before any other read: ``_rebinds_parameter``; nor
    declared ``global``/``nonlocal``, nor a loop's or a ``with``'s target)."""
    target = _single_target(statement, value)
    if target is None or len(assigned_values(function, target.value)) != 1:
        return None
    name = target.value
    if any(p.name.value == name for p in nodes_of(function.params, cst.Param)):  # type: ignore[attr-defined]
        if not _rebinds_parameter(function, statement, name):
            return None
    for node in nodes_of(function.body, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.AsName, cst.Global, cst.Nonlocal):
        bound = node if type(node) in (cst.Global, cst.Nonlocal) else getattr(node, "target", None) or getattr(node, "name", None)
        if bound is not None and any(n.value == name for n in nodes_of(bound, cst.Name)):  # type: ignore[attr-defined]
            return None
    return target


def _rebinds_parameter(function: cst.FunctionDef, statement: cst.CSTNode, name: str) -> bool:
    """``activation = resolve_nn_activation(activation)``: a statement of the function's own
    body that rebinds the parameter ``name``, which no statement before it reads: from there on
    the name holds the new value (its reads inside the statement are the parameter's)."""
    body = function.body.body if type(function.body) is cst.IndentedBlock else ()
    if not any(s is statement for s in body):
        return False
    for earlier in body:
        if earlier is statement:
            return True
        if any(n.value == name for n in nodes_of(earlier, cst.Name)):  # type: ignore[attr-defined]
            return False
    return False


def dispatch_test(index: Any, function: cst.FunctionDef, statement: Any) -> Optional[tuple]:
    """``(param, "elu", fold)`` when ``statement`` sits directly in the body of ``if param ==
    "elu":`` (or of such an ``elif``) and ``param`` is a parameter of ``function``, never rebound
    but perhaps first case-folded (``act = act.upper()``: ``fold`` is what that does to a string
    the caller passes; otherwise it leaves the string as it is)."""
    here = index.find(statement)
    parent = index.parent
    above = parent[here] if here is not None else -1
    block = index.order[above] if above >= 0 else None
    owner = index.order[parent[above]] if above >= 0 and parent[above] >= 0 else None
    if type(block) is not cst.IndentedBlock or type(owner) is not cst.If or owner.body is not block:
        return None
    test = owner.test
    if type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    left, right = test.left, comparison.comparator
    if type(comparison.operator) is not cst.Equal:
        return None
    if type(left) is cst.SimpleString and type(right) is cst.Name:
        left, right = right, left
    if type(left) is not cst.Name or type(right) is not cst.SimpleString:
        return None
    param, fold = parameter(function, left.value), _unchanged
    if param is None:
        param, fold = _param(function, left.value), _case_fold(function, left.value)
        if param is None or fold is None:
            return None
    return (param, right.evaluated_value, fold)


def _fallback_arm(index: Any, function: cst.FunctionDef, chosen: cst.CSTNode, line: cst.CSTNode, param: Any) -> bool:
    """``line`` sits in the final ``else`` of the ``if``/``elif`` chain whose arm testing
    ``param`` holds ``chosen``, every ``if`` from that arm to the ``else`` testing ``param``
    for a string: the default that picks ``chosen``'s arm never reaches the ``else``."""
    here, parent, order = index.find(line), index.parent, index.order
    block = parent[here] if here is not None else -1
    arm = parent[block] if block >= 0 else -1
    if arm < 0 or parent[arm] < 0 or type(order[block]) is not cst.IndentedBlock or type(order[arm]) is not cst.Else:
        return False
    owner = order[parent[arm]]
    at = index.find(chosen)
    start = order[parent[parent[at]]] if at is not None and parent[at] >= 0 and parent[parent[at]] >= 0 else None
    current = start
    while type(current) is cst.If:
        body = current.body.body if type(current.body) is cst.IndentedBlock else ()  # type: ignore[attr-defined]
        if not body or (dispatch_test(index, function, body[0]) or (None,))[0] is not param:
            return False
        if current is owner:
            return True
        current = current.orelse  # type: ignore[attr-defined]
    return False


def _unchanged(text: str) -> str:
    return text


_FOLDS = {"upper": str.upper, "lower": str.lower, "casefold": str.casefold, "strip": str.strip}


def _case_fold(function: cst.FunctionDef, name: str) -> Optional[Callable[[str], str]]:
    """What ``name = name.upper()`` (``lower``, ``casefold``, ``strip``, chained) does to the
    parameter ``name``, when that is its only binding: a statement of the function's own body
    that no statement before it reads (``_rebinds_parameter``)."""
    values = assigned_values(function, name)
    folded = case_folded(values[0]) if len(values) == 1 else None
    if folded is None or folded[0] != name:
        return None
    body = function.body.body if type(function.body) is cst.IndentedBlock else ()
    statement = next((line for line in body if type(line) is cst.SimpleStatementLine and any(
        type(small) is cst.Assign and small.value is values[0] for small in line.body)), None)
    if statement is None or not _rebinds_parameter(function, statement, name):
        return None
    return folded[1]


def case_folded(value: cst.BaseExpression) -> Optional[Tuple[str, Callable[[str], str]]]:
    """``(name, fold)`` for ``name.lower()`` (``upper``, ``casefold``, ``strip``, chained): the
    name folded and what the calls do to a string; None for anything else."""
    steps = []
    while type(value) is cst.Call and not value.args and type(value.func) is cst.Attribute and value.func.attr.value in _FOLDS:
        steps.append(_FOLDS[value.func.attr.value])
        value = value.func.value
    if not steps or type(value) is not cst.Name:
        return None

    def fold(text: str) -> str:
        for step in reversed(steps):
            text = step(text)
        return text
    return value.value, fold


def dispatched_reads(index: Any, statement: cst.CSTNode, value: cst.BaseExpression, function: cst.FunctionDef) -> Optional[List[cst.Name]]:
    """The reads of ``act`` for ``act = <value>`` in the arm of ``if activation == "leakyrelu":
    act = nn.LeakyReLU() elif activation == "elu": act = nn.ELU() else: raise ...`` that the
    default of the string parameter picks (``activation: str = "leakyrelu"``, never rebound),
    when every other binding of ``act`` in ``function`` is in an arm testing that parameter for
    another string (or a bare ``act: nn.Module``): in the default configuration the name holds
    this arm's layer wherever it is read (a caller passing another string configures another
    model, whose layer is judged in its own arm). None otherwise."""
    target = _single_target(statement, value)
    if target is None or any(p.name.value == target.value for p in nodes_of(function.params, cst.Param)):  # type: ignore[attr-defined]
        return None
    test = dispatch_test(index, function, statement)
    default = test[0].default if test is not None else None
    if type(default) is not cst.SimpleString or test[2](str(default.evaluated_value)) != test[1]:  # type: ignore[index]
        return None
    name, targets = target.value, {id(target)}
    for node in nodes_of(function.body, cst.Assign, cst.AugAssign, cst.AnnAssign, cst.For, cst.NamedExpr, cst.AsName, cst.Global, cst.Nonlocal, cst.Del):
        if node is statement.body[0]:  # type: ignore[attr-defined]
            continue
        if type(node) in (cst.Global, cst.Nonlocal):
            bound = [item.name for item in node.names]  # type: ignore[attr-defined]
        elif type(node) is cst.Assign:
            bound = [t.target for t in node.targets]  # type: ignore[attr-defined]
        else:
            bound = [getattr(node, "target", None) or getattr(node, "name", None)]
        if not any(binds(b, name) for b in bound):
            continue
        if type(node) is cst.AnnAssign and node.value is None and type(node.target) is cst.Name:
            targets.add(id(node.target))  # ``act: nn.Module``, a declaration
            continue
        if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Name:
            here = index.find(node)
            line = index.order[index.parent[here]] if here is not None and index.parent[here] >= 0 else None
            other = dispatch_test(index, function, line) if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None
            if other is not None and other[0] is test[0] and other[1] != test[1]:  # type: ignore[index]
                targets.add(id(node.targets[0].target))
                continue
            if type(line) is cst.SimpleStatementLine and _fallback_arm(index, function, statement, line, test[0]):  # type: ignore[index]
                targets.add(id(node.targets[0].target))  # ``else: act = nn.LeakyReLU(0.2)``, after the chosen arm
                continue
        return None
    return [read for read in names_read(function, target) if id(read) not in targets]
