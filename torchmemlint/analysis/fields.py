"""Fields of a local that a function assigns (``shortcut.features = self.act(shortcut.features)``
on the sparse tensors of spconv and mmcv.ops), for the value graph (``analysis/values.py``):
``shortcut.features`` is read as a variable of its own, bound by the assignment until
``shortcut`` is rebound, so a second read of it is the same value (read again) and an
assignment replaces it. A read of the local itself (passed on, returned, anything the graph
does not model) reads every field it holds. Only fields the function assigns somewhere, and
``features`` (what a sparse tensor holds), are followed so; any other ``x.y`` stays a
``member`` read afresh.

Also what such a field holds where the value graph cannot say: the ``features`` of what a
sparse convolution returns (a ``SparseConvTensor`` whose features are the convolution's
output, which the convolution does not keep for backward). Written from the documentation
of spconv and mmcv.ops; neither is imported."""

from __future__ import annotations

from typing import Any, Dict, FrozenSet, Optional, Sequence

import libcst as cst

from torchmemlint.tree import scan, walk

_SPARSE = ("SparseConv", "SubMConv", "SparseInverseConv", "SparseConvTranspose")
SPARSE_CONVS = frozenset(
    f"{package}{name}{n}d"
    for package in ("mmcv.ops.", "mmcv.ops.sparse_conv.", "spconv.", "spconv.pytorch.", "spconv.pytorch.conv.", "spconv.conv.")
    for name in _SPARSE for n in (1, 2, 3, 4)
)
SPARSE_FIELD = "features"


class LocalFields:
    """The fields ``<local>.<name>`` a function assigns (and the ``features`` it reads, a sparse
    tensor's), and how reads and writes of them bind."""

    def __init__(self, function: cst.FunctionDef, self_name: Optional[str], use: Any, meta: FrozenSet[str]) -> None:
        self.use, self.meta = use, meta  # the graph's ``Use`` and size attributes (``values.py``)
        keys = set()
        for node in scan(function.body, (cst.Assign, cst.AugAssign, cst.Attribute), (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if type(node) is cst.Attribute:  # a sparse tensor's features, also where only read
                targets = [node] if node.attr.value == SPARSE_FIELD else []  # type: ignore[attr-defined]
            else:
                targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[attr-defined]
            for target in targets:
                if type(target) is cst.Attribute and type(target.value) is cst.Name and target.value.value != self_name:
                    keys.add(f"{target.value.value}.{target.attr.value}")
        self.stored: FrozenSet[str] = frozenset(keys)
        self.bases: FrozenSet[str] = frozenset(key.split(".", 1)[0] for key in keys)

    def read(self, graph: Any, node: cst.Attribute, env: Dict[str, Any]) -> Optional[Any]:
        """The value ``node`` (``s.features``) reads, when it is such a field (None: not one)."""
        if type(node.value) is not cst.Name:
            return None
        key = f"{node.value.value}.{node.attr.value}"
        if key not in self.stored:
            return None
        if key in env:
            return env[key]
        base = env.get(node.value.value)
        if base is None:
            return None
        graph.names[id(node.value)] = base
        env[key] = graph._new("member", [base], node, info={"name": node.attr.value})
        return env[key]

    def whole(self, graph: Any, name: cst.Name, env: Dict[str, Any]) -> None:
        """``name`` read as a whole: every field of it the environment holds is read there."""
        prefix = name.value + "."
        for key, value in list(env.items()):
            if key.startswith(prefix):
                graph._sink(value, "opaque")

    def store(self, target: cst.BaseExpression, value: Any, env: Dict[str, Any]) -> None:
        """``s.features = value``: the field holds ``value`` from here on."""
        if type(target) is cst.Attribute and type(target.value) is cst.Name:
            key = f"{target.value.value}.{target.attr.value}"
            if key in self.stored:
                env[key] = value

    def drop(self, name: str, env: Dict[str, Any]) -> None:
        """``name`` is bound again: its fields are another object's."""
        if name in self.bases:
            prefix = name + "."
            for key in [key for key in env if key.startswith(prefix)]:
                del env[key]


def opaque(graph: Any, node: cst.CSTNode, env: Dict[str, Any]) -> None:
    """Every local name ``node`` reads is used in a way the graph does not model, except for its
    sizes (``raise ValueError(f"... {s.size()}")``: ``meta``); a field's base, its fields too."""
    fields = graph.fields
    sized = {id(n.value) for n in walk(node) if type(n) is cst.Attribute and n.attr.value in fields.meta}
    for name in walk(node):
        if type(name) is cst.Name and name.value in env:
            graph.uses.append(fields.use(env[name.value], "meta" if id(name) in sized else "opaque", name))
            if name.value in fields.bases:
                fields.whole(graph, name, env)


def starred_arguments(graph: Any, args: Sequence[cst.Arg], env: Dict[str, Any]) -> Dict[str, Any]:
    """The keywords a call's ``**kw`` passes when ``kw`` is a local bound to ``dict(query=q, ...)``
    (each name with the value the dict was built with; a ``**more`` inside it passes other
    names); any other ``*a``/``**kw`` is read in a way the graph does not model (``opaque``).
    ``factories.spelled_out`` reads such dicts as syntax, for what a call passes; this reads the
    values the graph already made for them."""
    spread: Dict[str, Any] = {}
    for arg in args:
        if arg.star:
            found = _splatted(arg, env) if arg.star == "**" else None
            if found is None:
                opaque(graph, arg, env)
            spread.update(found or {})
    return spread


def _splatted(arg: cst.Arg, env: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    made = env.get(arg.value.value) if type(arg.value) is cst.Name else None
    call = made.node if made is not None else None
    if type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != "dict":
        return None
    named = [a for a in call.args if a.keyword is not None]  # (a ``**more`` of its own: read as opaque there)
    if any(a.keyword is None and a.star != "**" for a in call.args) or made.op != "call" or len(made.inputs) != len(named):
        return None
    return {a.keyword.value: value for a, value in zip(named, made.inputs)}  # type: ignore[union-attr]
