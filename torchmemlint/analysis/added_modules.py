"""A Sequential filled by ``add_module``: ``seq = nn.Sequential()`` (or with its first layers; or
``self.layers = nn.Sequential()``) then ``seq.add_module("conv", nn.Conv2d(...))``,
``seq.add_module("bn", nn.BatchNorm2d(...))``, ``seq.add_module("act", nn.LeakyReLU())``, in
the block the Sequential is built in (also in a loop: one round's modules in turn). The modules
run in the order they are added, so each runs on what the one added before it makes."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.factories import parameter, single_local_value
from torchmemlint.tree import walk

SEQUENTIAL = "torch.nn.Sequential"
MODULE_LIST = "torch.nn.ModuleList"


def added_before(file: Any, function: cst.FunctionDef, call: cst.Call, defaults: Optional[List[str]] = None) -> Optional[List[cst.BaseExpression]]:
    """The modules that may run just before ``call`` in the Sequential it is added to: by
    ``seq.add_module(name, call)`` or ``seq.append(call)`` (``seq`` a local or an attribute of
    ``self`` built once in the function as ``nn.Sequential(...)``, or as ``nn.ModuleList(...)``
    that the caller knows ``forward`` runs in turn, or ``self`` in ``__init__`` of an ``nn.Sequential``
    subclass whose ``forward`` runs its modules in turn), or by ``layers[name] = call`` (``layers``
    a local ``OrderedDict`` given to ``nn.Sequential(layers)`` and read nowhere else). Walking
    back over what is added before it in the source (and the constructor's own layers): each
    added under an ``if`` or in a loop that ``call`` is not in may not run, so the walk goes on
    past it, up to one that runs before ``call`` whenever it runs (a statement of a block around
    it, no loop between: ``for i in range(n): seq.add_module(f"{i}fc", nn.Linear(...))``, then
    under an ``if`` of the loop ``seq.add_module(f"{i}act", nn.LeakyReLU(0.2))``). None when
    ``call`` may come first, when a loop around ``call`` may add a module after it in the round
    before, or when the container is changed any other way. Given a ``defaults`` list, where the
    walk would give None it gives instead the modules up to the first one that runs before
    ``call`` whenever the flags of the ``if batch_norm:`` tests around it keep their defaults
    (``batch_norm=True``), and adds those flags' names to the list."""
    index = file.index
    here = index.find(call)
    parent = index.parent
    arg = parent[here] if here is not None else -1
    adding = parent[arg] if arg >= 0 else -1
    outer = index.order[adding] if adding >= 0 else None
    if arg >= 0 and type(index.order[arg]) is cst.Assign:
        outer = index.order[arg]
    if type(outer) is cst.Call and outer.args and outer.args[-1].value is call:
        func = outer.func
        if type(func) is not cst.Attribute or _added_value(outer) is not call:
            return None
        holder = func.value
    elif type(outer) is cst.Assign and outer.value is call and len(outer.targets) == 1 and type(outer.targets[0].target) is cst.Subscript:
        holder = outer.targets[0].target.value
    else:
        return None
    key = _key(function, holder)
    if key is None:
        return None
    start = _start(file, function, key)
    if start is None:
        return None
    block, initial = start
    added = [node for node in walk(block) if type(node) in (cst.Call, cst.Assign) and _adds_to(function, node, key)]
    if not any(a is outer for a in added) or _added_elsewhere(function, key, added):
        return None
    position = next(i for i, a in enumerate(added) if a is outer)
    found: List[cst.BaseExpression] = []
    loops = _loops(index, outer)
    # where the walk may stop if the flags keep their defaults: (how many found, the flags)
    by_default: Optional[Tuple[int, List[str]]] = None

    def first_by_default() -> Optional[List[cst.BaseExpression]]:
        if by_default is None or defaults is None:
            return None
        defaults.extend(flag for flag in by_default[1] if flag not in defaults)
        return found[:by_default[0]]

    for previous in reversed(added[:position]):
        value = _added_value(previous)
        if value is None or not loops <= _loops(index, previous):
            return first_by_default()  # (a loop around ``call`` that ``previous`` is not in: the round before adds after it)
        found.append(value)
        if _runs_before(index, previous, outer):
            return found
        if defaults is not None and by_default is None:
            flags = _default_flags(index, function, previous, outer)
            if flags:  # ``if batch_norm: self.add_module("norm1", ...)``, ``batch_norm=True``
                by_default = (len(found), flags)
    if loops or not initial:
        return first_by_default()  # it may come first (unless by default it never does)
    return found + [initial[-1]]


def _added_value(node: Any) -> Optional[cst.BaseExpression]:
    """``m`` of ``c.add_module(name, m)``, ``c.append(m)``, ``c[name] = m``."""
    if type(node) is cst.Call:
        method = node.func.attr.value if type(node.func) is cst.Attribute else None
        count = {"add_module": 2, "append": 1}.get(method or "")
        return node.args[-1].value if count == len(node.args) and not any(a.star or a.keyword for a in node.args) else None
    return node.value


def _loops(index: Any, node: cst.CSTNode) -> set:
    """The loops of the function around ``node`` (positions in the index)."""
    found = set()
    here = index.find(node)
    while here is not None and here >= 0 and type(index.order[here]) is not cst.FunctionDef:
        if type(index.order[here]) in (cst.For, cst.While):
            found.add(here)
        here = index.parent[here]
    return found


def _start(file: Any, function: cst.FunctionDef, key: str) -> Optional[Tuple[Any, List[cst.BaseExpression]]]:
    """The block the container ``key`` is filled in and the layers it starts with: a local or
    ``self.x`` built as ``nn.Sequential(...)``, a local ``OrderedDict([...])`` given to one
    ``nn.Sequential``, or ``self`` of an ``nn.Sequential`` subclass in its ``__init__``."""
    resolver = file.resolver
    params = function.params.params
    given = _sequential_parameter(file, function, key)
    if params and key == params[0].name.value and not given:
        return (function.body, []) if function.name.value == "__init__" and _chained_self(file, function) else None
    built = _built(function, key)
    if built is None and given:
        return function.body, []  # ``def add_block(model: nn.Sequential, ...)``: what it held before is the caller's
    if type(built) is not cst.Call or any(a.star or a.keyword is not None for a in built.args):
        return None
    block = _block_of(file.index, built)
    qualified = resolver.qualify(built.func)
    if block is None:
        return None
    if qualified == SEQUENTIAL:
        return block, [a.value for a in built.args]
    if qualified == MODULE_LIST:  # (run in turn: the caller's to say, ``ModuleLists.chained``)
        elements = built.args[0].value if built.args else cst.List([])
        if type(elements) not in (cst.List, cst.Tuple) or any(type(e) is cst.StarredElement for e in elements.elements):
            return None
        return block, [e.value for e in elements.elements]
    if qualified != "collections.OrderedDict" or len(built.args) > 1 or key.startswith("self.") or not _only_sequenced(file, function, key):
        return None
    pairs = built.args[0].value if built.args else cst.List([])
    if type(pairs) not in (cst.List, cst.Tuple):
        return None
    initial = []
    for element in pairs.elements:
        pair = element.value
        if type(pair) is not cst.Tuple or len(pair.elements) != 2 or type(element) is cst.StarredElement:
            return None
        initial.append(pair.elements[1].value)
    return block, initial


def _sequential_parameter(file: Any, function: cst.FunctionDef, key: str) -> bool:
    """``key`` is a parameter annotated ``nn.Sequential`` (a builder that appends a block's
    modules to the Sequential it is given: ``model.append(nn.Conv1d(...)); model.append(nn.ELU())``)."""
    params = function.params
    found = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == key), None)
    annotation = found.annotation.annotation if found is not None and found.annotation is not None else None
    return annotation is not None and file.resolver.qualify(annotation) == SEQUENTIAL


