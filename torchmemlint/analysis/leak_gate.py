"""Whether a file can hold a TML5xx finding at all, read off the node index before the scope
walk (``ScopeWalk``), which is the costly part of the loop analysis and which most model files
need for nothing.

Each test is a necessary condition of one rule, taken from what ``rules/loops.py`` requires
before it reports (the names are the ones ``analysis/training.py`` and ``autograd.py`` use);
each may answer True for a file without findings, never False for a file with one.
``tests/test_gates.py`` lints every example and fixture with these tests on and off.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import (
    _is_false, AUTOGRAD_CALLS, CRITERION_NAME, FUNCTIONAL_LOSSES, MODEL_NAME,
)
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.training import is_eval_name
from torchmemlint.tree import NodeIndex

EVAL_WITHOUT_NO_GRAD = "TML501"
ACCUMULATED_TENSOR = "TML502"
RETAIN_GRAPH = "TML503"
LIST_ON_SELF = "TML504"
TENSOR_ON_SELF = "TML505"

# `def evaluate`, `model.eval()`, `model.train(False)`: all TML501 can start from, in words
_MODE_WORD = re.compile(r"\b(?:eval|train)\b")
_DEF_NAME = re.compile(r"\bdef[\s\\]+(\w+)")
_AUTOGRAD_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in AUTOGRAD_CALLS)
_STEP_ATTRS = frozenset({"backward", "manual_backward", "step"})
_MODE_ATTRS = frozenset({"eval", "train"})


def eval_code_possible(text: str) -> bool:
    """TML501 reports a model call in a function named like evaluation (``is_eval_name``) or
    after a ``.eval()`` / ``.train(False)``: the text names one or the other."""
    return bool(_MODE_WORD.search(text)) or any(
        is_eval_name(name) for name in _DEF_NAME.findall(text)
    )


def may_report(index: NodeIndex, codes: FrozenSet[str]) -> bool:
    """False only when none of the TML5xx ``codes`` can report in the file of ``index``."""
    gate = _Gate(index)
    return (
        RETAIN_GRAPH in codes  # its text gate (`retain_graph`) already passed
        or (EVAL_WITHOUT_NO_GRAD in codes and gate.eval_code())
        or (LIST_ON_SELF in codes and gate.forward_stores(append=True))
        or (TENSOR_ON_SELF in codes and gate.forward_stores(append=False))
        or (ACCUMULATED_TENSOR in codes and gate.accumulating_loop())
    )


class _Gate:
    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self._mode_calls: Optional[List[Tuple[Optional[str], bool]]] = None
        self._renamed: Optional[Dict[str, str]] = None
        self._loss_class: Optional[bool] = None

    def nodes(self, node_type: type):
        order = self.index.order
        return [order[here] for here in self.index.positions(node_type)]

    # TML501: a function named like evaluation, or a switch to evaluation mode: `x.eval()`,
    # `x.train(False)` (``ScopeFacts.last_mode_change``)
    def eval_code(self) -> bool:
        return any(
            is_eval_name(function.name.value) for function in self.nodes(cst.FunctionDef)
        ) or any(to_eval for _, to_eval in self.mode_calls())

    def mode_calls(self) -> List[Tuple[Optional[str], bool]]:
        """Each `x.eval()` / `x.train(...)`: x's dotted name, and whether it switches to
        evaluation."""
        if self._mode_calls is None:
            self._mode_calls = []
            for call in self.nodes(cst.Call):
                func = call.func
                if not isinstance(func, cst.Attribute) or func.attr.value not in _MODE_ATTRS:
                    continue
                if func.attr.value == "eval":
                    if not call.args:
                        self._mode_calls.append((dotted_name(func.value), True))
                else:
                    to_eval = bool(call.args) and _is_false(call.args[0].value)
                    self._mode_calls.append((dotted_name(func.value), to_eval))
        return self._mode_calls

    # TML504 / TML505: `self.<name>.append(...)` / `self.<name> = ...` in a method `forward`
    def forward_stores(self, append: bool) -> bool:
        index = self.index
        for here in index.positions(cst.FunctionDef):
            function = index.order[here]
            if function.name.value != "forward" or index.scope[here] < 0:
                continue
            if type(index.order[index.scope[here]]) is not cst.ClassDef:
                continue  # not a method
            for node in index.of_types(here, (cst.Call,) if append else (
                    cst.Assign, cst.AnnAssign, cst.AugAssign)):
                if append:
                    func = node.func
                    if (
                        isinstance(func, cst.Attribute) and func.attr.value == "append"
                        and _on_self(func.value)
                    ):
                        return True
                elif any(_on_self(target) for target in _targets(node)):
                    return True
        return False

    # TML502: a loop that both accumulates (`+=`, `-=`, `x = x + ...`, `.append(...)`) and
    # computes (runs a model, steps, or computes a loss: `ScopeFacts.loop_computes`)
    def accumulating_loop(self) -> bool:
        # Only outermost loops: an inner loop's nodes are all in the loop around it.
        index = self.index
        outer_end = -1
        for here in sorted(index.positions(cst.For) + index.positions(cst.While)):
            if here < outer_end:
                continue
            outer_end = index.end[here]
            if self._accumulates(here) and self._computes(here):
                return True
        return False

    def _accumulates(self, here: int) -> bool:
        index = self.index
        for node in index.of_types(here, (cst.AugAssign, cst.BinaryOperation, cst.Call)):
            if type(node) is cst.AugAssign:
                if isinstance(node.operator, (cst.AddAssign, cst.SubtractAssign)):
                    return True
            elif type(node) is cst.BinaryOperation:
                if isinstance(node.operator, cst.Add):
                    return True
            elif isinstance(node.func, cst.Attribute) and node.func.attr.value == "append":
                return True
        return False

    def _computes(self, here: int) -> bool:
        # what `.eval()` / `.train(...)` is called on is a model (``ScopeFacts._model_names``)
        switched = {name for name, _ in self.mode_calls() if name is not None}
        renamed = self.renamed()
        for call in self.index.of_types(here, (cst.Call,)):
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value in _STEP_ATTRS:
                return True
            dotted = dotted_name(func)
            if dotted is None:
                continue
            if dotted.endswith(".forward"):
                dotted = dotted[: -len(".forward")]
            if dotted in switched:
                return True
            last = dotted.rsplit(".", 1)[-1]
            if "." not in dotted:
                last = renamed.get(last, last)
            if (
                MODEL_NAME.match(last) or CRITERION_NAME.search(last)
                or last.endswith("_loss") or last in FUNCTIONAL_LOSSES
                or last in _AUTOGRAD_NAMES or self.loss_class()
            ):
                return True
        return False

    def renamed(self) -> Dict[str, str]:
        """`from m import name as alias`: alias -> name (a call of the alias is one of name)."""
        if self._renamed is None:
            self._renamed = {}
            for node in self.nodes(cst.ImportFrom):
                if isinstance(node.names, cst.ImportStar):
                    continue
                for alias in node.names:
                    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
                        original = dotted_name(alias.name) or ""
                        self._renamed[alias.asname.name.value] = original.rsplit(".", 1)[-1]
        return self._renamed

    def loss_class(self) -> bool:
        """The file names an `nn.*Loss` class: a name bound to one of its instances computes
        a loss whatever it is called (`ScopeFacts._loss_instances`)."""
        if self._loss_class is None:
            self._loss_class = any(
                node.value.endswith("Loss") for node in self.nodes(cst.Name)
            ) or any(
                node.attr.value.endswith("Loss") for node in self.nodes(cst.Attribute)
            )
        return self._loss_class


def _on_self(node: cst.BaseExpression) -> bool:
    """`self.<name>` (``training._self_attribute``)."""
    return (
        isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name)
        and node.value.value == "self"
    )


def _targets(node: cst.CSTNode):
    if isinstance(node, cst.Assign):
        return [target.target for target in node.targets]
    return [node.target]
