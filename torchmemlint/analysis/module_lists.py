"""What calling an element of a module list runs: ``for conv in self.convs: x = conv(x)``,
``self.convs[i](x)``, ``for c1, c2 in zip(self.convs1, self.convs2)``. The list is what
``__init__`` builds into ``self.<name>`` (``nn.ModuleList([...])``, a list display, a
comprehension, a local list filled by ``append``/``extend``/``+=``, ``self.<name>.append``);
the value of calling one of its elements is "a call of one of its element kinds". Layers
wrapped by ``weight_norm``/``spectral_norm`` (``torch.nn.utils`` and its ``parametrizations``,
whose ``orthogonal`` returns its module too) are the layer they wrap."""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import ClassModel, Layer, _is_self
from torchmemlint.analysis.container_helpers import MODULE_LIST
from torchmemlint.analysis.factories import parameter
from torchmemlint.analysis.listed_modules import _DEPTH, listed_node
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.vocabulary import GRAPH_CONVOLUTIONS, GRAPH_DENSE_LAYERS
from torchmemlint.tree import walk

# A wrapper that returns the module it is given (its kind unchanged).
WRAPPERS = frozenset(
    f"torch.nn.utils.{place}{name}"
    for place in ("", "parametrizations.", "weight_norm.", "spectral_norm.")
    for name in ("weight_norm", "spectral_norm")
) | {"torch.nn.utils.parametrizations.orthogonal"}
_LISTS = frozenset({"torch.nn.ModuleList"})
MODULE_DICT = "torch.nn.ModuleDict"  # its values, read by key: ``self.heads[name](x)``
SEQUENTIAL = "torch.nn.Sequential"
_ADDS = ("append", "extend", "insert", "setdefault", "update")
_READS_ONLY = frozenset({"len", "type", "isinstance", "repr", "str", "print", "id"})  # (read a list or an element, run none)


def unwrap(call: cst.Call, qualify) -> cst.Call:
    """``weight_norm(nn.Conv1d(...))`` -> ``nn.Conv1d(...)`` (any number of such wrappers)."""
    for _ in range(_DEPTH):
        if qualify(call.func) not in WRAPPERS or not call.args or call.args[0].keyword is not None:
            break
        inner = call.args[0].value
        if type(inner) is not cst.Call:
            break
        call = inner
    return call


def wrapped_layer(resolver, call: cst.Call, function: Optional[cst.FunctionDef] = None) -> Optional[Layer]:
    """The layer ``call`` builds, through the wrappers around it (None when it builds none)."""
    inner = unwrap(call, resolver.qualify)
    if inner is call:
        return None
    layer = resolver.layer(inner, function)
    return layer if layer is not None and layer.qualified not in WRAPPERS else None


_GRAPH_LAYERS = GRAPH_CONVOLUTIONS | GRAPH_DENSE_LAYERS  # PyG's layers, read by ``Producers.block``


