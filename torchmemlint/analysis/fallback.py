"""Is an eager attention a deliberate fallback of ``F.scaled_dot_product_attention``?

A function that can compute the attention with SDPA and, on another path, computes it by hand
has chosen the eager form for the inputs that reach it (timm's ``if self.fused_attn:``, a patch
of SDPA that takes the eager path only where a backend cannot run): replacing it with SDPA
undoes that choice. Two forms, asked of the value graph (``analysis/values.py``):

- the eager output joins, after an ``if``/``else``, a value SDPA computed (``x = sdpa(...)``
  in one arm, ``x = attn @ v`` in the other);
- the eager output is returned, and the function returns, on another path, the attention of
  the same q, k and v (``if fused: return sdpa(q, k, v)`` before the eager code): computed by
  ``F.scaled_dot_product_attention``, or by a call made under ``torch.nn.attention.sdpa_kernel``
  (a context that only selects SDPA's backends) that takes them.

"The same" is the same values up to the steps that keep a tensor's data (``SAME_DATA``:
reshapes, transposes, casts, an ``if``'s arms) and a scale (``q = q * self.scale``, applied by
hand only in the eager arm); an SDPA call on other tensors (another attention of the function,
another element of the split that made q, k and v) is no alternative to this one. On its way to
the ``return`` the output may pass through the steps ``TO_RETURN`` names (``self.proj(out)``,
``return out, None``); the other path's SDPA call is looked for through the same steps.

Either way the SDPA path must be one that may run with autograd on: where an ``if`` lets it run
only without autograd (``if not torch.is_grad_enabled():``, ``with torch.no_grad():``), training
always takes the eager path, which keeps the weights for backward; and so does it where an ``if``
lets the SDPA path run only while a flag is set that is off unless a caller turns it on
(``if self.flash:`` with ``flash=False`` the constructor's default: ``analysis/flags.py``), the
default path being the eager one (``_in_training``).
"""

from __future__ import annotations

from typing import Callable, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import grad_effect
from torchmemlint.analysis.flags import flag_test, turned_off
from torchmemlint.analysis.values import FunctionValues, Value
from torchmemlint.tree import path_to

PASSES = frozenset({"reshape", "relabel", "same", "join", "element", "helper", "index", "cast"})
BACKEND_CONTEXTS = frozenset({"torch.nn.attention.sdpa_kernel", "torch.backends.cuda.sdp_kernel"})
SAME_DATA = frozenset({"reshape", "relabel", "same", "join", "cast", "scale"})  # what "the same q" may pass through (``_sources``)
TO_RETURN = PASSES | {"tuple", "linear", "module", "dropout"}  # what an output may pass through to be returned (``out, None``, ``self.proj(out)``)


JOINED = "the eager arm of an `if` whose other arm calls F.scaled_dot_product_attention"
RETURNED = "the eager path of a function that returns the same attention from F.scaled_dot_product_attention on another path"


def sdpa_fallback(graph: FunctionValues, product: Value, operands: Tuple[Value, Value, Value]) -> str:
    """Why the eager attention ``product`` (of the q, k, v ``operands``) is the other path of
    an SDPA computation in its function (see the module doc); "" when it is not."""
    joins, _ = _following(graph, product, PASSES, 6)
    for consumer, source in joins.values():
        if consumer.op == "join" and any(
            _in_training(graph, call, other) for other in consumer.inputs if other is not source
            for call in _attention_calls(other, [], PASSES | {"tuple"}, 4, graph)
        ):
            return JOINED
    mine, returned = _following(graph, product, TO_RETURN, 6)
    if not returned:
        return ""
    contexts = _backend_contexts(graph)
    operand_sources = [_sources(operand) for operand in operands]
    for other in graph.returns:
        if id(other) in mine or other is product:
            continue
        for call in _attention_calls(other, contexts, TO_RETURN, 6):
            if not _in_training(graph, call, other):
                continue
            theirs: Set[int] = set().union(*(_sources(source) for source in call.inputs)) if call.inputs else set()
            if all(found & theirs for found in operand_sources):
                return RETURNED
    return ""


def _following(graph: FunctionValues, product: Value, through: FrozenSet[str], steps: int) -> Tuple[Dict[int, Tuple[Value, Value]], bool]:
    """The values made from ``product`` through ``through`` steps, at most ``steps`` deep (each
    with the value it was made from), and whether ``product`` or one of them is returned."""
    frontier, seen, returned = [product], {}, False
    for _ in range(steps):
        following = []
        for value in frontier:
            for consumer in graph.consumers(value):
                returned = returned or consumer == "return"
                if isinstance(consumer, str) or id(consumer) in seen:
                    continue
                seen[id(consumer)] = (consumer, value)
                if consumer.op in through:
                    following.append(consumer)
        frontier = following
    return seen, returned


