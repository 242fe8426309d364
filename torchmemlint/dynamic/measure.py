"""Measure the memory of one training step (forward, scalar loss, backward)."""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.utils._pytree import tree_flatten

from .emulate import ESTIMATE_FOR, EmulationLog, cuda_kernels, emulation_gaps
from .errors import USER_EXITS, DynamicError, NoTensorOutputError, user_exit
from .inputs import InputsFunction, ModelInputs
from .tracker import (
    BACKWARD,
    FORWARD,
    AllocatorEstimate,
    LiveTracker,
    MemoryEvent,
    TrackerSnapshot,
    simulate_cuda_caching_allocator,
    storage_bytes,
)

ModuleSource = Union[nn.Module, Callable[[], nn.Module]]
# A shape, optionally ending with a dtype name: (8, 3, 224, 224) or [8, 128, "int64"].
InputSpec = Sequence[Union[int, str]]
# "fake": fake tensors on the cpu device running CUDA's attention/dropout kernels;
# "fake-cpu": fake tensors with the CPU's own kernels; "cpu"/"cuda": real tensors.
DEVICES = ("fake", "fake-cpu", "cpu", "cuda")


@dataclass
class CudaFigures:
    """CUDA allocator statistics of the measured step (after one warm-up step)."""

    max_allocated: int  # max_memory_allocated() minus memory_allocated() at the step's start
    max_reserved: int  # max_memory_reserved(), absolute: includes blocks cached by the warm-up
    # Allocator peak minus the tracker's peak: kernel workspaces and block slack.
    untracked: int


@dataclass
class StepReport:
    """Bytes of one training step.

    ``peak_bytes`` counts what the step allocates on top of the parameters,
    buffers and input batch that exist before it (like CUDA's
    ``max_memory_allocated() - memory_allocated()`` before the step):
    activations, gradients and temporaries, in 512-byte blocks by default.
    """

    device: str
    peak_bytes: int
    peak_phase: str
    peak_op: str
    peak_module: str
    forward_peak_bytes: int
    kept_after_forward: int
    saved_bytes: int
    param_bytes: int
    buffer_bytes: int
    input_bytes: int
    grad_bytes: int
    modules: List[Tuple[str, int]]
    events: List[MemoryEvent] = field(repr=False)
    seconds: float = 0.0
    cuda: Optional[CudaFigures] = None
    # Under fake tensors: the device whose kernels ran ("cuda": attention and
    # dropout as CUDA runs them, see emulate.py; "cpu": the CPU's own).
    estimate_for: Optional[str] = None
    emulated: Dict[str, int] = field(default_factory=dict)  # kernel -> calls replaced
    emulation_gaps: List[str] = field(default_factory=list)
    compiled: bool = False  # a torch.compile wrapper was found and run eager
    built: str = ""  # how a fake-tensor model was built when not simply under fake mode
    loss: str = "mean"  # "mean" (sum of the outputs' means) or the model's own: "output.loss" ...
    inputs: str = ""  # what an inputs function made: "args: 4x3x64x64 float32; kwargs: ..."

    @property
    def resident_bytes(self) -> int:
        """Parameters, buffers and the input batch, present before the step."""
        return self.param_bytes + self.buffer_bytes + self.input_bytes

    def total_bytes(self, optimizer_slots: int = 0) -> int:
        """Device peak including resident tensors and ``optimizer_slots``
        parameter-sized optimizer states (2 for Adam, 1 for SGD momentum)."""
        return self.resident_bytes + self.peak_bytes + optimizer_slots * self.param_bytes

    def simulate_allocator(self) -> AllocatorEstimate:
        """Modelled CUDA ``max_memory_allocated``/``reserved`` of the step."""
        return simulate_cuda_caching_allocator(self.events)

    def to_dict(self, include_events: bool = False) -> Dict[str, Any]:
        data = asdict(self)
        if not include_events:
            del data["events"]
        data["modules"] = [list(item) for item in self.modules]
        return data


