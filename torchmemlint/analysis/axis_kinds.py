"""What an axis of a tensor of the value graph (``analysis/values.py``) holds: positions (tokens,
pixels, time steps) or features (channels, a head's dimension).

Attention's weights grow with the square of the sequence only when its scores contract the
features of q and k, leaving positions × positions. Transposed ("channel") attention contracts
the positions instead (Restormer's ``rearrange(q, "b (head c) h w -> b head c (h w)")``, XCiT's
``q.transpose(-2, -1)`` before ``q @ kᵀ``: (B, h, C/h, C/h) weights), and so does linear
attention's ``kᵀ @ v`` (features × features): their weights do not grow with the sequence, and
``F.scaled_dot_product_attention`` has nothing to save there (``analysis/attention.py`` asks).

An axis is followed back from where it is read to where its tensor was made, through the steps
that keep or move axes (``transpose``/``permute``, ``chunk``/``unbind``/``qkv[0]``, elementwise
steps, ``F.normalize``, ``view``/``reshape``/``flatten``/``einops.rearrange``), to:

- an ``nn.Linear`` (features last: its last axis is the features, the others positions or batch);
- an ``nn.Conv1d/2d/3d`` (channels first: axis 1 the features, the axes after it positions);
- a size the code names (``b, c, h, w = x.shape``: ``view(b, -1, h * w)``), read where the sizes
  come from (the shape of a tensor a layer of the module reads, or the names' conventional
  meanings: ``c``/``dim``/``head_dim`` features, ``n``/``seq_len``/``h * w`` positions), and an
  ``einops`` axis by where its letters come from.

Anything else is not known (None): the question then treats the scores as it did before.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.einsum import parse_rearrange
from torchmemlint.analysis.ranks import CONV, _integer, rank as value_rank

POSITION, FEATURE = "position", "feature"
_BATCH, _HEADS = "batch", "heads"

# steps whose result has the axes of their first input
_KEEPS = frozenset({"same", "cast", "scale", "dropout", "activation", "norm", "fill", "add"})
# of those, the ones with a second tensor operand that may broadcast the first
_BROADCASTING = frozenset({"add", "scale", "fill"})
# functional layers that keep the axes of what they take (``F.normalize(q, dim=-1)``)
_KEEPING_FUNCTIONS = frozenset({
    "normalize", "layer_norm", "group_norm", "dropout", "gelu", "relu", "silu", "elu", "leaky_relu", "sigmoid", "tanh",
    "softplus", "mish", "hardswish",
})
# the conventional names of sizes (``B, N, C = x.shape``) and of einops axes
_FEATURE_NAMES = frozenset({
    "c", "C", "ch", "channels", "channel", "dim", "d", "D", "head_dim", "dim_head", "d_k", "dk", "d_head", "d_model",
    "e", "E", "embed_dim", "hidden", "hidden_dim", "hidden_size", "features", "n_embd", "c_", "C_", "head_size",
})
_POSITION_NAMES = frozenset({
    "n", "N", "l", "L", "t", "T", "s", "S", "seq_len", "seqlen", "seq", "length", "num_tokens", "tokens", "hw", "HW",
    "frames", "num_patches", "n_tokens", "seq_length", "time",
})
_SPATIAL_NAMES = frozenset({"h", "w", "H", "W", "height", "width", "hh", "ww", "x", "y", "z"})  # positions in a product: ``h * w``
_BATCH_NAMES = frozenset({"b", "B", "bs", "batch", "batch_size", "B_", "bsz", "n_batch"})
_HEAD_NAMES = frozenset({"head", "heads", "num_heads", "n_heads", "nh", "n_head", "num_head", "h_"})


def small_weights(graph: Any, scores: Any, key_side: int) -> str:
    """Why the weights of the scores ``scores`` (the keys from operand ``key_side``) do not grow
    with the square of the sequence; "" when they may."""
    if positions_contracted(graph, scores):
        return ("the scores contract the positions, not the features (channel or linear attention): "
                "the weights are features x features and do not grow with the sequence")
    if heads_only(graph, scores):  # ``q.view(b, n, heads, d)`` contracted with no transpose of the heads
        return ("the scores' own axes are the heads (q and k laid out (B, L, H, D), not transposed to (B, H, L, D)): "
                "the softmax runs over the heads, and the B·L·H·H weights grow with the sequence, not its square")
    one = one_position(graph, scores, key_side)  # a learned query pooling the tokens; a single state vector as the key
    if one:
        return ("one %s: the B·H·%s weights grow with the sequence, not its square, and are smaller than the %s"
                % (one, "1·S" if one == "query" else "L·1", "keys" if one == "query" else "queries"))
    return ""


def contracted_kinds(graph: Any, scores: Any) -> Optional[List[Optional[str]]]:
    """The kind of the axis each operand of the contraction ``scores`` contracts (``POSITION``,
    ``FEATURE`` or None), None when it contracts more than one axis."""
    contracted = scores.info.get("contracted") or ()
    if len(contracted) != 1:
        return None
    letter = contracted[0]
    kinds: List[Optional[str]] = []
    for side in (0, 1):
        spec = list(scores.info["specs"][side])
        at = spec.index(letter) if letter in spec else None
        if at is None or "..." in spec[at:]:
            kinds.append(None)  # (its place from the end not known)
            continue
        kinds.append(axis_kind(graph, scores.inputs[side], at - len(spec)))
    return kinds


def positions_contracted(graph: Any, scores: Any) -> bool:
    """Whether the scores contract positions, not features (channel attention, linear
    attention's ``kᵀ @ v``): one operand's contracted axis known to hold positions and neither
    known to hold features; an einsum letter named as positions (``"bhnd,bhne->bhde"``) counts
    where the operands say nothing."""
    kinds = contracted_kinds(graph, scores)
    if kinds is None or FEATURE in kinds:
        return False
    if POSITION in kinds:
        return True
    letter = scores.info["contracted"][0]
    return scores.info.get("spelling") in ("torch.einsum", "einops.einsum", "einsum") and letter in _POSITION_NAMES


def heads_only(graph: Any, scores: Any) -> bool:
    """Whether the own axis of each operand of the scores (the query's and the key's: not
    contracted, not shared) is known to hold the heads (a ``view``/``reshape`` size named
    ``num_heads``, ``heads`` ...): q and k kept (B, L, H, D) and multiplied as they are."""
    specs = scores.info["specs"]
    for side in (0, 1):
        spec, other = list(specs[side]), set(specs[1 - side])
        own = [at for at, letter in enumerate(spec) if letter != "..." and letter not in other]
        if len(own) != 1 or "..." in spec[own[0]:] or axis_kind(graph, scores.inputs[side], own[0] - len(spec), heads=True) != _HEADS:
            return False
    return True


def one_position(graph: Any, scores: Any, key_side: int) -> str:
    """"query" or "key" when the scores have one of them: that operand's own axis (not
    contracted, not shared with the other operand) has one element where it was made
    (``single_position``), or the operand, learned (``_learned``), has no axis of its own at all
    (``einsum("hd,nhd->nh", q_0, k)``: one learned query per head, not a decoder's step); ""
    otherwise."""
    specs = scores.info["specs"]
    for side, what in ((1 - key_side, "query"), (key_side, "key")):
        spec, other = list(specs[side]), set(specs[1 - side])
        own = [at for at, letter in enumerate(spec) if letter != "..." and letter not in other]
        if not own and spec and "..." not in spec and _learned(scores.inputs[side]):
            return what
        if len(own) == 1 and "..." not in spec[own[0]:] and single_position(
            graph, scores.inputs[side], own[0] - len(spec),
            3 if scores.info.get("spelling") in ("torch.bmm", "bmm") else None if "..." in spec else len(spec),
        ):
            return what
        if what == "query" and len(own) == 1 and scores.info.get("spelling") in ("torch.einsum", "einsum") and _name_kind(spec[own[0]], alone=True) == _BATCH:
            return what  # ``einsum("bhd,thd->bht", q, k)``: one query per sample over keys the batch shares
    return ""


_CONSTRUCTORS = frozenset({"torch.zeros", "torch.ones", "torch.arange", "torch.tensor", "torch.full", "torch.LongTensor"})


def _learned(value: Any, depth: int = 0) -> bool:
    """``value`` is made from the module's own state alone: a parameter (``self.query``), or a
    layer run on a constant (``self.q(torch.zeros(1, dtype=torch.long))``, an embedding's row),
    through views, casts, layers and arithmetic with other such values or constants
    (``self.queries * self.scale``)."""
    if depth > 16:
        return False
    if value.op in ("attribute", "constant"):
        return True
    if value.op == "call" and value.info.get("qualified") in _CONSTRUCTORS:
        return True
    if value.op in ("arith", "scale") and value.inputs:
        return all(_learned(i, depth + 1) for i in value.inputs)
    if value.op in ("reshape", "relabel", "same", "cast", "linear", "module") and value.inputs:
        return _learned(value.inputs[0], depth + 1)
    return False


def axis_kind(graph: Any, value: Any, position: int, depth: int = 0, heads: bool = False) -> Optional[str]:
    """The kind of ``value``'s axis at the negative index ``position`` (``heads``: also an axis
    a ``view`` names the heads, ``_HEADS``)."""
    for _ in range(32):
        if depth > 6 or position >= 0:
            return None
        moved = _through(graph, value, position)
        if moved is not None:
            value, position = moved
            continue
        if value.op == "reshape" and value.inputs:
            return _reshaped(graph, value, position, depth, heads)
        if value.op == "join" and value.inputs:  # an ``if``'s arms: where every arm that may run by default agrees
            kinds = {axis_kind(graph, arm, position, depth + 1, heads) for arm in _default_arms(graph, value)}
            return kinds.pop() if len(kinds) == 1 else None
        if value.op == "linear":
            return _layer_kind(value.info.get("qualified") or "", position)
        return None
    return None


def _default_arms(graph: Any, join: Any) -> List[Any]:
    """The arms of ``join`` that may run by default: not one behind a flag off unless a caller
    turns it on (``if self.use_rotary: q, k = self.rotary_emb(q, k)``, ``use_rotary=False``)."""
    from torchmemlint.analysis.flags import off_by_default  # (the flags read the factories, which read the graph)

    test, branches = join.info.get("test"), join.info.get("branches") or ()
    if test is None or len(branches) != len(join.inputs):
        return list(join.inputs)
    kept = [arm for arm, branch in zip(join.inputs, branches) if type(branch) is not bool or not off_by_default(graph, test, branch)]
    return kept or list(join.inputs)


def single_position(graph: Any, value: Any, position: int, rank: Optional[int] = None) -> bool:
    """Whether ``value``'s axis at ``position`` has one element where it was made: a learned
    query ``nn.Parameter(torch.randn(1, 1, dim))`` (through ``nn.Linear``, ``expand(b, -1, -1)``
    and a ``reshape`` whose ``-1`` is its positions), or a size ``1`` written at that axis
    (``q.view(b, 1, h, dh)``), or one position selected by a constant index and given back an
    axis of one (``h[:, -1, :].unsqueeze(2)``: the last hidden state as the query; ``rank``: the
    rank the contraction shows for ``value``). A query handed in and unsqueezed (a decoder's
    step) is not known to be one position."""
    for _ in range(32):
        if position >= 0:
            return False
        step = value.info.get("step") if value.op == "reshape" and value.inputs else None
        if step is not None and step[0] == "insert":
            at = step[1]
            known = value_rank(graph, value) or rank
            if at is None and isinstance(value.info.get("dim"), int) and known is not None:
                at = value.info["dim"] - known
            return at == position and _selected_position(value.inputs[0])
        if value.op in _BROADCASTING and any(_tensor(other) for other in value.inputs[1:]):
            return False  # (``query + pos_embed``: the other operand may give the axis its size; ``q * self.scale`` cannot)
        moved = _through(graph, value, position)
        if moved is not None:
            value, position = moved
            continue
        op, inputs = value.op, value.inputs
        if op == "linear" and inputs and position != -1 and (value.info.get("qualified") or "").rsplit(".", 1)[-1] in ("Linear", "LazyLinear"):
            value = inputs[0]  # an nn.Linear keeps every axis but the last
            continue
        if op == "reshape" and inputs and type(value.node) is cst.Call and type(value.node.func) is cst.Attribute:
            method = value.node.func.attr.value
            sizes = _sizes(value) if method in ("view", "reshape", "expand") else None
            if sizes is None or not -len(sizes) <= position:
                return False
            size = sizes[position]
            if size.op == "constant" and size.info.get("number") == 1:
                return True
            if size.op != "constant" or size.info.get("number") != -1:
                return False
            if method == "expand":  # ``-1``: the axis as it was
                value = inputs[0]
                continue
            if method not in ("view", "reshape") or _reshaped(graph, value, position, 0) != POSITION:
                return False
            rank = value_rank(graph, inputs[0]) or 4  # (not known: the axes an nn.Linear's output shows)
            found = [at for at in range(-rank, 0) if axis_kind(graph, inputs[0], at) == POSITION]
            if len(found) != 1:
                return False
            value, position = inputs[0], found[0]
            continue
        if op == "attribute":
            shape = _parameter_shape(graph, value.info.get("name"))
            return shape is not None and -len(shape) <= position and shape[position] == 1
        return False
    return False


def _selected_position(value: Any) -> bool:
    """``x[:, -1]``, ``x[:, 0, :]``: one entry of an axis taken by a constant integer index."""
    node = value.node
    if value.op != "index" or type(node) is not cst.Subscript:
        return False
    return any(type(e.slice) is cst.Index and _integer(e.slice.value, 0) is not None for e in node.slice)


def _tensor(value: Any) -> bool:
    """Whether ``value`` may be a tensor (not a number, a size, an attribute of numbers)."""
    return value.op not in ("constant", "attribute", "arith", "meta", "global", "finfo") and not value.info.get("scalar")


def _through(graph: Any, value: Any, position: int) -> Optional[Tuple[Any, int]]:
    """One step back from ``value``'s axis at ``position`` to the same axis in what ``value``
    was made from, through a step that keeps or moves axes; None for any other value."""
    op, info, inputs = value.op, value.info, value.inputs
    if not inputs:
        return None
    if op in _KEEPS or (op == "helper" and info.get("helper") is not None):
        return inputs[0], position  # (a same-file helper: what it returned)
    if op == "layer" and _short(info) in _KEEPING_FUNCTIONS:
        return inputs[0], position
    if op == "element":
        source = inputs[0]
        if source.op == "split" and source.inputs and _split_keeps(source, position):
            return source.inputs[0], position  # ``q, k, v = qkv.chunk(3, dim=1)`` / ``qkv.unbind(0)``
        if source.op in ("relabel", "reshape", "linear", "same", "cast"):
            return source, position  # ``k, v = kv``: unpacked along the first axis
        if source.op == "parts":
            return source.inputs[0], position  # ``q, k, v = (rearrange(t, ...) for t in qkv)``: each part made alike
        return None
    if op == "part" and inputs[0].op == "split" and inputs[0].inputs and _split_keeps(inputs[0], position):
        return inputs[0].inputs[0], position  # ``t`` of ``for t in qkv.chunk(3, dim=1)``
    if op == "index" and (_leading_integer(value.node) or _slices_only(value.node)):
        return inputs[0], position  # ``qkv[0]``; ``q[:, start:end]``: every axis kept
    if op == "cat" and inputs[0].op == "split" and inputs[0].inputs and _heads_to_batch(graph, value, inputs[0], position):
        return inputs[0].inputs[0], position  # ``torch.cat(q.split(d, dim=2), dim=0)``: the heads moved to the batch
    if op == "relabel":
        moved = _relabelled(graph, value, position)
        return None if moved is None else (inputs[0], moved)
    return None


def _heads_to_batch(graph: Any, cat: Any, split: Any, position: int) -> bool:
    """``torch.cat(x.split(n, dim=d), dim=0)``: every axis of ``x`` but the first and ``d`` keeps
    its place and size, the axis at ``position`` among them."""
    def dim(node: Optional[cst.CSTNode]) -> Optional[int]:
        if type(node) is not cst.Call:
            return None
        given = [a.value for a in node.args if (a.keyword is not None and a.keyword.value == "dim")]
        given = given or [a.value for a in node.args[1:2] if a.keyword is None]
        value = given[0] if given else None
        if type(value) is cst.UnaryOperation and type(value.operator) is cst.Minus and type(value.expression) is cst.Integer:
            return -int(value.expression.value)
        return int(value.value) if type(value) is cst.Integer else None
    joined, parted = dim(cat.node), dim(split.node)
    rank = _rank(graph, split.inputs[0])
    if joined != 0 or parted is None or (parted >= 0 and rank is None):
        return False
    return position != (parted - rank if parted >= 0 else parted) and (rank is None or position != -rank)


def _rank(graph: Any, value: Any) -> Optional[int]:
    """``ranks.rank``, and through an ``nn.Linear`` (which keeps the rank of what it takes)."""
    for _ in range(8):
        rank = value_rank(graph, value)
        if rank is not None or value.op != "linear" or not value.inputs or not (value.info.get("qualified") or "").endswith("Linear"):
            return rank
        value = value.inputs[0]
    return None


def _sizes(value: Any) -> Optional[List[Any]]:
    """The sizes given to ``view``/``reshape``/``expand`` (one tuple of them, or each)."""
    sizes = list(value.inputs[1:])
    if len(sizes) == 1 and sizes[0].op == "tuple":
        sizes = list(sizes[0].info.get("elements") or ())
    return sizes if sizes and all(s is not None for s in sizes) else None


def _parameter_shape(graph: Any, name: Optional[str]) -> Optional[List[Optional[int]]]:
    """The literal shape of ``self.<name> = nn.Parameter(torch.randn(1, 1, dim) * s)``."""
    if name is None or getattr(graph, "classdef", None) is None:
        return None
    assignment = graph.file.analysis.class_model(graph.classdef).single_assignment(name)
    made = assignment.value if assignment is not None else None
    qualify = graph.file.bindings.qualify
    if type(made) is not cst.Call or qualify(made.func) not in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") or not made.args:
        return None
    inner = made.args[0].value
    while type(inner) is cst.BinaryOperation:  # ``torch.randn(...) * 0.02``
        inner = inner.left
    if type(inner) is not cst.Call or not (qualify(inner.func) or "").startswith("torch."):
        return None
    args = [a.value for a in inner.args if a.keyword is None]
    if len(args) == 1 and type(args[0]) in (cst.Tuple, cst.List):
        args = [e.value for e in args[0].elements]
    defaults = _init_defaults(graph.classdef)  # ``torch.empty(1, num_seeds, dim)``, ``num_seeds=1`` by default
    return [int(a.value) if type(a) is cst.Integer else defaults.get(a.value) if type(a) is cst.Name else None for a in args] or None


def _init_defaults(classdef: cst.ClassDef) -> dict:
    """The integer defaults of the class's ``__init__`` parameters (what an instance built
    without them gets)."""
    body = classdef.body.body if type(classdef.body) is cst.IndentedBlock else ()
    for statement in body:
        if type(statement) is cst.FunctionDef and statement.name.value == "__init__":
            params = statement.params
            return {p.name.value: int(p.default.value) for p in (*params.params, *params.kwonly_params)
                    if p.default is not None and type(p.default) is cst.Integer}
    return {}


def _short(info: dict) -> str:
    layer = info.get("layer")
    qualified = getattr(layer, "qualified", None) or info.get("qualified") or ""
    return qualified.rsplit(".", 1)[-1] if qualified.startswith("torch.") else ""


def _layer_kind(qualified: str, position: int, rank: Optional[int] = None) -> Optional[str]:
    """The kind of the axis at ``position`` of what the ``nn`` layer ``qualified`` makes (or
    takes: both have their features in one place)."""
    short = qualified.rsplit(".", 1)[-1] if qualified.startswith("torch.nn.") else ""
    if short in ("Linear", "LazyLinear"):
        return FEATURE if position == -1 else POSITION if position == -2 else None
    if short in CONV:
        at = CONV[short] + position  # from the start
        return FEATURE if at == 1 else POSITION if at >= 2 else None
    return None


def _split_keeps(split: Any, position: int) -> bool:
    """``chunk``/``split`` keep every axis; ``unbind(d)`` drops axis ``d``, which leaves the
    negative indices of the others as they were only when it is the first (``unbind(0)``)."""
    node = split.node
    if type(node) is not cst.Call or type(node.func) is not cst.Attribute:
        return False
    method = node.func.attr.value
    if method in ("chunk", "split"):
        return True
    if method != "unbind":
        return False
    dims = [a.value for a in node.args if a.keyword is None or a.keyword.value == "dim"]
    return not dims or (type(dims[0]) is cst.Integer and dims[0].value == "0")


def _leading_integer(node: Optional[cst.CSTNode]) -> bool:
    """``x[0]``: one integer index, on the first axis."""
    if type(node) is not cst.Subscript or len(node.slice) != 1:
        return False
    index = node.slice[0].slice
    return type(index) is cst.Index and type(index.value) is cst.Integer


def _slices_only(node: Optional[cst.CSTNode]) -> bool:
    """``x[:, a:b]``: slices only (no integer, ``None`` or ``...``): every axis keeps its place."""
    return type(node) is cst.Subscript and all(type(element.slice) is cst.Slice for element in node.slice)


def _relabelled(graph: Any, value: Any, position: int) -> Optional[int]:
    """The position in ``value``'s input of its axis at ``position`` (``transpose``/``permute``)."""
    info = value.info
    dims = list(info.get("dims", ()))
    if info.get("transpose") and len(dims) == 2 and all(d < 0 for d in dims):
        return dims[1] if position == dims[0] else dims[0] if position == dims[1] else position
    rank = value.rank if value.rank is not None else value_rank(graph, value)
    if rank is None:
        return -3 - position if info.get("swap") and position in (-1, -2) and info.get("transpose") else None
    norm = [d - rank if d >= 0 else d for d in dims]
    if info.get("transpose") and len(norm) == 2:
        return norm[1] if position == norm[0] else (norm[0] if position == norm[1] else position)
    if len(norm) == rank and -rank <= position:
        return norm[position]
    return None


