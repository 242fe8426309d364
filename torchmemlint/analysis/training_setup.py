"""How a file sets up training, read once per file from its node index: where it asks
transformers for the eager attention implementation (``eager_attention_settings``) and the
training steps it runs without mixed precision (``float32_training_steps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.scripts import loop_backward_calls, training_evidence, uses_mixed_precision

# The keywords, dict keys and config attributes that choose transformers' attention.
ATTN_IMPLEMENTATION = frozenset({"attn_implementation", "_attn_implementation"})


@dataclass(frozen=True)
class EagerSetting:
    """A ``"eager"`` string given as the attention implementation: a call's keyword, a dict
    item or a config attribute assigned."""

    value: cst.SimpleString


@dataclass(frozen=True)
class EagerSettings:
    evidence: Optional[str]  # what shows the file trains (None: nothing does, no setting is kept)
    settings: List[EagerSetting]


def eager_attention_settings(context) -> EagerSettings:  # type: ignore[no-untyped-def]
    """The file's ``attn_implementation="eager"`` settings, in source order, when the file
    trains (a call that also asks ``output_attentions=True`` wants the weights: not kept)."""
    return context.shared("eager-attention-settings", lambda: _eager_settings(context))


def _eager_settings(context) -> EagerSettings:  # type: ignore[no-untyped-def]
    module = context.module
    evidence = training_evidence(module)
    if evidence is None:
        return EagerSettings(None, [])
    index = context.analysis.index
    order = index.order
    positions = sorted(
        [*index.positions(cst.Call), *index.positions(cst.Dict), *index.positions(cst.Assign)]
    )
    found: List[EagerSetting] = []
    for here in positions:
        node = order[here]
        for value in _attention_values(node):
            if _string(value) == "eager":
                found.append(EagerSetting(value))  # type: ignore[arg-type]
    return EagerSettings(evidence, found)


def _attention_values(node: cst.CSTNode) -> List[cst.BaseExpression]:
    """The values ``node`` gives the attention implementation."""
    if type(node) is cst.Call:
        if any(
            arg.keyword is not None and arg.keyword.value == "output_attentions"
            and type(arg.value) is cst.Name and arg.value.value == "True"
            for arg in node.args
        ):
            return []
        return [arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value in ATTN_IMPLEMENTATION]
    if type(node) is cst.Dict:
        return [
            element.value for element in node.elements
            if type(element) is cst.DictElement and _string(element.key) in ATTN_IMPLEMENTATION
        ]
    assert type(node) is cst.Assign
    return [
        node.value for target in node.targets
        if type(target.target) is cst.Attribute and target.target.attr.value in ATTN_IMPLEMENTATION
    ]


def _string(node: cst.BaseExpression) -> Optional[str]:
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def float32_training_steps(context) -> List[cst.Call]:  # type: ignore[no-untyped-def]
    """The ``.backward()`` calls in loops (``scripts.loop_backward_calls``) of a file that
    mentions no mixed precision (``scripts.uses_mixed_precision``), each once, in source order."""
    return context.shared("float32-training-steps", lambda: _float32_steps(context))


def _float32_steps(context) -> List[cst.Call]:  # type: ignore[no-untyped-def]
    analysis = context.analysis
    text = analysis.text
    if text is None:
        text = context.module.code
    if uses_mixed_precision(text) is not None:
        return []
    index = analysis.index
    found = {}
    for call in loop_backward_calls(analysis.scopes):
        here = index.find(call)
        if here is not None:
            found[here] = call
    return [found[here] for here in sorted(found)]
