"""TML5xx: training and evaluation loop leaks.

The analysis (``_loops.analyse``) runs once per file, shared by these rules; each rule reports
its findings when the traversal reaches the flagged node, so ``# noqa`` works per statement.
"""

from __future__ import annotations

from typing import Dict

import libcst as cst

from torchmemlint.rules import _loops
from torchmemlint.rules.base import FixAvailability, Rule


class _LoopRule(Rule):
    """Reports what the shared loop analysis found for this rule's code."""

    def visit_Module(self, node: cst.Module) -> None:
        findings = self.context.shared(
            "loops", lambda: _loops.analyse(node, self.context.bindings)
        )
        self._pending: Dict[int, _loops.Pending] = findings[self.code]

    def _reached(self, node: cst.CSTNode) -> None:
        pending = self._pending.get(id(node))
        if pending is not None:
            self.report(pending.node, pending.message, pending.fix)


class EvalWithoutNoGrad(_LoopRule):
    """
    ## What it does
    Flags calls of the model in evaluation code that runs with autograd on: after
    `model.eval()`, or in a function named like `evaluate` / `validate` / `test` / `predict` /
    `infer`, when neither a `with torch.no_grad():` / `torch.inference_mode()` block nor a
    decorator turns autograd off. The model is a name that the code `.eval()`s or `.train()`s,
    a parameter named `model` / `net` / `network` / `module` (or `*_model`, `*_net`), or
    `self.model`. Code that calls `backward`, `autograd.grad`, an optimizer `step`, or switches
    `enable_grad` / `requires_grad` is left alone, as are functions this file calls under
    `no_grad` and Lightning's `validation_step` / `test_step` / `predict_step` hooks, which
    Lightning already runs without autograd.

    ## Why is this bad?
    `model.eval()` only switches dropout and batch-norm behaviour; autograd still records every
    operation and keeps the tensors saved for backward alive as long as the output (or a loss
    computed from it) is referenced. In a loop the previous batch's graph lives until its
    output is overwritten, so the peak holds two batches' activations; any accumulation of
    outputs or losses keeps every batch's graph until the process runs out of memory.

    ## Example
    ```python
    def validate(model, loader):
        model.eval()
        correct = 0
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
        return correct
    ```

    ## Use instead
    ```python
    @torch.no_grad()
    def validate(model, loader):
        ...
    ```

    ## Fix safety
    Unsafe: the fix decorates an evaluation function with `@torch.no_grad()`, or wraps the loop
    (or statement) after `.eval()` in `with torch.no_grad():`. Outputs then no longer require
    grad, which breaks code elsewhere that backpropagates through them. Offered only where the
    file imports `torch` under that name.

    ## Measured
    Conv-BN-ReLU-Conv-ReLU-GAP-FC net, batch 16x3x32x32, 6 iterations, torch 2.13.0 on CPU
    (`benchmarks/memory_figures.py`, `f_training_loop_leaks`): an evaluation loop without
    `no_grad` peaks at 14,682,760 B per iteration against 6,291,460 B under `no_grad` (x2.33);
    with `total += loss` it grows by 6,294,148 B per iteration.
    """

    code = "TML501"
    name = "eval-without-no-grad"
    summary = "The model is called in evaluation code with autograd on"
    fix_availability = FixAvailability.SOMETIMES

    def visit_Call(self, node: cst.Call) -> None:
        self._reached(node)


