"""Per-rank memory under DDP and FSDP: ``torchmemlint profile --parallel ddp|fsdp --world-size N``.

No GPU and no second process: a fake process group of N ranks (torch's ``"fake"``
backend with its ``FakeStore``; collectives return at once, nothing is sent) and this
process as rank 0, the step run on fake tensors by the same tracker as the single-device
estimate (``measure.measure_training_step``).

* **FSDP** is torch's own FSDP2 code, ``torch.distributed.fsdp.fully_shard`` on a CPU
  device mesh of N ranks: the parameters are sharded DTensors, each wrapped module's
  parameters are all-gathered into the buffers FSDP allocates before its forward and
  backward, gradients are reduce-scattered from FSDP's own buffers.  Two things torch
  does that a dispatch-level tracker cannot see are reported to it here: FSDP frees and
  re-allocates the unsharded parameters by resizing their storage
  (``_fsdp_param.free_storage``/``alloc_storage``, no aten op), and the all-gather and
  reduce-scatter buffers are recorded as FSDP allocates them (``DefaultAllGather`` /
  ``DefaultReduceScatter.allocate``) to give their sizes.
* **DDP** cannot run: its C++ ``Reducer`` allocates its buckets with real storage and
  checks parameters across processes through data pointers, which fake tensors do not
  have.  It falls back to a stated model of what the reducer does: the buckets are the
  ones ``torch.distributed._compute_bucket_assignment_by_size`` (the function DDP calls)
  gives for DDP's steady-state caps (a first bucket of ``dist._DEFAULT_FIRST_BUCKET_BYTES``,
  then ``bucket_cap_mb``), allocated before the step and kept; each gradient is copied
  into its bucket when autograd has accumulated it (a post-accumulate-grad hook, as the
  reducer's autograd hook does); with ``gradient_as_bucket_view=True`` the parameter's
  ``.grad`` then becomes the view of its bucket and autograd's own gradient is freed.
  The all-reduce works in place on the buckets and allocates nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import torch
from torch import nn

from .errors import DynamicError
from .measure import InputSpec, StepReport, _as_dtype, measure_training_step
from .tracker import LiveTracker, round_up, storage_bytes

STRATEGIES = ("ddp", "fsdp")
DDP_BUCKET_CAP_MB = 25  # torch.nn.parallel.distributed._DEFAULT_BUCKET_CAP_MB
EVERY_BLOCK = "blocks"  # the default FSDP wrapping: every module held in an nn.ModuleList


@dataclass(frozen=True)
class ParallelOptions:
    strategy: str  # "ddp" or "fsdp"
    world_size: int
    wrap: Optional[Tuple[str, ...]] = None  # FSDP: class names to fully_shard; None = every block
    reshard_after_forward: bool = True  # FSDP
    param_dtype: Optional[str] = None  # FSDP MixedPrecisionPolicy
    reduce_dtype: Optional[str] = None
    gradient_as_bucket_view: bool = False  # DDP
    bucket_cap_mb: float = DDP_BUCKET_CAP_MB  # DDP

    def describe(self) -> str:
        if self.strategy == "ddp":
            return "DDP, world size %d, bucket_cap_mb=%g, gradient_as_bucket_view=%s" % (
                self.world_size, self.bucket_cap_mb, self.gradient_as_bucket_view)
        mixed = ""
        if self.param_dtype or self.reduce_dtype:
            mixed = ", MixedPrecisionPolicy(param_dtype=%s, reduce_dtype=%s)" % (
                self.param_dtype, self.reduce_dtype)
        return "FSDP2 fully_shard, world size %d, reshard_after_forward=%s%s" % (
            self.world_size, self.reshard_after_forward, mixed)


def check_options(options: ParallelOptions) -> None:
    """One-line errors for options that cannot work (before anything is built)."""
    if options.strategy not in STRATEGIES:
        raise DynamicError("--parallel must be ddp or fsdp, not %r" % (options.strategy,))
    if options.world_size < 1:
        raise DynamicError("--world-size must be at least 1, got %d" % options.world_size)
    if options.strategy == "ddp" and (options.wrap or options.param_dtype or options.reduce_dtype
                                      or not options.reshard_after_forward):
        raise DynamicError("--fsdp-wrap, --param-dtype, --reduce-dtype and --no-reshard-after-forward "
                           "are FSDP options; they do not apply to --parallel ddp")
    if options.strategy == "fsdp" and options.gradient_as_bucket_view:
        raise DynamicError("--gradient-as-bucket-view is a DDP option; it does not apply to --parallel fsdp")
    for name in (options.param_dtype, options.reduce_dtype):
        if name is not None:
            _as_dtype(name)


@dataclass
class ParallelReport:
    """One rank's memory: the step as measured, and what the wrapping added."""

    options: ParallelOptions
    step: StepReport  # per rank: param/grad bytes are the rank's shards
    unsharded_param_bytes: int  # the whole model's parameters, as one device holds them
    wrapped: List[str] = field(default_factory=list)  # FSDP: the modules given to fully_shard
    bucket_bytes: int = 0  # DDP: all buckets, in 512-byte blocks
    buckets: List[int] = field(default_factory=list)  # DDP: bytes of each bucket
    all_gather_bytes: int = 0  # FSDP: the largest all-gather output buffer
    reduce_scatter_bytes: int = 0  # FSDP: the largest reduce-scatter input buffer
    all_gathers: int = 0
    reduce_scatters: int = 0
    limits: List[str] = field(default_factory=list)

    @property
    def activation_bytes(self) -> int:
        """What forward keeps for backward (FSDP without resharding: with the gathered
        parameters it keeps too)."""
        return self.step.kept_after_forward

    def with_adam(self) -> Any:
        """The steady state with Adam, as ``--budget`` estimates it (``budget.MemoryEstimate``)."""
        from .budget import Budget, check_budget, optimizer_model

        check = check_budget(self.step, Budget(1 << 62, "unbounded"), optimizer_model("adam"))
        if self.options.gradient_as_bucket_view:
            _gradients_in_buckets(check, self)
        return check.estimate

    @property
    def communication_bytes(self) -> int:
        if self.options.strategy == "ddp":
            return self.bucket_bytes
        return self.all_gather_bytes + self.reduce_scatter_bytes

    def to_dict(self) -> Dict[str, Any]:
        return {
            "strategy": self.options.strategy,
            "world_size": self.options.world_size,
            "options": dataclasses.asdict(self.options),
            "param_bytes": self.step.param_bytes,
            "unsharded_param_bytes": self.unsharded_param_bytes,
            "grad_bytes": self.step.grad_bytes,
            "buffer_bytes": self.step.buffer_bytes,
            "input_bytes": self.step.input_bytes,
            "peak_bytes": self.step.peak_bytes,
            "activation_bytes": self.activation_bytes,
            "wrapped": list(self.wrapped),
            "bucket_bytes": self.bucket_bytes,
            "buckets": list(self.buckets),
            "all_gather_bytes": self.all_gather_bytes,
            "reduce_scatter_bytes": self.reduce_scatter_bytes,
            "all_gathers": self.all_gathers,
            "reduce_scatters": self.reduce_scatters,
            "limits": list(self.limits),
            "adam_state_bytes": self.with_adam().optimizer_state_bytes,
            "allocated_peak_with_adam_bytes": self.with_adam().allocated_bytes,
        }


