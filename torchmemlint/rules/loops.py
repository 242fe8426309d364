"""TML5xx: training and evaluation loop leaks.

The checks replay each scope over the shared analysis (``context.analysis.scopes``: autograd
state, loops and events of every scope; ``ModuleValues``: what its values are) once per file;
each rule reports from ``visit_Module`` (``FileContext.report`` finds the statement: noqa works).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, List, Optional, Set, Tuple, Union

import libcst as cst

from torchmemlint.analysis.autograd import AssignEvent, CallEvent, Frame, _is_false, _is_true
from torchmemlint.analysis.held_out_loops import held_out_loop
from torchmemlint.analysis.loop_items import graph_from_before
from torchmemlint.analysis.plain_modules import plainly_a_module
from torchmemlint.analysis.callers import (
    borrowed_loop, borrowed_model, eval_by_callers, model_calls_under, only_sinks_reached, opened_by_training_caller, output_kept,
    loss_terms_loop, reduced_after, returned_for_backward, runs_model, switched_back, trained_by_callers,
)
from torchmemlint.analysis import leak_gate
from torchmemlint.analysis.leak_gate import ACCUMULATED_TENSOR, EVAL_WITHOUT_NO_GRAD, LIST_ON_SELF, RETAIN_GRAPH, TENSOR_ON_SELF
from torchmemlint.analysis.importer_modes import decided_elsewhere, run_without_grad_by_importers
from torchmemlint.analysis.backward_names import backpropagated_term, backpropagated_with, trained_after_its_loop, validated_after_step
from torchmemlint.analysis.evaluated_methods import evaluated_method, in_evaluation
from torchmemlint.analysis.step_hooks import kept_across_steps, returned_as_loss, STEP_HOOKS
from torchmemlint.analysis.feeds import collected_over_loader, eval_method_over_loader, fed_by, iterates_loader
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.folds import assigned_terms as _fold_terms
from torchmemlint.analysis.flags import flag_test
from torchmemlint.analysis.differentiated_outputs import gradients_wanted
from torchmemlint.analysis.model_helpers import helper_run_model
from torchmemlint.analysis.held_models import held_model
from torchmemlint.analysis.module_calls import as_model, called_in_file, opened_by_caller, callers_elsewhere, called_in_project, called_module, called_value, library_hook, loss_module, module_method, part_of_forward, runs_no_module
from torchmemlint.analysis.module_values import ModuleValues
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.sinks import DETACHING
from torchmemlint.analysis.test_suites import suite_test
from torchmemlint.analysis.rendering import render_expression, shortened
from torchmemlint.analysis.training import _buffers, is_eval_name, _keyed_list, _keyword, Kind, ScopeFacts, _self_attribute, _self_attribute_name, Value
from torchmemlint.analysis.accumulator_uses import _float_use, _list_use, uses_allow
from torchmemlint.findings import Applicability
from torchmemlint.rules.loop_docs import TML501_DOCUMENTATION, TML502_DOCUMENTATION
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule
from torchmemlint.rules.loop_fixes import no_grad_fix


class _LoopRule(Rule):
    """Reports what the shared loop analysis found for this rule's code, all at once from
    ``visit_Module`` (the engine's walk then meets no expression for these rules)."""

    # the statements or calls a finding of this rule is keyed by
    flagged: Tuple[type, ...] = (cst.Call,)
    # A helper module of a training project need not name torch (`def validate(loader, model,
    # criterion)` importing only tqdm): read unless it imports another array framework.
    needs_torch = False

    @classmethod
    def may_apply(cls, text: str) -> bool:
        return super().may_apply(text) and leak_gate.torch_code_possible(text)

    def visit_Module(self, node: cst.Module) -> None:
        findings = self.context.shared(
            "loops", lambda: analyse(self.context.analysis, self.context.codes)
        )
        pending = findings[self.code]
        if not pending:
            return
        # Each finding is keyed by its node; in source order, as the traversal met them.
        index = self.context.analysis.index
        placed = []
        for found in pending.values():
            here = index.find(found.node)
            if here is not None and type(found.node) in self.flagged:
                placed.append((here, found))
        for _, found in sorted(placed, key=lambda pair: pair[0]):
            self.report(found.node, found.message, found.fix)


class EvalWithoutNoGrad(_LoopRule):
    __doc__ = TML501_DOCUMENTATION  # its documentation: rules/loop_docs.py

    code = "TML501"
    needs_project = True  # a model class may come from another file (`from models import *`)
    # ... and a method of a module class may be called by a file importing it
    project_facts = frozenset({"imports", "importer_texts"})
    name = "eval-without-no-grad"
    summary = "The model is called in evaluation code with autograd on"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)

    @classmethod
    def may_apply(cls, text: str) -> bool:
        # a function named like evaluation, or the word `eval` / `train` (a mode switch)
        # (or a strong sink: a module's output only saved, printed or made a number)
        return super().may_apply(text) and (  # (the cheapest test first: one of three suffices)
            leak_gate.sink_code_possible(text) or leak_gate.eval_code_possible(text)
            or leak_gate.loader_comprehension_possible(text)
        )