def measure_training_step(
    model: ModuleSource,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    dtype: Union[str, torch.dtype] = torch.float32,
    device: str = "fake",
    round_to: int = 512,
    seed: int = 0,
    estimate_for: str = "cuda",
    observer: Any = None,
) -> StepReport:
    """Run forward, a scalar loss and backward once and report its memory.

    ``model`` is an ``nn.Module`` or a zero-argument factory (a class or
    function).  ``dtype`` is the inputs' dtype (a shape may end with its own
    dtype name); the model keeps its parameters' dtype.  ``device="fake"`` runs under ``FakeTensorMode`` on the cpu
    device: exact CPU-dispatch bytes, nothing allocated, no compute (a
    factory is then built fake too; a module instance is run with fake
    copies of its tensors).  ``"cpu"`` runs for real.  ``"cuda"`` runs a
    warm-up step first and adds the allocator's own figures.  A module
    instance is run in place on "cpu"/"cuda" (its grads and BatchNorm
    statistics change).

    ``estimate_for`` (fake device only): ``"cuda"`` runs attention and dropout
    as CUDA would (``emulate.cuda_kernels``), ``"cpu"`` the CPU's own kernels.

    ``observer`` (a ``lines.StepObserver``) records the source line behind every
    storage and the op trace of the step.
    """
    if device not in DEVICES:
        raise DynamicError("device must be one of %s, not %r" % ("/".join(DEVICES), device))
    if estimate_for not in ESTIMATE_FOR:
        raise DynamicError("estimate_for must be cuda or cpu, not %r" % (estimate_for,))
    if device == "fake-cpu":
        device, estimate_for = "fake", "cpu"
    emulation = EmulationLog() if device == "fake" and estimate_for == "cuda" else None
    if device == "cuda" and not torch.cuda.is_available():
        raise DynamicError("device 'cuda' requested but torch.cuda is not available")
    default_dtype = _as_dtype(dtype)
    specs = _normalise_specs(input_shapes)
    started = time.perf_counter()
    with _device_context(device) as prepare:
        torch.manual_seed(seed)
        with observer.building() if observer is not None else contextlib.nullcontext():
            prepared = prepare(model)
        prepared.module.train()
        params = prepared.params
        inputs = make_inputs(specs, default_dtype, device)
        param_bytes = storage_bytes(params, round_to)
        buffer_bytes = storage_bytes(prepared.buffers, round_to)
        input_bytes = storage_bytes(input_tensors(inputs), round_to)
        cuda_start = None
        if device == "cuda":
            # Warm-up: cuDNN algorithm search, cuBLAS workspace, lazy init.
            with _user_code_errors():
                training_loss(prepared.forward(inputs)).backward()
            _clear_grads(params)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            cuda_start = torch.cuda.memory_allocated()
        torch.manual_seed(seed)
        tracker = LiveTracker(round_to, observer=observer)
        forward_end, loss_kind = _training_step(prepared, inputs, tracker, emulation)
        grad_bytes = storage_bytes([p.grad for p in params], round_to)
        if observer is not None and observer.failed is None:
            try:
                observer.finish(tracker, prepared.module, params, prepared.buffers)
            except Exception as error:  # noqa: BLE001 - the observer's bug is not the model's
                observer.failed = "%s: %s" % (type(error).__name__, error)
                observer.finished = False
        cuda = None
        if cuda_start is not None:
            torch.cuda.synchronize()
            max_allocated = torch.cuda.max_memory_allocated() - cuda_start
            cuda = CudaFigures(
                max_allocated=max_allocated,
                max_reserved=torch.cuda.max_memory_reserved(),
                untracked=max_allocated - tracker.peak.bytes,
            )
    modules = sorted(
        ((name, nbytes) for name, nbytes in forward_end.by_module.items() if nbytes > 0),
        key=lambda item: (-item[1], item[0]),
    )
    return StepReport(
        device=device,
        peak_bytes=tracker.peak.bytes,
        peak_phase=tracker.peak.phase,
        peak_op=tracker.peak.op,
        peak_module=tracker.peak.module,
        forward_peak_bytes=tracker.phase_peaks.get(FORWARD, 0),
        kept_after_forward=forward_end.live_bytes,
        saved_bytes=tracker.saved_bytes,
        param_bytes=param_bytes,
        buffer_bytes=buffer_bytes,
        input_bytes=input_bytes,
        grad_bytes=grad_bytes,
        modules=modules,
        events=tracker.events,
        seconds=time.perf_counter() - started,
        cuda=cuda,
        estimate_for=(estimate_for if device == "fake" else None),
        emulated=emulation.to_dict() if emulation is not None else {},
        emulation_gaps=emulation_gaps(tracker.ops_seen, emulation) if emulation is not None else [],
        compiled=uses_compile(prepared.module),
        built=prepared.built,
        loss=loss_kind,
        inputs=inputs.describe() if isinstance(inputs, ModelInputs) else "",
    )


