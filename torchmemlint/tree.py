"""Fast traversal of libcst trees: only the fields that can hold code.

libcst's own visitors descend into every whitespace, comma and parenthesis node; the engine's
walk and the rules' analyses skip those layout fields, which makes a walk several times cheaper.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import gc
import sys
import typing
import weakref
from bisect import bisect_left
from functools import lru_cache
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import libcst as cst

# Fields that hold layout only (whitespace, brackets, punctuation, operators), plus the keyword
# name of an argument, which is not a use of that name.
_LAYOUT_FIELDS = frozenset(
    {
        "lpar", "rpar", "lbrace", "rbrace", "lbracket", "rbracket", "leading_lines",
        "lines_after_decorators", "empty_lines", "comma", "equal", "colon", "semicolon", "dot",
        "header", "footer", "newline", "trailing_whitespace", "asynchronous", "star", "operator",
        "keyword", "indent", "first_line", "default_indent", "default_newline", "encoding",
        "has_trailing_newline",
    }
)
# Fields in evaluation order where libcst declares them otherwise (decorators come first).
_ORDER = {
    cst.FunctionDef: ("decorators", "name", "type_parameters", "params", "returns", "body"),
    cst.ClassDef: ("decorators", "name", "type_parameters", "bases", "keywords", "body"),
}


@lru_cache(maxsize=None)
def child_fields(node_type: type) -> Tuple[str, ...]:
    if node_type in _ORDER:
        return _ORDER[node_type]
    return tuple(
        f.name
        for f in dataclasses.fields(node_type)
        if f.name not in _LAYOUT_FIELDS and "whitespace" not in f.name
    )


@lru_cache(maxsize=None)
def is_node_type(value_type: type) -> bool:
    # libcst's node classes are ABCs: a cached subclass test is much cheaper than isinstance.
    return issubclass(value_type, cst.CSTNode)


def children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The child nodes that carry code, in evaluation order."""
    reader = _READERS.get(type(node))
    if reader is None:
        reader = _READERS[type(node)] = _reader(type(node))
    return reader(node)


def generic_children(node: cst.CSTNode) -> List[cst.CSTNode]:
    """``children`` read field by field, checking every value (the readers' reference)."""
    found: List[cst.CSTNode] = []
    for name in child_fields(type(node)):
        value = getattr(node, name)
        value_type = type(value)
        if value_type is tuple or value_type is list:
            found.extend(item for item in value if is_node_type(type(item)))
        elif is_node_type(value_type):
            found.append(value)
    return found


# One reader per node type, written from the types libcst declares for its fields: a field
# declared as a node (``Call.func``) or a sequence of nodes (``Call.args``) is taken without a
# check, one that cannot hold a node (``Name.value: str``) is not read, any other field
# (``Optional``, a sentinel) is checked value by value as ``generic_children`` does.
_READERS: Dict[type, Callable[[cst.CSTNode], List[cst.CSTNode]]] = {}


def _reader(node_type: type) -> Callable[[cst.CSTNode], List[cst.CSTNode]]:
    try:
        hints = typing.get_type_hints(node_type)
    except Exception:  # an annotation that does not resolve: read it the generic way
        return generic_children
    lines = ["def read(node):", "    found = []"]
    for name in child_fields(node_type):
        kind = _field_kind(hints.get(name))
        if kind == "node":
            lines.append(f"    found.append(node.{name})")
        elif kind == "nodes":
            lines.append(f"    found.extend(node.{name})")
        elif kind == "check":
            lines += [
                f"    value = node.{name}",
                "    value_type = type(value)",
                "    if value_type is tuple or value_type is list:",
                "        found.extend([item for item in value if is_node_type(type(item))])",
                "    elif is_node_type(value_type):",
                "        found.append(value)",
            ]
    lines.append("    return found")
    namespace: Dict[str, object] = {"is_node_type": is_node_type}
    exec("\n".join(lines), namespace)  # noqa: S102 - code written above from field names
    return namespace["read"]  # type: ignore[return-value]


