"""TML4xx: missing or misused ``torch.utils.checkpoint``.

Besides the call itself, most of these rules need to know what a checkpointed callable
runs: ``checkpoint(self.block, x)`` is followed to ``self.block = Block(...)`` in
``__init__``, through ``nn.Sequential(...)`` contents, to ``class Block`` in the same file
and its ``__init__``/``forward``. That is the shared analysis (``analysis/callables.py``,
``analysis/segments.py``, ``analysis/stacks.py``), built lazily once per file; the rules here
only ask it and word the findings.
"""

from __future__ import annotations

from typing import List, Optional, Set

import libcst as cst

from torchmemlint.analysis.checkpointed_layers import checkpointed_layers
from torchmemlint.analysis.checkpoints import BATCH_NORM, MODULE, RANDOM, SingleOp
from torchmemlint.analysis.segments import CheckpointCall, checkpoint_calls
from torchmemlint.analysis.stacks import class_stacks, Stack
from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule, RuleOption

# -- TML401 ---------------------------------------------------------------------------------
class CheckpointWithoutUseReentrant(Rule):
    """
    ## What it does
    Flags `torch.utils.checkpoint.checkpoint(...)` and `checkpoint_sequential(...)` calls that
    do not pass `use_reentrant`.

    A project's own helper that passes its caller's keywords on to torch's checkpoint
    (`def ckpt(fn, *args, **kwargs): return checkpoint(fn, *args, **kwargs)`, in this file or
    another file of the project) is reported at each call that passes no `use_reentrant`;
    a helper that calls torch's without it itself is reported there, once. A call that passes
    `**kwargs` is reported only when the same function also calls the checkpointed callable
    itself with those `**kwargs` (`self.inner_attn(qkv, **kwargs)` beside
    `checkpoint(self.inner_attn, qkv, **kwargs)`): they are the callable's keywords; otherwise
    they may hold `use_reentrant`.

    `checkpoint_sequential(layers, 1, x)` is not reported: torch checkpoints every segment but
    the last, so one segment runs without a checkpoint (tests/test_tml401_one_segment.py).

    Other checkpoint functions are not reported: timm's `checkpoint`/`checkpoint_seq`
    (`timm.models`, `timm.models._manipulate`, `timm.models.helpers`) are non-reentrant unless
    `TIMM_REENTRANT_CKPT` or `set_reentrant_ckpt()` says otherwise, torch's
    `checkpoint_wrapper(module)` is `CheckpointImpl.NO_REENTRANT` by default, and deepspeed's
    `deepspeed.checkpointing.checkpoint(f, *args)` takes no `use_reentrant`.

    ## Why is this bad?
    Without the argument torch (2.13) picks the reentrant variant and warns that the default
    will change. The reentrant variant recomputes every checkpointed segment in backward even
    when that saves nothing, and when none of the segment's inputs requires grad (the image
    batch going into the first layer, or the output of a frozen backbone) the parameters inside
    it silently get no gradient at all. The non-reentrant variant is the one the PyTorch
    documentation recommends.

    ## Example
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Net(nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, x):
            return checkpoint(self.block, x)
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Net(nn.Module):
        def __init__(self, block):
            super().__init__()
            self.block = block

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix adds `use_reentrant=False`. When a segment input requires grad both
    variants give the same outputs and gradients (tested in `tests/test_checkpoint_rules.py`),
    but when none does, the reentrant variant leaves the segment's parameters without
    gradients and the non-reentrant one trains them: the fix corrects that, which changes the
    gradients, so it is offered only with `--unsafe-fixes`. The non-reentrant variant also
    checks that the recomputation matches the forward and raises if it does not. No fix where
    the call goes through an attribute that `__init__` binds to `checkpoint` in one arm only
    (`self.maybe_ckpt = checkpoint if "ffn" in opts else lambda f, x: f(x)`), or through a local
    the function binds to it in one branch only (`if self.training: checkpoint =
    torch.utils.checkpoint.checkpoint` / `else: checkpoint = checkpointByPass`,
    tests/test_checkpoint_local_alias.py): the other arm takes no `use_reentrant`.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0): with the stem
    conv checkpointed reentrantly, the model's gradients total 46,720,416 bytes instead of
    46,758,048: the stem conv's weight gets none. `tests/test_checkpoint_rules.py` shows both
    sides of the fix: identical gradients when the segment input requires grad, a gradient
    instead of None when it does not.
    """

    code = "TML401"
    needs = (("checkpoint",),)  # every checkpointing function's name holds it
    needs_project = True  # a project's helper that passes the caller's keywords on to torch's
    project_facts = frozenset({"imports"})
    name = "checkpoint-without-use-reentrant"
    summary = "`checkpoint` without `use_reentrant`: torch falls back to the reentrant variant"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        for call in checkpoint_calls(self.context):
            if not call.omits_use_reentrant:
                continue
            message = (
                "`checkpoint` without `use_reentrant` runs torch's reentrant variant. It "
                "recomputes every segment and gives no gradient to parameters whose segment input "
                "does not require grad; pass `use_reentrant=False`"
            )
            if not call.wrapper.sole:  # the name's other value takes no such keyword
                self.report(call.node, message + f" where `{self.code_for(call.node.func)}` is bound to `checkpoint`")
                continue
            self.report(
                call.node,
                message,
                FixSpec(Applicability.UNSAFE, "Pass `use_reentrant=False`", (self._add_keyword(call.node),)),
            )

    def _add_keyword(self, call: cst.Call) -> NodeEdit:
        last = call.args[-1] if call.args else None
        if last is None:
            return NodeEdit(call, self.code_for(call.with_changes(args=[_use_reentrant_false()])))
        # Insert after the last argument's value, keeping any trailing comma and layout.
        return NodeEdit(last.value, ", use_reentrant=False", "after")