class ModuleLists:
    """The element layers of the module lists of one class (asked per attribute, cached)."""

    def __init__(self, file: Any, model: ClassModel) -> None:
        self.file = file
        self.model = model
        self._found: Dict[str, Optional[List[Any]]] = {}
        self._locals: Optional[Dict[str, List[Tuple[str, cst.BaseExpression]]]] = None
        self._expressions: Dict[str, List[cst.BaseExpression]] = {}  # attribute -> its element expressions
        self._holders: Optional[Dict[int, str]] = None
        self._calls: Dict[str, Tuple[List[Tuple[cst.Call, cst.FunctionDef]], bool]] = {}
        self._before: Dict[int, cst.BaseExpression] = {}  # element -> the one before it in its display
        self._rows: Optional[Dict[int, Tuple[str, int, int]]] = None  # element -> its place in rows
        self._orders: Dict[str, Optional[Any]] = {}  # attribute -> the orders of the local list it is made of

    def elements(self, attribute: str) -> Optional[List[Any]]:
        """Every layer ``self.<attribute>`` may hold as an element (None: not all known): a
        ``Layer``, or the call of a class that is not a ``torch`` one (``Conv1d(...)``)."""
        if attribute not in self._found:
            self._found[attribute] = self._attribute(attribute)
        return self._found[attribute]

    def _attribute(self, attribute: str) -> Optional[List[Any]]:
        init = self.model.init
        assignments = self.model.assignments.get(attribute, [])
        if init is None or not assignments or any(
            a.method is not init and (not self.model.builds(a.method) or _grown(a.method, attribute)) for a in assignments
        ):
            return None  # (a method ``__init__`` calls once may build it whole: ``self._init_layers()``)
        expressions: List[cst.BaseExpression] = []
        for assignment in assignments:
            if self._rewrapped_list(assignment, attribute):
                continue  # ``self.convs = nn.ModuleList(self.convs)``: the elements it was given
            found = self._items(assignment.value, 0)
            if found is None:
                return None
            expressions.extend(found)
        for how, added in self._additions().get("self." + attribute, []):
            found = [added] if how == "append" else self._items(added, 0)
            if found is None:
                return None
            expressions.extend(found)
        self._expressions[attribute] = expressions
        layers: List[Any] = []
        for expression in expressions:
            layer = self._layer(expression, 0)
            if layer is None:
                return None
            layers.append(layer)
        return layers or None

    def _rewrapped_list(self, assignment: Any, attribute: str) -> bool:
        """``self.convs = nn.ModuleList(self.convs)`` in ``__init__``, after ``self.convs = []``
        and its ``append``s: the elements the plain list got."""
        value = assignment.value
        if type(value) is not cst.Call or self.file.resolver.qualify(value.func) not in _LISTS or len(value.args) != 1:
            return False
        arg = value.args[0]
        self_name = self.model.self_name(assignment.method)
        return (
            arg.keyword is None and not arg.star and _target(arg.value, self_name) == "self." + attribute
            and any(type(other.value) in (cst.List, cst.Tuple) for other in self.model.assignments.get(attribute, []))
        )

    def holder(self, call: cst.CSTNode) -> Optional[str]:
        """``upsamples`` when ``call`` (``nn.Sequential(...)`` in ``__init__``) is an element
        expression of the module list ``self.upsamples`` (in its display, comprehension or
        ``+=``/``append``)."""
        if self._holders is None:
            self._holders = {}
            for attribute in self.model.assignments:
                if self._sequential(attribute):
                    continue  # (an ``nn.Sequential`` runs its modules itself: ``added_modules`` orders them)
                self.elements(attribute)
                for expression in self._expressions.get(attribute, ()):
                    self._holders.setdefault(id(expression), attribute)
        return self._holders.get(id(call))

    def _sequential(self, attribute: str) -> bool:
        """``self.<attribute>`` is built as an ``nn.Sequential``: its elements are read by index
        (``self.layers[i](x)``), but it is no list whose elements the class calls itself."""
        return any(
            type(a.value) is cst.Call and self.file.resolver.qualify(a.value.func) == SEQUENTIAL
            for a in self.model.assignments.get(attribute, [])
        )

    def row(self, call: cst.CSTNode) -> Optional[Tuple[str, Tuple[int, ...], Tuple[int, ...]]]:
        """``(layers, path, widths)`` when ``call`` is at ``path`` of each row of the module list
        ``self.layers`` whose every element is a display of ``widths[0]`` modules
        (``self.layers.append(nn.ModuleList([conv, act, conv2, act2]))``, path ``(1,)``),
        unpacked as ``for conv, act, conv2, act2 in self.layers``; a position that holds a
        display itself, the same width in every row (a local ``block = nn.ModuleList([conv,
        noise, act])`` put in the row), gives its modules a path one longer, unpacked by a
        nested target (``for pre, (conv, noise, act), post in self.layers``)."""
        if self._rows is None:
            self._rows = {}
            for attribute in self.model.assignments:
                if self.elements(attribute) is None:
                    continue
                expressions = self._expressions.get(attribute, ())
                rows = [self._items(e, 0) for e in expressions if type(e) is not cst.Name]
                if len(rows) == len(expressions):
                    self._index_rows(attribute, rows, (), ())  # type: ignore[arg-type]
        return self._rows.get(id(call))

    def _index_rows(self, attribute: str, rows: List[Optional[List[cst.BaseExpression]]], path: Tuple[int, ...], widths: Tuple[int, ...]) -> None:
        """Note the place of each item of ``rows`` (the displays at ``path`` of each row)."""
        if len({len(items) if items is not None else -1 for items in rows}) != 1 or rows[0] is None or len(rows[0]) < 2 or len(path) > 2:
            return
        width = len(rows[0])
        for items in rows:
            for position, item in enumerate(items):  # type: ignore[arg-type]
                self._rows[id(item)] = (attribute, path + (position,), widths + (width,))  # type: ignore[index]
        for position in range(width):
            inner = [self._display(items[position]) for items in rows]  # type: ignore[index]
            if None not in inner:
                self._index_rows(attribute, inner, path + (position,), widths + (width,))

    def _display(self, item: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
        """The modules of ``item`` when it is a module list display, or a local of ``__init__``
        given one once (``resnet_block = nn.ModuleList([...])``); None otherwise."""
        if type(item) is cst.Call and type(item.func) is cst.Name and not item.args:
            bound = self._additions().get(item.func.value, [])  # ``convs()``, ``convs = lambda: nn.ModuleList([...])``
            if len(bound) != 1 or bound[0][0] != "bind" or type(bound[0][1]) is not cst.Lambda or bound[0][1].params.params:
                return None
            item = bound[0][1].body  # type: ignore[attr-defined]
        if type(item) is cst.Name:
            bound = self._additions().get(item.value, [])
            if len(bound) != 1 or bound[0][0] != "bind":
                return None
            item = bound[0][1]
        if type(item) is cst.Call and self.file.resolver.qualify(item.func) in _LISTS:
            return self._items(item, 0)
        return None

    def inner_elements(self, attribute: str) -> Optional[List[Any]]:
        """Every layer an element of an element of ``self.<attribute>`` may be, when each of its
        elements is a module list display (``nn.ModuleList([convs() for _ in bands])`` with
        ``convs = lambda: nn.ModuleList([...])``); None otherwise."""
        found: List[Any] = []
        for expression in self._expressions.get(attribute, ()) if self.elements(attribute) is not None else ():
            items = self._display(expression)
            for item in items if items is not None else ():
                layer = self._layer(item, 0)
                if layer is None:
                    return None
                found.append(layer)
            if items is None:
                return None
        return found or None

    def row_elements(self, attribute: str, path: Tuple[int, ...]) -> Optional[List[Any]]:
        """What ``path`` of each row of ``self.<attribute>`` holds (see ``row``)."""
        found = []
        for expression in self._expressions.get(attribute, ()) if self.elements(attribute) is not None else ():
            item: Optional[cst.BaseExpression] = expression
            for depth, position in enumerate(path):
                items = self._items(item, 0) if depth == 0 else self._display(item)  # type: ignore[arg-type]
                item = items[position] if items is not None and position < len(items) else None
                if item is None:
                    return None
            layer = self._layer(item, 0)  # type: ignore[arg-type]
            row = self.row(item)  # type: ignore[arg-type]
            if layer is None or row is None or row[:2] != (attribute, path):
                return None
            found.append(layer)
        return found or None

    def row_calls(self, attribute: str, path: Tuple[int, ...], widths: Tuple[int, ...]) -> Tuple[List[Tuple[cst.Call, cst.FunctionDef]], bool]:
        """Every call of the module at ``path`` of the rows of ``self.<attribute>``: in
        ``for a, (b, c), d in self.<attribute>:`` the name bound at ``path`` (unless a later
        name of the target binds it too: then it holds the later module), called in the loop's
        body; complete when every other read of ``self.<attribute>`` is ``len(...)`` and the
        name is only ever called there."""
        found: List[Tuple[cst.Call, cst.FunctionDef]] = []
        index = self.file.index
        for reference in self.model.references.get(attribute, []):
            if reference.method is self.model.init:
                continue
            here = index.find(reference.node)
            parent = index.order[index.parent[here]] if here is not None and index.parent[here] >= 0 else None
            if type(parent) is cst.Arg and reference.call is None:
                outer = index.order[index.parent[index.find(parent)]]  # type: ignore[arg-type]
                if type(outer) is cst.Call and type(outer.func) is cst.Name and outer.func.value == "len":
                    continue
            if type(parent) is not cst.For or parent.iter is not reference.node:
                return found, False
            bound = _unpacked(parent.target, path, widths)
            if bound is None:
                return found, False
            names = [n for n in walk(parent.target) if type(n) is cst.Name]
            at = next(i for i, n in enumerate(names) if n is bound)
            if any(n.value == bound.value for n in names[at + 1:]):
                continue  # a later module of the row is what the name holds
            name = bound.value
            calls = [n for n in walk(parent.body) if type(n) is cst.Call and type(n.func) is cst.Name and n.func.value == name]
            called = {id(c.func) for c in calls}
            if any(type(n) is cst.Name and n.value == name and id(n) not in called for n in walk(parent.body)):
                return found, False  # ``checkpoint(act, x)``, ``outs.append(act)``: it may run on anything
            found.extend((c, reference.method) for c in calls)
        return found, bool(found)

    def element_calls(self, attribute: str) -> Tuple[List[Tuple[cst.Call, cst.FunctionDef]], bool]:
        """Every call of an element of ``self.<attribute>`` in the class's methods other than
        ``__init__`` (``self.convs[i](x)``, ``for conv in self.convs: conv(x)``, through ``zip`` and
        ``enumerate``), with its method; and whether those are all that can run one: every other read
        of ``self.<attribute>`` is ``len(...)``, ``type(...[0])`` or a loop whose variable is only called or
        has its attributes read (``layer.remove_weight_norm()``)."""
        if attribute not in self._calls:
            self._calls[attribute] = self._element_calls(attribute)
        return self._calls[attribute]

    def _element_calls(self, attribute: str) -> Tuple[List[Tuple[cst.Call, cst.FunctionDef]], bool]:
        found: List[Tuple[cst.Call, cst.FunctionDef]] = []
        model, init, qualify = self.model, self.model.init, self.file.resolver.qualify
        references = [r for r in model.references.get(attribute, []) if r.method is not init]
        accounted = set()
        for method in dict.fromkeys(r.method for r in references):
            self_name = model.self_name(method)
            graph = self.file.values(method)
            if not graph.reliable:
                return found, False
            for node in walk(method):
                if type(node) is cst.For:
                    accounted.update(_iterated(node, self_name, attribute))
                if type(node) is not cst.Call:
                    continue
                func = node.func  # type: ignore[attr-defined]
                callee = graph.names.get(id(func)) if type(func) is cst.Name else None
                source = listed_node(func, callee, self_name, qualify)
                if source is not None and source.attr.value == attribute:
                    found.append((node, method))  # type: ignore[arg-type]
                    accounted.add(id(source))
                elif type(func) is cst.Name and func.value in _READS_ONLY:  # ``type(self.acts[0]).__name__`` runs none
                    accounted.update(id(arg.value.value if type(arg.value) is cst.Subscript else arg.value) for arg in node.args)  # type: ignore[attr-defined]
        return found, bool(found) and all(id(r.node) in accounted for r in references)

    def chained_before(self, attribute: str, element: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The element that runs right before ``element`` when ``self.<attribute>`` runs as a
        Sequential: every call of an element is ``x = block(x)``, the only statement of a
        ``for block in self.<attribute>`` loop, so each element consumes what the one before
        it in the list made. Known for an element of a list display (``self.tdnns.extend([conv,
        act, norm])`` in a loop) after another of the same display, or of a local list the
        ModuleList is made of whose every order puts one element before it; None otherwise (first in
        its display, a list that ``insert`` reorders, or a loop that does more)."""
        if self.elements(attribute) is None or not self._chained(attribute):
            return None
        return self._before.get(id(element)) or self._ordered_before(attribute, element)

    def chained_after(self, attribute: str, element: cst.BaseExpression) -> Optional[Tuple[List[cst.BaseExpression], bool]]:
        """The elements that may run right after ``element`` when ``self.<attribute>`` runs in
        turn, and whether it may be the last: the next of its display, or, for a module list made
        of a local list (``_local_order``), the successors in its orders; None when not known."""
        if self.elements(attribute) is None or not self._chained(attribute):
            return None
        after = [e for e in self._expressions.get(attribute, ()) if self._before.get(id(e)) is element]
        if after:
            return after, False
        order = self._local_order(attribute)
        if order is None or element not in order.items:
            return None
        return [b for a, b in order.pairs if a is element], element in order.last

    def _local_order(self, attribute: str) -> Optional[Any]:
        """For ``self.<attribute> = nn.ModuleList(layers)``, ``layers`` a local list ``__init__``
        fills (by appends in loops and branches): every order it may hold there (``LayerLists``)."""
        if attribute not in self._orders:
            self._orders[attribute] = self._read_local_order(attribute)
        return self._orders[attribute]

    def _read_local_order(self, attribute: str) -> Optional[Any]:
        init, assignments = self.model.init, self.model.assignments.get(attribute, [])
        if init is None or len(assignments) != 1 or self._additions().get("self." + attribute):
            return None
        value = assignments[0].value
        if type(value) is not cst.Call or self.file.resolver.qualify(value.func) not in _LISTS or len(value.args) != 1:
            return None
        arg = value.args[0]
        if arg.keyword is not None or arg.star or type(arg.value) is not cst.Name:
            return None
        return self.file.layer_lists.order(init, arg.value.value, assignments[0].statement)

    def _ordered_before(self, attribute: str, element: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """For ``self.<attribute> = nn.ModuleList(layers)``, ``layers`` a local list that
        ``__init__`` fills by appends in loops and branches: the element right before
        ``element`` in every order the list may hold (``LayerLists.order``, the successor
        relation ``nn.Sequential(*layers)`` is read with), when it is the same one."""
        order = self._local_order(attribute)
        before = order.predecessors(element) if order is not None else []
        return before[0] if len(before) == 1 and element not in order.first else None  # type: ignore[union-attr]

    def chained(self, attribute: str) -> bool:
        """``forward`` runs ``self.<attribute>``'s elements in turn (as ``chained_before`` needs)."""
        return self.elements(attribute) is not None and self._chained(attribute)

    def _chained(self, attribute: str) -> bool:
        calls, complete = self.element_calls(attribute)
        if not complete:
            return False
        init = self.model.init
        self_name = self.model.self_name(init) if init is not None else None
        for node in walk(init) if init is not None else ():
            if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "insert":  # type: ignore[attr-defined]
                if _target(node.func.value, self_name) == "self." + attribute:  # type: ignore[attr-defined]
                    return False
        for call, method in calls:
            if not _chain_step(call, method, self.model.self_name(method), attribute):
                return False
        return True

    def last_parts(self, layer: Any) -> Optional[List[Any]]:
        """For an element built by ``nn.Sequential(...)``, the parts (``Part``) that may run
        last in it, so that calling the element makes what they make; None for any other
        element ([] for a Sequential whose order is not known or that may be empty)."""
        resolver = self.file.resolver
        if type(layer) is not Layer or resolver.constructor(layer.call) != SEQUENTIAL:
            return None
        init = self.model.init
        self_name = self.model.self_name(init) if init is not None else None
        order = resolver.sequential_order(layer.call, self_name, init, None)
        if order is None or order.nullable:
            return []
        return list(order.last)

    def _additions(self) -> Dict[str, List[Tuple[str, cst.BaseExpression]]]:
        """In ``__init__``: ``name.append(x)`` / ``self.name.extend(xs)`` / ``name += xs`` /
        ``name = value`` by the name (``self.`` prefixed for attributes) they add to."""
        if self._locals is None:
            found: Dict[str, List[Tuple[str, cst.BaseExpression]]] = {}
            init = self.model.init
            self_name = self.model.self_name(init) if init is not None else None
            for node in walk(init) if init is not None else ():
                kind = type(node)
                if kind is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _ADDS:  # type: ignore[attr-defined]
                    target = _target(node.func.value, self_name)  # type: ignore[attr-defined]
                    args = [a for a in node.args if a.keyword is None and not a.star]  # type: ignore[attr-defined]
                    how = node.func.attr.value  # type: ignore[attr-defined]
                    if target is not None and how == "update":  # (a mapping: its values; ``update(act=m)``)
                        for arg in node.args:  # type: ignore[attr-defined]
                            found.setdefault(target, []).append(("extend" if arg.keyword is None else "append", arg.value))
                    elif target is not None and args:
                        found.setdefault(target, []).append(("extend" if how == "extend" else "append", args[-1].value))
                elif kind is cst.AugAssign and type(node.operator) is cst.AddAssign:  # type: ignore[attr-defined]
                    target = _target(node.target, self_name)  # type: ignore[attr-defined]
                    if target is not None:
                        found.setdefault(target, []).append(("extend", node.value))  # type: ignore[attr-defined]
                elif kind is cst.Assign:
                    for target in node.targets:  # type: ignore[attr-defined]
                        if type(target.target) is cst.Name:
                            found.setdefault(target.target.value, []).append(("bind", node.value))  # type: ignore[attr-defined]
                        elif type(target.target) is cst.Subscript:  # ``self.blocks["input"] = NNBlock(...)``
                            held = _target(target.target.value, self_name)
                            if held is not None:
                                found.setdefault(held, []).append(("append", node.value))  # type: ignore[attr-defined]
            self._locals = found
        return self._locals

    def _items(self, expression: cst.BaseExpression, depth: int) -> Optional[List[cst.BaseExpression]]:
        """The element expressions of the list ``expression`` builds (None: not known)."""
        if depth > _DEPTH:
            return None
        kind = type(expression)
        if kind in (cst.List, cst.Tuple):
            elements = expression.elements  # type: ignore[attr-defined]
            return self._displayed([(type(e) is cst.StarredElement, e.value) for e in elements], depth)
        if kind in (cst.ListComp, cst.GeneratorExp):
            return [expression.elt]  # type: ignore[attr-defined]
        if kind is cst.BinaryOperation and type(expression.operator) is cst.Add:  # type: ignore[attr-defined]
            left = self._items(expression.left, depth + 1)  # type: ignore[attr-defined]
            right = self._items(expression.right, depth + 1)  # type: ignore[attr-defined]
            return None if left is None or right is None else left + right
        if kind is cst.Call and self.file.resolver.qualify(expression.func) == MODULE_DICT:  # type: ignore[attr-defined]
            args = expression.args  # type: ignore[attr-defined]
            if not args:
                return []
            mapping = args[0].value
            if len(args) != 1 or args[0].keyword is not None or args[0].star:
                return None
            if type(mapping) is cst.DictComp:  # ``nn.ModuleDict({str(r): nn.Sequential(...) for r in ...})``
                return [mapping.value]
            return self._mapping_values(mapping, depth + 1)
        if kind is cst.Dict:  # (a local ``components = {}`` filled by key, then given to ``nn.ModuleDict``)
            return self._mapping_values(expression, depth)
        if kind is cst.Call and (self.file.resolver.qualify(expression.func) in _LISTS or (  # type: ignore[attr-defined]
            type(expression.func) is cst.Name and expression.func.value == "list" and not self.file.bindings.is_bound("list")  # type: ignore[attr-defined]
        )):  # (``layers = list()`` ... ``nn.ModuleList(layers)``: the builtin list, as ``[]``)
            args = expression.args  # type: ignore[attr-defined]
            if not args:
                return []
            if len(args) != 1 or args[0].keyword is not None or args[0].star:
                return None
            return self._items(args[0].value, depth + 1)
        if kind is cst.Call and self._list_helper(expression.func):  # type: ignore[attr-defined]
            # ``Layers(conv, act)`` of ``def Layers(*modules): return nn.ModuleList(modules)``
            args = expression.args  # type: ignore[attr-defined]
            if any(arg.keyword is not None or arg.star == "**" for arg in args):
                return None
            return self._displayed([(arg.star == "*", arg.value) for arg in args], depth)
        if kind is cst.Call and self.file.resolver.qualify(expression.func) == SEQUENTIAL and all(  # type: ignore[attr-defined]
            arg.keyword is None and arg.star != "**" for arg in expression.args  # type: ignore[attr-defined]
        ):  # ``self.layers[i](x)`` of ``nn.Sequential(*layers)``: its modules, in order
            return self._displayed([(arg.star == "*", arg.value) for arg in expression.args], depth)  # type: ignore[attr-defined]
        if kind is cst.Name:
            bound = self._additions().get(expression.value, [])  # type: ignore[attr-defined]
            binds = [value for how, value in bound if how == "bind"]
            if not binds:
                return self._module_level(expression, depth)  # type: ignore[arg-type]
            found = []
            for how, value in bound:
                inner = [value] if how == "append" else self._items(value, depth + 1)
                if inner is None:
                    return None
                found.extend(inner)
            return found
        return None

    def _mapping_values(self, mapping: cst.BaseExpression, depth: int) -> Optional[List[cst.BaseExpression]]:
        """The values of a mapping of modules: a dict display, ``dict(key=module, ...)``, a local
        bound to one and filled by key (``components["act"] = nn.ELU()``); None when not known
        (``**`` unpacking, a mapping of another kind)."""
        if type(mapping) is cst.Dict:
            if not all(type(e) is cst.DictElement for e in mapping.elements):
                return None
            return [e.value for e in mapping.elements]  # type: ignore[union-attr]
        if type(mapping) is cst.Call and type(mapping.func) is cst.Name and mapping.func.value == "dict" and not self.file.bindings.is_bound("dict"):
            if any(arg.keyword is None or arg.star for arg in mapping.args):
                return None
            return [arg.value for arg in mapping.args]
        if type(mapping) is cst.Name:
            return self._items(mapping, depth)
        return None

    def _module_level(self, name: cst.Name, depth: int) -> Optional[List[cst.BaseExpression]]:
        """``activate_functions = [nn.LeakyReLU(), nn.LeakyReLU()]`` at module level, assigned
        once, then ``self.activate_functions = activate_functions`` in ``__init__`` (not a
        parameter of it): the display's elements."""
        init = self.model.init
        params = init.params if init is not None else None
        if params is None or any(
            p.name.value == name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)
        ):
            return None
        factories = self.file.factories
        factories._index()
        values = factories._module_assignments.get(name.value, [])
        if len(values) != 1 or type(values[0]) not in (cst.List, cst.Tuple):
            return None
        return self._items(values[0], depth + 1)

    def _displayed(self, elements: List[Tuple[bool, cst.BaseExpression]], depth: int) -> Optional[List[cst.BaseExpression]]:
        """The element expressions of a display (``(starred, value)`` each), noting which
        element directly follows which (``chained_before``)."""
        found: List[cst.BaseExpression] = []
        previous: Optional[cst.BaseExpression] = None
        for starred, value in elements:
            if starred:
                inner = self._items(value, depth + 1)
                if inner is None:
                    return None
                found.extend(inner)
                previous = None
            else:
                if previous is not None:
                    self._before[id(value)] = previous
                found.append(value)
                previous = value
        return found

    def _list_helper(self, func: cst.BaseExpression) -> bool:
        """``func`` names a function of the file that returns ``nn.ModuleList`` of the modules
        it is given (``analysis/container_helpers.py``)."""
        helpers = self.file.resolver.helpers
        return type(func) is cst.Name and helpers is not None and helpers.container(func.value) == MODULE_LIST

    def _layer(self, expression: cst.BaseExpression, depth: int) -> Optional[Any]:
        """The layer an element expression builds: ``nn.Conv1d(...)``, a factory call, a
        wrapper of one, or a local bound once to one of these."""
        init = self.model.init
        resolver = self.file.resolver
        if type(expression) is cst.Call:
            if depth < _DEPTH and self._local_wrapper(expression.func):
                args = expression.args
                if args and args[0].keyword is None and not args[0].star:
                    return self._layer(args[0].value, depth + 1)  # ``norm_f(nn.Conv1d(...))``
                return None
            layer = wrapped_layer(resolver, expression, init) or resolver.layer(expression, init)
            if layer is None and (self._project_class(expression.func) or resolver.qualify(expression.func) in _GRAPH_LAYERS):
                return expression  # ``Conv1d(...)``, a module class of the project (or PyG's ``GCNConv``): the caller reads it
            return layer if layer is not None and layer.qualified not in WRAPPERS else None
        if type(expression) is cst.Name and depth < _DEPTH:
            bound = self._additions().get(expression.value, [])
            if len(bound) == 1 and bound[0][0] == "bind":
                return self._layer(bound[0][1], depth + 1)
            param = parameter(init, expression.value) if init is not None and not bound else None
            if param is not None and type(param.default) is cst.Call:
                # ``def __init__(self, sizes, activation=nn.LeakyReLU(0.2))`` ... ``.append(activation)``:
                # the default configuration's module (one instance, made once with the ``def``)
                return self._layer(param.default, depth + 1)
        return None


    def _local_wrapper(self, func: cst.BaseExpression) -> bool:
        """``norm_f`` bound in ``__init__`` only to wrappers, each binding one or either of two
        (``norm_f = spectral_norm if use_spectral_norm else weight_norm``, maybe bound again
        under an ``if``; ``lambda x: x`` as one): whichever binding holds, it returns the module
        it is given."""
        if type(func) is not cst.Name:
            return False
        bound = self._additions().get(func.value, [])
        if not bound or any(kind != "bind" for kind, _ in bound):
            return False
        init = self.model.init
        if init is not None and func.value in {p.name.value for p in walk(init.params) if type(p) is cst.Param}:
            return False  # a parameter may hold anything a caller passes
        qualify = self.file.resolver.qualify
        options = [
            option for _, value in bound
            for option in ([value.body, value.orelse] if type(value) is cst.IfExp else [value])  # type: ignore[attr-defined]
        ]
        return all(qualify(option) in WRAPPERS or _identity(option) or returns_its_module(self.file, option) for option in options)

    def _project_class(self, func: cst.BaseExpression) -> bool:
        """``Conv1d`` of the file, or imported from another file of the project (which the
        resolver qualifies when the import is absolute: ``from speechbrain.nnet.CNN import Conv1d``)."""
        if self.file.resolver.qualify(func) is None:
            return True
        links = self.file.links
        return links is not None and links.may_come_from_package(dotted_name(func))


def returns_its_module(file: Any, func: cst.BaseExpression, depth: int = 0) -> bool:
    """``func`` names a function of this file or of another project file whose every ``return``
    gives back its first parameter, never rebound, or a wrapper of it (a project's own
    ``def weight_norm(module, name="weight"): return parametrized_weight_norm(module, ...)``)."""
    dotted = dotted_name(func) if type(func) in (cst.Name, cst.Attribute) else None
    if dotted is None or depth > 2:
        return False
    node = file.callables.functions.get(dotted) if "." not in dotted else None
    theirs = file
    if node is None and file.links is not None:
        found = file.links.definition(dotted, "function", package=True)
        if found is None:
            return False
        theirs, node = found
    params = node.params.params if type(node) is cst.FunctionDef else ()
    if not params:
        return False
    name = params[0].name.value
    body = walk(node.body)
    returns = [n for n in body if type(n) is cst.Return]
    rebound = any(type(n) in (cst.AssignTarget, cst.AugAssign) and type(n.target) is cst.Name and n.target.value == name for n in body)
    if not returns or rebound or any(type(n) in (cst.FunctionDef, cst.Lambda, cst.ClassDef) for n in body):
        return False
    for returned in returns:
        value = returned.value
        if type(value) is cst.Name and value.value == name:
            continue
        if not (type(value) is cst.Call and value.args and value.args[0].keyword is None and not value.args[0].star
                and type(value.args[0].value) is cst.Name and value.args[0].value.value == name):
            return False
        if theirs.resolver.qualify(value.func) not in WRAPPERS and not returns_its_module(theirs, value.func, depth + 1):
            return False
    return True


def _identity(node: cst.BaseExpression) -> bool:
    """``lambda x: x``: the module it is given (``norm_f = spectral_norm if sn else lambda x: x``)."""
    if type(node) is not cst.Lambda or len(node.params.params) != 1 or node.params.star_arg is not cst.MaybeSentinel.DEFAULT:
        return False
    return type(node.body) is cst.Name and node.body.value == node.params.params[0].name.value


_CACHE: "weakref.WeakKeyDictionary[ClassModel, ModuleLists]" = weakref.WeakKeyDictionary()


def module_lists(file: Any, model: ClassModel) -> ModuleLists:
    """The (cached) module lists of ``model``."""
    found = _CACHE.get(model)
    if found is None:
        found = _CACHE[model] = ModuleLists(file, model)
    return found


def _chain_step(call: cst.Call, method: cst.FunctionDef, self_name: Optional[str], attribute: str) -> bool:
    """``call`` is ``x = block(x)``, the whole body of ``for block in self.<attribute>:``."""
    func = call.func
    if type(func) is not cst.Name or len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return False
    arg = call.args[0].value
    for node in walk(method):
        if type(node) is not cst.For or node.orelse is not None:  # type: ignore[attr-defined]
            continue
        loop_iter, target, body = node.iter, node.target, node.body  # type: ignore[attr-defined]
        if not (type(loop_iter) is cst.Attribute and _is_self(loop_iter.value, self_name) and loop_iter.attr.value == attribute):
            continue
        if type(target) is not cst.Name or target.value != func.value or type(body) is not cst.IndentedBlock:
            continue
        if len(body.body) != 1 or type(body.body[0]) is not cst.SimpleStatementLine or len(body.body[0].body) != 1:
            continue
        small = body.body[0].body[0]
        if type(small) is cst.Assign and small.value is call and len(small.targets) == 1:
            bound = small.targets[0].target
            return type(bound) is cst.Name and type(arg) is cst.Name and bound.value == arg.value
    return False


def _grown(method: cst.FunctionDef, attribute: str) -> bool:
    """Whether ``method`` adds to ``self.<attribute>`` (``append``/``extend``/``insert``, ``+=``,
    an item assigned): only ``__init__``'s additions are read."""
    for node in walk(method.body):
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _ADDS:  # type: ignore[attr-defined]
            target = node.func.value  # type: ignore[attr-defined]
        elif type(node) is cst.AugAssign:
            target = node.target  # type: ignore[attr-defined]
        elif type(node) is cst.AssignTarget and type(node.target) is cst.Subscript:  # type: ignore[attr-defined]
            target = node.target.value  # type: ignore[attr-defined]
        else:
            continue
        if type(target) is cst.Attribute and target.attr.value == attribute:
            return True
    return False


def _target(node: cst.BaseExpression, self_name: Optional[str]) -> Optional[str]:
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute and _is_self(node.value, self_name):
        return "self." + node.attr.value
    return None


def _unpacked(target: cst.BaseExpression, path: Tuple[int, ...], widths: Tuple[int, ...]) -> Optional[cst.Name]:
    """The name ``target`` (of a ``for``) binds at ``path`` of each item, when every level on
    the way unpacks exactly ``widths`` names (nested tuples of names only)."""
    for position, width in zip(path, widths):
        if type(target) not in (cst.Tuple, cst.List) or len(target.elements) != width:  # type: ignore[attr-defined]
            return None
        if any(type(e) is not cst.Element or type(e.value) not in (cst.Name, cst.Tuple, cst.List) for e in target.elements):  # type: ignore[attr-defined]
            return None
        target = target.elements[position].value  # type: ignore[attr-defined]
    return target if type(target) is cst.Name else None


def _iterated(loop: cst.For, self_name: Optional[str], attribute: str) -> List[int]:
    """The ids of the ``self.<attribute>`` a ``for`` iterates (directly, or in ``zip`` /
    ``enumerate``), when each name it binds is only called or has attributes read in its body."""
    sources = [loop.iter]
    for _ in range(_DEPTH):  # through ``zip`` / ``enumerate``, nested (``enumerate(zip(a, b))``)
        calls = {id(s): s for s in sources if type(s) is cst.Call and type(s.func) is cst.Name and s.func.value in ("zip", "enumerate")}
        if not calls:
            break
        sources = [s for s in sources if id(s) not in calls] + [a.value for c in calls.values() for a in c.args]
    mine = [
        source for source in sources if type(source) is cst.Attribute
        and _is_self(source.value, self_name) and source.attr.value == attribute
    ]
    if not mine:
        return []
    bound = {node.value for node in walk(loop.target) if type(node) is cst.Name}
    allowed = set()
    for node in walk(loop.body):
        if type(node) is cst.Call and type(node.func) is cst.Name:  # type: ignore[attr-defined]
            allowed.add(id(node.func))  # type: ignore[attr-defined]
        elif type(node) is cst.Attribute and type(node.value) is cst.Name and node.attr.value not in ("forward", "__call__"):  # type: ignore[attr-defined]
            allowed.add(id(node.value))  # type: ignore[attr-defined]  (``layer.forward(x)`` runs it unseen)
    for node in walk(loop.body):
        if type(node) is cst.Name and node.value in bound and id(node) not in allowed:  # type: ignore[attr-defined]
            return []  # ``checkpoint(layer, x)``, ``outs.append(layer)``: it may run on anything
    return [id(source) for source in mine]
