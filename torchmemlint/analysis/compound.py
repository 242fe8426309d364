"""Calls the value graph (``analysis/values.py``) writes as its own operations, composed:

- ``torch.baddbmm(input, a, b, beta=β, alpha=α)`` is ``β·input + α·(a @ b)``: a ``contract`` of
  ``a`` and ``b`` (a ``bmm``), then a ``scale`` by α (when given and not 1), then an ``add`` of
  ``input`` (β = 1 or not given; β = 0: the input is ignored, as torch does even when it holds
  NaN: diffusers' ``baddbmm(torch.empty(...), q, kᵀ, beta=0, alpha=scale)``); another β is a
  plain call;
- ``x.amax(dim, keepdim)``, ``torch.amax``, ``x.max(dim, keepdim)`` (the pair of values and
  indices; its ``.values`` or ``[0]`` is the values), ``logsumexp``, ``sum`` are ``reduce`` over
  one axis (``info["axis"]``, None when not known, and ``keepdim``; numpy's ``axis=`` and
  ``keepdims=``, which torch also takes): a question can see that
  ``s - s.amax(-1, keepdim=True)`` subtracts what is constant along that axis;
- ``x.exp()``/``torch.exp(x)`` is ``exp``, and an ``exp`` divided by its own sum over one axis
  (``e / e.sum(-1, keepdim=True)``, also through ``.detach()``/casts of either) is the
  ``softmax`` over that axis of what ``exp`` took (``written_softmax``; ``info["parts"]``: the
  ``exp`` and the sum, which only compute it): a softmax written out, as assignments do; so is
  the ``exp`` of a ``log_softmax`` (``F.log_softmax(s, dim=-1).exp()``);
- ``torch.nan_to_num(w)``, ``s.clamp(min=-50)``, ``torch.clip``, and the pointwise functions of
  one tensor (``torch.sigmoid(k)``, ``k.abs()``, ``F.logsigmoid(k)``) change values one by one and
  keep the axes: a step whose shape is its input's (a ``helper`` noted ``elementwise``: the
  chain of an attention runs through it, and SDPA does not run it: stribor's ``safe_softmax``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.syntax import literal_number
from torchmemlint.tree import nodes_of

BMM_SPECS = (("...", "i", "c"), ("...", "c", "j"), ("...", "i", "j"))
REDUCTIONS = frozenset({"amax", "max", "logsumexp", "sum"})
ELEMENTWISE = frozenset({"nan_to_num", "clamp", "clip", "clamp_min", "clamp_max"})
# pointwise functions of one tensor and nothing else (``torch.sigmoid(k)``, ``k.abs()``; with
# ``nn.functional.``: ``F.logsigmoid(k)``, AutoBERT's keys), read as the steps above; never a call
# given more (Lightning's ``self.log("loss", loss)`` is no ``log``)
UNARY = frozenset({
    "sigmoid", "tanh", "abs", "neg", "sqrt", "rsqrt", "square", "log", "log1p", "expm1", "sin", "cos", "erf", "sign",
    "reciprocal",
}) | frozenset("nn.functional." + name for name in ("logsigmoid", "softsign", "softplus", "tanhshrink", "sigmoid", "tanh"))
COMPOSED = REDUCTIONS | ELEMENTWISE | UNARY | {"baddbmm", "exp", "where"}  # the methods and ``torch.`` functions composed here
ALIASES = {"axis": "dim", "keepdims": "keepdim"}  # numpy's names, which torch also takes
LIKE_NUMBERS = {"torch.zeros_like": 0.0, "torch.ones_like": 1.0, "torch.zeros": 0.0, "torch.ones": 1.0}  # a tensor of one number
NEW_NUMBERS = {"new_zeros": 0.0, "new_ones": 1.0}  # ``s.new_zeros(shape)``: the same, with s's dtype and device


def compound_value(graph: Any, name: str, node: cst.Call, receiver: Any, positional: List[Any], keywords: Dict[str, Any]) -> Optional[Any]:
    """The value of ``torch.<name>(...)`` (``receiver`` None) or ``receiver.<name>(...)`` when
    it is one of the calls above, else None. ``graph``: a ``values.FunctionValues``."""
    operands = positional if receiver is None else [receiver, *positional]
    arguments = [a.value for a in node.args if a.keyword is None and not a.star]
    if receiver is not None:
        arguments = [node.func.value, *arguments]  # type: ignore[attr-defined]
    if name == "baddbmm":
        return _baddbmm(graph, node, operands, arguments, keywords)
    if name in REDUCTIONS:
        return _reduction(graph, name, node, operands, {ALIASES.get(k, k): v for k, v in keywords.items()})
    if name == "exp" and len(operands) == 1 and not keywords:
        return _exp(graph, operands[0], node)
    if name == "where":
        return _where(graph, node, operands, arguments, keywords, receiver is not None)
    if (name in ELEMENTWISE and operands) or (name in UNARY and len(operands) == 1 and not keywords):
        first = operands[0]
        return graph._new("helper", [*operands, *keywords.values()], node, first.axes, first.rank, {"qualified": "torch." + name, "elementwise": True})
    return None


def written_softmax(graph: Any, numerator: Any, denominator: Any, node: cst.CSTNode) -> Optional[Any]:
    """``e / e.sum(dim, keepdim=True)`` where ``e`` is an ``exp``: the ``softmax`` over ``dim`` of
    the tensor ``e`` exponentiates (None when ``numerator / denominator`` is not that). A
    positive constant below 1 added to the sum (``e / (e.sum(-1, keepdim=True) + 1e-6)``, a
    "stable" softmax) keeps it a softmax, its ``epsilon`` noted: SDPA adds none."""
    steps = [denominator]
    epsilon = None
    while denominator.op in ("same", "cast", "add") and denominator.inputs:
        if denominator.op == "add":  # ``e.sum(-1, keepdim=True) + 1e-6``: a positive constant, once
            added = _number(denominator.inputs[1]) if len(denominator.inputs) == 2 else None
            if epsilon is not None or denominator.info.get("subtract") or added is None or not 0 < added < 1:
                return None
            epsilon = added
        denominator = denominator.inputs[0]
        steps.append(denominator)
    if denominator.op != "reduce" or denominator.info.get("kind") != "sum" or not denominator.info.get("keepdim"):
        return None
    summed, exponential = denominator.inputs[0], numerator
    while summed is not exponential and summed.op in ("same", "cast") and summed.inputs:
        steps.append(summed)
        summed = summed.inputs[0]
    axis = denominator.info.get("axis")
    if summed is not exponential or exponential.op != "exp" or axis is None:
        return None
    source = exponential.inputs[0]
    return graph._same("softmax", source, node, [denominator], dim=None, axis=axis, extra=[], parts=(exponential, *steps),
                       written=True, epsilon=epsilon)


LOG_SOFTMAX = frozenset({"torch.nn.functional.log_softmax", "torch.log_softmax", "torch.special.log_softmax"})


def _exp(graph: Any, operand: Any, node: cst.Call) -> Any:
    """``x.exp()``; of a ``log_softmax`` over one axis given as a literal (``F.log_softmax(s,
    dim=-1).exp()``, ``torch.exp(s.log_softmax(-1))``, nothing else passed), the ``softmax`` of
    ``s`` over that axis, written out (``info["parts"]``: the ``log_softmax``, which only
    computes it)."""
    call = operand.node
    if operand.op in ("call", "layer") and type(call) is cst.Call and operand.inputs and operand.function is graph.function:
        method = operand.info.get("method") == "log_softmax"
        layer = operand.info.get("layer")  # (``F.log_softmax``, which the resolver reads as a functional layer)
        if method or (layer.qualified if layer is not None else operand.info.get("qualified")) in LOG_SOFTMAX:
            args = call.args if method else call.args[1:]
            dim = _literal_dim(args)
            source = operand.inputs[0]
            if dim is not None:
                return graph._same("softmax", source, node, dim=dim, axis=source.axis(dim), extra=[], parts=(operand,), written=True)
    return graph._same("exp", operand, node)


def _literal_dim(args: Any) -> Optional[int]:
    """The axis of ``args`` (what follows the tensor): one literal integer, by position or as ``dim=``."""
    if len(args) != 1 or args[0].star or (args[0].keyword is not None and args[0].keyword.value != "dim"):
        return None
    number = literal_number(args[0].value)
    return int(number) if number is not None and number == int(number) else None


def _number(value: Optional[Any]) -> Optional[float]:
    return value.info.get("number") if value is not None and value.op == "constant" else None


def _baddbmm(graph: Any, node: cst.Call, operands: List[Any], arguments: List[Any], keywords: Dict[str, Any]) -> Optional[Any]:
    if len(operands) != 3 or len(arguments) != 3 or set(keywords) - {"beta", "alpha"}:
        return None
    beta = 1.0 if "beta" not in keywords else _number(keywords["beta"])
    if beta not in (0.0, 1.0):
        return None
    value = graph._contract(operands[1], operands[2], node, BMM_SPECS, "torch.bmm", (arguments[1], arguments[2]))
    value.info["via"] = "baddbmm"
    alpha = keywords.get("alpha")
    if alpha is not None and _number(alpha) != 1.0:
        factor = next(a.value for a in node.args if a.keyword is not None and a.keyword.value == "alpha")
        value = graph._same("scale", value, node, [alpha], divide=False, factor=factor)
    if beta == 1.0:
        value = graph._same("add", value, node, [operands[0]], subtract=False, other=arguments[0])
    return value


def _where(graph: Any, node: cst.Call, operands: List[Any], arguments: List[Any], keywords: Dict[str, Any], method: bool) -> Optional[Any]:
    """``torch.where(c, x, y)`` (``x.where(c, y)``: ``x`` first) with one of ``x``/``y`` a number."""
    if keywords or len(operands) != 3 or len(arguments) != 3:
        return None
    condition, kept, other = (operands[1], operands[0], operands[2]) if method else operands
    where = arguments[1] if method else arguments[0]
    other, kept = _buffered(graph, other), _buffered(graph, kept)
    if _number(other) is not None and _number(kept) is None:
        return graph._same("fill", kept, node, [condition, other], where=where, fill=other, keep=True, inplace=False)
    if _number(kept) is not None and _number(other) is None and not method:
        return graph._same("fill", other, node, [condition, kept], where=where, fill=kept, keep=False, inplace=False)
    return None


FILLED = frozenset({"torch.full_like", "torch.full", "torch.tensor", "torch.as_tensor", "torch.scalar_tensor"})  # one number given, any shape
NEW_FILLED = frozenset({"new_full", "new_tensor"})  # ``s.new_full(shape, n)``, ``s.new_tensor(n)``


def _filled(value: Any) -> Optional[float]:
    """The one number every element of ``value`` holds, when a call makes it so: ``torch.zeros_like(w)``,
    ``torch.full_like(s, -inf)``, ``torch.full(shape, -1e9)``, ``torch.tensor(-1e9, device=d)``,
    ``s.new_full(shape, n)``, ``s.new_tensor(n)``, ``torch.ones_like(s) * n``, each also cast; else None."""
    while value.op == "cast" and value.inputs:
        value = value.inputs[0]
    if value.op == "scale" and not value.info.get("divide") and len(value.inputs) == 2:
        base, factor = _filled(value.inputs[0]), _number(value.inputs[1])
        return base * factor if base is not None and factor is not None else None
    if value.op != "call":
        return None
    qualified = value.info.get("qualified")
    if qualified in LIKE_NUMBERS or value.info.get("method") in NEW_NUMBERS:
        return LIKE_NUMBERS.get(qualified, NEW_NUMBERS.get(value.info.get("method")))
    given = value.inputs if qualified in FILLED or value.info.get("method") in NEW_FILLED else None
    numbers = [part for part in given or () if part.op == "constant"]
    return _number(numbers[0]) if len(numbers) == 1 else None


def _buffered(graph: Any, value: Any) -> Any:
    """A tensor of one known number, as a constant: ``torch.zeros_like(w)`` (0), or
    ``self.masked_bias`` (also cast, ``.to(w.dtype)``) where the class registers it once as a
    number, ``self.register_buffer("masked_bias", torch.tensor(-1e4))`` (GPT-2's causal fill), and
    nothing else assigns it; else ``value``."""
    number = _filled(value)
    if number is not None:
        return graph._new("constant", [value], value.node, info={"number": number})
    inner = value
    while inner.op == "cast" and inner.inputs:
        inner = inner.inputs[0]
    classdef = getattr(graph, "classdef", None)
    if inner.op != "attribute" or classdef is None:
        return value
    name = inner.info.get("name")
    registered = []
    for node in nodes_of(classdef, cst.Call, cst.Assign, cst.AugAssign, cst.AnnAssign):
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value == "register_buffer" and node.args and \
                    type(node.args[0].value) is cst.SimpleString and node.args[0].value.evaluated_value == name:
                registered.append(node)
        elif any(type(t) is cst.Attribute and t.attr.value == name for t in _targets(node)):
            return value  # assigned as well: not known to hold the number
    if len(registered) != 1 or len(registered[0].args) < 2:
        return value
    made = registered[0].args[1].value
    if type(made) is not cst.Call or graph.file.bindings.qualify(made.func) not in ("torch.tensor", "torch.as_tensor") or not made.args:
        return value
    number = literal_number(made.args[0].value)
    if number is None:
        return value
    return graph._new("constant", [value], value.node, info={"number": number})


def _targets(node: cst.CSTNode) -> List[cst.BaseExpression]:
    if type(node) is cst.Assign:
        return [t.target for t in node.targets]
    return [node.target]  # type: ignore[attr-defined]


def _reduction(graph: Any, name: str, node: cst.Call, operands: List[Any], keywords: Dict[str, Any]) -> Optional[Any]:
    if not operands or set(keywords) - {"dim", "keepdim"}:
        return None
    source, rest = operands[0], operands[1:]
    dim_value = keywords.get("dim", rest[0] if rest else None)
    keep_value = keywords.get("keepdim", rest[1] if len(rest) > 1 else None)
    dim = _number(dim_value)
    if dim_value is None or dim is None or dim != int(dim) or len(rest) > 2:
        return None  # ``x.max()``, ``torch.max(a, b)``: not a reduction over one axis
    keepdim = keep_value is not None and (
        _number(keep_value) == 1.0 or (keep_value.op == "global" and keep_value.info.get("qualified") == "builtins.True")
        or type(keep_value.node) is cst.Name and keep_value.node.value == "True"
    )
    return graph._new("reduce", [source, *rest, *keywords.values()], node, rank=source.rank if keepdim else None, info={
        "kind": name, "axis": source.axis(int(dim)), "keepdim": keepdim, "pair": name == "max",
    })
