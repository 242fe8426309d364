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


def unread(graph: FunctionValues, value: Value) -> bool:
    """Is ``value`` made in ``graph``'s own function, consumed by no value or sink of the graph,
    and bound only to names no later statement reads?"""
    if value.function is not graph.function or graph.consumers(value):
        return False
    names = _bound_names(value)
    flow = graph.file.analysis.flow(graph.function)
    index = flow.statement_index(value.statement)
    if not names or index is None or not flow.reliable or names & flow.captured:
        return False
    return not flow.read_after(names, index)