def count_training_flops(
    model: ModuleSource,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    dtype: Union[str, torch.dtype] = torch.float32,
    seed: int = 0,
) -> int:
    """FLOPs of one forward + loss + backward, counted under fake tensors.

    A separate run from the memory measurement: ``FlopCounterMode`` tracks
    modules with backward hooks that keep tensors alive longer, which
    would distort the peak (+15 % measured on a checkpointed resnet18).
    """
    from torch.utils.flop_counter import FlopCounterMode

    specs = _normalise_specs(input_shapes)
    with _device_context("fake") as prepare:
        torch.manual_seed(seed)
        prepared = prepare(model)
        prepared.module.train()
        inputs = make_inputs(specs, _as_dtype(dtype), "fake")
        counter = FlopCounterMode(display=False)
        with counter, _user_code_errors():
            training_loss(prepared.forward(inputs)).backward()
    return counter.get_total_flops()


def scalar_loss(output: Any) -> torch.Tensor:
    """A differentiable scalar from any output: mean of each floating tensor
    (as float32), summed over tuple/list/dict outputs."""
    leaves, _ = tree_flatten(output)
    tensors = [
        leaf
        for leaf in leaves
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.requires_grad
    ]
    if not tensors:
        found = ", ".join(sorted({type(leaf).__name__ for leaf in leaves})) or "nothing"
        raise NoTensorOutputError(
            "forward returned no floating-point tensor that requires grad (got %s); "
            "dynamic mode needs one to build a loss" % found
        )
    loss = tensors[0].float().mean()
    for tensor in tensors[1:]:
        loss = loss + tensor.float().mean()
    return loss


def model_loss(output: Any) -> Optional[Tuple[torch.Tensor, str]]:
    """The model's own loss, when its output carries one: ``output.loss`` (a Hugging Face
    ``ModelOutput``) or ``output["loss"]``, a one-element floating tensor that requires grad;
    with where it was found.  None otherwise."""
    if isinstance(output, torch.Tensor):
        return None
    found: Any = None
    where = ""
    if not isinstance(output, (list, tuple)):  # a ModelOutput is a dict with attributes
        found, where = getattr(output, "loss", None), "output.loss"
    if found is None and isinstance(output, Mapping):
        found, where = output.get("loss"), 'output["loss"]'
    if (isinstance(found, torch.Tensor) and found.numel() == 1 and found.is_floating_point()
            and found.requires_grad):
        return found.reshape(()), where
    return None


def training_loss(output: Any) -> torch.Tensor:
    """The model's own loss when it returns one (``model_loss``), otherwise ``scalar_loss``."""
    own = model_loss(output)
    return own[0] if own is not None else scalar_loss(output)


def make_inputs(specs: Any, default_dtype: torch.dtype, device: str) -> Any:
    """The step's inputs: a list of random tensors from shapes, or the user's inputs
    function's ``ModelInputs`` (its tensors made on ``device``; fake under fake mode)."""
    if isinstance(specs, InputsFunction):
        return specs.make("cpu" if device == "fake" else device, default_dtype)
    return [_make_input(spec, default_dtype, device) for spec in specs]


def input_tensors(inputs: Any) -> List[torch.Tensor]:
    return inputs.tensors() if isinstance(inputs, ModelInputs) else list(inputs)


def call_model(module: Callable[..., Any], inputs: Any) -> Any:
    """``module(*inputs)`` for a list of tensors, with args and kwargs for ``ModelInputs``."""
    if isinstance(inputs, ModelInputs):
        return inputs.call(module)
    return module(*inputs)


# -- internals -------------------------------------------------------------

@dataclass
class _Prepared:
    module: nn.Module
    forward: Callable[[Sequence[torch.Tensor]], Any]
    params: List[torch.Tensor]
    buffers: List[torch.Tensor]
    built: str = ""


