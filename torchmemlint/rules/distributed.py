"""TML7xx: the memory mistakes of distributed training (DDP, FSDP, torchrun scripts).

Each rule asks the file's distributed facts (``analysis/distributed.py``: the DDP
constructions with the keywords they resolve to, ``torch.load`` calls without a device,
``empty_cache`` in training steps, ``zero_grad`` calls that keep the gradients) and words the
findings and their fixes.
"""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.distributed import distributed_facts
from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule


class DdpWithoutGradientAsBucketView(Rule):
    """
    ## What it does
    Flags `DistributedDataParallel(...)` (however it is imported: `DDP`, `nn.parallel.
    DistributedDataParallel`, with keywords spread from a dict built beside it, from a dict
    `__init__` keeps on `self`, or from `dataclasses.asdict` of a same-file dataclass; a
    parameter that defaults to None and is replaced by a default, `kwargs or {}`, is read as
    that default: what the DDP gets when the caller passes nothing) without
    `gradient_as_bucket_view=True`, and accelerate's `DistributedDataParallelKwargs(...)` and
    Lightning's `DDPStrategy(...)`, whose keywords reach the DDP they build, without it. The
    DDP subclasses of OpenMMLab are DDPs too: mmengine's `MMDistributedDataParallel(module=...,
    **kwargs)` passes its keywords to DDP's constructor and mmcv's (1.x) keeps DDP's. Any of
    these built through `functools.partial` gets the partial's keywords
    (`partial(DistributedDataParallelKwargs, find_unused_parameters=True)`, a default handler
    factory), unless a call of the partial passes the flag or a `**mapping`
    (`tests/test_distributed_rules.py`).

    ## Why is this bad?
    DDP's reducer copies every gradient into its communication buckets, flat tensors as large
    as all the gradients together, allocated when the model is wrapped and kept. By default
    the gradients and the buckets are two copies; with `gradient_as_bucket_view=True` each
    `param.grad` is a view into its bucket, and the second copy is gone.

    ## Example
    ```python
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from model import Net

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    model = DDP(model, device_ids=[local_rank])
    ```

    ## Use instead
    ```python
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from model import Net

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    model = DDP(model, device_ids=[local_rank], gradient_as_bucket_view=True)
    ```

    ## Fix safety
    Unsafe. The training computes the same numbers, but `param.grad` becomes a view into a
    bucket: code that calls `param.grad.detach_()` or `requires_grad_()` on a gradient fails,
    code that replaces `param.grad` with a new tensor breaks the aliasing (the next all-reduce
    no longer writes into it), and a gradient kept across iterations is overwritten by the
    next backward.

    ## Measured
    CPU estimate of CUDA (`benchmarks/distributed_figures.py`, `results/distributed_figures.json`:
    `torchmemlint profile --parallel ddp` on fake tensors, DDP's buckets modelled as its reducer
    allocates them), one rank of 8 training the 12x768 `nn.TransformerEncoder` LM of
    `fixtures/models/transformer_lm.py`. What the rank holds once backward is done
    (parameters, buckets and gradients) falls from 1,610,477,568 B to 1,073,651,712 B: the
    536,825,856 B of separate gradients. Whether the peak falls depends on where it is: at
    1x128 tokens the step's peak falls from 553,604,096 B to 214,545,408 B and the steady
    state with Adam (`--budget`: parameters, buckets, optimizer state and the larger of the
    step and the update) from 3,220,956,160 B to 2,684,130,304 B (-16.7 %); at 4x512 tokens
    the step's peak (2,033,464,320 B, in backward) and the steady state (4,180,784,128 B) do
    not change: there the activations, not the gradients, set the peak.
    """

    code = "TML701"
    name = "ddp-without-gradient-as-bucket-view"
    summary = "DDP without `gradient_as_bucket_view=True` keeps a second copy of every gradient in its buckets"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)
    needs = (("DistributedDataParallel", "DDPStrategy"),)
    # its constructors are qualified names (torch's, accelerate's, Lightning's, OpenMMLab's):
    # `from accelerate import DistributedDataParallelKwargs` in a package's `__init__.py`
    # need not name torch
    needs_torch = False

    def visit_Module(self, node: cst.Module) -> None:
        for ddp in distributed_facts(self.context).ddp_constructions():
            if not ddp.bucket_view_off:
                continue
            if ddp.bucket_view is None:
                edit = None
                if ddp.last_argument is not None:
                    edit = NodeEdit(ddp.last_argument, ", gradient_as_bucket_view=True", "after")
                passed = "Without `gradient_as_bucket_view=True`"
            else:
                edit = NodeEdit(ddp.bucket_view, "True") if ddp.through is None else None
                passed = "With `gradient_as_bucket_view=False`"
            if ddp.through is not None:
                passed += " (read from %s)" % ddp.through
            fix = None if edit is None else FixSpec(
                Applicability.UNSAFE, "Pass `gradient_as_bucket_view=True`", (edit,))
            self.report(
                ddp.node,
                "%s keeps every gradient twice. %s the reducer's buckets hold a second copy of "
                "each gradient; as bucket views the gradients take no extra memory" % (ddp.what, passed),
                fix,
            )