class AccumulatedTensor(_LoopRule):
    __doc__ = TML502_DOCUMENTATION  # its documentation: rules/loop_docs.py

    code = "TML502"
    needs_project = True  # which `self.model` is a module may depend on a class in another file
    project_facts = frozenset({"imports"})
    name = "tensor-accumulated-across-iterations"
    summary = "A loss or model output tensor accumulated across loop iterations keeps its graph"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)

    flagged = (cst.Call, cst.AugAssign, cst.Assign)


class RetainGraphWithoutSecondBackward(_LoopRule):
    """
    ## What it does
    Flags `loss.backward(retain_graph=True)` and `torch.autograd.backward(loss,
    retain_graph=True)` in a loop when nothing else in that loop
    backpropagates (no other `backward`, `autograd.grad` or `autograd.backward`) and the
    tensor it backpropagates is computed in the same iteration (not an item of losses made
    before the loop, `for name, loss in losses.items()`, `loss = losses[name]`), from nothing
    a call before the loop made and the loop never rebinds (`acti = model.activations(x)`, then
    one backward per layer of `acti`: each goes through that graph again, the retain is needed).

    ## Why is this bad?
    `retain_graph=True` keeps the graph and all the activations it saved alive after backward,
    as long as the loss tensor is referenced: until the loss is overwritten, after the next
    iteration's forward. That forward then runs on top of the previous iteration's activations.
    It is often added to silence "Trying to backward through the graph a second time", which
    comes from state carried across iterations (an RNN hidden state, a running sum) that should
    be `.detach()`ed instead.

    ## Example
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward(retain_graph=True)
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    Unsafe: the fix removes `retain_graph=True`. Gradients are unchanged when no second backward
    goes through the graph, but a second backward hidden in a called function, or state
    carried from the previous iteration, then raises in backward.

    ## Measured
    Same net and loop (`benchmarks/memory_figures.py`, `f_training_loop_leaks`, torch 2.13.0):
    6,336,560 B kept between iterations and the peak per iteration goes from 10,487,344 B to
    14,683,272 B (+40 %).
    """

    code = "TML503"
    needs = (("retain_graph",),)
    name = "retain-graph-without-second-backward"
    summary = "`backward(retain_graph=True)` in a loop with no second backward through the graph"
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("unsafe",)


class ListOnSelfInForward(_LoopRule):
    """
    ## What it does
    Flags `self.<list>.append(<activation>)` in a module's `forward`, when the class creates the
    list empty in `__init__` and never empties, reassigns or pops it. An activation is the input
    of `forward`, the result of a submodule or torch operation on an activation, or a tensor
    method of one (`.detach()` included; `.cpu()` / `.item()` / `.tolist()` excluded).

    ## Why is this bad?
    Every call leaves one more tensor referenced by the module: one activation per training
    step (or per evaluation batch) is never freed, until out of memory. `.detach()` drops the
    graph but not the tensor.

    ## Example
    ```python
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.maps = []

        def forward(self, x):
            h = self.conv(x)
            self.maps.append(h.detach())
            return h
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)
            self.maps = []

        def forward(self, x):
            h = self.conv(x)
            self.maps = [h.detach().cpu()]  # or a bounded deque, or return it
            return h
    ```

    ## Fix safety
    No fix: whether to keep the last value, copy to the host, bound or drop the list is the
    author's choice.

    ## Measured
    Same net (`benchmarks/memory_figures.py`, `f_training_loop_leaks`, torch 2.13.0):
    `self.feats.append(h)` and `.append(h.detach())` both grow by 2,097,152 B (one activation)
    per iteration.
    """

    code = "TML504"
    needs = (("append",), ("forward",))
    name = "activation-list-on-self"
    summary = "`forward` appends an activation to a list on `self` that is never emptied"


