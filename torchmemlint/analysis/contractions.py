"""Which functions of a file may hold an eager attention (``analysis/attention.py`` asks the
value graph of these only): one that mentions a contraction (``@``, ``matmul``, ``bmm``, ``mm``,
an ``einsum`` or an alias of one, ``baddbmm``), or one that calls a same-file function or method
that does (``self._attn(q, k, v)``: its graph runs the helper with what the caller passes)."""

from __future__ import annotations

import re
from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.attribute_calls import held_class

from torchmemlint.analysis.vocabulary import whole_words
from torchmemlint.tree import nodes_of, walk

CONTRACTIONS = ("matmul", "bmm", "einsum")
MATRIX_PRODUCT = "mm"  # ``torch.mm``, ``x.mm(y)``: the whole name (a substring of many)


def calls_contracting_helper(graphs, function: cst.FunctionDef, classdef: Optional[cst.ClassDef], mentions: Dict[int, bool]) -> bool:  # type: ignore[no-untyped-def]
    """Does ``function`` call a same-file function or method (``self._attn(q, k, v)``) that
    mentions a contraction? Its value graph runs that helper with what it passes (the keys
    laid out by the caller: ``self.split_heads(key, k=True)``)."""
    first = function.params.params[0].name.value if function.params.params else None
    for node in walk(function):
        if type(node) is not cst.Call:
            continue
        func, helper = node.func, None
        if type(func) is cst.Name:
            helper = graphs.function_named(func.value)
        elif type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == first and classdef is not None:
            helper = graphs.method(classdef, func.attr.value, inherited=True)
            if helper is None and any(mentions_contraction(forward, mentions) for forward in _held_forwards(graphs, classdef, func.attr.value)):
                return True  # ``self.pair_scores(q, k)``: a module of the file whose forward contracts
        if helper is not None and helper is not function and mentions_contraction(helper, mentions):
            return True
    return False


def _held_forwards(graphs, classdef: cst.ClassDef, name: str) -> List[cst.FunctionDef]:  # type: ignore[no-untyped-def]
    """The ``forward`` of each class, of the file or of another project file
    (``attribute_calls.held_class``), that ``self.<name>`` is built as
    (``attribute_calls._held_module_call`` runs them)."""
    forwards = []
    for assignment in graphs.analysis.class_model(classdef).assignments.get(name, []):
        made = assignment.value.func if type(assignment.value) is cst.Call else None
        home, held = graphs, graphs._classes.get(made.value) if type(made) is cst.Name else None
        if held is None and made is not None and (defined := held_class(graphs, made)) is not None:
            home, held = defined
        forward = home.method(held, "forward", inherited=True) if held is not None and held is not classdef else None
        if forward is not None:
            forwards.append(forward)
    return forwards


def mentions_contraction(function: cst.FunctionDef, mentions: Optional[Dict[int, bool]] = None) -> bool:
    if mentions is None:
        return _mentioned(function)
    if id(function) not in mentions:
        mentions[id(function)] = _mentioned(function)
    return mentions[id(function)]


def _mentioned(function: cst.FunctionDef) -> bool:
    # Only names and binary operations are read (``nodes_of``: off the index's positions of
    # those types, not node by node): an attribute's name (``x.matmul``, ``torch.bmm``) is a
    # ``Name`` below the ``Attribute`` and answers the same test.
    names = set()
    for node in nodes_of(function, cst.Name, cst.BinaryOperation):
        if type(node) is cst.Name:
            names.add(node.value)  # type: ignore[attr-defined]
        elif type(node.operator) is cst.MatrixMultiply:  # type: ignore[attr-defined]
            return True
    if "contract" in names or MATRIX_PRODUCT in names:
        return True
    joined = "\0".join(names)  # (one scan per word; no name holds the separator)
    return any(word in joined for word in CONTRACTIONS)  # ``einsum``, an alias ``einops_einsum``, ``baddbmm``


def may_hold_softmax(text: str) -> bool:
    """False only when ``text`` cannot hold a softmax the value graph sees: one called by name
    (``F.softmax``, ``x.softmax``, ``nn.Softmax``) or one written out (``e / e.sum(...)`` of
    ``e = x.exp()``, ``analysis/compound.py``)."""
    return "softmax" in text or "Softmax" in text or (
        any(True for _ in whole_words(_EXP, text)) and any(True for _ in whole_words(_SUM, text))
    )


# the words of a softmax written out, whole (`expand`, `expected`, `summary` are not them)
_EXP = re.compile(r"exp\b")
_SUM = re.compile(r"sum\b")