def _only_sequenced(file: Any, function: cst.FunctionDef, key: str) -> bool:
    """The local dict ``key`` is read once, as the one argument of ``nn.Sequential(key)``, besides
    the item assignments that fill it."""
    filled = {
        id(node.targets[0].target.value) for node in walk(function.body)
        if type(node) is cst.Assign and len(node.targets) == 1 and type(node.targets[0].target) is cst.Subscript
    }
    sequenced, other = 0, 0
    for node in walk(function.body):
        if type(node) is cst.Call and len(node.args) == 1 and type(node.args[0].value) is cst.Name \
                and node.args[0].value.value == key and file.resolver.qualify(node.func) == SEQUENTIAL:
            sequenced += 1
            filled.add(id(node.args[0].value))
        elif type(node) is cst.Attribute:
            filled.add(id(node.attr))
        elif type(node) is cst.Arg and node.keyword is not None:
            filled.add(id(node.keyword))
    for node in walk(function.body):
        if type(node) is cst.Name and node.value == key and id(node) not in filled:
            other += 1
    return sequenced == 1 and other == 1  # (the one other: the name the dict is bound to)


def _chained_self(file: Any, function: cst.FunctionDef) -> bool:
    """``function`` is ``__init__`` of an ``nn.Sequential`` subclass whose ``forward`` is torch's,
    calls it (``super().forward(x)``, pyhealth's ``DenseLayer``), or runs its modules in turn
    (``for layer in self: out = layer(out)``)."""
    index = file.index
    here = index.find(function)
    owner = index.order[index.scope[here]] if here is not None and index.scope[here] >= 0 else None
    if type(owner) is not cst.ClassDef or not any(file.resolver.qualify(b.value) == SEQUENTIAL for b in owner.bases):
        return False
    forward = next((f for f in owner.body.body if type(f) is cst.FunctionDef and f.name.value == "forward"), None)
    if forward is None:
        return True
    me = forward.params.params[0].name.value if forward.params.params else None
    for node in walk(forward.body):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "forward" and (
            (type(node.func.value) is cst.Call and type(node.func.value.func) is cst.Name and node.func.value.func.value == "super")
            or file.resolver.qualify(node.func.value) == SEQUENTIAL
        ):
            return True  # ``super().forward(x)``, ``super(Cls, self).forward(x)``: torch's, in turn
        if type(node) is cst.For and type(node.iter) is cst.Name and node.iter.value == me and type(node.target) is cst.Name:
            element = node.target.value
            for inner in walk(node.body):
                if type(inner) is cst.Assign and len(inner.targets) == 1 and type(inner.targets[0].target) is cst.Name \
                        and type(inner.value) is cst.Call and type(inner.value.func) is cst.Name and inner.value.func.value == element \
                        and len(inner.value.args) == 1 and type(inner.value.args[0].value) is cst.Name \
                        and inner.value.args[0].value.value == inner.targets[0].target.value:
                    return True
    return False