def _field_kind(hint: object) -> str:
    """"node", "nodes" (a sequence of nodes), "none" (never a node) or "check"."""
    if hint is None:
        return "check"
    if isinstance(hint, type):
        return "node" if issubclass(hint, cst.CSTNode) else "none"
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        kinds = {_field_kind(argument) for argument in arguments}
        if kinds == {"node"}:
            return "node"
        return "none" if kinds == {"none"} else "check"
    if origin is typing.Literal:
        return "none" if all(isinstance(a, (str, int, bool)) for a in arguments) else "check"
    if origin in (collections.abc.Sequence, list, tuple):
        items = {_field_kind(argument) for argument in arguments if argument is not Ellipsis}
        return "nodes" if items == {"node"} else "check"
    return "check"


# -- parsing ------------------------------------------------------------------------------------
_validating = True  # False while parse_module parses


def _post_init(self: cst.CSTNode) -> None:
    """``CSTNode.__post_init__``: libcst's checks of a node, skipped while ``parse_module``
    builds a tree."""
    if _validating:
        self._validate()


# Installed once, at import. Assigning a class attribute of ``CSTNode`` around every parse (as
# was done) makes Python drop the method caches and the specialised bytecode of every libcst
# node class, paid again by the analyses after each parse (a re-lint in the language server
# parses a few lines), and it is visible to every thread for the parse's duration.
cst.CSTNode.__post_init__ = _post_init  # type: ignore[method-assign]


# The constructors of libcst's node classes, written once at import. Each is a frozen dataclass,
# whose generated ``__init__`` sets every field with ``object.__setattr__(self, name, value)``
# and then calls ``__post_init__``; the parser builds every node of every file through it. The
# constructors below take the same parameters with the same defaults (a field's
# ``default_factory`` called when the argument is left out, as the dataclass does), set each
# field through its slot's descriptor (``object.__setattr__`` where the field is not a slot)
# and run libcst's checks unless ``parse_module`` is parsing: the same nodes, built faster
# (benchmarks/README.md, "Parsing"; tests/test_speed_paths.py compares the signatures and the
# trees with libcst's constructors). Only constructors the dataclass machinery generated are
# replaced; libcst's own are kept here.
ORIGINAL_CONSTRUCTORS: Dict[type, Callable[..., None]] = {}


def _node_classes() -> List[type]:
    seen: Dict[type, None] = {}
    stack = [cst.CSTNode]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen[sub] = None
                stack.append(sub)
    return list(seen)


def _constructor(node_type: type) -> Optional[Callable[..., None]]:
    """The faster ``__init__`` of one node class; None when it is not a generated one."""
    generated = node_type.__dict__.get("__init__")
    if generated is None or not dataclasses.is_dataclass(node_type) or getattr(generated, "__code__", None) is None:
        return None
    if generated.__code__.co_filename != "<string>" or node_type.__dict__.get("__post_init__") is not None:
        return None
    namespace: Dict[str, object] = {
        "_tree": sys.modules[__name__], "_set": object.__setattr__,
        "_FACTORY": dataclasses._HAS_DEFAULT_FACTORY,  # type: ignore[attr-defined]
    }
    params, lines = [], []
    for number, field in enumerate(dataclasses.fields(node_type)):
        if not field.init or field.kw_only:
            return None  # (libcst declares none such: left to the dataclass)
        value = field.name
        if field.default is not dataclasses.MISSING:
            namespace[f"_default{number}"] = field.default
            params.append(f"{field.name}=_default{number}")
        elif field.default_factory is not dataclasses.MISSING:
            namespace[f"_factory{number}"] = field.default_factory
            params.append(f"{field.name}=_FACTORY")
            value = f"_factory{number}() if {field.name} is _FACTORY else {field.name}"
        else:
            params.append(field.name)
        slot = next((klass.__dict__[field.name] for klass in node_type.__mro__ if field.name in klass.__dict__), None)
        if type(slot).__name__ == "member_descriptor":
            namespace[f"_slot{number}"] = slot.__set__  # type: ignore[union-attr]
            lines.append(f"    _slot{number}(self, {value})")
        else:
            lines.append(f"    _set(self, {field.name!r}, {value})")
    source = "\n".join([
        f"def __init__(self, {', '.join(params)}):" if params else "def __init__(self):", *lines,
        "    if _tree._validating:", "        self._validate()",
    ])
    exec(source, namespace)  # noqa: S102 - code written above from the dataclass's fields
    constructor = namespace["__init__"]
    constructor.__qualname__ = f"{node_type.__qualname__}.__init__"  # type: ignore[attr-defined]
    return constructor  # type: ignore[return-value]


