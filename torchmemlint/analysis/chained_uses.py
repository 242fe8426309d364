"""What a module held by a module list that ``forward`` runs in turn runs on: ``for block in
self.layers: x = block(x)`` with ``self.layers`` built in ``__init__`` from a display
(``chained_before``) or one ``append`` at a time (``added_before``), so each element consumes
what the element before it made. Asked by the activation sites (``analysis/activations.py``)
for an element construction (``self.layers.append(nn.LeakyReLU(0.2))``) and for a name that
holds one (``self.layers.append(activation)``, ``activation`` a constructor parameter whose
default builds the module: ``analysis/module_flow.py``)."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.activation_calls import parts_follow
from torchmemlint.analysis.activation_sites import Use
from torchmemlint.analysis.added_modules import added_before
from torchmemlint.analysis.layer_lists import _statement_of
from torchmemlint.analysis.module_lists import module_lists
from torchmemlint.analysis.producers import Producers


def run_before(file: Any, model: Any, holder: str, element: cst.CSTNode) -> Optional[List[cst.BaseExpression]]:
    """The element expressions of ``self.<holder>`` (of ``model``'s class in ``file``) that may run
    right before ``element``; None when not known (first, or the list is not run in turn)."""
    lists, init = module_lists(file, model), model.init
    before = lists.chained_before(holder, element)  # type: ignore[arg-type]
    if before is not None:
        return [before]
    if init is None or not lists.chained(holder):
        return None
    # the list's orders where the element is added (``Order``: branches and loops joined, so an
    # element appended in a loop follows what the round before appended last), else the walk
    # back over what is added before it (``added_before``)
    statement = _statement_of(init, element)
    order = file.layer_lists.order(init, "self." + holder, statement) if statement is not None else None
    if order is not None:
        return None if order.nullable or not order.last else list(order.last)
    return added_before(file, init, element) or None  # type: ignore[arg-type]


def chain_uses(
    file: Any, model: Any, node: cst.CSTNode, before: List[cst.BaseExpression], holder: Optional[str] = None,
    element: Optional[cst.CSTNode] = None,
) -> List[Use]:
    """A use of the module at ``node`` on what each of ``before`` (``run_before``) makes; with
    ``holder``, the module list whose ``element`` (by default ``node``) it is, what may run after
    it there: only dropouts that drop, or a layer that may change its input in place
    (``activation_calls.parts_follow``)."""
    init = model.init
    self_name = model.self_name(init) if init is not None else None
    dropout = changed = False
    after = module_lists(file, model).chained_after(holder, element or node) if holder is not None else None  # type: ignore[arg-type]
    if after is not None:
        dropout, changed = parts_follow(file, [file.resolver.part(e, self_name, init) for e in after[0]], after[1])
    return [
        Use(node, [Producers(file, model).part(file.resolver.part(previous, self_name, init))], single_use=True,
            to_dropout=dropout, to_inplace=changed)
        for previous in before
    ]