class LoadWithoutMapLocation(Rule):
    """
    ## What it does
    Flags `torch.load(path)` without `map_location` in a file that runs one process per
    device: it imports `torch.distributed`, DDP, FSDP, accelerate, DeepSpeed or a Lightning
    strategy, or reads torchrun's `LOCAL_RANK`/`RANK`/`WORLD_SIZE`. Off by default: the
    linter cannot see what the file holds, and RNG states, learning-rate schedulers, gradient
    scalers and files saved from the CPU hold no GPU tensor, so their loads are harmless
    (most of the loads it finds in transformers' `Trainer` are such).

    ## Why is this bad?
    `torch.load` puts every tensor back on the device it was saved from. A checkpoint saved by
    rank 0 of a GPU job says `cuda:0`, so every rank loads a full copy onto GPU 0: with 8
    ranks, 8 copies of the checkpoint on the first card, next to that rank's own model, until
    they are freed - a common cause of out-of-memory errors on GPU 0 only, at resume time.

    ## Example
    ```python
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from model import Net

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    state = torch.load("checkpoint.pt")
    model.load_state_dict(state)
    ```

    ## Use instead
    ```python
    import os

    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from model import Net

    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = Net().cuda(local_rank)
    state = torch.load("checkpoint.pt", map_location="cpu")  # or f"cuda:{local_rank}"
    model.load_state_dict(state)
    ```

    ## Fix safety
    Unsafe. The fix passes `map_location="cpu"`: `model.load_state_dict` and
    `optimizer.load_state_dict` copy or cast the values onto the model's device, so loading a
    state dict behaves the same; a tensor of the checkpoint used directly is on the CPU
    instead of the GPU it was saved from.

    ## Measured
    Not measured on GPUs (this project's figures are CPU estimates). What one rank restores
    onto the saving device is the checkpoint's tensors: for the 12x768 `nn.TransformerEncoder`
    LM of `fixtures/models/transformer_lm.py`, 536,825,856 B of parameters and buffers
    (`benchmarks/distributed_figures.py`, `results/distributed_figures.json`, fake tensors),
    so 8 ranks put 4,294,606,848 B on GPU 0 besides rank 0's own model (arithmetic on the
    measured size).
    """

    code = "TML702"
    default_enabled = False
    name = "load-without-map-location"
    summary = ("`torch.load` without `map_location` in a multi-process script loads every rank's copy "
               "onto the saving GPU")
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)
    needs = (("load",), ("distributed", "DistributedDataParallel", "fsdp", "accelerate", "deepspeed",
                         "RANK", "WORLD_SIZE", "lightning", "multiprocessing"))

    def visit_Module(self, node: cst.Module) -> None:
        facts = distributed_facts(self.context)
        if not facts.has_loads():
            return
        evidence = facts.multi_device_evidence()
        if evidence is None:
            return
        for load in facts.loads_without_map_location():
            fix = None
            if load.last_argument is not None:
                fix = FixSpec(Applicability.UNSAFE, 'Pass `map_location="cpu"`',
                              (NodeEdit(load.last_argument, ', map_location="cpu"', "after"),))
            self.report(
                load.node,
                "`torch.load` without `map_location` loads onto the GPU the tensors were saved "
                "from. In a multi-process script (%s) every rank puts its copy there (cuda:0 for "
                "rank 0's checkpoint); pass `map_location=\"cpu\"` or the rank's device" % evidence,
                fix,
            )


