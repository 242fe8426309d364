"""The statements an SDPA fix of an attention site removes (``analysis/attention.py``): those that
only compute its chain (the scores, the mask fills, the softmax, the dropout), each ``if`` that
only applies a mask, and the statements whose values only feed the chain. ``self`` below is the
attention question of one product (``attention._Question``): its graph, product, chain, texts and
the reasons it gives no fix."""

from __future__ import annotations

from typing import Any, Dict, Optional

import libcst as cst

from torchmemlint.analysis.attention_text import _order
from torchmemlint.tree import path_to, walk


def removable_statements(self: Any, site: Any) -> None:
    """The statements that only compute the chain (SDPA replaces them)."""
    graph, product = self.graph, self.product
    inside = {id(node) for node in walk(product.node)}  # type: ignore[arg-type]
    removable: Dict[int, cst.CSTNode] = {}
    for value in self.chain.values():
        if value.function is not graph.function:
            self.reasons.append("part of the computation is in another function")
            return
        if value.op == "join":
            continue
        statement = value.statement
        if statement is product.statement:
            if value.node is not None and id(value.node) in inside:
                continue
            self.reasons.append("the statement of the product with v also computes other things")
            return
        if type(statement) is not cst.SimpleStatementLine:
            self.reasons.append("the scores are computed in a compound statement")
            return
        for small in statement.body:
            result = graph.results.get(id(small))
            if result is None or id(result) not in self.chain:
                self.reasons.append("a statement that computes the scores also does other things")
                return
        outer = _outer_if(self, statement)
        if self.reasons:
            return
        removable[id(outer or statement)] = outer or statement
        removable[id(statement)] = outer or statement
    if not _readers(self, removable):
        return
    kept = {id(s): s for s in removable.values()}
    site.removable = sorted(kept.values(), key=lambda s: _order(graph.function, s))

def _readers(self: Any, removable: Dict[int, cst.CSTNode]) -> bool:
    """Whether no statement that stays reads a value of the chain (``n = attn.shape[-1]``);
    a statement whose values only feed the chain (``max_neg = -torch.finfo(s.dtype).max``)
    goes with it."""
    graph, product = self.graph, self.product
    read = {id(graph.names.get(id(n))) for text in self.texts for n in walk(text) if type(n) is cst.Name}  # what the SDPA call reads
    for value in list(self.chain.values()):
        for consumer in graph.consumers(value):
            if isinstance(consumer, str):
                if consumer == "test":
                    self.reasons.append("an `if` tests the scores or the weights")
                    return False
                continue
            if id(consumer) in self.chain or consumer is product or consumer.op == "join":
                continue
            statement = consumer.statement
            if statement is product.statement or id(statement) in removable:
                continue
            if type(statement) is cst.SimpleStatementLine and all(
                id(small) in graph.results and all(
                    not isinstance(c, str) and id(c) in self.chain for c in graph.consumers(graph.results[id(small)])
                ) for small in statement.body
            ):
                if any(id(graph.results[id(small)]) in read for small in statement.body):  # ``causal = torch.ones(*s.shape[-2:])``
                    self.reasons.append("the mask is made from the scores' sizes; the fix removes the scores")
                    return False
                removable[id(statement)] = statement
                continue
            self.reasons.append("a statement that stays reads the scores or the weights")
            return False
    return True

def _outer_if(self: Any, statement: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The ``if`` (without ``else``) a mask statement is in, when the product is not in it."""
    path = path_to(self.graph.function, statement) or []
    product_path = {id(n) for n in (path_to(self.graph.function, self.product.statement) or [])}  # type: ignore[arg-type]
    for node in path:
        if type(node) is cst.If and id(node) not in product_path:
            body = node.body.body if type(node.body) is cst.IndentedBlock else []
            if node.orelse is not None or len(body) != 1:
                self.reasons.append("the `if` that applies the mask runs other statements too")
            return node
    return None
