"""Code that cannot run, whatever the inputs: no rule reports a node there (the engine drops
such reports, ``engine.lint_source``).

- an ``elif`` whose test implies a test earlier in the same chain: every conjunct of the
  earlier test is a conjunct of this one (ssondo's ``if self.classification_head:`` ...
  ``elif self.classification_head and relu_only:``, whose arm the first one always takes);
- the body of ``if False:`` / ``if 0:`` / ``if None:`` (code switched off by hand) and the
  ``else`` of ``if True:`` / ``if 1:``.

Only tests made of names, attributes, subscripts by constants, comparisons, ``not`` and
literals are compared: they read the same value twice in a row (no call runs between the tests
of one chain). A test with a call, a walrus or an ``await`` may change what the next reads."""

from __future__ import annotations

from bisect import bisect_right
from typing import List, Optional, Tuple

import libcst as cst

from torchmemlint.tree import NodeIndex

_PURE = (
    cst.Name, cst.Attribute, cst.Subscript, cst.SubscriptElement, cst.Index, cst.Comparison,
    cst.ComparisonTarget, cst.UnaryOperation, cst.BooleanOperation, cst.Integer, cst.Float,
    cst.SimpleString, cst.ConcatenatedString, cst.Dot, cst.Not, cst.And, cst.Or, cst.Is, cst.IsNot,
    cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual,
    cst.In, cst.NotIn, cst.Minus, cst.LeftSquareBracket, cst.RightSquareBracket,
    cst.LeftParen, cst.RightParen, cst.SimpleWhitespace, cst.ParenthesizedWhitespace,
    cst.TrailingWhitespace, cst.EmptyLine, cst.Newline, cst.Comment,
)


class DeadArms:
    """The spans (pre-order positions of ``index``) of the arms of a file that cannot run."""

    def __init__(self, module: cst.Module, index: NodeIndex) -> None:
        self.index = index
        spans: List[Tuple[int, int]] = []
        elifs = set()
        for here in index.positions(cst.If):
            node = index.order[here]
            if here in elifs:
                continue  # (read with the chain it belongs to)
            earlier: List[List[cst.BaseExpression]] = []
            while True:
                constant = _constant(node.test)
                if constant is False:
                    spans.append(_span(index, node.body))
                tests = _conjuncts(node.test) if _pure(node.test, index) else None
                if tests is not None and any(all(_has(tests, part) for part in before) for before in earlier):
                    spans.append(_span(index, node.body))
                if tests is not None:
                    earlier.append(tests)
                orelse = node.orelse
                if constant is True and orelse is not None:
                    spans.append(_span(index, orelse))
                    break
                if type(orelse) is not cst.If:
                    break
                node = orelse
                found = index.find(node)
                if found is not None:
                    elifs.add(found)
        spans.sort()
        self.starts = [start for start, _ in spans]
        self.spans = spans

    def holds(self, node: cst.CSTNode) -> bool:
        """Whether ``node`` lies in an arm that cannot run."""
        if not self.spans:
            return False
        here = self.index.find(node)
        if here is None:
            return False
        for start, end in self.spans[: bisect_right(self.starts, here)]:
            if start <= here < end:
                return True
        return False


def _span(index: NodeIndex, block: cst.CSTNode) -> Tuple[int, int]:
    here = index.find(block)
    return (here, index.end[here]) if here is not None else (0, 0)


def _constant(test: cst.BaseExpression) -> Optional[bool]:
    if type(test) is cst.Name and test.value in ("False", "None", "True"):
        return test.value == "True"
    if type(test) is cst.Integer:
        return test.value not in ("0", "0x0", "0o0", "0b0")
    return None


def _pure(test: cst.BaseExpression, index: NodeIndex) -> bool:
    here = index.find(test)
    if here is None:
        return False
    order = index.order
    return all(isinstance(order[p], _PURE) for p in range(here, index.end[here]))


def _conjuncts(test: cst.BaseExpression) -> List[cst.BaseExpression]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.And:
        return _conjuncts(test.left) + _conjuncts(test.right)
    return [test]


def _has(tests: List[cst.BaseExpression], part: cst.BaseExpression) -> bool:
    return any(test.deep_equals(part) for test in tests)
