"""Calls that read only the sizes of what they are given (``analysis/values.py``).

``torch.ones(*shape(sim, "b h [i j]"), dtype=torch.bool).triu(1)`` builds a causal mask of the
scores' size: its positional arguments are sizes, so a tensor they are computed from (``sim``,
through an imported ``shape`` helper, a starred tuple, ``sim.shape[-2:]``) is read for its sizes
only, as ``.shape`` is (``meta``), not kept or computed with. The call is a ``call`` of the
factory whose inputs are one ``meta`` value of the positional arguments, then the keywords.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

FACTORIES = frozenset(f"torch.{kind}" for kind in ("ones", "zeros", "empty", "rand", "randn", "eye"))  # every positional argument a size


def sized_call(graph: Any, node: cst.Call, qualified: Optional[str], env: Dict[str, Any]) -> Optional[Any]:
    """``torch.ones(*sizes, dtype=..., device=...)`` in ``graph`` (``FunctionValues``): the
    factory's value, its sizes read as ``meta``; None for any other call."""
    if qualified not in FACTORIES:
        return None
    sizes = [graph.expression(arg.value, env) for arg in node.args if arg.keyword is None]  # ``*shape(s)`` too
    keywords = [graph.expression(arg.value, env) for arg in node.args if arg.keyword is not None]
    return graph._new("call", [graph._new("meta", sizes, node), *keywords], node, info={"qualified": qualified})
