"""How TML601's fix writes the arguments of ``F.scaled_dot_product_attention`` from the eager
code's expressions (``analysis/attention.py``): a tensor as (…, L, E), a mask negated, an
expression parenthesised where it is combined; and whether a scale factor is a tensor
(``_tensor_attribute``, ``_sliced``), which SDPA's numeric scale cannot be."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import libcst as cst

from torchmemlint.tree import walk

if TYPE_CHECKING:
    from torchmemlint.analysis.values import FunctionValues, Value


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node).strip()


def _bare(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[]) if getattr(node, "lpar", None) else node


def _oriented(node: cst.CSTNode, swap: bool, rank: Optional[int] = None) -> str:
    """``node`` as (…, L, E): ``x.transpose(-2, -1)`` when ``node`` is (…, E, L) (and ``x`` when
    ``node`` already is that transpose: ``transpose(2, 3)`` too when the tensors are ``rank``-D)."""
    node = _bare(node)  # type: ignore[arg-type]
    if not swap:
        return _code(node)
    if type(node) is cst.Attribute and node.attr.value == "mT":
        return _code(node.value)
    if type(node) is cst.Call and _code(node.func) == "torch.transpose" and len(node.args) == 3:  # ``torch.transpose(x, -2, -1)``
        node = cst.Call(cst.Attribute(node.args[0].value, cst.Name("transpose")), node.args[1:])  # type: ignore[arg-type]
    if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "transpose" and len(node.args) == 2:
        dims = sorted(_literal(a.value) for a in node.args)  # type: ignore[type-var]
        if rank is not None and None not in dims:
            dims = sorted(d - rank if d >= 0 else d for d in dims)  # type: ignore[operator]
        if dims == [-2, -1]:
            return _code(node.func.value)
    text = _code(node)
    return "%s.transpose(-2, -1)" % (text if _simple(node) else "(%s)" % text)


def _first(node: Optional[cst.CSTNode]) -> bool:
    """``x[0]``."""
    if type(node) is not cst.Subscript or len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return False
    return _literal(node.slice[0].slice.value) == 0

def _literal(node: cst.BaseExpression) -> Optional[int]:
    if type(node) is cst.Integer:
        return int(node.value)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus and type(node.expression) is cst.Integer:
        return -int(node.expression.value)
    return None


def _order(function: cst.FunctionDef, statement: cst.CSTNode) -> int:
    for position, node in enumerate(walk(function)):
        if node is statement:
            return position
    return -1


def _simple(node: cst.CSTNode) -> bool:
    return type(node) in (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript) or bool(getattr(node, "lpar", None))


def _parenthesised(text: str) -> str:
    return text if text.isidentifier() else "(%s)" % text


def _negated(where: cst.BaseExpression) -> str:
    """The boolean mask that keeps what ``masked_fill(where, -inf)`` does not fill."""
    if type(where) is cst.Comparison and len(where.comparisons) == 1:
        target = where.comparisons[0]
        flipped = {cst.Equal: "!=", cst.NotEqual: "=="}.get(type(target.operator))  # type: ignore[call-overload]
        if flipped:
            return "%s %s %s" % (_code(where.left), flipped, _code(target.comparator))
    if type(where) is cst.UnaryOperation and type(where.operator) is cst.BitInvert:
        return _code(_bare(where.expression)) if not where.expression.lpar else _code(where.expression)
    if type(where) is cst.Call and (_code(where.func) in ("torch.logical_not",)):
        return _code(where.args[0].value)
    text = _code(where)
    return "~%s" % (text if type(where) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript) or where.lpar else "(%s)" % text)


def _tensor_attribute(graph: "FunctionValues", value: "Value") -> Optional[str]:
    """``self.x`` (or ``self.x.exp()``) where ``__init__`` makes ``x`` a tensor (``nn.Parameter``, ``torch.*``)."""
    if graph.classdef is None:
        return None
    for part in [value, *value.inputs]:
        if part.op == "attribute":
            model = graph.file.analysis.class_model(graph.classdef)
            assignment = model.single_assignment(part.info["name"])
            made = assignment.value if assignment is not None else None
            if type(made) is cst.Call and (graph.file.bindings.qualify(made.func) or "").startswith("torch."):
                return _code(value.node) if value.node is not None else part.info["name"]
    return None


def _sliced(value: "Value") -> bool:
    """``self.bias[:, :, :n, :n]``: a slice of something, never a number (a tensor, here)."""
    return value.op == "index" and type(value.node) is cst.Subscript and any(type(e.slice) is cst.Slice for e in value.node.slice)