# -- the fake process group --------------------------------------------------------------

@contextlib.contextmanager
def fake_process_group(world_size: int) -> Iterator[Any]:
    """A process group of ``world_size`` ranks in which this process is rank 0 and every
    collective returns at once; yields a 1-D CPU device mesh over it."""
    import torch.distributed as dist

    if not dist.is_available():
        raise DynamicError("--parallel needs torch.distributed, which this build of torch lacks")
    if dist.is_initialized():
        raise DynamicError("a process group is already initialized in this process")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world_size)
    try:
        # Built outside fake mode: the mesh reads its rank layout from a real tensor.
        yield init_device_mesh("cpu", (world_size,))
    finally:
        dist.destroy_process_group()


# -- FSDP ------------------------------------------------------------------------------

def wrap_targets(model: nn.Module, wrap: Optional[Sequence[str]]) -> List[Tuple[str, nn.Module]]:
    """The submodules to ``fully_shard`` (before the root): every module held in an
    ``nn.ModuleList`` (the blocks of a transformer, the stages of a net), or every module
    whose class name is in ``wrap``; innermost first, as FSDP2 wants children sharded
    before their parents."""
    found: List[Tuple[str, nn.Module]] = []
    names = set(wrap) if wrap else None
    for name, module in model.named_modules():
        if module is model:
            continue
        if names is not None:
            chosen = type(module).__name__ in names
        else:
            parent_name = name.rpartition(".")[0]
            parent = model.get_submodule(parent_name) if parent_name else model
            chosen = isinstance(parent, nn.ModuleList)
        if chosen:
            found.append((name, module))
    if names is not None:
        missing = names - {type(module).__name__ for _, module in found}
        if missing:
            raise DynamicError("--fsdp-wrap: the model has no module of class %s" % ", ".join(sorted(missing)))
    found.sort(key=lambda item: -item[0].count("."))
    return found