def _install_constructors() -> None:
    for node_type in _node_classes():
        faster = _constructor(node_type)
        if faster is not None:
            ORIGINAL_CONSTRUCTORS[node_type] = node_type.__init__  # type: ignore[misc]
            node_type.__init__ = faster  # type: ignore[misc]


_install_constructors()


# ``evaluated_value`` of a literal: libcst's calls ``ast.literal_eval`` on the text, which
# compiles it and leaves four closures in a reference cycle for the garbage collector on every
# call (the analyses read thousands of literals per run: ~7,000 on timm). The plain forms are
# read directly here: a string without prefix, backslash or carriage return is its text between
# the quotes; an integer or a float is what ``int(text, 0)`` or ``float(text)`` makes of it (the
# parser only produces valid literals, and both accept exactly Python's spellings of them,
# underscores included). Anything else is libcst's own answer. Installed once, at import, with
# the same values (tests/test_speed_paths.py compares them with ``ast.literal_eval``).
_libcst_string_value = cst.SimpleString.evaluated_value.fget  # type: ignore[attr-defined]
_libcst_integer_value = cst.Integer.evaluated_value.fget  # type: ignore[attr-defined]
_libcst_float_value = cst.Float.evaluated_value.fget  # type: ignore[attr-defined]


def _string_value(node: cst.SimpleString) -> typing.Union[str, bytes]:
    text = node.value
    if text[0] in "'\"" and "\\" not in text and "\r" not in text:
        return text[3:-3] if len(text) >= 6 and text[:3] in ('"""', "'''") else text[1:-1]
    return _libcst_string_value(node)


def _integer_value(node: cst.Integer) -> int:
    try:
        return int(node.value, 0)
    except ValueError:
        return _libcst_integer_value(node)


def _float_value(node: cst.Float) -> float:
    try:
        return float(node.value)
    except ValueError:
        return _libcst_float_value(node)


cst.SimpleString.evaluated_value = property(_string_value)  # type: ignore[assignment]
cst.Integer.evaluated_value = property(_integer_value)  # type: ignore[assignment]
cst.Float.evaluated_value = property(_float_value)  # type: ignore[assignment]


def parse_module(text: str) -> cst.Module:
    """``libcst.parse_module(text)``, without libcst's per-node validation.

    libcst checks every node it constructs (``CSTNode.__post_init__`` calls ``_validate``),
    which catches nodes that code builds wrongly; the parser only builds valid ones, and the
    checks are 6-18 % of a parse (benchmarks/README.md, "Parsing"). They are switched off for
    the parse alone and on again before this returns or raises, so that the nodes fixes build
    are still checked. The tree is the one ``libcst.parse_module`` returns
    (tests/test_speed_paths.py compares them).
    """
    global _validating
    if not _validating:  # a parse already running (another thread)
        return cst.parse_module(text)
    _validating = False
    try:
        return cst.parse_module(text)
    finally:
        _validating = True