def _reshaped(graph: Any, value: Any, position: int, depth: int, heads: bool = False) -> Optional[str]:
    source = value.inputs[0]
    if value.info.get("qualified") == "einops.rearrange":
        return _rearranged(graph, value, position, depth)
    node = value.node
    method = node.func.attr.value if type(node) is cst.Call and type(node.func) is cst.Attribute else None
    if method == "flatten":
        return _flattened(graph, value, source, position, depth)
    if method not in ("view", "reshape"):
        return None
    sizes = _sizes(value)
    if sizes is None or -len(sizes) > position:
        return None
    kinds = [_size_kind(graph, size, depth) for size in sizes]
    kind = kinds[position]
    if kind == "rest":  # ``-1``: what the other sizes leave, when that is one kind
        named = {k for k in kinds if k in (POSITION, FEATURE)}
        left = {POSITION, FEATURE} - named
        return left.pop() if len(left) == 1 else None
    return kind if kind in (POSITION, FEATURE) or (heads and kind == _HEADS) else None


def _flattened(graph: Any, value: Any, source: Any, position: int, depth: int) -> Optional[str]:
    """``x.flatten(start)`` (to the last axis): the axes before ``start`` kept, the rest one."""
    node = value.node
    args = [a.value for a in node.args if a.keyword is None or a.keyword.value == "start_dim"]
    rank = value_rank(graph, source)
    if len(node.args) > 1 or not args or type(args[0]) is not cst.Integer or rank is None:
        return None
    start = int(args[0].value)
    if position == -1:  # the merged axes: of one kind, or not known
        found = {axis_kind(graph, source, at - rank, depth + 1) for at in range(start, rank)}
        return found.pop() if len(found) == 1 else None
    return axis_kind(graph, source, start + 1 + position - rank, depth + 1)  # an axis before ``start``


