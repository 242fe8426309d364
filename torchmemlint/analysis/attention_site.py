"""What TML601 knows of one eager attention (``analysis/attention.py`` finds them): where it is,
what ``F.scaled_dot_product_attention`` needs to compute the same thing, or why no such call can
be written (``reason``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.tree import walk


@dataclass
class AttentionSite:
    function: cst.FunctionDef
    product: cst.CSTNode  # the expression that contracts the weights with v
    statement: Optional[cst.CSTNode]
    query: Optional[str] = None  # SDPA's arguments, as code
    key: Optional[str] = None
    value: Optional[str] = None
    operands: Tuple[Optional[cst.CSTNode], ...] = (None, None, None)  # the q, k, v expressions
    scale: Optional[str] = None  # None: no scale was applied, so 1.0
    mask: Optional[str] = None
    dropout: Optional[str] = None
    transposed: bool = False  # the product is SDPA's output with its last two axes swapped
    removable: List[cst.CSTNode] = field(default_factory=list)  # statements SDPA replaces
    reason: str = ""  # why no SDPA call can be written ("" when one can)
    has_dropout: bool = False
    has_mask: bool = False
    rank: Optional[int] = None  # the tensors' rank when the code or the value graph says (ranks.py)
    anchor: Optional[cst.CSTNode] = None  # where it is reported: the product, or the call of the helper holding it

    @property
    def at(self) -> cst.CSTNode:
        return self.anchor if self.anchor is not None else self.product

    @property
    def fixable(self) -> bool:
        return not self.reason


def chain_deleted(graph: Any, chain: Dict[int, Any]) -> bool:
    """Does a ``del`` of the function name a value of ``chain`` (the values of one attention,
    by id, bound to it there)? ``graph``: the function's ``values.FunctionValues``."""
    for line in walk(graph.function):
        if type(line) is not cst.SimpleStatementLine or not any(type(small) is cst.Del for small in line.body):
            continue
        before = graph.snapshots.get(id(line), {})
        for small in line.body:
            names = [n.value for n in walk(small) if type(n) is cst.Name] if type(small) is cst.Del else []
            if any(id(before.get(name)) in chain for name in names):
                return True
    return False