def _training_step(
    prepared: _Prepared, inputs: Sequence[torch.Tensor], tracker: LiveTracker,
    emulation: Optional[EmulationLog] = None,
) -> Tuple[TrackerSnapshot, str]:
    """Forward + loss + backward under ``tracker``; returns the forward-end snapshot.
    With ``emulation``, the step runs CUDA's attention and dropout kernels: in the forward,
    and in backward where a checkpointed segment is recomputed (its recomputation must make
    the tensors the forward made, or torch.utils.checkpoint raises)."""
    tracker.track_modules(prepared.module)
    kernels = cuda_kernels(emulation) if emulation is not None else contextlib.nullcontext()
    with tracker, _user_code_errors(), kernels:
        tracker.phase = FORWARD
        with tracker.record_saved_tensors():
            with tracker.observer.forward() if tracker.observer is not None else contextlib.nullcontext():
                output = prepared.forward(inputs)
                own = model_loss(output)
                loss = own[0] if own is not None else scalar_loss(output)
            if tracker.observer is not None:
                tracker._observe("outputs_made", tracker, (output, loss))
        forward_end = tracker.snapshot()
        tracker.phase = BACKWARD
        loss.backward()
        del output, loss
    return forward_end, own[1] if own is not None else "mean"


@contextlib.contextmanager
def _user_code_errors() -> Iterator[None]:
    """Turn exceptions from the user's forward/backward into one-line DynamicErrors."""
    from torch._subclasses.fake_tensor import DataDependentOutputException, DynamicOutputShapeException

    try:
        with eager():
            yield
    except DynamicError:
        raise
    except USER_EXITS as exc:
        raise user_exit(exc, "running the training step") from None
    except (DataDependentOutputException, DynamicOutputShapeException) as exc:
        raise DynamicError(
            "the model uses a data-dependent op (%s) that fake tensors cannot run; "
            "measure a real CPU step instead (--device cpu --real-tensors) at a smaller batch"
            % _first_line(exc)
        ) from exc
    except Exception as exc:
        raise DynamicError(
            "the training step failed: %s: %s" % (type(exc).__name__, _first_line(exc))
        ) from exc


@contextlib.contextmanager
def eager() -> Iterator[None]:
    """``torch.compile``d modules and functions run as plain eager code.

    Fake tensors and the dispatch-level tracker measure eager execution; a
    compiled graph would be traced (slowly, or failing under fake mode).
    Nothing happens when torch._dynamo was never imported (no compile used).
    """
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is None:
        yield
        return
    with dynamo.config.patch(disable=True):
        yield


def uses_compile(module: nn.Module) -> bool:
    """Whether ``module`` or a submodule is a ``torch.compile`` wrapper."""
    return any(type(sub).__name__ == "OptimizedModule" for sub in module.modules())


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


@contextlib.contextmanager
def _device_context(device: str) -> Iterator[Callable[[ModuleSource], _Prepared]]:
    if device != "fake":
        yield lambda source: _prepare_real(source, device)
        return
    from torch._subclasses.fake_tensor import FakeTensorMode

    # Non-fake tensors (constants created at import time) are converted on use.
    fake_mode = FakeTensorMode(allow_non_fake_inputs=True)
    # A meta kernel that rejects the user's shapes is logged with a traceback by
    # torch before it raises; the error itself becomes one line (_user_code_errors).
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    was_disabled, logger.disabled = logger.disabled, True
    try:
        with fake_mode:
            yield lambda source: _prepare_fake(source, fake_mode)
    finally:
        logger.disabled = was_disabled


def _prepare_real(source: ModuleSource, device: str) -> _Prepared:
    module = build_module(source)
    try:
        module = module.to(device)
    except Exception as exc:  # e.g. out of memory moving the parameters to the GPU
        raise DynamicError(
            "moving the model to %s failed: %s: %s" % (device, type(exc).__name__, _first_line(exc))
        ) from exc
    params = list(module.parameters())
    _clear_grads(params)
    return _Prepared(module, lambda inputs: call_model(module, inputs), params, list(module.buffers()))