def _key(function: cst.FunctionDef, node: cst.BaseExpression) -> Optional[str]:
    """``"seq"`` for a local ``seq``, ``"self.layers"`` for ``self.layers``; else None."""
    if type(node) is cst.Name:
        return node.value
    params = function.params.params
    if type(node) is cst.Attribute and type(node.value) is cst.Name and params and node.value.value == params[0].name.value:
        return "self." + node.attr.value
    return None


def _built(function: cst.FunctionDef, key: str) -> Optional[cst.BaseExpression]:
    if not key.startswith("self."):
        return single_local_value(function, key)
    values = [
        node.value for node in walk(function.body) if type(node) is cst.Assign
        and any(_key(function, target.target) == key for target in node.targets)
    ]
    return values[0] if len(values) == 1 else None


def _adds_to(function: cst.FunctionDef, node: Any, key: str) -> bool:
    """``key.add_module(name, m)`` or ``key[name] = m``."""
    if type(node) is cst.Assign:
        target = node.targets[0].target if len(node.targets) == 1 else None
        return type(target) is cst.Subscript and _key(function, target.value) == key
    func = node.func
    return type(func) is cst.Attribute and _added_value(node) is not None and _key(function, func.value) == key


def _runs_before(index: Any, before: cst.Call, call: cst.Call) -> bool:
    """Whether ``before`` is a statement of a block around ``call`` (or of its own), with no
    loop between: it runs, once, before ``call`` whenever ``call`` runs."""
    block = _block_of(index, before)
    here = index.find(call)
    while here is not None and here >= 0:
        node = index.order[here]
        if node is block:
            return True
        if type(node) in (cst.For, cst.While, cst.FunctionDef, cst.Lambda):
            return False
        here = index.parent[here]
    return False


def _default_flags(index: Any, function: cst.FunctionDef, before: cst.CSTNode, call: cst.CSTNode) -> Optional[List[str]]:
    """The parameters of ``function`` whose defaults make ``before`` run, once, before ``call``
    whenever ``call`` runs: every block between ``before`` and the block around both is the body
    of an ``if flag:`` (``if not flag:``) without ``else``, ``flag`` a parameter that defaults to
    ``True`` (``False``) and is never rebound; no loop between. None otherwise."""
    around = set()
    here = index.find(call)
    while here is not None and here >= 0:
        node = index.order[here]
        if type(node) in (cst.For, cst.While, cst.FunctionDef, cst.Lambda):
            break
        around.add(id(node))
        here = index.parent[here]
    flags: List[str] = []
    here = index.find(before)
    while here is not None and here >= 0:
        node = index.order[here]
        if id(node) in around:
            return flags or None
        if type(node) in (cst.For, cst.While, cst.FunctionDef, cst.Lambda, cst.Else, cst.Try, cst.With):
            return None
        if type(node) is cst.If:
            flag = _flag_test(function, node)
            if flag is None or node.orelse is not None:
                return None
            flags.append(flag)
        here = index.parent[here]
    return None


def _flag_test(function: cst.FunctionDef, test_of: cst.If) -> Optional[str]:
    """``p`` for ``if p:`` (``p=True``) or ``if not p:`` (``p=False``), ``p`` never rebound."""
    test, wanted = test_of.test, "True"
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        test, wanted = test.expression, "False"
    if type(test) is not cst.Name:
        return None
    param = parameter(function, test.value)
    default = param.default if param is not None else None
    return test.value if type(default) is cst.Name and default.value == wanted else None


def _block_of(index: Any, node: cst.CSTNode) -> Optional[Any]:
    here = index.find(node)
    while here is not None and here >= 0:
        found = index.order[here]
        if type(found) in (cst.IndentedBlock, cst.Module):
            return found
        here = index.parent[here]
    return None


def _added_elsewhere(function: cst.FunctionDef, key: str, added: List[cst.Call]) -> bool:
    """Whether the function adds to or changes the Sequential anywhere but those calls
    (another ``add_module``, ``insert``/``append``/``extend``, an item assignment)."""
    known = {id(call) for call in added}
    for node in walk(function.body):
        if type(node) is cst.Call and id(node) not in known:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value in ("add_module", "insert", "append", "extend", "register_module", "pop") \
                    and _key(function, func.value) == key:
                return True
        if type(node) is cst.Assign and id(node) not in known and any(
            type(t.target) is cst.Subscript and _key(function, t.target.value) == key for t in node.targets
        ):
            return True
    return False