# -- the shared pre-order index of a file ---------------------------------------------------------
class NodeIndex:
    """Every node under ``root`` in pre-order (the order of ``walk``), built with one
    ``children`` call per node: its parent, its children, the end of its subtree (the subtree
    of the node at position ``i`` is ``order[i:end[i]]``) and the positions of each node type.

    Nodes are immutable, so the index of a parsed module stays true for as long as the module
    lives. While an index lives it is registered (``indexed``): ``walk``, ``path_to`` and the
    helpers below answer from it for its nodes, and fall back to walking for any other node
    (one built by a fix, a copy made with ``with_changes``).
    """

    __slots__ = (
        "root", "order", "parent", "end", "kids", "position", "scope", "_by_type", "_merged",
        "__weakref__",
    )

    def __init__(self, root: cst.CSTNode, register: bool = True) -> None:
        self.root = root
        # Pre-order first (a stack of nodes), then parents and scopes from the children lists:
        # no tuple per node, and no collection of the cyclic GC while the lists grow.
        enabled = gc.isenabled()
        gc.disable()
        try:
            order: List[cst.CSTNode] = []
            kids: List[List[cst.CSTNode]] = []
            stack = [root]
            pop, add, keep, reader_of = stack.pop, order.append, kids.append, _READERS.get
            while stack:
                node = pop()
                add(node)
                reader = reader_of(type(node))  # (``children``, without a call to it per node)
                if reader is None:
                    reader = _READERS[type(node)] = _reader(type(node))
                below = reader(node)
                keep(below)
                if below:
                    stack.extend(reversed(below))
            size = len(order)
            position = dict(zip(map(id, order), range(size)))
            # In pre-order a node's first child follows it and each next child starts where the
            # subtree of the one before ends: the ends, from the last node back, give parents
            # and ends without looking a child up; scopes follow, from the root down.
            parent = [-1] * size
            end = list(range(1, size + 1))
            for here in range(size - 1, -1, -1):
                below = kids[here]
                if below:
                    at = here + 1
                    for _ in below:
                        parent[at] = here
                        at = end[at]
                    end[here] = at
            # The positions of each type (which the walk and the analyses read anyway), and
            # from them the scopes: each definition's subtree below it, outer definitions
            # first, so that an inner one's slice overwrites its outer one's (a slice
            # assignment per definition instead of a step per node).
            by_type: Dict[type, List[int]] = {}
            for here, node in enumerate(order):
                found = by_type.get(type(node))
                if found is None:
                    by_type[type(node)] = [here]
                else:
                    found.append(here)
            scope = [-1] * size
            functions, classes = by_type.get(cst.FunctionDef), by_type.get(cst.ClassDef)
            definitions = sorted(functions + classes) if functions and classes else functions or classes or ()
            for here in definitions:
                stop = end[here]
                scope[here + 1:stop] = [here] * (stop - here - 1)
        finally:
            if enabled:
                gc.enable()
        self.order, self.parent, self.end, self.kids, self.position = order, parent, end, kids, position
        self.scope = scope  # the innermost FunctionDef or ClassDef strictly above (-1: none)
        self._by_type: Optional[Dict[type, List[int]]] = by_type
        self._merged: Dict[Tuple[type, ...], List[int]] = {}
        if register:
            _register(self)

    @classmethod
    def of_module(cls, module: cst.Module, pieces: Sequence["NodeIndex"]) -> "NodeIndex":
        """The index of ``module`` put together from the (unregistered) indices of its
        top-level statements, in order: the same lists as ``NodeIndex(module)`` builds
        (tests/test_incremental.py compares them), without a ``children`` call per node."""
        statements = children(module)
        if len(pieces) != len(statements) or any(
            piece.root is not statement for piece, statement in zip(pieces, statements)
        ):
            raise ValueError("the pieces are not the module's statements")
        index = cls.__new__(cls)
        order: List[cst.CSTNode] = [module]
        kids: List[List[cst.CSTNode]] = [statements]
        parent, end, scope = [-1], [0], [-1]
        for piece in pieces:
            offset = len(order)
            order.extend(piece.order)
            kids.extend(piece.kids)
            parent.append(0)
            parent.extend([above + offset for above in piece.parent[1:]])
            end.extend([stop + offset for stop in piece.end])
            scope.extend([inside + offset if inside >= 0 else -1 for inside in piece.scope])
        end[0] = len(order)
        index.root, index.order, index.kids = module, order, kids
        index.parent, index.end, index.scope = parent, end, scope
        index.position = {id(node): here for here, node in enumerate(order)}
        index._by_type = None
        index._merged = {}
        _register(index)
        return index

    def children(self, node: cst.CSTNode) -> List[cst.CSTNode]:
        """``children(node)``, from the index when ``node`` is one of its nodes (do not change
        the list returned)."""
        here = self.position.get(id(node))
        if here is not None and self.order[here] is node:
            return self.kids[here]
        return children(node)

    def find(self, node: cst.CSTNode) -> Optional[int]:
        """The position of ``node``, or None when it is not one of this index's nodes."""
        here = self.position.get(id(node))
        return here if here is not None and self.order[here] is node else None

    def above(self, node: cst.CSTNode) -> Optional[cst.CSTNode]:
        """The parent of ``node``; None for the root or a node that is not one of this index's."""
        here = self.find(node)
        return self.order[self.parent[here]] if here is not None and self.parent[here] >= 0 else None

    def types(self) -> List[type]:
        """The node types present, each once."""
        return list(self._positions_by_type())

    def positions(self, node_type: type) -> List[int]:
        """Positions of the nodes of exactly ``node_type``, ascending."""
        by_type = self._by_type  # called often: no extra call once built
        if by_type is None:
            by_type = self._positions_by_type()
        return by_type.get(node_type, [])

    def _positions_by_type(self) -> Dict[type, List[int]]:
        if self._by_type is None:
            by_type: Dict[type, List[int]] = {}
            for here, node in enumerate(self.order):
                found = by_type.get(type(node))
                if found is None:
                    by_type[type(node)] = [here]
                else:
                    found.append(here)
            self._by_type = by_type
        return self._by_type

    def of_types(self, here: int, node_types: Tuple[type, ...]) -> List[cst.CSTNode]:
        """The nodes of exactly one of ``node_types`` in the subtree at ``here``, in pre-order."""
        order = self.order
        return [order[p] for p in self.positions_in(here, node_types)]

    def positions_in(self, here: int, node_types: Tuple[type, ...]) -> List[int]:
        """The positions of ``of_types``."""
        stop = self.end[here]
        if len(node_types) == 1:
            found = self.positions(node_types[0])
            return found[bisect_left(found, here):bisect_left(found, stop)]
        # The positions of several types, merged once per tuple of types asked for.
        merged = self._merged.get(node_types)
        if merged is None:
            merged = sorted(p for node_type in set(node_types) for p in self.positions(node_type))
            self._merged[node_types] = merged
        return merged[bisect_left(merged, here):bisect_left(merged, stop)]

    def function_of(self, here: int) -> int:
        """The position of the innermost FunctionDef strictly above ``here`` (-1: none)."""
        scope, order = self.scope, self.order
        here = scope[here]
        while here >= 0 and type(order[here]) is not cst.FunctionDef:
            here = scope[here]
        return here

    def within(self, inner: Optional[cst.CSTNode], outer: Optional[cst.CSTNode]) -> bool:
        """Whether node ``inner`` is inside node ``outer`` (strictly)."""
        if inner is None or outer is None:
            return False
        here, there = self.find(inner), self.find(outer)
        return here is not None and there is not None and there < here < self.end[there]

    def exclusive(self, one: Optional[cst.CSTNode], other: Optional[cst.CSTNode]) -> bool:
        """Whether ``one`` and ``other`` (statements or expressions of one function) are in
        different arms of one ``if`` statement or ``a if c else b``: they never run together."""
        if one is None or other is None:
            return False
        here = self.find(one)
        order, parent = self.order, self.parent
        above = parent[here] if here is not None else -1
        while above >= 0 and type(order[above]) is not cst.FunctionDef:
            node = order[above]
            if type(node) in (cst.If, cst.IfExp) and node.orelse is not None:  # type: ignore[attr-defined]
                body = self.find(node.body)  # type: ignore[attr-defined]
                orelse = self.find(node.orelse)  # type: ignore[attr-defined]
                arms = [(a, self.end[a]) for a in (body, orelse) if a is not None]
                mine = [a for a, end in arms if a <= here < end]  # type: ignore[operator]
                there = self.find(other)
                if self.within(other, node) and mine and there is not None and not (mine[0] <= there < self.end[mine[0]]):
                    return True
            above = parent[above]
        return False

    def try_and_handler(self, one: Optional[cst.CSTNode], other: Optional[cst.CSTNode]) -> bool:
        """Whether one of ``one`` and ``other`` is in the body of a ``try`` and the other in one
        of its ``except`` handlers: the handler's runs when the body's raised (``try: x = attn @
        v`` / ``except: x = attn.half() @ v``)."""
        first, second = (self.find(one), self.find(other)) if one is not None and other is not None else (None, None)
        if first is None or second is None:
            return False
        for a, b in ((first, second), (second, first)):
            above = self.parent[a]
            while above >= 0 and type(self.order[above]) is not cst.FunctionDef:
                node = self.order[above]
                body = self.find(node.body) if type(node) in (cst.Try, cst.TryStar) else None  # type: ignore[attr-defined]
                if body is not None and body <= a < self.end[body] and any(
                    (handler := self.find(h)) is not None and handler <= b < self.end[handler]
                    for h in node.handlers  # type: ignore[attr-defined]
                ):
                    return True
                above = self.parent[above]
        return False

    def ancestors(self, here: int) -> List[int]:
        """Positions from the root down to ``here`` (both included)."""
        path = []
        parent = self.parent
        while here >= 0:
            path.append(here)
            here = parent[here]
        path.reverse()
        return path


