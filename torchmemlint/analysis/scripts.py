"""What a training script shows about itself, for the TML6xx rules: does the file train
(``training_evidence``), does it mention mixed precision (``uses_mixed_precision``), and where
are the ``.backward()`` calls of its loops (``loop_backward_calls``)."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.autograd import ScopeWalk
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import nodes_of


# -- does the file train? ------------------------------------------------------------------------
TRAINER_CLASSES = ("Trainer", "SFTTrainer", "Seq2SeqTrainer", "Accelerator")


def training_evidence(module: cst.Module) -> Optional[str]:
    """What in the file shows it trains a model: a ``.backward()`` call, an optimizer
    ``.step()``, a ``*Trainer(...)`` / ``trainer.train()`` / ``fit(...)``, or a Lightning
    ``training_step``; None when nothing does."""
    for node in nodes_of(module, cst.FunctionDef, cst.Call):
        if type(node) is cst.FunctionDef:
            if node.name.value == "training_step":
                return "`training_step`"
            continue
        func = node.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
        if name is None:
            continue
        if name == "backward":
            return "`.backward()`"
        if name == "step" and type(func) is cst.Attribute:
            owner = dotted_name(func.value) or ""
            if "optim" in owner.lower() or owner.endswith(("opt", "optimizer")):
                return "`%s.step()`" % owner
        if name.endswith(TRAINER_CLASSES):
            return "`%s(...)`" % name
        if name in ("train", "fit") and type(func) is cst.Attribute and not node.args:
            owner = dotted_name(func.value) or ""
            if "trainer" in owner.lower():
                return "`%s.%s()`" % (owner, name)
        if name == "fit" and type(func) is cst.Attribute and "trainer" in (dotted_name(func.value) or "").lower():
            return "`%s.fit(...)`" % dotted_name(func.value)
    return None


# -- mixed precision -----------------------------------------------------------------------------
MIXED_PRECISION_MARKERS = (
    "autocast", "GradScaler", "bfloat16", "float16", ".half()", "fp16", "bf16", "precision",
    "cuda.amp", "torch.amp", "apex",
)


def uses_mixed_precision(text: str) -> Optional[str]:
    """The first mixed-precision marker the file's text mentions, or None."""
    for marker in MIXED_PRECISION_MARKERS:
        if marker in text:
            return marker
    return None


def loop_backward_calls(scopes: ScopeWalk) -> List[cst.Call]:
    """``x.backward()`` calls inside a ``for``/``while`` loop of their own function (the shared
    scope walk's loops): the training steps of the file."""
    return [
        call.node
        for scope in scopes.scopes
        for call in scope.calls
        if call.attr == "backward" and call.ctx.loops
    ]
