"""Einsum specs as label lists: ``"b h i d, b h j d -> b h i j"`` (einops: names separated
by spaces) or ``"bhid,bhjd->bhij"`` (torch: one letter each), ``...`` kept as one label; and
``einops.rearrange`` patterns as axis groups (a pure permutation is an axis relabelling); the
text of a string or constant f-string (``string_value``), the number ``float`` makes of it
(``float_text``) and that a literal writes (``literal_number``)."""

from __future__ import annotations

import math
from typing import Any, List, Optional, Sequence, Tuple

import libcst as cst


def parse_spec(spec: str) -> Optional[Tuple[List[List[str]], List[str]]]:
    """``"b h i d, b h j d -> b h i j"`` / ``"bhid,bhjd->bhij"`` -> label lists (``...`` kept)."""
    if spec.count("->") != 1:
        return None
    inputs, output = spec.split("->")
    parsed = [_labels(part) for part in inputs.split(",")]
    out = _labels(output)
    if out is None or any(p is None for p in parsed):
        return None
    return parsed, out  # type: ignore[return-value]


def _labels(part: str) -> Optional[List[str]]:
    part = part.strip().replace("…", "...")
    if " " in part:  # einops: space-separated names
        labels = part.split()
    else:
        labels, rest = [], part
        while rest:
            if rest.startswith("..."):
                labels.append("...")
                rest = rest[3:]
            else:
                labels.append(rest[0])
                rest = rest[1:]
    if any(not (label == "..." or label.isidentifier()) for label in labels) or len(set(labels)) != len(labels):
        return None
    return labels


def spec_axes(value: Any, spec: Sequence[str]) -> Optional[List[Any]]:
    """The known axes of ``value`` (a value graph ``Value``) at the positions of ``spec``
    (None where not known)."""
    if value.axes is None:
        return None
    if "..." in spec:
        start = spec.index("...")
        tail = len(spec) - start - 1
        return [None] * (start + 1) + [value.axis(position - tail) for position in range(tail)]
    return [value.axis(position - len(spec)) for position in range(len(spec))]


def parse_rearrange(pattern: str) -> Optional[Tuple[List[List[str]], List[List[str]]]]:
    """``einops.rearrange``'s ``"b c (h w) -> b (h w) c"`` -> the axis groups of each side
    (``[["b"], ["c"], ["h", "w"]]``, ...); None for ``...``, anonymous axes (``1``) or names
    that are not the same on both sides."""
    if pattern.count("->") != 1:
        return None
    sides = []
    for part in pattern.split("->"):
        groups: List[List[str]] = []
        group: Optional[List[str]] = None
        for token in part.replace("(", " ( ").replace(")", " ) ").split():
            if token == "(":
                if group is not None:
                    return None
                group = []
            elif token == ")":
                if not group:
                    return None
                groups.append(group)
                group = None
            elif not token.isidentifier():
                return None
            elif group is not None:
                group.append(token)
            else:
                groups.append([token])
        if group is not None:
            return None
        sides.append(groups)
    names = [sorted(name for g in side for name in g) for side in sides]
    if names[0] != names[1] or len(set(names[0])) != len(names[0]):
        return None
    return sides[0], sides[1]


def rearranged(pattern: str) -> Optional[Tuple[Optional[List[int]], bool]]:
    """What ``rearrange(x, pattern)`` does to the axes: (the permutation, when every axis stays
    itself: ``"b i j -> b j i"`` is ``permute(0, 2, 1)``; else None, and whether the last two
    output axes come in the input's opposite order: ``"b c h w -> b (h w) c"`` moves the
    features after the positions, as a transpose would). None when the pattern is not known."""
    parsed = parse_rearrange(pattern)
    if parsed is None:
        return None
    source, target = parsed
    if all(len(group) == 1 for group in source + target):
        order = [group[0] for group in source]
        return [order.index(group[0]) for group in target], False
    position = {name: index for index, group in enumerate(source) for name in group}
    swapped = len(target) >= 2 and all(
        position[late] < position[early] for late in target[-1] for early in target[-2]
    )
    return None, swapped