class _FsdpBuffers:
    """Reports FSDP's storage resizes to the active tracker and records its
    all-gather and reduce-scatter buffers, while the step runs."""

    def __init__(self) -> None:
        self.all_gather: List[int] = []
        self.reduce_scatter: List[int] = []

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        try:
            from torch.distributed.fsdp._fully_shard import _fsdp_collectives, _fsdp_param, _fsdp_param_group

            originals = {
                "free": _fsdp_param.free_storage,
                "alloc": _fsdp_param.alloc_storage,
                "gather": _fsdp_collectives.DefaultAllGather.allocate,
                "scatter": _fsdp_collectives.DefaultReduceScatter.allocate,
            }
        except (ImportError, AttributeError) as error:
            raise DynamicError(
                "--parallel fsdp reads FSDP2's internals of torch 2.13 (torch.distributed.fsdp."
                "_fully_shard), which this torch %s lacks: %s" % (torch.__version__, error)) from None

        def free_storage(tensor: torch.Tensor) -> None:
            originals["free"](tensor)
            _tell_tracker(tensor, "fsdp free_storage")

        def alloc_storage(tensor: torch.Tensor) -> None:
            originals["alloc"](tensor)
            _tell_tracker(tensor, "fsdp alloc_storage (all-gather)")

        def gather(comm: Any, size: Any, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
            out = originals["gather"](comm, size, dtype=dtype, device=device)
            self.all_gather.append(out.untyped_storage().nbytes())
            return out

        def scatter(comm: Any, size: Any, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
            out = originals["scatter"](comm, size, dtype=dtype, device=device)
            self.reduce_scatter.append(out.untyped_storage().nbytes())
            return out

        _fsdp_param.free_storage = free_storage
        _fsdp_param.alloc_storage = alloc_storage
        _fsdp_param_group.alloc_storage = alloc_storage
        _fsdp_collectives.DefaultAllGather.allocate = gather
        _fsdp_collectives.DefaultReduceScatter.allocate = scatter
        try:
            yield
        finally:
            _fsdp_param.free_storage = originals["free"]
            _fsdp_param.alloc_storage = originals["alloc"]
            _fsdp_param_group.alloc_storage = originals["alloc"]
            _fsdp_collectives.DefaultAllGather.allocate = originals["gather"]
            _fsdp_collectives.DefaultReduceScatter.allocate = originals["scatter"]


def _active_tracker() -> Optional[LiveTracker]:
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    for mode in reversed(_get_current_dispatch_mode_stack()):
        if isinstance(mode, LiveTracker):
            return mode
    return None


def _tell_tracker(tensor: torch.Tensor, op: str) -> None:
    """A storage FSDP resized in place (``storage.resize_``: no aten op, so the
    dispatch-level tracker did not see it): the tracker's record follows it."""
    tracker = _active_tracker()
    if tracker is None:
        return
    storage = tensor.untyped_storage()
    record = tracker._live.get(id(storage))
    if record is not None:
        tracker._resize(record, storage.nbytes(), op)


def _fsdp_factory(
    build: Callable[[], nn.Module], mesh: Any, options: ParallelOptions, built: List[nn.Module],
    wrapped: List[str],
) -> Callable[[], nn.Module]:
    from torch._guards import active_fake_mode
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(
        param_dtype=_as_dtype(options.param_dtype) if options.param_dtype else None,
        reduce_dtype=_as_dtype(options.reduce_dtype) if options.reduce_dtype else None,
    )

    failed: List[BaseException] = []

    def factory() -> nn.Module:
        if active_fake_mode() is None:
            # measure_training_step builds for real when the fake build failed: not for FSDP.
            cause = failed[-1] if failed else None
            if isinstance(cause, DynamicError):
                raise DynamicError(str(cause))
            raise DynamicError(
                "--parallel fsdp needs a model that can be built on fake tensors: %s"
                % (cause if cause is not None else "it was built outside fake mode"))
        try:
            model = build()
            wrapped.clear()
            for name, module in wrap_targets(model, options.wrap):
                fully_shard(module, mesh=mesh, reshard_after_forward=options.reshard_after_forward,
                            mp_policy=policy)
                wrapped.append(name)
            fully_shard(model, mesh=mesh, reshard_after_forward=options.reshard_after_forward,
                        mp_policy=policy)
        except BaseException as error:
            failed.append(error)
            raise
        built.append(model)
        return model

    return factory


def _local(tensor: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if tensor is None:
        return None
    to_local = getattr(tensor, "to_local", None)
    return to_local() if to_local is not None else tensor


# -- DDP -------------------------------------------------------------------------------

class _BucketedModule(nn.Module):
    """DDP's reducer, as a model: ``module`` (so parameter names get DDP's ``module.``
    prefix) with its gradient buckets, allocated when it is wrapped (before the step, as
    DDP's constructor does) and kept; each gradient is copied into its bucket once
    autograd has accumulated it."""

    def __init__(self, module: nn.Module, assignment: List[List[int]], bucket_view: bool) -> None:
        super().__init__()
        self.module = module
        self._bucket_view = bucket_view
        self._buckets: List[torch.Tensor] = []
        params = [p for p in module.parameters() if p.requires_grad]
        for indices in assignment:
            members = [params[i] for i in indices]
            bucket = torch.empty(sum(p.numel() for p in members), dtype=members[0].dtype,
                                 device=members[0].device)
            self._buckets.append(bucket)
            offset = 0
            for param in members:
                view = bucket[offset:offset + param.numel()].view_as(param)
                offset += param.numel()
                param.register_post_accumulate_grad_hook(self._copy_into(view))

    def forward(self, *inputs: Any) -> Any:
        return self.module(*inputs)

    def _copy_into(self, view: torch.Tensor) -> Callable[[torch.Tensor], None]:
        def hook(param: torch.Tensor) -> None:
            if param.grad is None or param.grad.untyped_storage() is view.untyped_storage():
                return
            view.copy_(param.grad)
            if self._bucket_view:
                param.grad = view  # the reducer's gradient_as_bucket_view: .grad is the bucket

        return hook


def ddp_buckets(model: nn.Module, bucket_cap_mb: float) -> List[List[int]]:
    """The steady-state bucket assignment DDP's reducer uses: parameter indices per
    bucket, from torch's ``_compute_bucket_assignment_by_size`` with a first bucket of
    ``_DEFAULT_FIRST_BUCKET_BYTES`` and then ``bucket_cap_mb``, over the parameters
    in reverse order (the order their gradients become ready, as the reducer's
    rebuild after the first iteration finds for a plain forward)."""
    import torch.distributed as dist

    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise DynamicError("the model has no parameter that requires grad: DDP has nothing to reduce")
    cap = int(bucket_cap_mb * 1024 * 1024)
    first = dist._DEFAULT_FIRST_BUCKET_BYTES if bucket_cap_mb == DDP_BUCKET_CAP_MB else cap
    order = list(range(len(params)))[::-1]
    reversed_params = [params[i] for i in order]
    assignment, _ = dist._compute_bucket_assignment_by_size(
        reversed_params, [first, cap] if first < cap else [cap], [False] * len(params))
    return [[order[i] for i in bucket] for bucket in assignment]


# -- the measurement --------------------------------------------------------------------

def measure_parallel(
    build: Callable[[], nn.Module],
    input_shapes: Sequence[InputSpec],
    options: ParallelOptions,
    dtype: str = "float32",
    estimate_for: str = "cuda",
    seed: int = 0,
) -> ParallelReport:
    """One rank's training step under ``options``, on fake tensors.  ``input_shapes``
    is the rank's own batch (data parallelism: every rank runs its own batch)."""
    check_options(options)
    device = "fake" if estimate_for == "cuda" else "fake-cpu"
    built: List[nn.Module] = []
    if options.strategy == "fsdp":
        buffers = _FsdpBuffers()
        wrapped: List[str] = []
        with fake_process_group(options.world_size) as mesh, buffers.patched():
            factory = _fsdp_factory(build, mesh, options, built, wrapped)
            step = measure_training_step(factory, input_shapes, dtype=dtype, device=device, seed=seed)
            model = built[-1]
            params = list(model.parameters())
            step = dataclasses.replace(
                step,
                param_bytes=storage_bytes([_local(p) for p in params], 512),
                grad_bytes=storage_bytes([_local(p.grad) for p in params], 512),
            )
            unsharded = sum(round_up(p.numel() * p.element_size(), 512) for p in params)
        report = ParallelReport(
            options, step, unsharded, wrapped=wrapped,
            all_gather_bytes=max(buffers.all_gather, default=0),
            reduce_scatter_bytes=max(buffers.reduce_scatter, default=0),
            all_gathers=len(buffers.all_gather), reduce_scatters=len(buffers.reduce_scatter),
        )
        report.limits = _fsdp_limits(options, wrapped)
        return report

    def ddp_factory() -> nn.Module:
        model = build()
        wrapper = _BucketedModule(model, ddp_buckets(model, options.bucket_cap_mb),
                                  options.gradient_as_bucket_view)
        built.append(wrapper)
        return wrapper

    with fake_process_group(options.world_size):
        step = measure_training_step(ddp_factory, input_shapes, dtype=dtype, device=device, seed=seed)
    wrapper = built[-1]
    buckets = [round_up(b.untyped_storage().nbytes(), 512) for b in wrapper._buckets]
    # The buckets exist before the step and after it, like the parameters: resident memory.
    step = dataclasses.replace(step, buffer_bytes=step.buffer_bytes + sum(buckets))
    report = ParallelReport(options, step, step.param_bytes, bucket_bytes=sum(buckets), buckets=buckets)
    report.limits = [
        "DDP's C++ Reducer cannot run on fake tensors (it allocates real bucket storage and checks "
        "parameters across ranks through data pointers): its buckets are modelled - torch's own "
        "bucket assignment (_compute_bucket_assignment_by_size, first bucket 1 MiB, then "
        "bucket_cap_mb), allocated when the model is wrapped and counted with the buffers, "
        "gradients copied in as they are accumulated",
        "the first iteration's bucket rebuild (one bucket of every parameter, then the buckets above) "
        "and find_unused_parameters are not modelled; the all-reduce allocates nothing",
    ]
    return report


def _fsdp_limits(options: ParallelOptions, wrapped: Sequence[str]) -> List[str]:
    limits = [
        "FSDP2 ran for real (torch's fully_shard on a fake process group of %d ranks, rank 0 measured): "
        "sharded parameters, all-gathers and reduce-scatters are torch's; collectives send nothing"
        % options.world_size,
        "on a GPU FSDP runs all-gathers and reduce-scatters on their own CUDA streams and frees their "
        "buffers only when those finish; the CPU run is sequential, so buffers a GPU would still hold "
        "for the next layer's prefetch are not all counted",
    ]
    if not wrapped:
        limits.append("only the root was given to fully_shard (no nn.ModuleList blocks found, no --fsdp-wrap): "
                      "every parameter is all-gathered at once")
    return limits


# -- the report ---------------------------------------------------------------------------

def text_lines(report: ParallelReport) -> List[str]:
    from .budget import format_bytes

    step = report.step
    opts = report.options
    lines = [report.options.describe() + "; per rank (rank 0 of %d, its own batch)" % opts.world_size]
    if opts.strategy == "fsdp":
        shown = ", ".join(report.wrapped[:4]) + (" ..." if len(report.wrapped) > 4 else "")
        lines.append("fully_shard on %d modules%s, then the root" % (
            len(report.wrapped), " (%s)" % shown if shown else ""))
    rows = [
        ("parameters", format_bytes(step.param_bytes),
         "of %s unsharded" % format_bytes(report.unsharded_param_bytes)
         if opts.strategy == "fsdp" else "a full copy on every rank"),
        ("gradients", format_bytes(step.grad_bytes),
         "held in the buckets" if opts.strategy == "ddp" and opts.gradient_as_bucket_view else
         ("sharded, after the reduce-scatter" if opts.strategy == "fsdp" else "")),
        ("buffers, input", format_bytes(step.buffer_bytes - report.bucket_bytes + step.input_bytes), ""),
        ("activations", format_bytes(report.activation_bytes),
         "kept after forward" + ("" if opts.strategy == "ddp" or opts.reshard_after_forward else
                                 ", with the unsharded parameters not resharded after forward")),
    ]
    if opts.strategy == "ddp":
        rows.append(("DDP buckets", format_bytes(report.bucket_bytes),
                     "%d buckets, allocated when wrapped and kept (counted as resident)" % len(report.buckets)))
    else:
        rows.append(("all-gather buffer", format_bytes(report.all_gather_bytes),
                     "largest of %d" % report.all_gathers))
        rows.append(("reduce-scatter buffer", format_bytes(report.reduce_scatter_bytes),
                     "largest of %d" % report.reduce_scatters))
    rows.append(("step peak", format_bytes(step.peak_bytes), "during %s, at %s" % (step.peak_phase, step.peak_op)))
    adam = report.with_adam()
    rows.append(("Adam state", format_bytes(adam.optimizer_state_bytes),
                 "exp_avg and exp_avg_sq of the rank's gradients (--budget --optimizer for others)"))
    rows.append(("rank peak with Adam", format_bytes(adam.allocated_bytes),
                 "resident + Adam state + the larger of the step and the update (as --budget counts)"))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    lines += [("  ".join(c.ljust(w) for c, w in zip(row, widths))).rstrip() for row in rows]
    return lines


def _gradients_in_buckets(check: Any, report: ParallelReport) -> None:
    """With ``gradient_as_bucket_view=True`` the gradients are the buckets, counted as
    resident: the optimizer update adds only its own temporaries (the budget's model of
    the update counts the gradients in it, as for gradients allocated by backward)."""
    from .budget import verdict

    estimate = check.estimate
    update = report.step.grad_bytes * check.optimizer.update_slots if check.optimizer.state_slots else 0
    base = estimate.resident_bytes + estimate.optimizer_state_bytes
    allocated = base + max(estimate.step_peak_bytes, update)
    check.estimate = dataclasses.replace(
        estimate, update_peak_bytes=update, allocated_bytes=allocated,
        reserved_bytes=max(allocated, base + max(estimate.step_reserved_bytes, update)),
        peak_phase=estimate.peak_phase if estimate.step_peak_bytes >= update else "optimizer step",
    )
    check.verdict = verdict(check.estimate, check.usable_bytes)
    check.notes.append("gradient_as_bucket_view: the gradients are the buckets (resident); the update "
                       "adds only its temporaries (the batch search counts them as separate gradients)")


# -- ``torchmemlint profile --parallel`` ---------------------------------------------------

def run_parallel_profile(
    target_spec: str,
    input_shapes: Sequence[InputSpec],
    init_args: Any,
    dtype: str,
    estimate_for: str,
    options: ParallelOptions,
    budget_request: Any = None,
    budget: Any = None,
) -> Tuple[Any, Dict[str, Any]]:
    """The per-rank profile (a ``verify.ProfileResult`` with a "parallel" section, and a
    "budget" one with ``--budget``) and the JSON fields the budget adds at the top level."""
    import time
    import warnings

    from . import source, verify
    from .budget import FITS, batch_of, check_budget, estimate_memory, json_fields, largest_batch, with_batch
    from .measure import _normalise_specs

    started = time.perf_counter()
    check_options(options)
    target = source.read_target_source(target_spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build = source.model_factory(source.import_source_variant(target, target.text), target_spec,
                                     init_args, dtype)

        def at(shapes: Sequence[InputSpec]) -> ParallelReport:
            return measure_parallel(build, shapes, options, dtype=dtype, estimate_for=estimate_for)

        report = at(input_shapes)
        measuring = "fake" if estimate_for == "cuda" else "fake-cpu"
        result = verify.ProfileResult(
            target=target_spec,
            device="cpu",
            method=verify._method(measuring),
            dtype=str(dtype),
            input_shapes=[list(spec) for spec in _normalise_specs(input_shapes)],
            report=report.step,
            allocator=report.step.simulate_allocator(),
            findings=[],
            limits=report.limits + verify.estimate_limits(report.step, measuring) + [
                "findings are not verified with --parallel (run profile without it to verify them)"],
            measuring=measuring,
        )
        result.add_section("parallel", "Per rank (--parallel %s --world-size %d)"
                           % (options.strategy, options.world_size), text_lines(report), report.to_dict())
        fields: Dict[str, Any] = {}
        if budget_request is not None:
            batch = batch_of(input_shapes)
            check = check_budget(report.step, budget, budget_request.optimizer,
                                 budget_request.reserve_bytes, batch)
            if options.gradient_as_bucket_view:
                _gradients_in_buckets(check, report)
            if budget_request.max_batch or check.verdict != FITS:
                check.batch_search = largest_batch(
                    lambda b: at(with_batch(input_shapes, b)).step, budget_request.optimizer,
                    check.usable_bytes, batch, {batch: estimate_memory(report.step, budget_request.optimizer, batch)},
                )
            result.add_section("budget", "Will it fit on each rank? (--budget, per rank)", check.text_lines(),
                               check.to_dict())
            fields = json_fields(check)
    result.warnings = verify._unique_messages(caught)
    result.seconds = time.perf_counter() - started
    return result, fields