_INDICES: List["weakref.ref[NodeIndex]"] = []  # the live indices, the newest first
_MAX_INDICES = 8


def _register(index: NodeIndex) -> None:
    _INDICES[:] = [ref for ref in _INDICES if ref() is not None][: _MAX_INDICES - 1]
    _INDICES.insert(0, weakref.ref(index))


def node_index(root: cst.CSTNode) -> NodeIndex:
    """The live index whose root is ``root``, built (and registered) when there is none."""
    for ref in list(_INDICES):
        index = ref()
        if index is not None and index.root is root:
            return index
    return NodeIndex(root)


def indexed(node: cst.CSTNode) -> Optional[Tuple[NodeIndex, int]]:
    """The live index holding ``node`` and its position there, or None."""
    key = id(node)
    for ref in list(_INDICES):
        index = ref()
        if index is not None:
            here = index.position.get(key)
            if here is not None and index.order[here] is node:
                return index, here
    return None


def walk(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """``node`` and every node below it in pre-order (over ``children``): a slice of the
    index when ``node`` is indexed, else a walk."""
    found = indexed(node)
    if found is not None:
        index, here = found
        return index.order[here:index.end[here]]
    return list(_walk(node))


def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(children(current)))


def nodes_of(node: cst.CSTNode, *node_types: type) -> List[cst.CSTNode]:
    """The nodes of exactly one of ``node_types`` in ``node``'s subtree (itself included), in
    pre-order. Exact types: for libcst's concrete node classes (``cst.Call``, ``cst.ClassDef``)."""
    found = indexed(node)
    if found is not None:
        return found[0].of_types(found[1], node_types)
    return [n for n in _walk(node) if type(n) in node_types]