class AccumulatedTensor(_LoopRule):
    """
    ## What it does
    Flags a loss or model output accumulated across loop iterations without turning it into a
    number or detaching it: `total += loss`, `total = total + loss`, `losses.append(loss)`,
    `outputs.append(model(x))`. A loss is what a criterion (`criterion(...)`, `loss_fn(...)`, an
    `nn.*Loss()` instance) or an `F.*_loss` / `F.cross_entropy` call returns, or what
    `.backward()` is called on; the model as in TML501. Only loops that run the model, compute
    a loss or step are considered, and only values computed in the same iteration.
    `.item()`, `float()`, `.detach()`, accumulation under `torch.no_grad()` and accumulators
    that are themselves backpropagated (gradient accumulation) are not reported.

    ## Why is this bad?
    The accumulated tensor references its autograd graph, and each `+=` links the next one.
    In a training loop, backward frees the saved activations, so device memory stays flat,
    but the graph nodes of every iteration stay reachable from the sum and host memory grows;
    an appended list also holds one tensor per iteration on its device. In a loop without
    backward and outside `no_grad` (evaluation), nothing frees the graphs: every batch's saved
    activations are kept and memory grows by a batch's activations per iteration until out of
    memory. The message says which case applies.

    ## Example
    ```python
    running_loss = 0.0
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        running_loss += loss
    ```

    ## Use instead
    ```python
        running_loss += loss.item()
    ```

    ## Fix safety
    Unsafe: the fix appends `.item()` to a loss known to be a 0-dim tensor (`.backward()` is
    called on it, or it comes from a reducing loss). The accumulator becomes a Python float and
    `.item()` waits for the device; it is offered only when the accumulator starts as a number
    (or is a list) and is only read where a float works (printing, logging, arithmetic,
    comparisons, `len` / `sum` / numpy).

    ## Measured
    Same net and loop (`benchmarks/memory_figures.py`, `f_training_loop_leaks`, torch 2.13.0):
    training with `total_loss += loss` keeps tensor memory flat (0 B per iteration); evaluation
    without `no_grad` with `total += loss` grows by 6,294,148 B (6.29 MB) per iteration. In the
    training case the accumulator's autograd graph gains nodes every iteration (host memory);
    this project has not measured how many bytes that is.
    """

    code = "TML502"
    name = "tensor-accumulated-across-iterations"
    summary = "A loss or model output tensor accumulated across loop iterations keeps its graph"
    fix_availability = FixAvailability.SOMETIMES

    def visit_Call(self, node: cst.Call) -> None:
        self._reached(node)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._reached(node)

    def visit_Assign(self, node: cst.Assign) -> None:
        self._reached(node)


class RetainGraphWithoutSecondBackward(_LoopRule):
    """
    ## What it does
    Flags `backward(retain_graph=True)` in a loop when nothing else in that loop
    backpropagates (no other `backward`, `autograd.grad` or `autograd.backward`) and the
    tensor it backpropagates is computed in the same iteration.

    ## Why is this bad?
    `retain_graph=True` keeps the graph and all the activations it saved alive after backward,
    as long as the loss tensor is referenced: until the loss is overwritten, after the next
    iteration's forward. That forward then runs on top of the previous iteration's activations.
    It is often added to silence "Trying to backward through the graph a second time", which
    comes from state carried across iterations (an RNN hidden state, a running sum) that should
    be `.detach()`ed instead.

    ## Example
    ```python
    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward(retain_graph=True)
        optimizer.step()
    ```

    ## Use instead
    ```python
        loss.backward()
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
    name = "retain-graph-without-second-backward"
    summary = "`backward(retain_graph=True)` in a loop with no second backward through the graph"
    fix_availability = FixAvailability.ALWAYS

    def visit_Call(self, node: cst.Call) -> None:
        self._reached(node)


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
    name = "activation-list-on-self"
    summary = "`forward` appends an activation to a list on `self` that is never emptied"

    def visit_Call(self, node: cst.Call) -> None:
        self._reached(node)


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
    def forward(self, x):
        self.features = self.backbone(x)
        return self.head(self.features)
    ```

    ## Use instead
    ```python
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
    name = "activation-stored-on-self"
    summary = "`forward` stores an activation on `self`, keeping it alive between steps"
    default_enabled = False

    def visit_Assign(self, node: cst.Assign) -> None:
        self._reached(node)