def float_text(text: Any) -> Optional[float]:
    """What ``float(text)`` gives for a string constant, None when it raises or ``text`` is not one."""
    try:
        number = float(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return None if number is None or math.isnan(number) else number


def literal_number(node: cst.BaseExpression) -> Optional[float]:
    """The number a literal (``2``, ``-1e9``) writes, None for anything else."""
    if type(node) in (cst.Integer, cst.Float):
        return float(node.evaluated_value)  # type: ignore[attr-defined]
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:  # type: ignore[attr-defined]
        inner = literal_number(node.expression)  # type: ignore[attr-defined]
        return None if inner is None else -inner
    return None


def int_of(number: Optional[float]) -> Optional[int]:
    """``number`` as an int when it is a finite whole number."""
    return int(number) if isinstance(number, float) and math.isfinite(number) and number == int(number) else None


def string_value(node: Any, env: Any, values: Any) -> Optional[str]:
    """A string's value (an einsum spec, a rearrange pattern); an f-string's when each part is a
    constant (``f"b {h} i d"`` with ``h = "h"``), read by ``values`` (the function's value graph)
    in ``env``."""
    choices = string_choices(node, env, values)
    return choices[0] if choices is not None and len(choices) == 1 else None


def string_info(node: Any, env: Any, values: Any) -> dict:
    """What a string constant's value says: its ``text``, or, for an f-string one of whose parts
    is chosen by an ``if`` between constants (``kv = "b j d" if k.ndim == 3 else "b h j d"``,
    then ``f"b h i d, {kv} -> b h i j"``), the texts it can be (``choices``) and no text."""
    choices = string_choices(node, env, values)
    if choices is not None and len(choices) > 1:
        return {"text": None, "choices": choices}
    return {"text": choices[0] if choices else None}


CHOICES = 4  # the most texts an f-string is followed as


def string_choices(node: Any, env: Any, values: Any) -> Optional[List[str]]:
    """The texts a string can be: one for a string or an f-string of constants; each an ``if``
    between constant strings can give a part of an f-string (at most ``CHOICES``); None when a
    part is not known."""
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return [value] if isinstance(value, str) else None
    if type(node) is cst.ConcatenatedString:
        return _product([string_choices(node.left, env, values), string_choices(node.right, env, values)])  # type: ignore[arg-type]
    if type(node) is cst.FormattedString:
        parts: List[Optional[List[str]]] = []
        for part in node.parts:
            if type(part) is cst.FormattedStringText:
                parts.append([part.value])
            else:
                parts.append(_texts(values.expression(part.expression, env)))  # type: ignore[attr-defined]
        return _product(parts)
    return None


def _texts(value: Any) -> Optional[List[str]]:
    """The texts a value of the graph can be: a constant's, or each arm's of a join of constants."""
    text = value.info.get("text")
    if isinstance(text, str):
        return [text]
    if value.op == "join" and value.inputs and all(isinstance(arm.info.get("text"), str) for arm in value.inputs):
        return list(dict.fromkeys(arm.info["text"] for arm in value.inputs))
    return None


def _product(parts: List[Optional[List[str]]]) -> Optional[List[str]]:
    texts = [""]
    for part in parts:
        if part is None:
            return None
        texts = [text + choice for text in texts for choice in part]
        if len(texts) > CHOICES:
            return None
    return texts


def einsum_value(graph: Any, node: cst.Call, positional: List[Any], name: str) -> Any:
    """The value of ``torch.einsum(spec, a, b)``, ``torch.einsum(spec, [a, b])`` (the operands as
    one list or tuple, as torch also takes them) or ``einops.einsum(a, b, spec)`` in ``graph``
    (a ``values.FunctionValues``): a ``contract`` of two operands, else a plain call."""
    args = [a.value for a in node.args if a.keyword is None]
    texts = [v.info.get("text") or _chosen(v) for v in positional]
    if len(args) != len(positional):  # ``op = partial(torch.einsum, "bix,iox->box")`` ... ``op(x, w)``: not the call's own
        return graph._new("call", positional, node, info={"qualified": name})
    if len(positional) == 3 and isinstance(texts[0], str):  # torch.einsum(spec, a, b)
        spec, (left, right), operands = texts[0], positional[1:], (args[1], args[2])
    elif (
        len(positional) == 2 and isinstance(texts[0], str) and positional[1].op == "tuple"
        and len(positional[1].inputs) == 2 and type(args[1]) in (cst.List, cst.Tuple)
        and not any(type(e) is cst.StarredElement for e in args[1].elements)  # type: ignore[attr-defined]
    ):
        elements, listed = args[1].elements, positional[1]  # type: ignore[attr-defined]
        spec, (left, right), operands = texts[0], listed.inputs, (elements[0].value, elements[1].value)
        graph.uses[:] = [u for u in graph.uses if u.consumer is not listed]  # the list only carries them to the einsum
        graph._consumers = None
    elif len(positional) == 3 and isinstance(texts[2], str):  # einops.einsum(a, b, spec)
        spec, (left, right), operands = texts[2], positional[:2], (args[0], args[1])
    else:
        return graph._new("call", positional, node, info={"qualified": name})
    parsed = parse_spec(spec)  # type: ignore[arg-type]
    if parsed is None or len(parsed[0]) != 2:
        return graph._new("call", positional, node, info={"qualified": name})
    (lspec, rspec), out = parsed
    made = graph._contract(left, right, node, (lspec, rspec, out), "einsum", operands)
    choices = next((_choices(v) for v in positional if _choices(v) and _chosen(v) == spec), None)
    if choices:
        made.info["choices"] = choices  # the spec is one of these, chosen at run time (modelled by the fullest)
    return made


def _choices(value: Any) -> Optional[List[str]]:
    """The texts a spec can be: an f-string's ``choices``, or the arms of an ``if`` between
    constant specs (``spec = "bhid,bjd->bhij" if shared else "bhid,bhjd->bhij"``)."""
    if value.info.get("choices"):
        return value.info["choices"]
    texts = _texts(value) if value.op == "join" else None
    return texts if texts is not None and len(texts) > 1 else None


def _chosen(value: Any) -> Optional[str]:
    """For a spec that is one of several texts (``string_info``'s ``choices``: an ``if`` picks
    the keys' layout, ``"b j d"`` for one head of keys shared by all, else ``"b h j d"``), the one
    with the most labels, when every one is a contraction of two operands with the same output
    and the same contracted labels (each reads the same scores; the fullest names every axis)."""
    choices = _choices(value)
    parsed = [parse_spec(choice) for choice in choices or ()]
    if not parsed or any(p is None or len(p[0]) != 2 for p in parsed):
        return None
    shapes = {(tuple(p[1]), frozenset((set(p[0][0]) & set(p[0][1])) - set(p[1]))) for p in parsed}  # type: ignore[index]
    if len(shapes) != 1:
        return None
    sizes = [sum(len(labels) for labels in p[0]) for p in parsed]  # type: ignore[index]
    return choices[sizes.index(max(sizes))]
