"""The rank of a value of the value graph where the code shows it.

``rank(graph, value)`` is the number of axes of ``value`` (a ``values.Value`` of
``graph``, a ``values.FunctionValues``) or None when the code does not say. What says it:

- the value's own rank, when the graph knows it (an ``einsum`` spec, ``bmm``, ``permute``);
- an unpacking of its shape into names: ``B, C, H, W = x.shape`` (or ``x.size()``) makes
  ``x`` 4-D;
- ``view``/``reshape`` with n sizes (or one tuple of n), ``repeat``/``expand`` with n sizes
  (n > 1, or a tuple of n: one per axis of the result), ``flatten(s)`` (s + 1 axes),
  ``flatten(s, e)`` of an n-D value (n - (e - s)), ``unsqueeze`` (+1), ``squeeze(d)`` (-1),
  ``einops.rearrange`` by its output pattern;
- ``unbind`` (each part) and an integer index (``qkv[0]``): one axis fewer; an index by
  integers, slices, ``...`` and ``None`` (``k[..., :rot]``: kept; ``x[:, None]``: one more);
- ``torch.cat`` of the parts one tensor is split into (heads moved to the batch axis): that
  tensor's; ``torch.cat``/``torch.stack`` of parts written out: the rank the parts whose rank
  is shown share (+1 stacked); an element of the tuple a same-file helper returns (``q, k =
  rotate(q, k)``): that element's; a same-file helper with several ``return``s (``repeat_kv``:
  its argument, or a reshape with four sizes): the rank they share; a same-file helper with one
  ``return``: the rank of what it returns (``return x.reshape(b * h, n, d)``: 3);
- steps that keep the rank: ``split``/``chunk`` (each part), ``repeat_interleave`` along a
  dim, ``transpose``, elementwise steps, scale, softmax, casts, dropout, norms and
  activations, a submodule the file does not show (``self.q_norm(q)``: kept, as the value
  graph takes it); ``@``/``matmul`` of two n-D values;
- ``nn.Conv1d``/``2d``/``3d`` layers and ``F.conv1d``/``2d``/``3d`` (3-, 4-, 5-D outputs).

Anything else (an unknown module or helper, an index) is unknown: None.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, Optional

import libcst as cst

KEEPS_RANK = frozenset({
    "scale", "softmax", "cast", "same", "dropout", "fill", "add", "arith", "unary", "norm", "activation",
})
CONV = {"Conv1d": 3, "Conv2d": 4, "Conv3d": 5, "conv1d": 3, "conv2d": 4, "conv3d": 5}
DEPTH = 64
SPLITS = ("split", "chunk", "tensor_split")
_FACTS: "weakref.WeakKeyDictionary[Any, Dict[int, int]]" = weakref.WeakKeyDictionary()


def rank(graph: Any, value: Any) -> Optional[int]:
    """The rank of ``value`` where the code shows it (see the module doc), else None."""
    facts = _FACTS.get(graph)
    if facts is None:
        facts = _FACTS[graph] = _shape_unpackings(graph)
    return _rank(value, facts, {}, 0)


def _shape_unpackings(graph: Any) -> Dict[int, int]:
    """``a, b, c = x.shape`` / ``x.size()``: id(x's value) -> the number of names."""
    facts: Dict[int, int] = {}
    for value in graph.values:
        if value.op != "meta" or not value.inputs:
            continue
        node = value.node
        is_shape = (type(node) is cst.Attribute and node.attr.value == "shape") or (
            type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "size" and not node.args
        )
        statement = value.statement
        if not is_shape or type(statement) is not cst.SimpleStatementLine:
            continue
        for small in statement.body:
            if type(small) is cst.Assign and small.value is node:
                for target in small.targets:
                    elements = getattr(target.target, "elements", None)
                    if type(target.target) in (cst.Tuple, cst.List) and not any(type(e) is cst.StarredElement for e in elements):
                        facts[id(value.inputs[0])] = len(elements)
    return facts


def _rank(value: Any, facts: Dict[int, int], memo: Dict[int, Optional[int]], depth: int) -> Optional[int]:
    if id(value) in memo:
        return memo[id(value)]
    memo[id(value)] = None  # a cycle is unknown
    found = value.rank if value.rank is not None else facts.get(id(value))
    if found is None and depth < DEPTH:
        found = _derived(value, facts, memo, depth + 1)
    memo[id(value)] = found
    return found


def _derived(value: Any, facts: Dict[int, int], memo: Dict[int, Optional[int]], depth: int) -> Optional[int]:
    op, inputs, node = value.op, value.inputs, value.node

    def of(source: Any) -> Optional[int]:
        return _rank(source, facts, memo, depth)

    if not inputs and op != "element":
        return None
    if op in KEEPS_RANK or (op == "helper" and not value.info.get("assumed")):
        return of(inputs[0])
    if op == "module" and value.info.get("attribute") is not None:  # ``self.q_norm(q)``, a submodule not shown:
        return of(inputs[0])  # taken to keep its input's axes, as the value graph does
    if op == "helper" and value.info.get("helper") is not None:  # a same-file helper's result, its axes not known
        return of(inputs[0])  # (its rank where its last step shows it: ``x.reshape(b * h, n, d)``)
    if op == "relabel":  # a transpose (a permute's rank is on the value already)
        return of(inputs[0])
    if op == "join":
        ranks = {of(arm) for arm in inputs}
        return ranks.pop() if len(ranks) == 1 else None
    if op == "contract" and value.info.get("spelling") in ("@", "torch.matmul", "matmul"):
        left, right = of(inputs[0]), of(inputs[1])
        return left if left is not None and left == right and left >= 2 else None
    if op == "cat" and _terminal(value.node) in ("cat", "concat") and inputs[0].op in ("call", "split") and _terminal(inputs[0].node) in SPLITS and inputs[0].inputs:
        return of(inputs[0].inputs[0])  # ``torch.cat(torch.split(q, d, dim=-1), dim=0)``: the parts of one tensor, rejoined
    if op == "cat":  # ``torch.cat``/``torch.stack`` of a tuple or list written out: the rank its parts share (+1 stacked)
        parts = inputs[0].node.elements if type(inputs[0].node) in (cst.Tuple, cst.List) else None
        ranks = {of(part) for part in inputs[0].info.get("elements", ())} - {None} if inputs[0].op == "tuple" else set()
        if not parts or any(type(e) is cst.StarredElement for e in parts) or len(ranks) != 1:
            return None
        return ranks.pop() + (1 if _terminal(value.node) == "stack" else 0)
    if op == "call" and _repeated_along(node):  # ``torch.repeat_interleave(k, n, dim=1)``: each entry repeated along an axis
        return of(inputs[0])
    if op == "call" and value.info.get("returns"):  # a same-file helper with several returns: a rank they share
        ranks = {of(result) for result in value.info["returns"]}
        return ranks.pop() if len(ranks) == 1 else None
    if op == "element":
        source = inputs[0]
        held = source.inputs[0] if source.op == "helper" and source.inputs else source
        index, parts = value.info.get("index"), held.info.get("elements") if held.op == "tuple" else None
        if isinstance(index, int) and parts is not None and 0 <= index < len(parts):
            return of(parts[index])  # ``q, k = rotate(q, k, ...)``: what the helper's tuple holds there
        if source.op == "split" and type(source.node) is cst.Call and _method(source.node) in ("split", "chunk", "unbind"):
            whole = of(source.inputs[0])
            return whole - 1 if whole is not None and _method(source.node) == "unbind" else whole
        if source.op == "call" and source.info.get("qualified") in ("torch.split", "torch.chunk") and source.inputs:
            return of(source.inputs[0])
        whole = of(source) if source.op not in ("split", "call", "tuple") else None
        if whole is not None and whole >= 1:  # ``q, k, v = qkv.permute(2, 0, 3, 1, 4)``: unpacked along its first axis
            return whole - 1
        return _mapped_rank(source.node)
    if op == "unknown" or not inputs:
        return None
    if op == "index" and type(node) is cst.Subscript:
        return _indexed(node, of(inputs[0]))
    if op == "linear" or op == "layer":
        layer = value.info.get("qualified") or getattr(value.info.get("layer"), "qualified", None) or ""
        return CONV.get(layer.rsplit(".", 1)[-1]) if layer.startswith("torch.nn.") else None
    if op == "call" and value.info.get("qualified") in ("torch.nn.functional.conv1d", "torch.nn.functional.conv2d", "torch.nn.functional.conv3d"):
        return CONV[value.info["qualified"].rsplit(".", 1)[-1]]
    if op == "reshape" and type(node) is cst.Call:
        if value.info.get("qualified") == "einops.rearrange":
            return _pattern_rank(inputs[1].info.get("text") if len(inputs) > 1 else None)
        shape = inputs[1] if len(inputs) == 2 and _method(node) in ("view", "reshape") else None
        if shape is not None and shape.op == "tuple" and type(shape.node) in (cst.Tuple, cst.List) and type(node.args[0].value) is cst.Name:
            elements = shape.node.elements  # ``shape = (b, t, h, -1)``, then ``x.view(shape)``
            return None if any(type(e) is cst.StarredElement for e in elements) else len(elements)
        return _reshaped(node, of(inputs[0]))
    return None


def _indexed(node: cst.Subscript, whole: Optional[int]) -> Optional[int]:
    """The rank of ``x[...]`` of an n-D ``x`` indexed by integers (one axis fewer each:
    ``qkv[0]``), slices and ``...`` (kept: ``k[..., :rot]``) and ``None`` (one more); None for
    a tensor index or an unknown ``x``."""
    if whole is None:
        return None
    for element in node.slice:
        index = element.slice
        if type(index) is cst.Slice or type(index.value) is cst.Ellipsis:  # type: ignore[union-attr]
            continue
        if type(index.value) is cst.Name and index.value.value == "None":  # type: ignore[union-attr]
            whole += 1
        elif _integer(index.value, 0) is not None:  # type: ignore[union-attr]
            whole -= 1
        else:
            return None
    return whole


def _terminal(node: Any) -> Optional[str]:
    func = node.func if type(node) is cst.Call else None
    return func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None


def _mapped_rank(node: Any) -> Optional[int]:
    """Each element of ``(f(t) for t in parts)``, ``[f(t) for t in parts]`` or
    ``map(lambda t: f(t), parts)``, where ``f`` ends in a step that says the rank:
    ``t.reshape(b, n, h, d).transpose(1, 2)``, ``rearrange(t, "b n (h d) -> b h n d", h=h)``."""
    if type(node) in (cst.GeneratorExp, cst.ListComp):
        return _expression_rank(node.elt)
    if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "map" and node.args:
        first = node.args[0].value
        return _expression_rank(first.body) if type(first) is cst.Lambda else None
    return None


def _expression_rank(node: cst.BaseExpression) -> Optional[int]:
    while type(node) is cst.Call:
        func = node.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
        if name == "rearrange" and len(node.args) > 1 and type(node.args[1].value) is cst.SimpleString:
            return _pattern_rank(node.args[1].value.evaluated_value)
        if type(func) is not cst.Attribute:
            return None
        if name in ("view", "reshape"):
            return _reshaped(node, None)
        if name not in ("transpose", "contiguous", "float", "half", "to", "type", "clone", "detach"):
            return None
        node = func.value
    return None


def _repeated_along(node: Any) -> bool:
    """``torch.repeat_interleave(x, n, dim=d)`` / ``x.repeat_interleave(n, dim=d)`` (with a dim:
    without one the result is flattened)."""
    if type(node) is not cst.Call or _terminal(node) != "repeat_interleave":
        return False
    receiver = node.func.value if type(node.func) is cst.Attribute else None
    tensor_first = type(receiver) is cst.Name and receiver.value == "torch"
    return any(a.keyword is not None and a.keyword.value == "dim" for a in node.args) or (
        len([a for a in node.args if a.keyword is None]) == (3 if tensor_first else 2))


def _method(call: cst.Call) -> Optional[str]:
    return call.func.attr.value if type(call.func) is cst.Attribute else None


def _reshaped(call: cst.Call, source: Optional[int]) -> Optional[int]:
    method = _method(call)
    positional = [a.value for a in call.args if a.keyword is None and not a.star]
    keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
    if any(a.star for a in call.args):
        return None
    if method in ("view", "reshape") and not keywords:
        if len(positional) == 1 and type(positional[0]) in (cst.Tuple, cst.List):
            elements = positional[0].elements  # type: ignore[attr-defined]
            return None if any(type(e) is cst.StarredElement for e in elements) else len(elements)
        if len(positional) == 1 and type(positional[0]) is not cst.Integer:
            return None  # x.view(shape), x.view(dtype): not known here
        return len(positional) or None
    if method == "flatten":
        start = _integer(keywords.get("start_dim", positional[0] if positional else None), 0)
        end = _integer(keywords.get("end_dim", positional[1] if len(positional) > 1 else None), -1)
        if start is None or end is None:
            return None
        if end == -1 and start >= 0:
            return start + 1
        if source is None:
            return None
        start, end = start % source if start < 0 else start, end % source if end < 0 else end
        return source - (end - start) if 0 <= start <= end < source else None
    if method in ("repeat", "expand") and positional and not keywords:  # one size per axis of the result
        if len(positional) == 1 and type(positional[0]) in (cst.Tuple, cst.List):
            elements = positional[0].elements  # type: ignore[attr-defined]
            return None if any(type(e) is cst.StarredElement for e in elements) else len(elements)
        return len(positional) if len(positional) > 1 else None  # (one name: ``x.repeat(sizes)``, not known)
    if method == "unsqueeze" and len(positional) == 1 and source is not None:
        return source + 1
    if method == "squeeze" and len(positional) == 1 and source is not None and type(positional[0]) in (cst.Integer, cst.UnaryOperation):
        return source - 1  # the dim is 1 where the code squeezes it
    return None


def _integer(node: Optional[cst.BaseExpression], default: int) -> Optional[int]:
    if node is None:
        return default
    if type(node) is cst.Integer:
        return int(node.evaluated_value)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus and type(node.expression) is cst.Integer:
        return -int(node.expression.evaluated_value)  # type: ignore[attr-defined]
    return None


def _pattern_rank(pattern: Optional[str]) -> Optional[int]:
    """The number of axes of ``rearrange``'s output pattern (a group in parentheses is one)."""
    if not isinstance(pattern, str) or pattern.count("->") != 1:
        return None
    output, count, depth = pattern.split("->")[1], 0, 0
    for token in output.replace("(", " ( ").replace(")", " ) ").split():
        if token == "...":
            return None
        if token == "(":
            count += depth == 0
            depth += 1
        elif token == ")":
            depth -= 1
        elif depth == 0:
            count += 1
    return count if depth == 0 else None
