"""Calls that read only the sizes of what they are given (``analysis/values.py``).

``torch.ones(*shape(sim, "b h [i j]"), dtype=torch.bool).triu(1)`` builds a causal mask of the
scores' size: its positional arguments are sizes, so a tensor they are computed from (``sim``,
through an imported ``shape`` helper, a starred tuple, ``sim.shape[-2:]``) is read for its sizes
only, as ``.shape`` is (``meta``), not kept or computed with. The call is a ``call`` of the
factory whose inputs are one ``meta`` value of the positional arguments, then the keywords.
``torch.ones_like(s[0, :, :])`` reads its first argument the same way (its size, dtype, device).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

FACTORIES = frozenset(f"torch.{kind}" for kind in ("ones", "zeros", "empty", "rand", "randn", "eye"))  # every positional argument a size
# the first argument read for its size, dtype and device only (``torch.ones_like(s[0])``)
LIKE = frozenset(f"torch.{kind}_like" for kind in ("ones", "zeros", "empty", "rand", "randn", "full", "randint"))


def sized_call(graph: Any, node: cst.Call, qualified: Optional[str], env: Dict[str, Any]) -> Optional[Any]:
    """``torch.ones(*sizes, dtype=..., device=...)`` in ``graph`` (``FunctionValues``): the
    factory's value, its sizes read as ``meta``; None for any other call."""
    if qualified in LIKE and node.args and node.args[0].keyword is None and not node.args[0].star:
        shaped = graph._new("meta", [graph.expression(node.args[0].value, env)], node)
        rest = [graph.expression(arg.value, env) for arg in node.args[1:]]
        return graph._new("call", [shaped, *rest], node, info={"qualified": qualified})
    if qualified not in FACTORIES:
        return None
    sizes = [graph.expression(arg.value, env) for arg in node.args if arg.keyword is None]  # ``*shape(s)`` too
    keywords = [graph.expression(arg.value, env) for arg in node.args if arg.keyword is not None]
    return graph._new("call", [graph._new("meta", sizes, node), *keywords], node, info={"qualified": qualified})
