"""Is a value of a function's value graph dead: bound to names by a plain assignment that no
later statement reads (``attn_weights = attn_weights.view(b, h, i, j).transpose(1, 0)`` left
after the output is made, a torchscale copy that no longer returns it)?

A dead value is no escape: nothing holds it once the statement ends, so the tensors it was
computed from are kept only by what else reads them. The graph says no value consumes it; the
statement-level flow (``flow.py``) says no path after the assignment reads a name it bound
before writing it again (a loop back to the statement counts as a read), and no nested function
or lambda captures the name.
"""

from __future__ import annotations

from typing import FrozenSet, Optional

import libcst as cst

from .values import FunctionValues, Value


def _bound_names(value: Value) -> Optional[FrozenSet[str]]:
    """The names ``value`` is bound to when its statement is ``a = b = <value>`` and nothing else."""
    statement = value.statement
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    assign = statement.body[0]
    if type(assign) is not cst.Assign or assign.value is not value.node:
        return None
    names = [target.target for target in assign.targets]
    if not all(type(name) is cst.Name for name in names):
        return None
    return frozenset(name.value for name in names)  # type: ignore[attr-defined]


# Tensor methods without a trailing ``_`` that act on the tensor all the same
_ACTING = frozenset({"backward", "register_hook", "retain_grad", "record_stream", "register_post_accumulate_grad_hook"})


def _discarded(value: Value) -> bool:
    """``s.mask_fill(m, v)`` as a statement of its own: a method of the tensor without the
    trailing ``_`` of an in-place one (and not one that acts on it: ``backward``), whose result
    nothing takes."""
    statement, node = value.statement, value.node
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return False
    expression = statement.body[0]
    if type(expression) is not cst.Expr or expression.value is not node or type(node) is not cst.Call:
        return False
    func = node.func
    return type(func) is cst.Attribute and not func.attr.value.endswith("_") and func.attr.value not in _ACTING


def unread(graph: FunctionValues, value: Value) -> bool:
    """Is ``value`` made in ``graph``'s own function, consumed by no value or sink of the graph,
    and bound only to names no later statement reads (or to none: a method's result dropped)?"""
    if value.function is not graph.function:
        return False
    consumers = graph.consumers(value)
    if consumers == ["opaque"] and _discarded(value):  # (the statement's own sink: a call run for its effect)
        return True
    if consumers:
        return False
    names = _bound_names(value)
    flow = graph.file.analysis.flow(graph.function)
    index = flow.statement_index(value.statement)
    if not names or index is None or not flow.reliable or names & flow.captured:
        return False
    return not flow.read_after(names, index)