class TensorOnSelfInForward(_LoopRule):
    """
    ## What it does
    Flags `self.<name> = <activation>` in a module's `forward` (activation as in TML504),
    except for registered buffers. Off by default: it costs memory but does not grow.

    ## Why is this bad?
    The stored tensor stays alive until the next call overwrites it, so one activation outlives
    the step that produced it. Without `.detach()` it also keeps its graph reachable.

    ## Example
    ```python
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, backbone, head):
            super().__init__()
            self.backbone = backbone
            self.head = head

        def forward(self, x):
            self.features = self.backbone(x)
            return self.head(self.features)
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self, backbone, head):
            super().__init__()
            self.backbone = backbone
            self.head = head

        def forward(self, x):
            features = self.backbone(x)
            return self.head(features)
    ```

    ## Fix safety
    No fix: other code may read the attribute.

    ## Measured
    Same net (`benchmarks/memory_figures.py`, `f_training_loop_leaks`, torch 2.13.0):
    `self.feat = h` keeps 2,139,308 B alive between iterations instead of 42,156 B; the peak
    per iteration is unchanged (10,487,344 B).
    """

    code = "TML505"
    needs = (("forward",),)
    name = "activation-stored-on-self"
    summary = "`forward` stores an activation on `self`, keeping it alive between steps"
    default_enabled = False

    flagged = (cst.Assign,)


# -- the checks, over the shared analysis ---------------------------------------------------

# Figures quoted by the messages, from benchmarks/memory_figures.py (f_training_loop_leaks in
# benchmarks/results/memory_figures.json; tests/test_loop_rules.py checks they still agree).
EVAL_PEAK_FACTOR = "x2.33"  # eval_without_no_grad_peak_ratio
EVAL_GROWTH = "6.29 MB"  # eval_total_loss_growth_per_iteration
RETAIN_GRAPH_PEAK = "+40 %"  # retain_graph_peak_change_pct
LIST_GROWTH = "2.1 MB"  # feats_list_growth_per_iteration


@dataclass(frozen=True)
class Pending:
    node: cst.CSTNode
    message: str
    fix: Optional[FixSpec] = None


Findings = Dict[str, Dict[int, Pending]]