def _prepare_fake(source: ModuleSource, fake_mode: Any) -> _Prepared:
    if not isinstance(source, nn.Module):
        try:
            module = build_module(source)  # built under the fake mode: fake parameters
        except DynamicError as fake_error:
            # Constructors that read tensor values (timm's ``.item()`` on drop-path
            # rates) cannot run on fake tensors: build for real on the CPU, then
            # measure with fake copies of its tensors.  A constructor that fails
            # for real too reports that (the user's own) error.
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                real = build_module(source)
            prepared = _prepare_fake(real, fake_mode)
            prepared.built = (
                "built for real on the CPU (parameters allocated in RAM), then measured with fake "
                "copies: building under fake tensors failed (%s)" % _first_line(fake_error.__cause__ or fake_error)
            )
            return prepared
        return _Prepared(
            module, lambda inputs: call_model(module, inputs), list(module.parameters()), list(module.buffers())
        )
    # A real instance: run it with fake copies of its parameters and buffers.
    # Swapped in and out by hand, not with torch.func.functional_call: that
    # leaves fake tensors behind in a submodule registered under two parents
    # (torch 2.13).  from_tensor memoizes, so a shared tensor has one fake copy.
    module = source
    fakes: Dict[int, torch.Tensor] = {}
    slots = []
    for submodule in module.modules():
        for table in (submodule._parameters, submodule._buffers):
            for name, tensor in table.items():
                if tensor is not None:
                    if id(tensor) not in fakes:
                        fakes[id(tensor)] = fake_mode.from_tensor(tensor)
                    slots.append((table, name, tensor))
    params = [fakes[id(t)] for t in {id(p): p for p in module.parameters()}.values()]
    buffers = [fakes[id(t)] for t in {id(b): b for b in module.buffers()}.values()]
    _clear_grads(params)

    def forward(inputs: Sequence[torch.Tensor]) -> Any:
        for table, name, tensor in slots:
            table[name] = fakes[id(tensor)]
        try:
            return call_model(module, inputs)
        finally:
            for table, name, tensor in slots:
                table[name] = tensor

    return _Prepared(module, forward, params, buffers)


def build_module(source: ModuleSource) -> nn.Module:
    """Call a factory (errors become ``DynamicError``); pass a module through."""
    if isinstance(source, nn.Module):
        return source
    try:
        module = source()
    except DynamicError:
        raise
    except USER_EXITS as exc:
        raise user_exit(exc, "building the model") from None
    except Exception as exc:  # the user's constructor: report, do not crash
        raise DynamicError("building the model failed: %s: %s" % (type(exc).__name__, exc)) from exc
    if not isinstance(module, nn.Module):
        raise DynamicError("the model factory returned %s, not an nn.Module" % type(module).__name__)
    return module


def _clear_grads(params: Sequence[torch.Tensor]) -> None:
    for param in params:
        param.grad = None


def _as_dtype(dtype: Union[str, torch.dtype]) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    resolved = getattr(torch, str(dtype), None)
    if not isinstance(resolved, torch.dtype):
        raise DynamicError("unknown dtype %r" % (dtype,))
    return resolved


def _normalise_specs(input_shapes: Any) -> Any:
    """A list of shapes; an inputs function (``inputs.InputsFunction``) is passed through."""
    if isinstance(input_shapes, InputsFunction):
        return input_shapes
    if isinstance(input_shapes, torch.Size) or (
        input_shapes and all(isinstance(item, (int, str)) for item in input_shapes)
    ):
        return [list(input_shapes)]
    specs = [list(spec) for spec in input_shapes]
    if not specs:
        raise DynamicError("at least one input shape is needed")
    return specs


def _make_input(spec: InputSpec, default_dtype: torch.dtype, device: str) -> torch.Tensor:
    dims = list(spec)
    dtype = default_dtype
    if dims and isinstance(dims[-1], str):
        dtype = _as_dtype(dims.pop())
    if not all(isinstance(dim, int) and dim >= 0 for dim in dims):
        raise DynamicError("input shape must be non-negative integers, got %r" % (list(spec),))
    target = "cpu" if device == "fake" else device
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(dims, dtype=dtype, device=target)
    # Index-like inputs: zeros are valid for any embedding or class count.
    return torch.zeros(dims, dtype=dtype, device=target)