def _use_reentrant_false() -> cst.Arg:
    return cst.Arg(
        value=cst.Name("False"),
        keyword=cst.Name("use_reentrant"),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )


# -- TML402 ---------------------------------------------------------------------------------
class SingleOpCheckpoint(Rule):
    """
    ## What it does
    Flags `checkpoint(f, x)` where `f` is a single cheap layer or op: a `Conv*d`, `Linear`,
    normalisation, activation or average-pool module (`self.conv1` is followed to
    `self.conv1 = nn.Conv2d(...)` in `__init__`, also where it is that layer or else
    `nn.Identity()`, or built by a factory parameter (`self.norm = norm_layer(dim)` with
    `norm_layer=nn.LayerNorm`); a layer torchvision documents of a ResNet the class holds
    (`self.encoder.avgpool`, `.fc`, `.conv1` ... with `self.encoder = resnet18(...)`, or where a
    method asserts `isinstance(self.encoder, ResNet)`, tests/test_checkpoint_library_parts.py);
    an inline `nn.Conv2d(...)`; the elements of a `ModuleList`
    iterated by a `for` loop, also as `layer.__call__`, `layer.forward` or `lambda t: layer(t)`,
    through `enumerate`/`zip`, unpacked (`for norm, ff in self.layers`: every element's first)
    or indexed (`self.projections[i]`); a method that only forwards to one, `def _fc(self,
    h): return self.fc(h)`, or a function the calling method defines that does, `def
    proj_func(x): return self.proj(x)`; a layer built by a function of this or another project
    file whose every `return` is that one layer, LDM's `Normalize(c)` returning
    `nn.GroupNorm`; a module class whose `forward` runs one layer it holds, once, around views
    and elementwise work, `x = self.proj(x)`; `return x.flatten(2).transpose(1, 2), x.shape`,
    the layer maybe chosen per arm of an `if`, `conv = nn.Conv2d` or `nn.Conv3d`,
    tests/test_checkpoint_held_out14.py), a functional op such as `F.relu`, or a lambda that only calls one of those. The same for timm's `checkpoint(f, x)` and deepspeed's
    `deepspeed.checkpointing.checkpoint(f, x)`, for `functools.partial(checkpoint,
    use_reentrant=False)` bound to a module-level name or to `self.x`, and for torch's and
    fairscale's module wrappers `checkpoint_wrapper(nn.Conv2d(...))`
    (`torch.distributed.algorithms._checkpoint.checkpoint_wrapper`, `fairscale.nn`, also imported
    in a `try` whose `except ImportError:` sets the name to `None`), whose
    every call checkpoints the one layer, and for torch's `apply_activation_checkpointing(model,
    check_fn=lambda m: isinstance(m, nn.Linear))`, which wraps every layer of the classes
    `check_fn` selects alone when each is one cheap layer (no fix: reported at the call). Not under `torch.no_grad()` (nothing is recomputed;
    the same for TML401, TML403 and TML404). A project's own
    checkpointing code counts as what it runs: a function that hands its parameter to torch's
    checkpoint (`def checkpoint(fn, *args): return torch_checkpoint(fn, *args,
    use_reentrant=False)`; also a method of the class or of a base class called on `self`,
    `self._apply_checkpoint(proj_func, x)` with `def _apply_checkpoint(self, func, *args,
    **kwargs)` that checkpoints `func` when gradient checkpointing is on and else calls it)
    checkpoints what its callers pass, and a module whose `forward`
    checkpoints the module its `__init__` was given (`CheckpointWrapper(nn.Linear(...))`)
    that module (`analysis/helpers.py`; `tests/test_checkpoint_mined.py`).

    ## Why is this bad?
    Checkpointing saves memory by dropping the activations *inside* a segment and keeping only
    its inputs. A single op keeps at most one tensor of its input's size for backward, and the
    checkpoint has to keep the input anyway, so the peak does not move. With the
    reentrant variant (`use_reentrant=True`, or the argument omitted) the op is also recomputed
    in backward, and when its input does not require grad (the image batch going into the
    first conv) its weights get no gradient at all: the layer is silently never trained.
    Checkpointing does not cache anything to disk; it recomputes.

    ## Example
    ```python
    import torch.nn as nn
    import torch.utils.checkpoint as checkpoint


    class Stem(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, padding=1)

        def forward(self, x):
            x = checkpoint.checkpoint(self.conv1, x, use_reentrant=False)
            return x
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Stem(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 3, padding=1)

        def forward(self, x):
            x = self.conv1(x)
            return x
    ```
    To save memory, checkpoint whole blocks, for example each residual block of the early,
    high-resolution stages (see TML405).

    ## Fix safety
    The fix calls the op directly. It is safe when the call passes `use_reentrant=False`: the
    non-reentrant variant either stops before the op runs again (a conv keeps only its inputs)
    or recomputes exactly the values it had, so outputs and gradients are identical with and
    without it (tested in `tests/test_checkpoint_rules.py`). It is unsafe otherwise:
    unwrapping a reentrant checkpoint gives the op's parameters the gradients the reentrant
    variant dropped when its input did not require grad. That is the bug being fixed, but it
    changes training, so it needs `--unsafe-fixes`. A checkpointed BatchNorm is
    recomputed even by the non-reentrant variant (its saved statistics come out of the op), so
    unwrapping it halves its running-statistics updates (TML403): unsafe as well, and so is a
    call through a name that may also hold another function (OLMo's `self._activation_checkpoint_fn
    = checkpoint_func or activation_checkpoint_function(cfg)`: the caller's function may do
    more than checkpoint; `None` does not count, it cannot be called). No fix is
    offered when the call passes `context_fn` or `**kwargs`, or when a lambda cannot be inlined.
    `checkpoint_wrapper(layer)` becomes `layer`: safe when it is non-reentrant (the default,
    `CheckpointImpl.NO_REENTRANT`), unsafe with `CheckpointImpl.REENTRANT` or a `checkpoint_fn`.
    timm's `checkpoint` without `use_reentrant` follows timm's global setting, and deepspeed's
    is reentrant: both unsafe.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0): checkpointing
    the stem conv leaves the peak (1,399,049,640 B) and the memory kept after forward
    (1,381,268,996 B) unchanged in both variants, and reentrantly the stem conv's weight gets no
    gradient. With every conv of resnet18 wrapped on its own (a pattern found in real code) the peak
    moves by 0.00 % (non-reentrant) / +0.46 % (reentrant), and the reentrant variant costs
    x1.296 FLOPs (+30 %) because it recomputes every conv in backward.
    `tests/test_checkpoint_rules.py` reproduces the missing gradient and proves the safe fix.
    """

    code = "TML402"
    # every checkpointing function's name holds it, and a project's checkpointing module
    # class (`CheckpointWrapper(layer)`, `analysis/helpers.py`) is named so
    needs = (("checkpoint", "Checkpoint"),)
    needs_project = True  # a project's own checkpoint helper, or a layer builder, may be in another file
    project_facts = frozenset({"imports"})
    name = "single-op-checkpoint"
    summary = "`checkpoint` around a single cheap layer saves no memory"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("safe", "unsafe")

    def visit_Module(self, node: cst.Module) -> None:
        for call in checkpoint_calls(self.context):
            op = call.single_op()
            if op is None:
                continue
            if call.applied is not None:  # no fix: which modules `check_fn` wraps is the caller's choice
                self.report(call.node, self._applied_message(call, op))
            elif call.form == MODULE:
                self.report(call.node, self._module_message(call, op), self._unwrap(call, op))
            else:
                self.report(call.node, self._message(call, op), self._fix(call, op))

    def _module_message(self, call: CheckpointCall, op: SingleOp) -> str:
        message = (
            f"`checkpoint_wrapper` around a single `{op.name}` saves no memory. The op keeps at "
            "most one input-sized tensor for backward and checkpoint keeps its input anyway"
        )
        return message + _recomputes(call) + f"; use `{self.code_for(call.target)}` unwrapped"

    def _applied_message(self, call: CheckpointCall, op: SingleOp) -> str:
        message = (
            f"`apply_activation_checkpointing` wraps each `{op.name}` alone, which saves no memory. "
            "The op keeps at most one input-sized tensor for backward and checkpoint keeps its input anyway"
        )
        return message + _recomputes(call) + "; let `check_fn` select whole blocks"

    def _unwrap(self, call: CheckpointCall, op: SingleOp) -> Optional[FixSpec]:
        code = self.code_for(call.target)
        if "\n" in self.code_for(call.node) or call.star_kwargs or "checkpoint_fn" in call.keywords:
            return None
        safe = call.reentrant is False and not op.stateful
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        return FixSpec(applicability, "Use the layer without `checkpoint_wrapper`", (NodeEdit(call.node, code),))

    def _message(self, call: CheckpointCall, op: SingleOp) -> str:
        name = self.code_for(call.called)
        message = (
            f"`{call.wrapper.name}` around a single `{op.name}` saves no memory. The op keeps at most "
            "one input-sized tensor for backward and checkpoint keeps its input anyway"
        )
        if call.reentrant is False:
            return message + f"; call `{name}` directly"
        variant = "the reentrant variant" if call.reentrant else "if reentrant, it"
        message += f"; {variant} recomputes it in backward (+30 % FLOPs for every conv of resnet18)"
        if op.parametric:
            origin = call.input_origin()
            if origin is not None:
                message += (
                    f", and its input is `{origin[0]}`, the argument of `{origin[1]}`: if that is "
                    f"the data batch (no requires_grad), `{name}` gets no gradient at all"
                )
            else:
                message += (
                    f" and gives `{name}` no gradient whenever its input does not require grad"
                )
        return message + f"; call `{name}` directly"

    def _fix(self, call: CheckpointCall, op: SingleOp) -> Optional[FixSpec]:
        direct = call.direct_call()
        if direct is None:
            return None
        node, doomed = call.node, direct.removed
        edits = _delete_arguments(node, doomed)
        function_code = self.code_for(direct.function)
        extra_code = ", ".join(
            self.code_for(arg.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip()
            for arg in direct.extra
        )
        if edits is None or "\n" in function_code or "\n" in extra_code:
            return None
        edits.append(NodeEdit(node.func, function_code))
        if extra_code:
            last_kept = max(index for index in range(len(node.args)) if index not in doomed)
            edits.append(NodeEdit(node.args[last_kept].value, ", " + extra_code, "after"))
        # a name that may also hold another function (a caller's `checkpoint_func`): unwrapping
        # is what checkpoint computes, not necessarily what that function does
        safe = call.reentrant is False and not op.stateful and call.wrapper.sole
        applicability = Applicability.SAFE if safe else Applicability.UNSAFE
        return FixSpec(applicability, "Call the op without `checkpoint`", tuple(edits))


def _recomputes(call: CheckpointCall) -> str:
    """The clause that says a reentrant (or possibly reentrant) checkpoint recomputes the op."""
    if call.reentrant is False:
        return ""
    variant = "the reentrant variant" if call.reentrant else "if reentrant, it"
    return f"; {variant} recomputes it in backward"


def _delete_arguments(call: cst.Call, doomed: Set[int]) -> Optional[List[NodeEdit]]:
    """Edits that remove some arguments of a call and keep its layout (trailing comma, lines).

    An argument's range covers its comma and the whitespace after it, so an argument followed
    by a kept one goes whole. The last one loses only its text: its comma and whitespace then
    close the call as before, and the last kept argument's comma goes instead.
    """
    kept = [index for index in range(len(call.args)) if index not in doomed]
    last_kept = kept[-1] if kept else -1
    last_doomed = max(doomed)
    edits: List[NodeEdit] = []
    for index in sorted(doomed):
        arg = call.args[index]
        if index != last_doomed or last_kept > last_doomed:
            edits.append(NodeEdit(arg, ""))
            continue
        if arg.star:
            return None
        parts = (arg.keyword, arg.equal, arg.value) if arg.keyword is not None else (arg.value,)
        edits.extend(NodeEdit(part, "") for part in parts if isinstance(part, cst.CSTNode))
        if not kept and type(arg.comma) is cst.Comma:
            edits.append(NodeEdit(arg.comma, ""))
    if kept and last_kept < last_doomed and type(call.args[last_kept].comma) is cst.Comma:
        edits.append(NodeEdit(call.args[last_kept].comma, ""))
    return edits


# -- TML403 ---------------------------------------------------------------------------------
class BatchNormInCheckpoint(Rule):
    """
    ## What it does
    Flags `checkpoint(f, ...)` and `checkpoint_sequential(f, ...)` where `f` contains a
    BatchNorm layer (or `F.batch_norm(..., training=...)`): `self.block` is followed to its
    `__init__` value, through `nn.Sequential(...)` contents and classes defined in the same
    file (their `__init__` modules and the functions their `forward` calls).

    Known checkpoint functions: torch's `checkpoint` and `checkpoint_sequential` (all segments
    but the last); timm's `checkpoint(f, x)` and `checkpoint_seq(blocks, x)` (every element of
    a container or of a list of them, the last one left out with `skip_last=True`; imported
    from `timm.models`, `timm.models._manipulate`, `timm.models.helpers`, or relatively in
    timm's own files), which timm models run when `set_grad_checkpointing()` is on;
    `checkpoint_wrapper(Block(...))` (`torch.distributed.algorithms._checkpoint.
    checkpoint_wrapper`: every call of the module is checkpointed); deepspeed's
    `deepspeed.checkpointing.checkpoint(f, x)`; fairscale's `checkpoint_wrapper`;
    transformers' `self._gradient_checkpointing_func(layer.__call__, x)` (the partial of torch's
    checkpoint that `gradient_checkpointing_enable()` sets), and transformers 5's layer classes
    deriving `GradientCheckpointingLayer`, whose every call it checkpoints while gradient
    checkpointing is on (reported at the class, `analysis/checkpointed_layers.py`);
    `functools.partial` of any of them;
    a project's own helper function or checkpointing module that hands its callable or module
    on to one of them, as for TML402. A layer list checkpointed in a loop is followed as for
    TML402, also through a closure factory (`checkpoint(create_custom_forward(layer), x)`).
    Of timm's layers, `BatchNormAct2d` and
    `ConvNormAct` (`ConvBnAct`) without `norm_layer=` or `**kwargs` count as BatchNorm, and so
    do torchvision's and timm's ResNet `BasicBlock`/`Bottleneck` and torchvision's `resnet*`
    constructors without a `norm_layer` argument (their documented default is BatchNorm2d);
    e2cnn's and escnn's `InnerBatchNorm` and `IIDBatchNorm1d/2d/3d` keep running statistics too
    unless `track_running_stats=False` (tests/test_checkpoint_equivariant_norms.py);
    a `**dd` whose value is a dict literal of the function (`dd = {'device': device, 'dtype':
    dtype}`) is read as its keywords, and timm's `get_norm_layer(norm_layer)`/`get_act_layer`
    keep a class passed to them. Of mmcv's builders, `build_norm_layer(norm_cfg, c)` and
    `ConvModule(..., norm_cfg=norm_cfg)` count as BatchNorm when the config's `type` is `BN`,
    `BN1d`/`2d`/`3d`, `SyncBN`, `MMSyncBN` or `NaiveSyncBN`: a dict literal, or a parameter
    whose default is one, also where the body copies it first (`norm_cfg =
    copy.deepcopy(norm_cfg)`, `cfg.copy()`, `dict(cfg, ...)`), unless a call in the file passes
    another type or the body may set its `type` (`cfg['type'] = ...`, `cfg.update(other)`); a
    parameter without a default, or `norm_cfg=None`, is not followed. Also followed: a function defined in the
    calling method (`def _inner_forward(x): ...; cp.checkpoint(_inner_forward, x)`), a layer
    registered by `self.add_module(self.norm1_name, norm1)` and read by `getattr(self,
    self.norm1_name)` (also through a `@property`), a builder function or method that
    returns the blocks it appended (`return blocks, feature_info`) or added to a local
    `nn.Sequential()` with `add_module` (in any branch of a loop over a config string), and a constant slice of
    a container (`checkpoint_seq(self.body[2:], x)`: only those elements).
    A class or function that another file of the project defines (`from .blocks import Block`,
    `from layers import *`, a re-export through a package's `__init__.py`, a base class) is
    followed into that file the same way, so a project split into files gets the findings of
    the same code in one file (`tests/test_project_rules.py`). A subclass's `self.norm_cfg`
    that only its base class's `__init__` sets is that parameter's default, or what the
    subclass's `super().__init__(...)` passes for it (a `**kwargs` leaves the default), and a
    method it inherits (`@property def norm1(self): return getattr(self, self.norm1_name)`)
    runs on the subclass's own `add_module`s (Res2Net over ResNet's `Bottleneck`); a
    subclass without an `__init__`, or whose `super().__init__(...)` passes none of the
    base's defaulted parameters, has the modules the base's `__init__` builds (a subclass
    that passes `norm_cfg=dict(type='GN')` up is not read as the default)
    (`tests/test_checkpoint_inherited.py`); the project is the files linted
    and the other modules of their packages, or a script's sibling files. Blocks that a builder
    object assembles from strings at run time (timm's `EfficientNetBuilder`, so efficientnet
    and mobilenetv3), stages registered under computed names (`self.add_module(*stage)` in
    timm's resnet) and block classes passed in as arguments are not followed. torch's
    `apply_activation_checkpointing(model, checkpoint_wrapper_fn=..., check_fn=...)` checkpoints
    the classes its `check_fn` selects (`lambda m: isinstance(m, Block)`, a tuple of classes,
    `type(m) in (...)`, also a `def` or a lambda bound to a name; reported at `check_fn`;
    `analysis/applied.py`); a `check_fn` that tests anything else is not followed.

    ## Why is this bad?
    In train mode BatchNorm updates its running statistics on every forward call, and
    checkpointing calls the segment's forward twice: once in forward, once when backward
    recomputes it. `num_batches_tracked` advances by 2 per step and the running mean moves
    0.19·μ instead of 0.1·μ with momentum 0.1, so the statistics used at evaluation drift from
    what the same training without checkpointing gives. Gradients are not affected. Both the
    reentrant and the non-reentrant variant do this.

    ## Example
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Block(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.conv = nn.Conv2d(c, c, 3, padding=1)
            self.bn = nn.BatchNorm2d(c)

        def forward(self, x):
            return self.bn(self.conv(x))


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = Block(64)

        def forward(self, x):
            return checkpoint(self.block, x, use_reentrant=False)
    ```

    ## Use instead
    Keep BatchNorm outside the checkpointed segment, or use the non-reentrant variant with a
    `context_fn` whose recomputation context sets BatchNorm `momentum` to 0 and restores
    `num_batches_tracked` (bitwise-identical statistics and gradients were measured this way);
    GroupNorm/LayerNorm keep no running statistics.

    ## Fix safety
    No fix: moving a layer out of a segment or writing a `context_fn` changes the model's
    code structure.

    ## Measured
    `benchmarks/memory_figures.py` (torch 2.13.0), BatchNorm in a checkpointed segment, train
    mode, momentum 0.1, one step: num_batches_tracked 2 instead of 1 and running_mean 1.9 times
    the value without checkpointing (0.19·μ instead of 0.1·μ), in both variants; parameter
    gradients equal. `tests/test_checkpoint_rules.py` reproduces all three on its fixture.
    """

    code = "TML403"
    needs = (("checkpoint", "Checkpoint"),)  # as for TML402
    needs_project = True  # blocks imported from other files are followed there
    project_facts = frozenset({"imports"})
    name = "batchnorm-in-checkpoint"
    summary = "BatchNorm inside a checkpointed segment updates its running statistics twice"

    def visit_Module(self, node: cst.Module) -> None:
        for call in checkpoint_calls(self.context):
            found, label = call.contents()
            item = found.get(BATCH_NORM)
            if item is None:
                continue
            self.report(
                call.target,
                "Checkpoint updates a BatchNorm's running statistics twice. "
                f"{label[:1].upper()}{label[1:]} contains `{item.what}`{item.located()}: in train mode its running "
                "statistics are updated again when checkpoint recomputes the segment in backward "
                "(num_batches_tracked +2 per step, running_mean moves 0.19·μ instead of 0.1·μ with "
                "momentum 0.1; gradients unaffected); keep BatchNorm outside the segment"
                + (" or recompute with momentum 0 via `context_fn`" if call.wrapper.torch_keywords else ""),
            )
        for layer in checkpointed_layers(self.context):
            item = layer.contents().get(BATCH_NORM)
            if item is None:
                continue
            self.report(
                layer.node.name,
                "Checkpoint updates a BatchNorm's running statistics twice. "
                f"`{layer.node.name.value}` derives `{layer.base}`, whose every call transformers "
                f"checkpoints while gradient checkpointing is on, and contains `{item.what}`{item.located()}: "
                "in train mode its running statistics are updated again when the layer is recomputed in "
                "backward (num_batches_tracked +2 per step, running_mean moves 0.19·μ instead of 0.1·μ with "
                "momentum 0.1; gradients unaffected); keep BatchNorm out of the layer",
            )


# -- TML404 ---------------------------------------------------------------------------------
class CheckpointRandomWithoutRngState(Rule):
    """
    ## What it does
    Flags `preserve_rng_state=False` on a `checkpoint`/`checkpoint_sequential` call whose
    segment runs dropout or another random op: `nn.Dropout*`, `nn.RReLU`, transformer layers
    with dropout, `F.dropout`, `torch.rand*`/`torch.bernoulli`, `.bernoulli_()` and other
    in-place samplers, reached through `self.x`, `nn.Sequential(...)` and classes of the
    same file as for TML403. The keyword is also passed on by timm's `checkpoint(f, x, ...)`
    and by `checkpoint_wrapper(module, preserve_rng_state=False)`, reported alike, also in the
    `partial(checkpoint_wrapper, ..., preserve_rng_state=False)` that
    `apply_activation_checkpointing(model, checkpoint_wrapper_fn=..., check_fn=...)` wraps the
    classes its `check_fn` selects with (as for TML403); timm's
    `checkpoint_seq` takes no such keyword and deepspeed's `checkpoint` always restores the RNG
    states.

    ## Why is this bad?
    Backward recomputes the segment. Without the saved RNG state the recomputation draws new
    dropout masks, so the gradients are computed for a different network than the one that
    produced the output: they are wrong, while the forward output and the loss look normal.
    The recomputation also consumes the global random stream, shifting every later random
    number.

    ## Example
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class MLPBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * d, d))

        def forward(self, x):
            return checkpoint(self.mlp, x, use_reentrant=False, preserve_rng_state=False)
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class MLPBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(4 * d, d))

        def forward(self, x):
            return checkpoint(self.mlp, x, use_reentrant=False)
    ```

    ## Fix safety
    Unsafe: the fix removes the argument, which restores the gradients of the model without
    checkpointing (tested in `tests/test_checkpoint_rules.py`). That changes the gradients
    (from wrong to right) and the random numbers every later step draws (the recomputation no
    longer consumes the global generator), so it is not behaviour-preserving.

    ## Measured
    `benchmarks/memory_figures.py` (torch 2.13.0), a Linear-ReLU-Dropout-Linear segment: with
    `preserve_rng_state=True` (the default) the gradients are bitwise equal to the model without
    checkpointing; with `False` the output is identical but three parameters get different
    gradients (max abs difference 0.035 here; the size depends on the model). `tests/test_checkpoint_rules.py` reproduces the difference and shows
    that the fix restores the gradients of the model without checkpointing.
    """

    code = "TML404"
    needs = (("checkpoint",), ("preserve_rng_state",))
    needs_project = True  # a project's own checkpoint helper may be in another file
    project_facts = frozenset({"imports"})
    name = "checkpoint-random-without-rng-state"
    summary = (
        "`preserve_rng_state=False` around dropout: recomputed masks differ, gradients are wrong"
    )
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        for call in checkpoint_calls(self.context):
            argument = call.rng_state_off
            if argument is None:
                continue
            found, label = call.contents()
            item = found.get(RANDOM)
            if item is None:
                continue
            self.report(
                argument,
                f"`preserve_rng_state=False` around `{item.what}` gives wrong gradients. "
                f"{label[:1].upper()}{label[1:]} runs `{item.what}`{item.located()}: "
                "the recomputation in backward draws different random numbers, so the gradients "
                "are wrong while the output and the loss are unchanged; remove the argument",
                self._removal(call, argument),
            )

    @staticmethod
    def _removal(call: CheckpointCall, argument: cst.Arg) -> Optional[FixSpec]:
        edits = _delete_arguments(call.keywords_node, {call.index_of(argument)})
        if edits is None:
            return None
        return FixSpec(Applicability.UNSAFE, "Remove `preserve_rng_state=False`", tuple(edits))


# -- TML405 ---------------------------------------------------------------------------------
class DeepStackWithoutCheckpoint(Rule):
    """
    ## What it does
    Suggests activation checkpointing for a module whose `forward` runs a deep stack of
    blocks, itself or in a method of the class it calls (`self.forward_features(x)`, and what
    that calls, up to 3 methods deep), with no checkpointing anywhere in the class:
    `for blk in self.blocks: x = blk(x)`
    or `x = self.blocks(x)` over an `nn.ModuleList`/`nn.Sequential` built in `__init__`
    (a literal list, `[Block() for _ in range(depth)]`, `*` splats, a list filled by
    `append` in a `for` loop), or a chain `x = self.layer1(x)`, `x = self.layer2(x)`, ...
    A block is a class of this file or an `nn.Sequential` that builds at least 4 torch
    layers, a torch transformer layer, a `_make_layer`-style method returning an
    `nn.Sequential`, or an imported class named `...Block`, `...Bottleneck`, `...Stage`,
    `...EncoderLayer`, `...DecoderLayer` or `...Residual`; single layers, conv-norm-act triples
    and unknown factories (`norm_layer(...)`) are not. The number of blocks must be known
    (literal, or an `__init__` default such as `depth=12`) and at least
    `checkpoint-min-blocks` (default 4). Classes that mention checkpointing at all
    (`checkpoint_seq`, `self.grad_checkpointing`, ...) and blocks that checkpoint themselves
    are left alone.

    Off by default: a missing checkpoint is not a defect, only an option when training runs
    out of memory; enable it with `--extend-select TML405`.

    ## Why is this bad?
    Every block keeps its activations for backward; checkpointing a block keeps only its
    input and recomputes the rest in backward. Where to checkpoint matters: the peak is set
    during the backward of the early, high-resolution stages, so checkpointing only the last
    (deepest) stages barely moves it, while checkpointing every block or the early stages
    does, at a compute cost.

    ## Example
    ```python
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

        def forward(self, x):
            return x + self.mlp(self.norm(x))


    class Encoder(nn.Module):
        def __init__(self, depth=12, dim=64):
            super().__init__()
            self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    from torch.utils.checkpoint import checkpoint


    class Block(nn.Module):
        def __init__(self, dim):
            super().__init__()
            self.norm = nn.LayerNorm(dim)
            self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))

        def forward(self, x):
            return x + self.mlp(self.norm(x))


    class Encoder(nn.Module):
        def __init__(self, depth=12, dim=64):
            super().__init__()
            self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])

        def forward(self, x):
            for block in self.blocks:
                x = checkpoint(block, x, use_reentrant=False)
            return x
    ```
    `torchmemlint profile FILE:Model --input-shape ...` measures the peak of candidate
    placements on your shapes (the profiler answers this rule with placements).

    ## Fix safety
    No fix: where to checkpoint is a trade of compute for memory that depends on the shapes.

    ## Measured
    `benchmarks/memory_figures.py` (resnet18, batch 64 at 224², torch 2.13.0), peak of a
    training step with non-reentrant checkpointing: every BasicBlock -30.6 % (x1.32 compute),
    layer1 only -19.6 % (x1.09), layer3+layer4 only -1.0 % (x1.15) although the memory kept
    after forward drops 11.6 %. Reentrant: every block -26.9 %, layer3+layer4 +0.1 %.
    """

    code = "TML405"
    needs = (("forward",),)  # a stack is run by a `forward`
    name = "deep-stack-without-checkpoint"
    summary = "A deep stack of blocks runs without activation checkpointing"
    default_enabled = False
    options = (
        RuleOption(
            "checkpoint-min-blocks",
            int,
            4,
            "TML405: report a stack only when it has at least this many blocks.",
        ),
    )

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        minimum = self.option("checkpoint-min-blocks")
        stacks = class_stacks(self.context.analysis.callables, self.context.module, node, self.context.bindings, minimum)
        # one finding per statement: the last stack found there (a chain over containers)
        for stack in {id(stack.statement): stack for stack in stacks}.values():
            self._report(stack)

    def _report(self, stack: Stack) -> None:
        through = ", ".join(f"`self.{name}`" for name in stack.via)
        through = f" (through {through})" if through else ""
        self.report(
            stack.node,
            f"{stack.count} stacked blocks run without activation checkpointing. "
            f"`forward`{through} runs {stack.description} without activation checkpointing; if "
            "training runs out of memory, checkpoint each block or the early "
            "high-resolution stages, not the deepest ones (resnet18: every block -30.6 % "
            "peak at x1.32 compute, layer3+layer4 -1.0 %); measure placements with "
            "`torchmemlint profile`",
        )