class _Checks:
    """Replays one scope (``ScopeFacts``) and records the TML5xx findings in it."""

    def __init__(
        self, facts: ScopeFacts, findings: Findings, wrapped: Dict[Tuple[str, int], Optional[FixSpec]],
        analysis: Optional[FileAnalysis] = None,
    ) -> None:
        self.analysis = analysis
        self.facts = facts
        self.scope = facts.scope
        self.walk = facts.walk
        self.findings = findings
        self.wrapped = wrapped
        self.forward = facts.forward
        self.reported: Set[int] = set()  # model calls reported here (TML501)
        self.losses: List[CallEvent] = []  # loss calls and calls of the model's parts reported here (TML501)

    def run(self) -> None:
        for event in self.facts.replay():
            if isinstance(event, AssignEvent):
                self._assignment(event)
            else:
                self._call(event)
        if not self.forward:
            self._retain_graph()
        for event in self.losses:  # a loss or a model part of a model output reported here: one finding, the model's
            if fed_by(self.scope, event, self.reported):
                self.findings[EVAL_WITHOUT_NO_GRAD].pop(id(event.node), None)

    def _assignment(self, event: AssignEvent) -> None:
        terms = _fold_terms(event)  # (total = total + loss, x = 0.9 * x + 0.1 * eps: what it adds)
        if event.augmented or terms is not None or self.facts.folded(event) is not None:
            self._accumulation(event, terms or ())
        if self.forward and event.value is not None and not event.augmented:
            self._tensor_on_self(event)

    def _call(self, event: CallEvent) -> None:
        if self.forward:
            self._list_on_self(event)
            return
        if self.facts.is_model(event.func) or (held := held_model(self.facts, event)) is not None:
            self._model_call(event, None if event.func else held)  # (``self.models[k](x)``: held)
        elif self.facts.model_part(event.node) and collected_over_loader(self.facts, event):
            self._model_call(event, (event.func or "").rpartition(".")[0])  # `[model.step(b) for b in loader]`
        elif self.facts.model_part(event.node) and eval_method_over_loader(self.facts, event):
            self._model_call(event, (event.func or "").rpartition(".")[0])  # `model.predict(batch)`
        elif (through := helper_run_model(self.facts, event)) is not None:
            self._model_call(event, through, event.func)  # ``self.p_sample(model, x, t)``
        elif self.scope.function is not None and self.analysis is not None:
            callee = called_module(self.facts, event)
            root = (callee or "").rpartition(".")[0]
            if root and self.facts.is_model(root):
                self._model_call(event, root)  # a part of the model: `model.forward_masks(x)`
            elif callee is not None:  # what the value is: `analysis.module_calls`
                (self._model_call if as_model(self.facts) else self._output_only_sinks)(event, callee)
            elif (value := called_value(self.facts, event)) is not None:  # `G(z)`, `self.netG.sample(n)`
                self._output_only_sinks(event, value[0], detached=not value[1])
                if id(event.node) not in self.findings[EVAL_WITHOUT_NO_GRAD]:
                    self._evaluated_method(event)  # `self.model.eval(); self.model.predict(src)`: a decoder run in steps
            else:
                self._evaluated_method(event)
        elif self.analysis is not None:
            self._evaluated_method(event)  # top-level code
        if event.attr == "append" and event.receiver is not None and len(event.node.args) == 1:
            self._accumulation(event)

    # TML501
    def _evaluated_method(self, event: CallEvent) -> None:
        """`model.eval(); enc = model.encode(src)`: ``analysis/evaluated_methods.py``."""
        if (evaluated := evaluated_method(self.facts, event)) is not None and in_evaluation(self.facts, event):
            self._model_call(event, evaluated, event.func)
        elif evaluated is not None:
            self._output_only_sinks(event, evaluated)

    def _model_call(self, event: CallEvent, model: Optional[str] = None, through: Optional[str] = None) -> None:
        scope = self.scope
        if event.ctx.no_grad or scope.grad_work or runs_no_module(self.facts, event, self.analysis):
            return  # (also a method of the model's class that runs no module: it records no graph)
        if self.facts.grad_controlled(event.seq) and not opened_by_caller(self.facts):
            return self._output_only_sinks(event, model or event.func or "", through=through) if opened_by_training_caller(self.facts) else None  # (``open_callers.py``)
        if suite_test(self.facts):  # a test of the test suite runs the model on purpose
            return
        callee = model or event.func or ""
        if callee.endswith(".forward"):
            callee = callee[: -len(".forward")]
        if loss_module(self.facts, callee):
            return  # a loss: what made its inputs is the call to judge
        collected = collected_over_loader(self.facts, event)
        if collected is not None and self._collected(event, collected, callee):
            return
        mode_seq = self.facts.last_mode_change(callee, event.seq)
        # an evaluation-named method of a module class another function of the file calls (PRNet's ``predict_embedding``,
        # run by ``forward``'s helpers) is part of the module's own computation: its callers decide, as ``as_model`` says
        named = (
            is_eval_name(scope.name) and not (module_method(self.facts) and called_in_file(self.facts))
            and not library_hook(self.facts) and not trained_by_callers(self.facts) and not part_of_forward(self.facts)
        )
        if borrowed_model(self.facts, callee, event.ctx.iterating):
            return  # the caller, perhaps in another file, decides about autograd
        if mode_seq is not None and mode_seq[1] == "train" or trained_after_its_loop(scope, self.facts.backward_calls, event):
            return  # the model was put back in training mode; the loop computes what a later backward trains on
        caller = None
        if not named and mode_seq is None:
            over_loader = any(iterates_loader(loop) for loop in event.ctx.loops)
            caller = eval_by_callers(self.facts, callee) if over_loader else None
            if caller is None:
                self._output_only_sinks(event, callee, through=through)
                return
        single = not named and not event.ctx.iterating
        if single and not self._straight_line_eval(event, callee):
            return
        if (named or caller is not None) and self.facts.trains_beside(event):
            return
        if named:
            where = f"in `{scope.name}()` with autograd on"
        elif caller is not None:
            switch = "eval()"
            where = f"after `{callee}.eval()` in its caller {f'`{caller}()`' if caller else 'at the top level of the file'} with autograd on"
        else:
            switch = self.facts.switch_written(mode_seq[0])  # none: a helper that returned the model, or was given it (`check(model, x)`), made it
            helper = None if switch else self.facts.switching_helper(mode_seq[0], callee)
            where = (f"after `{callee}.{switch}`" if switch else f"after `{callee}.eval()` in `{helper}()`" if helper else f"after the helper that returned `{callee}` called its `eval()`,") + " with autograd on"
        off = "" if named else f"`{switch or 'eval()'}` does not disable autograd. "
        shown = f"`{callee}`" + (f" (run by `{through}`)" if through else "")
        if single:
            message = (
                f"{shown} is called {where}. {off}Its output keeps the graph and every activation "
                "saved for backward alive as long as it lives, and the forward's peak holds them "
                "all; use `torch.no_grad()`"
            )
        else:
            message = (
                f"{shown} is called {where}. {off}Every call records its graph and keeps the saved "
                f"activations while the output lives (peak {EVAL_PEAK_FACTOR} measured against "
                "`torch.no_grad()`; accumulating outputs or losses grows memory every batch); use "
                "`torch.no_grad()`"
            )
        target = self.facts.wrap_target(event, None if named or caller is not None else mode_seq[0])
        if not named and caller is None and self.facts.trains_around(event, mode_seq[0], target):
            return  # eval() for frozen batch-norm or an attack: gradients are wanted
        self._pend(event, message + self._covered(target), target)

    def _collected(self, event: CallEvent, assign: AssignEvent, callee: str) -> bool:
        """`outputs = [model.step(b) for b in val_loader]`: the list keeps every batch's output
        and graph (TML502); in a function that trains elsewhere, the call is TML501's too (its
        other forms stay quiet there). Whether that TML501 was reported here."""
        if borrowed_model(self.facts, callee, True):
            return False
        shown = shortened(self.walk.module.code_for_node(event.node))
        self.findings[ACCUMULATED_TENSOR][id(event.node)] = Pending(event.node, (
            f"`{assign.targets[0]}` collects `{shown}` over every batch of a loader, with autograd on "
            "and never backpropagated: every batch's graph stays alive with all its saved "
            f"activations (+{EVAL_GROWTH} per iteration measured) while the list lives; use "
            "`torch.no_grad()` or keep `.detach()` copies"
        ))
        if not self.facts.training_calls:
            return False
        message = (
            f"`{callee}` is called over every batch of a loader with autograd on, and what it returns "
            "is never backpropagated (the function trains on other values). Every call records "
            "its graph and keeps the saved activations while the output lives (peak "
            f"{EVAL_PEAK_FACTOR} measured against `torch.no_grad()`); use `torch.no_grad()`"
        )
        target = event.ctx.chain[-1] if event.ctx.chain else None
        self._pend(event, message, target)
        return True

    def _output_only_sinks(self, event: CallEvent, callee: str, detached: bool = False, through: Optional[str] = None) -> None:
        """GAN sampling functions, ``greedy_decode(model, ...)``: ``callers.only_sinks_reached``.
        ``detached``: a value known as a model by its name alone (``module_calls.called_value``)
        counts only when the code detaches its output on the way to the sinks."""
        if self.analysis is None or id(event.node) in self.findings[EVAL_WITHOUT_NO_GRAD] or loss_module(self.facts, callee):
            return  # (a loss: what made its inputs is the call to judge)
        loop = held_out_loop(self.facts, event)  # (in a function that trains: the loop over held-out data after it)
        reach = only_sinks_reached(self.facts, event, callee, self.analysis, held_out=loop is not None)
        if reach is None or reach.attached_numpy or (detached and not any(sink in DETACHING for sink in reach.sinks)):
            return
        # asked last: it reads every module of the project that imports this one
        if part_of_forward(self.facts) or (
            module_method(self.facts) and (called_in_project(self.facts) or callers_elsewhere(self.facts))
        ):
            return  # the forward runs it, or a file importing the class calls it (under its own autograd mode)
        shown = f"`{callee}`" + (f" (run by `{through}`)" if through else "")
        message = (
            f"{shown} is called with autograd on in `{self.scope.name}()`. {'That loop comes after the training and never' if loop else 'That function never'} "
            f"backpropagates, and the output only reaches {', '.join(dict.fromkeys(reach.sinks))}: "
            "the forward records its graph and keeps every activation saved for backward alive "
            "while the output lives; use `torch.no_grad()`" + self._covered(loop)
        )
        self._pend(event, message, loop)

    def _behind_flag(self, event: Union[AssignEvent, CallEvent]) -> bool:
        """In an arm that runs only when a caller changes a flag from its default (``flags.py``:
        ``if self.cost_type == "average":`` with ``cost_type="smooth"``)."""
        function = self.scope.node
        return self.analysis is not None and type(function) is cst.FunctionDef and flag_test(self.analysis.values(function), event.node) is not None

    def _pend(self, event: CallEvent, message: str, target: Optional[Frame]) -> None:
        """One finding per model call, each at its own line (`# noqa` is per line); every call
        under the same loop or function (``target``: the statement to wrap, None: decorate the
        function) gets the same fix, which the fixer applies once."""
        key = ("decorate", id(self.scope.node)) if target is None else ("wrap", id(target.statement))
        if self._behind_flag(event) or gradients_wanted(self.facts, event, self.analysis) or run_without_grad_by_importers(self.facts):
            return  # in an arm that runs only when a caller changes a flag from its default; a potential's forces, a differentiated output need autograd; callers in other files turn it off
        if self.facts.loss_call(event.node) is None and (self.facts.is_model(event.func) or not self.facts.model_part(event.node)):
            self.reported.add(id(event.node))
        else:  # a loss, or a method or part of the model (`model.crf(feats, masks)`): judged at the end
            self.losses.append(event)
        if key not in self.wrapped:
            self.wrapped[key] = no_grad_fix(self.facts, target)
        self.findings[EVAL_WITHOUT_NO_GRAD][id(event.node)] = Pending(
            event.node, message, self.wrapped[key]
        )

    def _covered(self, target: Optional[Frame]) -> str:
        """How many model calls one `torch.no_grad()` covers, when several (``callers``)."""
        count = model_calls_under(self.facts, None if target is None else target.statement)
        if count < 2:
            return ""
        where = "function" if target is None else (
            "loop" if type(target.statement) in (cst.For, cst.While) else "statement"
        )
        return f" (one `torch.no_grad()` over this {where} covers its {count} model calls)"

    def _straight_line_eval(self, event: CallEvent, callee: str) -> bool:
        """`model.eval(); out = model(x)` (or `return model(x)`) outside a loop: reported when
        the output is kept, the callee is plainly a module, the function neither puts it back
        in training mode afterwards nor backpropagates (but before the `eval()`: a validation
        after the step), no caller of the file trains on what it returns, and it is not a test."""
        facts = self.facts
        return (
            not suite_test(facts) and (not facts.trains_beside(event) or validated_after_step(facts, event, callee))
            and output_kept(facts, event)
            and plainly_a_module(facts, callee)
            and not switched_back(facts, callee, event.seq)
            and not trained_by_callers(facts)
        )

    # TML502
    def _accumulation(self, event: Union[AssignEvent, CallEvent], terms: Tuple[cst.BaseExpression, ...] = ()) -> None:
        ctx = event.ctx
        if ctx.no_grad or not (ctx.loops or self.scope.name in STEP_HOOKS):
            return
        if self.scope.owner is not None and self.scope.name == "__init__":
            return  # a constructor builds modules (`self.down.append(self.module(...))`)
        shown_accumulator = None
        folded: Optional[cst.BaseExpression] = None
        if isinstance(event, CallEvent):
            assert event.receiver is not None
            argument = event.node.args[0]
            if argument.star or argument.keyword is not None:
                return
            accumulator = dotted_name(event.receiver)
            keyed = _keyed_list(event.receiver)
            if accumulator is None and keyed is not None:
                # `history["loss"].append(loss)`: a list kept under a literal key; its
                # lifetime is that of `history`.
                accumulator = dotted_name(event.receiver.value)  # type: ignore[attr-defined]
                shown_accumulator = render_expression(self.walk.module, event.receiver)
            value_node = argument.value
            appended = True
        else:
            if len(event.targets) != 1 or event.value is None:
                return
            operator = getattr(event.node, "operator", None)
            if event.augmented and type(operator) not in (cst.AddAssign, cst.SubtractAssign):
                return
            accumulator = event.targets[0]
            value_node = event.value
            if not event.augmented:
                folded = self.facts.folded(event)
            if folded is not None:  # acc = torch.cat((acc, out), 0)
                value_node = folded
                appended = True
            elif not event.augmented:  # the first term added that holds a loss or an output
                value_node = next((t for t in terms if (held := self.facts.value_of(t, ctx)) is not None and held.kind is not Kind.ACTIVATION), terms[0])
            if folded is None:
                appended = False
        if accumulator is None or accumulator in self.facts.backward_losses and backpropagated_with(self.scope, self.facts.backward_calls, accumulator, event):
            return
        if not appended and self.facts.starts_as_text(accumulator, ctx):
            return  # `out_string += sp_model.decode(ids)`: text, not a tensor
        value = self.facts.value_of(value_node, ctx)
        if value is None and not ctx.loops and returned_as_loss(self.facts, value_node):
            value = Value(Kind.LOSS, ())  # what the framework backpropagates
        elif value is None and (term := backpropagated_term(self.scope, self.facts.backward_calls, value_node, event)) is not None:
            value = Value(Kind.LOSS, term)  # a term of the loss its loop backpropagates
        if value is None or value.kind is Kind.ACTIVATION:
            return
        if ctx.loops:
            training = self._kept_over_loop(event, accumulator, value, appended)
        else:  # `self.val_loss += loss` in a `training_step`, run by the framework's loop
            training = True if kept_across_steps(self.facts, accumulator, event.seq) else None
        if training is None or self._behind_flag(event) or (training is False and decided_elsewhere(self.facts)):
            return  # (evaluation code whose callers set the autograd mode: theirs to judge)
        shown = shortened(self.walk.module.code_for_node(value_node))
        what = "loss tensor" if value.kind is Kind.LOSS else "model output"
        each = "every iteration" if ctx.loops else f"every `{self.scope.name}` call"
        if folded is not None:
            head = f"`{accumulator}` joins the {what} `{shown}` of {each} to itself"
        elif appended:
            holder = shown_accumulator or accumulator
            room = 90 - len(f"`{holder}.append()` keeps the {what} of {each}.")
            shown = shortened(self.walk.module.code_for_node(value_node), max(12, min(40, room)))
            head = f"`{holder}.append({shown})` keeps the {what} of {each}"
        else:
            head = f"`{accumulator}` sums the {what} `{shown}` of {each}"
        if training:
            tail = (
                ". Backward frees the saved activations (device memory does not grow), but "
                "every iteration's autograd graph nodes stay reachable and host memory grows"
            )
            if folded is not None:
                tail += " and the joined tensor grows by one output per iteration on its device"
            elif appended:
                tail += " and the list holds one tensor per iteration on its device"
        else:
            tail = (
                ". It runs in a loop without backward and outside `torch.no_grad()`: every "
                "batch's graph "
                f"stays alive with all its saved activations (+{EVAL_GROWTH} per iteration "
                "measured) until out of memory"
            )
        if value.kind is Kind.LOSS and folded is None:
            named = dotted_name(value_node) is not None
            advice = f"; accumulate `{shown}.item()`" if named else "; use `.item()`"
        else:
            advice = "; keep `.detach()` (or `.detach().cpu()`) copies"
        fix = None if shown_accumulator or folded is not None else self._item_fix(
            event, accumulator, value_node, value, appended
        )
        self.findings[ACCUMULATED_TENSOR][id(event.node)] = Pending(
            event.node, head + tail + advice, fix
        )

    def _kept_over_loop(self, event: Union[AssignEvent, CallEvent], accumulator: str, value: Value, appended: bool) -> Optional[bool]:
        """Whether the loop the accumulator outlives trains (None: no finding). The innermost
        loop whose iterations the accumulator outlives and that computes the value: also an
        outer one (`y_pred = torch.cat([y_pred, pred])` over each item of the output the loop
        over batches computed)."""
        ctx = event.ctx
        persists = self.facts.loops_kept_across(accumulator, ctx.loops, event.node)
        loop = next((kept for kept in persists if kept in value.loops), None)
        if loop is None:
            return None
        if not any(iterates_loader(kept) for kept in persists) and any(iterates_loader(outer) for outer in ctx.loops):
            return None  # started again in every batch of a loader: one batch's inner loop (KD-Lib's DML cohort)
        if not self.facts.loop_computes(loop):
            return None
        terms = loss_terms_loop(self.facts, loop)  # a loss function summing its terms (PRESENT's IBP_loss over batch labels)
        if (
            (terms or not iterates_loader(loop))
            and not self.facts.loop_has(loop, self.facts.training_calls)
            and (((terms or not runs_model(self.facts, loop)) and value.kind is Kind.LOSS)
                 or (appended and reduced_after(self.facts, accumulator, loop)))
        ):
            return None  # one batch's items (per-image losses handed on or summed, per-head losses
            # of one forward: ``lossd += lossr + lossf`` over the discriminators' outputs;
            # embeddings stacked after)
        if self.facts.training_calls == [] and borrowed_loop(self.facts, loop):
            return None
        training = any(self.facts.loop_has(kept, self.facts.training_calls) for kept in persists)
        if (not training and (self.facts.grad_controlled(event.seq) or part_of_forward(self.facts))) or returned_for_backward(self.facts, self.analysis, accumulator):
            return None  # (a method the module's forward runs: its graph is the forward's; the last asked late: it reads the callers)
        if not training and self.facts.training_calls and not self.facts.in_eval_mode(event.seq):
            return None  # this scope trains elsewhere: which mode applies here is not clear
        return training

    def _item_fix(
        self,
        event: Union[AssignEvent, CallEvent],
        accumulator: str,
        value_node: cst.BaseExpression,
        value: Value,
        appended: bool,
    ) -> Optional[FixSpec]:
        if value.kind is not Kind.LOSS or not value.scalar:
            return None
        if type(value_node) not in (cst.Name, cst.Attribute) or dotted_name(value_node) is None:
            return None
        allowed = _list_use if appended else _float_use
        if not appended and not self.facts.starts_as_number(accumulator, event.ctx):
            return None
        if not uses_allow(self.scope, accumulator, allowed):
            return None
        return FixSpec(
            Applicability.UNSAFE,
            f"Use `{dotted_name(value_node)}.item()`",
            (NodeEdit(value_node, ".item()", "after"),),
        )

    # TML503
    def _retain_graph(self) -> None:
        for call in self.facts.backward_calls:
            retain = _keyword(call.node, "retain_graph")
            if retain is None or not _is_true(retain.value) or not call.ctx.loops:
                continue
            create = _keyword(call.node, "create_graph")
            if create is not None and not _is_false(create.value):
                continue
            outer = call.ctx.loops[0]
            others = [c for c in self.facts.backward_calls if c is not call and outer in c.ctx.loops]
            if others or not self.facts.built_in_loop(call) or graph_from_before(self.analysis, self.scope, call, call.ctx.loops[-1]):
                continue
            args = [a for a in call.node.args if a is not retain]
            if args and call.node.args[-1] is retain:
                args[-1] = args[-1].with_changes(comma=retain.comma)
            new = call.node.with_changes(args=args)
            edit = NodeEdit(call.node, render_expression(self.walk.module, new))
            fix = FixSpec(Applicability.UNSAFE, "Remove `retain_graph=True`", (edit,))
            message = (
                "`retain_graph=True` with no second backward through this graph in the loop. The "
                "graph and its saved activations stay alive into the next iteration's forward "
                f"({RETAIN_GRAPH_PEAK} peak per iteration measured); drop it, or detach state "
                "carried between iterations"
            )
            self.findings[RETAIN_GRAPH][id(call.node)] = Pending(call.node, message, fix)

    # TML504 / TML505
    def _list_on_self(self, event: CallEvent) -> None:
        if event.attr != "append" or event.receiver is None or len(event.node.args) != 1:
            return
        attribute = _self_attribute(event.receiver)
        if attribute is None or not self.facts.unbounded_list(attribute):
            return
        value = self.facts.value_of(event.node.args[0].value, event.ctx)
        if value is None:
            return
        message = (
            f"`self.{attribute}` grows by one activation per call of `forward`. "
            f"`self.{attribute}.append(...)` in `forward` keeps one activation per call in a list "
            f"that is never emptied (+{LIST_GROWTH} per iteration measured; `.detach()` does not "
            "help): store `.detach().cpu()` copies, bound the list, or clear it"
        )
        self.findings[LIST_ON_SELF][id(event.node)] = Pending(event.node, message)

    def _tensor_on_self(self, event: AssignEvent) -> None:
        if len(event.targets) != 1 or event.unpacked or event.value is None:
            return
        attribute = _self_attribute_name(event.targets[0])
        if attribute is None or attribute in _buffers(self.scope.owner):
            return
        value = self.facts.value_of(event.value, event.ctx)
        if value is None:
            return
        message = (
            f"`self.{attribute} = ...` in `forward` keeps this activation alive until the next "
            "call. One extra activation between steps (peak unchanged in the measured net); "
            "store a `.detach().cpu()` copy or return it instead"
        )
        self.findings[TENSOR_ON_SELF][id(event.node)] = Pending(event.node, message)