class EmptyCacheInTrainingLoop(Rule):
    """
    ## What it does
    Flags `torch.cuda.empty_cache()` inside a loop that trains (the loop calls `.backward()`
    or an optimizer's `.step()`) and in the per-step hooks of a Lightning module
    (`training_step`, `on_train_batch_end`, ...). Off by default: it costs time, not memory.

    ## Why is this bad?
    `empty_cache()` returns the caching allocator's free blocks to the driver. The next step
    allocates the same tensors again, so the blocks come back through `cudaMalloc`, which
    synchronizes the device: every step pays for it and the peak does not move. It lowers
    `nvidia-smi`'s figure between steps only; it frees nothing a tensor holds.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(10, 2).cuda()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 10).cuda(), torch.randint(0, 2, (8,)).cuda())]

    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        torch.cuda.empty_cache()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(10, 2).cuda()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 10).cuda(), torch.randint(0, 2, (8,)).cuda())]

    for x, y in loader:
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    ```

    ## Fix safety
    No fix. Removing the call changes no result; it changes what other processes on the same
    GPU can allocate between this process's steps, which only the user can judge.

    ## Measured
    A model of CUDA's caching allocator, not a GPU measurement (`benchmarks/distributed_figures.py`,
    `results/distributed_figures.json`): the alloc/free stream of one training step of the
    12x768 `nn.TransformerEncoder` LM of `fixtures/models/transformer_lm.py` at 4x512 tokens
    (fake tensors, CPU estimate of CUDA) replayed twice. The reserved peak is 2,059,403,264 B
    whether the cache is kept or emptied between the steps; with it kept the second step
    creates no new segment, after `empty_cache()` it creates the first step's 70 again (70
    `cudaMalloc` calls a step). The time they cost was not measured (no GPU).
    """

    code = "TML703"
    name = "empty-cache-in-training-loop"
    summary = "`torch.cuda.empty_cache()` in a training loop frees nothing the next step does not allocate again"
    default_enabled = False
    needs = (("empty_cache",),)

    def visit_Module(self, node: cst.Module) -> None:
        for site in distributed_facts(self.context).empty_cache_per_step():
            if site.per_step_method is not None:
                where = "`%s` (run every training step)" % site.per_step_method
            else:
                where = "a training loop"
            self.report(
                site.node,
                "`torch.cuda.empty_cache()` every training step frees nothing for the next. It "
                "runs in %s: the next step allocates the same blocks again (through cudaMalloc, "
                "which synchronizes); the peak does not move" % where,
            )


class ZeroGradKeepsGradients(Rule):
    """
    ## What it does
    Flags `optimizer.zero_grad(set_to_none=False)` and `model.zero_grad(set_to_none=False)`
    (also `zero_grad(False)`, the keyword spread from a dict built beside the call, and a
    method's own parameter passed on, `def zero_grad(self, set_to_none=False): ...
    opt.zero_grad(set_to_none=set_to_none)`, whose default is False). A call with a second
    argument (`self.containers[k].zero_grad(set_to_none, force)`) is a project's own method,
    not torch's `zero_grad(set_to_none=True)`: the torch call it hands the value to is the site.

    ## Why is this bad?
    With `set_to_none=False` every gradient stays allocated, filled with zeros, through the
    next forward: the step's peak holds the gradients and the activations together. With
    `set_to_none=True` (the default since torch 2.0) the gradients are freed and backward
    allocates each one when it is produced, as activations are being freed.

    ## Example
    ```python
    import torch
    from torch import nn

    model = nn.Linear(10, 2).cuda()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 10).cuda(), torch.randint(0, 2, (8,)).cuda())]

    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Use instead
    ```python
    import torch
    from torch import nn

    model = nn.Linear(10, 2).cuda()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = [(torch.randn(8, 10).cuda(), torch.randint(0, 2, (8,)).cuda())]

    for x, y in loader:
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
    ```

    ## Fix safety
    Unsafe. The fix removes the argument. It behaves differently where a gradient is read
    between `zero_grad` and `backward` (`p.grad` is None, not zeros), where gradients are
    accumulated by hand (`p.grad += ...`), and for a parameter that receives no gradient in a
    step: the optimizer skips it (no momentum or Adam update), while a zero gradient still
    moves it by the momentum terms.

    ## Measured
    CPU estimate of CUDA (`benchmarks/distributed_figures.py`, `results/distributed_figures.json`:
    fake tensors with CUDA's attention and dropout kernels emulated, 512-byte blocks): the
    second training step of the 12x768 `nn.TransformerEncoder` LM of
    `fixtures/models/transformer_lm.py` at 4x512 tokens peaks at 2,570,290,176 B above the
    parameters after `zero_grad(set_to_none=False)` and at 2,033,464,320 B after `zero_grad()`
    (-20.9 %: the 536,825,856 B of gradients, which exist through the forward in the first case).
    """

    code = "TML704"
    name = "zero-grad-keeps-gradients"
    summary = "`zero_grad(set_to_none=False)` keeps every gradient allocated through the next forward"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)
    needs = (("zero_grad",), ("set_to_none", "False"))

    def visit_Module(self, node: cst.Module) -> None:
        for site in distributed_facts(self.context).zero_grads_keeping_gradients():
            fix = None
            if site.parameter is None and site.only_argument:
                fix = FixSpec(Applicability.UNSAFE, "Remove `set_to_none=False`",
                              (NodeEdit(site.node, self.code_for(site.node.func) + "()"),))
            if site.parameter is None:
                title = ("`zero_grad(set_to_none=False)` keeps every gradient allocated through the "
                         "next forward")
            else:
                title = ("`zero_grad` gets `set_to_none=False` from the default of `%s` and keeps "
                         "every gradient allocated" % site.parameter)
            self.report(
                site.node,
                title + ". They stay as zeros; without the argument the gradients are freed "
                "until backward makes them again",
                fix,
            )