def _rearranged(graph: Any, value: Any, position: int, depth: int) -> Optional[str]:
    """An ``einops.rearrange`` output axis: the kinds of the input axes its letters come from
    (a letter of a split group, ``(head c)``, has that group's kind), else their names'."""
    pattern = value.inputs[1].info.get("text") if len(value.inputs) > 1 else None
    sides = parse_rearrange(pattern) if isinstance(pattern, str) else None
    if sides is None:
        return None
    before, after = sides
    if -len(after) > position:
        return None
    found = set()
    for letter in after[position]:
        group = next(i for i, g in enumerate(before) if letter in g)
        kind = axis_kind(graph, value.inputs[0], group - len(before), depth + 1)
        if kind is None:
            kind = _name_kind(letter, alone=len(after[position]) == 1)
        found.add(kind)
    found.discard(_HEADS)
    return found.pop() if len(found) == 1 and None not in found else None


def _size_kind(graph: Any, size: Any, depth: int) -> Optional[str]:
    """What a size given to ``view``/``reshape`` counts: ``POSITION``, ``FEATURE``, batch,
    heads, "rest" (``-1``) or None."""
    op, info = size.op, size.info
    if op == "constant":
        number = info.get("number")
        return "rest" if number == -1 else None
    if op == "element" and size.inputs and size.inputs[0].op == "meta" and size.inputs[0].inputs:
        names = info.get("names") or []
        named = _name_kind(names[0], alone=True) if len(names) == 1 else None
        if named is not None:
            return named
        shaped = size.inputs[0].inputs[0]
        index = info.get("index")
        rank = value_rank(graph, shaped)
        if isinstance(index, int) and rank is not None and 0 <= index < rank:
            return axis_kind(graph, shaped, index - rank, depth + 1) or _read_by_layer(graph, shaped, index - rank)
        return None
    if op == "attribute":
        return _name_kind(info.get("name") or "", alone=True)
    if op == "arith" and type(size.node) is cst.BinaryOperation and len(size.inputs) == 2:
        operator = type(size.node.operator)
        if operator in (cst.FloorDivide, cst.Divide):  # ``C // self.num_heads``: a part of C
            return _size_kind(graph, size.inputs[0], depth)
        if operator is cst.Multiply:  # ``h * w``: positions when both are
            kinds = [_size_kind(graph, part, depth) for part in size.inputs]
            spatial = [_spatial(part) for part in size.inputs]
            if all(k == POSITION or s for k, s in zip(kinds, spatial)):
                return POSITION
            if FEATURE in kinds and POSITION not in kinds:
                return FEATURE
        return None
    return None


def _spatial(size: Any) -> bool:
    names = size.info.get("names") or [size.info.get("name")]
    return bool(names) and names[0] in _SPATIAL_NAMES


def _read_by_layer(graph: Any, tensor: Any, position: int) -> Optional[str]:
    """The kind of an axis of a tensor the code made elsewhere (an argument), read off an ``nn``
    layer of the module that takes it (``self.q(x)``: a Conv2d's input has its channels first)."""
    if tensor.op != "argument":
        return None
    for value in graph.values:
        if value.op == "linear" and value.inputs and value.inputs[0] is tensor:
            return _layer_kind(value.info.get("qualified") or "", position)
    return None


def _name_kind(name: str, alone: bool) -> Optional[str]:
    if name in _FEATURE_NAMES or name.endswith("_dim") or name.endswith("_channels"):
        return FEATURE
    if name in _POSITION_NAMES or name.startswith(("seq_len", "num_tokens")):
        return POSITION
    if name in _BATCH_NAMES:
        return _BATCH
    if name in _HEAD_NAMES:
        return _HEADS
    if not alone and name in _SPATIAL_NAMES:
        return POSITION
    return None