# -- entry point ----------------------------------------------------------------------------
def analyse(analysis: FileAnalysis, codes: Optional[FrozenSet[str]] = None) -> Findings:
    """Every TML5xx finding of one file, keyed by rule code and node id. With ``codes`` (the
    rules running on the file), a file where none of them can report (``leak_gate``) is not
    walked."""
    findings: Findings = {
        code: {} for code in (EVAL_WITHOUT_NO_GRAD, ACCUMULATED_TENSOR, RETAIN_GRAPH,
                              LIST_ON_SELF, TENSOR_ON_SELF)
    }
    only: Optional[FrozenSet[int]] = None  # (the functions a finding may be in; None: any)
    if codes is not None:
        facts = leak_gate.facts_from_index(analysis.index)
        if not leak_gate.may_report(facts, codes, analysis.text):
            return findings
        only = leak_gate.sink_only_functions(facts, codes, analysis.text)
    walk = analysis.scopes
    wrapped: Dict[Tuple[str, int], Optional[FixSpec]] = {}  # each no_grad fix, built once (TML501)
    for scope in walk.scopes:
        if only is not None and id(scope.node) not in only:
            continue
        if leak_gate.scope_may_leak(scope):
            _Checks(ModuleValues(walk, scope), findings, wrapped, analysis).run()
    return findings