def path_to(root: cst.CSTNode, target: cst.CSTNode) -> Optional[List[cst.CSTNode]]:
    """The nodes from ``root`` down to ``target`` (both included), or None if not inside."""
    found = indexed(target)
    if found is not None:
        index, here = found
        top = index.find(root)
        if top is not None:
            if not top <= here < index.end[top]:
                return None
            path = []
            parent = index.parent
            while here != top:
                path.append(index.order[here])
                here = parent[here]
            path.append(root)
            path.reverse()
            return path
    stack: List[Tuple[cst.CSTNode, int]] = [(root, 0)]
    path = []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(children(node)))
    return None


def scan(
    node: cst.CSTNode, node_types: Tuple[type, ...], pruned: Tuple[type, ...] = (), strict: bool = False
) -> List[cst.CSTNode]:
    """The nodes of exactly one of ``node_types`` in ``node``'s subtree, in pre-order, not
    entering (nor giving) the nodes below ``node`` of a ``pruned`` type (nested functions,
    classes, lambdas); ``strict``: without ``node`` itself."""
    found = indexed(node)
    if found is None:
        picked: List[cst.CSTNode] = []
        stack = [node]
        while stack:
            current = stack.pop()
            if type(current) in node_types and not (strict and current is node):
                picked.append(current)
            stack.extend(child for child in reversed(children(current)) if type(child) not in pruned)
        return picked
    index, here = found
    if not pruned:
        picked = index.of_types(here, node_types)
    else:
        order, end = index.order, index.end
        picked, skip = [], -1
        for at in index.positions_in(here, (*node_types, *pruned)):
            if at < skip:
                continue
            inner = order[at]
            if at != here and type(inner) in pruned:
                skip = end[at]
                continue
            picked.append(inner)
    if strict and picked and picked[0] is node:
        picked = picked[1:]
    return picked


def contains(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``root`` or below it."""
    found = indexed(node)
    if found is not None:
        index, here = found
        top = index.find(root)
        if top is not None:
            return top <= here < index.end[top]
    return any(inner is node for inner in _walk(root))