def _attention_calls(value: Value, contexts: List[cst.CSTNode], through: FrozenSet[str], depth: int,
                     graph: Optional[FunctionValues] = None) -> List[Value]:
    """The SDPA calls ``value`` is made from through ``through`` steps: ``F.scaled_dot_product_attention``,
    or a call of a function this file does not define made under one of the SDPA backend ``contexts``;
    given ``graph``, also what a same-file helper it calls returns (``E = self._fast_attention(q, k,
    v)`` in one arm, the eager ``self._manual_attention(q, k, v)`` in the other)."""
    if value.op == "attention" or (
        value.op in ("helper", "call") and value.node is not None and any(path_to(w, value.node) for w in contexts)
    ):
        return [value]
    if depth == 0 or value.op not in through:
        return []
    helper = value.info.get("helper") if value.op == "helper" and graph is not None else None
    if type(helper) is cst.FunctionDef and helper is not graph.function:  # type: ignore[union-attr]
        theirs = graph.file.analysis.values(helper)  # type: ignore[union-attr]
        found = [call for r in theirs.returns for call in _attention_calls(r, [], through, depth - 1, theirs)]
        if found:
            return found
    return [call for v in value.inputs for call in _attention_calls(v, contexts, through, depth - 1, graph)]


def _in_training(graph: FunctionValues, call: Value, other: Value) -> bool:
    """May the SDPA ``call`` (reached from ``other``, a value of this function: the call of a
    same-file helper that runs it) run in training, by default? Not when an ``if`` around it lets
    it run only with autograd off (``if not torch.is_grad_enabled():``,
    ``torch.is_inference_mode_enabled()``, also in a conjunction; the ``else`` of ``if
    torch.is_grad_enabled():``) or a ``with`` enters ``torch.no_grad()``/``torch.inference_mode()``;
    nor when an ``if`` lets it run only while a flag that is off unless a caller turns it on is
    set (``if self.flash:`` with ``self.flash = flash`` and ``flash=False`` in ``__init__``, no
    call of this file passing another value), or only past an ``if`` that returns unless such a
    flag is set (``if backend == "eager": return ...`` with ``backend="eager"``; both read by
    ``flags.flag_test``): the eager path is then the one training runs, the attention TML601 is
    about, and no fallback."""
    inside = call.node is not None and path_to(graph.function, call.node) is not None
    node = call.node if inside else other.node
    if node is not None and flag_test(graph, node) is not None:
        return False  # in an arm, or past an ``if ...: return``, that a flag off by default guards
    path = path_to(graph.function, node) if node is not None else None
    bindings = graph.file.bindings
    for node, child in zip(path or (), (path or ())[1:]):
        if type(node) is cst.If and (child is node.body or child is node.orelse) and (
            _grad_off_when(node.test, child is node.body, bindings.qualify)
            or turned_off(graph, node.test, child is node.body)  # some instances are built to take the other arm
        ):
            return False
        if type(node) is cst.With and child is node.body and any(grad_effect(item.item, bindings) == "off" for item in node.items):
            return False
    return True


def _grad_off_when(test: cst.BaseExpression, truth: bool, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> bool:
    """Does ``test`` being ``truth`` mean that autograd is off?"""
    if type(test) is cst.UnaryOperation and type(test.operator) is cst.Not:
        return _grad_off_when(test.expression, not truth, qualify)
    if type(test) is cst.BooleanOperation and (type(test.operator) is cst.And) == truth:  # ``a and b`` true, ``a or b`` false: both
        return _grad_off_when(test.left, truth, qualify) or _grad_off_when(test.right, truth, qualify)
    if type(test) is cst.Call and not test.args:
        qualified = qualify(test.func)
        return (qualified == "torch.is_grad_enabled" and not truth) or (qualified == "torch.is_inference_mode_enabled" and truth)
    return False


def _backend_contexts(graph: FunctionValues) -> List[cst.CSTNode]:
    """The ``with`` statements of the function that enter ``sdpa_kernel(...)`` (its items are run
    as values of that statement)."""
    return [
        value.statement for value in graph.values  # type: ignore[misc]
        if type(value.statement) is cst.With and value.op in ("call", "layer")
        and (getattr(value.info.get("layer"), "qualified", None) or value.info.get("qualified")) in BACKEND_CONTEXTS
    ]  # ``torch.nn.*`` calls are read as layers (``Resolver.layer``), ``torch.backends.*`` ones as calls


def _sources(value: Value, depth: int = 6) -> Set[int]:
    """``value`` and the values it is made from through ``SAME_DATA`` steps (every arm of a join)."""
    found: Set[int] = set()
    stack: List[Tuple[Value, int]] = [(value, depth)]
    while stack:
        here, left = stack.pop()
        if id(here) in found:
            continue
        found.add(id(here))
        if left and here.op in SAME_DATA and here.inputs:
            stack.extend((v, left - 1) for v in (here.inputs if here.op == "join" else here.inputs[:1]))
    return found

