"""The order of a list joined by ``sum`` (``analysis/classes.py``: ``Resolver.spliced_order``).

``nn.Sequential(*sum([[nn.Linear(n[i], n[i + 1]), act()] for i in range(k)], [])[:-1])`` (a
GFlowNet-style ``mlp``): the comprehension makes one list a round, and ``sum`` joins them, so each
round's list follows the one before; ``[:-1]`` (or ``[1:]``) cuts the joined list as it cuts
any other (``Order.trimmed``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import libcst as cst

from torchmemlint.analysis.layer_lists import Order, list_index, literal_elements


def summed_order(qualify: Callable[[cst.BaseExpression], Optional[str]], node: cst.BaseExpression) -> Optional[Order]:
    """Every order ``sum([[a, b] for i in range(n)], [])`` (possibly cut by a slice) may hold;
    None for anything else."""
    cut = node.slice if type(node) is cst.Subscript else None
    call: Any = node.value if type(node) is cst.Subscript else node
    if type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != "sum" or len(call.args) != 2:
        return None
    if qualify(call.func) not in (None, "builtins.sum") or any(a.keyword is not None or a.star for a in call.args):
        return None
    made, start = call.args[0].value, call.args[1].value
    if type(start) is not cst.List or start.elements or type(made) not in (cst.ListComp, cst.GeneratorExp):
        return None
    elements = literal_elements(made.elt)
    if not elements:
        return None
    once = Order.sequence(elements)  # each round's list after the one before; no round when the range is empty
    joined = Order(once.items, once.first, once.last, once.pairs | frozenset((a, b) for a in once.last for b in once.first), True)
    return joined if cut is None else joined.trimmed(list_index(cst.Subscript(cst.Name("_"), cut), "_"))
