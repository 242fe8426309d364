"""Will it fit?  A training step's device memory against a budget, without a GPU.

The estimate is a band ``[allocated, reserved]`` for the steady state of
training (the second and later iterations, when the optimizer state exists):

* ``allocated`` (low end, exact): parameters + buffers + the input batch +
  optimizer state + the larger of the step's peak (activations, gradients,
  temporaries; from the live tracker, in 512-byte blocks) and the optimizer
  update's peak (gradients + the update's temporaries).  It counts op
  outputs, as CUDA runs them by default (``emulate.py``); kernel workspaces
  (cuDNN, cuBLAS) are in CUDA's ``max_memory_allocated()`` but invisible
  without a GPU.
* ``reserved`` (high end, a MODEL): the same, with the step's alloc/free
  stream replayed through the caching-allocator model of
  ``tracker.simulate_cuda_caching_allocator``: what ``max_memory_reserved()``
  would be after a cold iteration.  Not validated on a GPU.

Memory outside PyTorch's allocator (the CUDA context, library handles) is in
neither end; ``reserve`` sets it aside from the budget.  Importing this module
does not import torch (the CLI parses a budget before it loads torch).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from .batch import batch_of, with_batch  # noqa: F401 (re-exported)
from .errors import DynamicError

if TYPE_CHECKING:  # budgets are parsed before torch is imported
    from .measure import StepReport

FITS = "fits"
DOES_NOT_FIT = "does not fit"
TOO_CLOSE = "too close to call"

OPTIMIZER_STEP = "optimizer step"

_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([a-z]*)$", re.IGNORECASE)
_CUDA_DEVICE = re.compile(r"^cuda(?::([0-9]+))?$")
# Past this the batch is not searched further (memory that does not grow with the batch).
MAX_SEARCHED_BATCH = 2**20


# -- sizes and budgets ------------------------------------------------------------

def parse_size(text: str, what: str = "budget") -> int:
    """``8GiB`` / ``8GB`` / ``8000MiB`` / ``1.5 GiB`` / ``512B`` -> bytes (> 0).

    A unit is required: ``8`` alone could mean bytes or GiB.
    """
    value = text.strip()
    if value.startswith("-"):
        raise DynamicError("%s must be positive, got %r" % (what, text))
    match = _SIZE.match(value)
    if match is None or match.group(2).lower() not in _UNITS:
        raise DynamicError(
            "cannot parse %s %r: expected a size such as 8GiB, 8GB or 8000MiB" % (what, text)
        )
    number, unit = match.groups()
    nbytes = math.floor(float(number) * _UNITS[unit.lower()])
    if nbytes <= 0:
        raise DynamicError("%s must be positive, got %r" % (what, text))
    return nbytes


@dataclass(frozen=True)
class Budget:
    bytes: int
    source: str  # what the user wrote, or where the figure came from


def parse_budget(text: str) -> Budget:
    """A size (see ``parse_size``) or ``cuda`` / ``cuda:N``: that card's free memory now."""
    device = _CUDA_DEVICE.match(text.strip().lower())
    if device is None:
        return Budget(parse_size(text), text.strip())
    import torch

    if not torch.cuda.is_available():
        raise DynamicError("budget %r needs a CUDA device, but torch.cuda is not available" % text)
    index = int(device.group(1) or 0)
    if index >= torch.cuda.device_count():
        raise DynamicError(
            "budget %r: no such device (%d CUDA device(s) visible)"
            % (text, torch.cuda.device_count())
        )
    free, total = torch.cuda.mem_get_info(index)
    # mem_get_info creates this process's CUDA context first, so ``free``
    # already excludes a context of the size the training process will need.
    return Budget(
        free,
        "cuda:%d free memory (%s of %s, %s)"
        % (index, format_bytes(free), format_bytes(total), torch.cuda.get_device_name(index)),
    )


@dataclass(frozen=True)
class BudgetRequest:
    """``profile``'s budget options, checked before torch is imported."""

    budget: str
    optimizer: "OptimizerModel"
    reserve_bytes: int
    max_batch: bool

    def resolve(self) -> Budget:
        """The budget in bytes (a ``cuda:N`` budget needs torch and the card)."""
        budget = parse_budget(self.budget)
        if self.reserve_bytes >= budget.bytes:
            raise DynamicError(
                "--reserve %s leaves nothing of the budget (%s)"
                % (format_bytes(self.reserve_bytes), format_bytes(budget.bytes))
            )
        return budget


def budget_request(
    budget: Optional[str], optimizer: Optional[str], reserve: Optional[str], max_batch: bool
) -> Optional[BudgetRequest]:
    """Check ``--budget``/``--optimizer``/``--reserve``/``--max-batch`` (one-line
    errors); None without ``--budget``.  A size budget is parsed here, a
    device budget only by ``resolve``."""
    if budget is None:
        for flag, given in (("--optimizer", optimizer), ("--reserve", reserve),
                            ("--max-batch", max_batch)):
            if given:
                raise DynamicError("%s needs --budget" % flag)
        return None
    request = BudgetRequest(
        budget,
        optimizer_model(optimizer or "adam"),
        parse_size(reserve, "--reserve") if reserve is not None else 0,
        max_batch,
    )
    if _CUDA_DEVICE.match(budget.strip().lower()) is None:
        request.resolve()
    return request


def format_bytes(nbytes: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(nbytes) >= size:
            return "%.2f %s" % (nbytes / size, unit)
    return "%d B" % nbytes


# -- optimizers -------------------------------------------------------------------

@dataclass(frozen=True)
class OptimizerModel:
    """Parameter-sized tensors an optimizer adds, per parameter that has a gradient.

    ``state_slots`` are kept from the first ``step()`` on (Adam's ``exp_avg``
    and ``exp_avg_sq``; SGD's ``momentum_buffer``).  ``update_slots`` live only
    during ``step()``: with ``foreach=True``, the default for CUDA parameters,
    Adam computes ``_foreach_sqrt(exp_avg_sq)`` for all parameters at once.
    tests/dynamic/test_budget.py checks both counts against torch.optim.
    """

    name: str
    state_slots: int
    update_slots: int
    description: str


OPTIMIZERS = {
    "adam": OptimizerModel("adam", 2, 1, "Adam: exp_avg and exp_avg_sq per parameter"),
    "adamw": OptimizerModel("adamw", 2, 1, "AdamW: exp_avg and exp_avg_sq per parameter"),
    "sgd": OptimizerModel("sgd", 1, 0, "SGD with momentum: one momentum buffer per parameter"),
    "none": OptimizerModel("none", 0, 0, "no optimizer step"),
}


def optimizer_model(name: str) -> OptimizerModel:
    try:
        return OPTIMIZERS[name.lower()]
    except KeyError:
        raise DynamicError(
            "unknown optimizer %r (one of %s)" % (name, ", ".join(OPTIMIZERS))
        ) from None


# -- the estimate -----------------------------------------------------------------

@dataclass
class MemoryEstimate:
    """Device memory of one steady-state training iteration at ``batch``."""

    batch: Optional[int]
    optimizer: str
    resident_bytes: int  # parameters + buffers + input batch
    optimizer_state_bytes: int
    step_peak_bytes: int  # forward + loss + backward, above the resident tensors
    update_peak_bytes: int  # gradients + temporaries of optimizer.step()
    step_reserved_bytes: int  # the allocator model's reserved memory for the step alone
    allocated_bytes: int  # low end: op outputs in 512-byte blocks (no kernel workspaces)
    reserved_bytes: int  # high end: caching-allocator model
    peak_phase: str

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.__dict__)


def estimate_memory(
    report: StepReport, optimizer: OptimizerModel, batch: Optional[int] = None
) -> MemoryEstimate:
    """The steady-state band for the step in ``report`` with ``optimizer``'s tensors."""
    state = optimizer.state_slots * report.grad_bytes
    update = report.grad_bytes * (1 + optimizer.update_slots) if optimizer.state_slots else 0
    step_or_update = max(report.peak_bytes, update)
    allocated = report.resident_bytes + state + step_or_update
    # Resident tensors and optimizer state are counted at their exact size;
    # only the step's own alloc/free stream goes through the allocator model.
    step_reserved = report.simulate_allocator().max_reserved
    return MemoryEstimate(
        batch=batch,
        optimizer=optimizer.name,
        resident_bytes=report.resident_bytes,
        optimizer_state_bytes=state,
        step_peak_bytes=report.peak_bytes,
        update_peak_bytes=update,
        step_reserved_bytes=step_reserved,
        allocated_bytes=allocated,
        reserved_bytes=max(allocated, report.resident_bytes + state + max(step_reserved, update)),
        peak_phase=OPTIMIZER_STEP if update > report.peak_bytes else report.peak_phase,
    )


# -- the verdict ------------------------------------------------------------------

def verdict(estimate: MemoryEstimate, usable_bytes: int) -> str:
    """``fits`` when even the modelled reserved memory is within the budget,
    ``does not fit`` when the exact allocated bytes already exceed it, and
    ``too close to call`` when the budget lies inside the band."""
    if estimate.reserved_bytes <= usable_bytes:
        return FITS
    if estimate.allocated_bytes > usable_bytes:
        return DOES_NOT_FIT
    return TOO_CLOSE


@dataclass
class FixOutcome:
    """The estimate after applying one finding's fix (or several together)."""

    codes: List[str]
    rows: List[int]
    columns: List[int]
    variant: str  # what was measured: the fix's title or the suggested variant
    estimate: MemoryEstimate
    verdict: str

    @property
    def label(self) -> str:
        return " + ".join("%s %d:%d" % item for item in zip(self.codes, self.rows, self.columns))

    def to_dict(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {}
        if len(self.codes) == 1:
            data.update(code=self.codes[0], row=self.rows[0], column=self.columns[0])
        else:
            data.update(codes=list(self.codes), rows=list(self.rows), columns=list(self.columns))
        data.update(
            variant=self.variant,
            peak_after=self.estimate.allocated_bytes,
            reserved_after=self.estimate.reserved_bytes,
            fits=self.verdict,
        )
        return data


@dataclass
class BatchSearch:
    """The largest batch whose verdict is ``fits``, and how it was found."""

    max_batch: int  # 0: not even batch 1 fits
    method: str
    measured: Dict[int, MemoryEstimate]

    def to_dict(self) -> Dict[str, Any]:
        return {
            "max_batch": self.max_batch,
            "method": self.method,
            "measured": [
                {"batch": batch, "allocated_bytes": found.allocated_bytes,
                 "reserved_bytes": found.reserved_bytes}
                for batch, found in sorted(self.measured.items())
            ],
        }


@dataclass
class BudgetCheck:
    budget: Budget
    reserve_bytes: int
    optimizer: OptimizerModel
    estimate: MemoryEstimate
    verdict: str
    fixes: List[FixOutcome] = field(default_factory=list)  # every confirmed fix, measured
    combined: Optional[FixOutcome] = None
    batch_search: Optional[BatchSearch] = None
    notes: List[str] = field(default_factory=list)

    @property
    def usable_bytes(self) -> int:
        return self.budget.bytes - self.reserve_bytes

    @property
    def fixes_that_fit(self) -> List[FixOutcome]:
        return [fix for fix in self.fixes if fix.verdict == FITS]

    def judge(self, report: StepReport, findings: Sequence[Any], variant: str) -> FixOutcome:
        """The outcome of the module changed by ``findings``' fixes (``report``:
        its measured step), at this check's batch and optimizer."""
        estimate = estimate_memory(report, self.optimizer, self.estimate.batch)
        return FixOutcome(
            [f.code for f in findings],
            [f.location.row for f in findings],
            [f.location.column for f in findings],
            variant,
            estimate,
            verdict(estimate, self.usable_bytes),
        )

    def to_dict(self) -> Dict[str, Any]:
        data: Dict[str, Any] = {
            "budget_bytes": self.budget.bytes,
            "budget_source": self.budget.source,
            "reserve_bytes": self.reserve_bytes,
            "usable_bytes": self.usable_bytes,
            "optimizer": self.optimizer.name,
            "fits": self.verdict,
            "estimate": self.estimate.to_dict(),
            "fixes_that_fit": [fix.to_dict() for fix in self.fixes_that_fit],
            "fixes_measured": [fix.to_dict() for fix in self.fixes],
            "fixes_combined": None if self.combined is None else self.combined.to_dict(),
            "notes": list(self.notes),
        }
        if self.batch_search is not None:
            data["max_batch"] = self.batch_search.max_batch
            data["max_batch_search"] = self.batch_search.to_dict()
        return data

    def text_lines(self) -> List[str]:
        est = self.estimate
        budget = "%s (%s)" % (format_bytes(self.budget.bytes), self.budget.source)
        if self.reserve_bytes:
            budget += " minus --reserve %s = %s usable" % (
                format_bytes(self.reserve_bytes), format_bytes(self.usable_bytes))
        at_batch = "batch %d, " % est.batch if est.batch is not None else ""
        lines = ["budget %s; %s%s" % (budget, at_batch, self.optimizer.description)]
        step = max(est.step_peak_bytes, est.update_peak_bytes)
        lines += _table([
            ("parameters, buffers, input", format_bytes(est.resident_bytes), ""),
            ("optimizer state", format_bytes(est.optimizer_state_bytes),
             "allocated by the first step()"),
            ("step peak", format_bytes(step), "during %s" % est.peak_phase),
            ("allocated peak", format_bytes(est.allocated_bytes),
             "sum of the above; kernel workspaces not counted"),
            ("reserved", format_bytes(est.reserved_bytes),
             "modelled caching allocator; a model, not measured on a GPU"),
        ])
        lines.append("not counted: the CUDA context and other memory outside PyTorch's allocator"
                     " (set it aside with --reserve)")
        lines.append("verdict: %s (%s)" % (self.verdict, _band(est, self.usable_bytes)))
        if self.fixes:
            lines.append("confirmed findings, estimate after each fix:")
            rows = [(fix.label, _band(fix.estimate, self.usable_bytes), fix.verdict, fix.variant)
                    for fix in self.fixes]
            if self.combined is not None:
                rows.append(("all together", _band(self.combined.estimate, self.usable_bytes),
                             self.combined.verdict, ""))
            lines += _table(rows, indent="  ")
        lines += self.notes
        if self.batch_search is not None:
            search = self.batch_search
            if search.max_batch:
                lines.append("largest batch that fits unchanged: %d" % search.max_batch)
            else:
                lines.append("not even batch 1 fits unchanged")
            lines.append("  (%s)" % search.method)
        return lines


def _band(estimate: MemoryEstimate, usable_bytes: int) -> str:
    return "%s .. %s of %s" % (
        format_bytes(estimate.allocated_bytes), format_bytes(estimate.reserved_bytes),
        format_bytes(usable_bytes),
    )


def _table(rows: Sequence[Tuple[str, ...]], indent: str = "") -> List[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        (indent + "  ".join(cell.ljust(width) for cell, width in zip(row, widths))).rstrip()
        for row in rows
    ]


def check_budget(
    report: StepReport,
    budget: Budget,
    optimizer: OptimizerModel,
    reserve_bytes: int = 0,
    batch: Optional[int] = None,
) -> BudgetCheck:
    """The verdict for the step in ``report`` plus ``optimizer``'s state."""
    if reserve_bytes < 0 or reserve_bytes >= budget.bytes:
        raise DynamicError(
            "--reserve (%s) must be smaller than the budget (%s)"
            % (format_bytes(reserve_bytes), format_bytes(budget.bytes))
        )
    estimate = estimate_memory(report, optimizer, batch)
    usable = budget.bytes - reserve_bytes
    return BudgetCheck(budget, reserve_bytes, optimizer, estimate, verdict(estimate, usable))


# -- the largest batch ------------------------------------------------------------

def largest_batch(
    measure_at: Callable[[int], StepReport],
    optimizer: OptimizerModel,
    usable_bytes: int,
    start: int,
    known: Optional[Dict[int, MemoryEstimate]] = None,
    known_reports: Optional[Dict[int, StepReport]] = None,
) -> BatchSearch:
    """Largest batch ``b`` whose verdict is ``fits`` while ``b + 1``'s is not.

    ``measure_at(b)`` measures one training step at batch ``b``.  The verdict
    rests on the modelled reserved memory, a staircase in the batch (the
    caching allocator's segments), so no straight line through two batches
    predicts it.  Instead:

    1. *fit on the allocated figure*: from the step at ``start``, the batch
       whose allocated bytes would fill the budget if everything that is not
       parameters, gradients or optimizer state grew with the batch; its step
       is measured too;
    2. the two steps' alloc/free streams are matched event by event and each
       storage's size interpolated linearly in the batch (tensor sizes are
       affine in the batch), giving the stream at any batch without measuring
       it; *bisecting on the modelled reserve* of those streams (the caching
       allocator model replayed) predicts the answer;
    3. the prediction and its neighbour are measured (*the bracket*).  When
       one of them disagrees, the prediction is made again from the two
       measured steps nearest to it; after three tries, or when the streams
       do not match (the model's ops depend on the batch), the search
       bisects on measured steps.

    ``known``/``known_reports``: estimates or steps already measured, by batch.
    """
    measured: Dict[int, MemoryEstimate] = dict(known or {})
    reports: Dict[int, StepReport] = dict(known_reports or {})
    for batch, report in reports.items():
        measured.setdefault(batch, estimate_memory(report, optimizer, batch))
    counted = set(measured) - set(known or {}) - set(known_reports or {})

    def measure(batch: int) -> None:
        if batch not in reports:
            from . import progress

            with progress.stage("measuring batch %d" % batch):
                try:
                    report = measure_at(batch)
                except DynamicError as exc:
                    raise DynamicError("at batch %d: %s" % (batch, exc)) from exc
            reports[batch] = report
            measured[batch] = estimate_memory(report, optimizer, batch)
            counted.add(batch)

    def fits(batch: int) -> bool:
        if batch not in measured:
            measure(batch)
        return measured[batch].reserved_bytes <= usable_bytes

    def bounds() -> Tuple[int, Optional[int]]:
        """The largest measured batch that fits (0: none), the smallest above it that does not."""
        lower = max((b for b in measured if fits(b)), default=0)
        return lower, min((b for b in measured if b > lower and not fits(b)), default=None)

    measure(start)
    guess = _allocated_fill(reports[start], start, optimizer, usable_bytes)
    if guess is None:  # nothing grows with the batch
        lower, upper = bounds()
        if upper is None:
            how = "memory does not grow with the batch; search stopped at %d" % lower
            return BatchSearch(lower, how, measured)
    second = min(max(guess if guess is not None else 2 * start, 1), MAX_SEARCHED_BATCH)
    if second == start:
        second = start + 1 if fits(start) else max(start - 1, 1)
    if second != start:
        measure(second)
    how = "allocated bytes fill the budget near batch %d" % second
    predictions: List[int] = []
    for _ in range(3):
        lower, upper = bounds()
        if upper is not None and upper - lower <= 1:
            break
        pair = _nearest_pair(reports, lower, upper)
        predict = _stream_predictor(reports, pair, optimizer) if pair else None
        if predict is None:
            break
        predicted = _search(lambda b: (measured[b] if b in measured else predict(b)).reserved_bytes
                            <= usable_bytes, lower, upper)
        predictions.append(predicted)
        if predicted >= MAX_SEARCHED_BATCH:
            break
        if predicted:
            fits(predicted)
        fits(predicted + 1)
    lower, upper = bounds()
    while upper is None:  # everything measured fits: double
        if 2 * lower > MAX_SEARCHED_BATCH or lower == 0:
            how = "memory does not grow with the batch; search stopped at %d" % lower
            return BatchSearch(lower, how, measured)
        fits(2 * lower)
        lower, upper = bounds()
    while upper - lower > 1:
        fits((lower + upper) // 2)
        lower, upper = bounds()
    if predictions:
        how += "; the modelled reserve of the interpolated steps predicted %s" % ", then ".join(
            str(p) for p in predictions)
    else:
        how += "; the steps' ops differ with the batch: bisected"
    how += "; %d steps measured (%s)" % (len(counted), ", ".join(str(b) for b in sorted(counted)))
    return BatchSearch(lower, how, measured)


def _allocated_fill(report: StepReport, batch: int, optimizer: OptimizerModel, usable: int) -> Optional[int]:
    """The batch whose allocated bytes would fill ``usable``, if the step's peak and its
    input beyond the gradients grew in proportion to the batch; None when nothing grows."""
    found = estimate_memory(report, optimizer, batch)
    fixed = report.param_bytes + report.buffer_bytes + found.optimizer_state_bytes + report.grad_bytes
    growing = found.allocated_bytes - fixed
    if growing <= 0:
        return None
    return max(1, math.floor(batch * (usable - fixed) / growing)) if usable > fixed else 1


def _nearest_pair(reports: Dict[int, StepReport], lower: int, upper: Optional[int]) -> Optional[Tuple[int, int]]:
    """Two measured batches to interpolate between: the bracket's ends when both are
    measured, else the two nearest to it."""
    batches = sorted(reports)
    if len(batches) < 2:
        return None
    if lower in reports and upper in reports:
        return lower, upper  # type: ignore[return-value]
    centre = lower if upper is None else (lower + upper) / 2
    nearest = sorted(batches, key=lambda b: (abs(b - centre), b))[:2]
    return min(nearest), max(nearest)


class _PredictedStep:
    """The parts of a ``StepReport`` that ``estimate_memory`` reads, for a batch that was
    not measured: its alloc/free stream interpolated from two measured ones."""

    def __init__(self, events: List[Any], peak_bytes: int, peak_phase: str, resident_bytes: int,
                 grad_bytes: int) -> None:
        self.events = events
        self.peak_bytes = peak_bytes
        self.peak_phase = peak_phase
        self.resident_bytes = resident_bytes
        self.grad_bytes = grad_bytes

    def simulate_allocator(self) -> Any:
        from .tracker import simulate_cuda_caching_allocator

        return simulate_cuda_caching_allocator(self.events)


def _stream_predictor(
    reports: Dict[int, StepReport], pair: Tuple[int, int], optimizer: OptimizerModel
) -> Optional[Callable[[int], MemoryEstimate]]:
    """``estimate_memory`` at any batch from the steps measured at the two batches of
    ``pair``, or None when their streams do not match event by event (op and direction)."""
    from .tracker import MemoryEvent, round_up

    (b1, r1), (b2, r2) = (pair[0], reports[pair[0]]), (pair[1], reports[pair[1]])
    e1, e2 = r1.events, r2.events
    if len(e1) != len(e2) or any(a.op != b.op or (a.delta > 0) != (b.delta > 0) for a, b in zip(e1, e2)):
        return None
    cache: Dict[int, MemoryEstimate] = {}

    def at(batch: int) -> MemoryEstimate:
        if batch in cache:
            return cache[batch]
        share = (batch - b1) / (b2 - b1)
        sizes: Dict[int, int] = {}
        events, live, peak, phase = [], 0, 0, r1.peak_phase
        for a, b in zip(e1, e2):
            if a.delta > 0:
                size = round_up(max(math.ceil(a.delta + (b.delta - a.delta) * share), 1), 512)
                sizes[a.storage_id] = size
            else:
                size = -sizes.pop(a.storage_id, 0)
            if size == 0:
                continue
            events.append(MemoryEvent(a.index, a.storage_id, size, a.op, a.module, a.phase))
            live += size
            if live > peak:
                peak, phase = live, a.phase
        inputs = r1.input_bytes + (r2.input_bytes - r1.input_bytes) * share
        step = _PredictedStep(events, peak, phase, r1.param_bytes + r1.buffer_bytes + max(int(inputs), 0),
                              r1.grad_bytes)
        cache[batch] = estimate_memory(step, optimizer, batch)  # type: ignore[arg-type]
        return cache[batch]

    return at


def _search(fits: Callable[[int], bool], lower: int, upper: Optional[int]) -> int:
    """Largest ``b`` with ``fits(b)`` and not ``fits(b + 1)`` between ``lower`` (fits, or 0)
    and ``upper`` (does not fit, or None): doubling, then bisection."""
    while upper is None:
        candidate = max(1, 2 * lower)
        if candidate > MAX_SEARCHED_BATCH:
            return MAX_SEARCHED_BATCH
        if fits(candidate):
            lower = candidate
        else:
            upper = candidate
    while upper - lower > 1:
        middle = (lower + upper) // 2
        if fits(middle):
            lower = middle
        else:
            upper = middle
    return lower


# -- ``torchmemlint profile --budget`` ----------------------------------------------

def check_profile(
    result: Any,
    request: BudgetRequest,
    budget: Budget,
    init_args: Any = None,
    settings: Any = None,
    verified: bool = True,
) -> BudgetCheck:
    """The budget check of a ``verify.ProfileResult`` (``budget``: ``request.resolve()``).

    Always from fake tensors, also after a CUDA profile, so that fixes and
    other batches are measured the same way.  When the step does not fit
    (or is too close to call), the fix (or suggested variant) of each
    finding in the target is measured at the profiled batch - of each
    confirmed finding when the profile ``verified`` them, else of every
    finding that has one, numerics not compared - then all of them together,
    and the largest batch that fits unchanged is searched;
    ``request.max_batch`` searches it always.
    """
    from . import source, verify

    # The shapes, or the user's inputs function (called at each batch tried).
    shapes = result.inputs if getattr(result, "inputs", None) is not None else result.input_shapes
    batch = batch_of(shapes)
    target = source.read_target_source(getattr(result, "source_spec", "") or result.target)
    # A fake-tensor profile's own kernels (CUDA's by default); after a real
    # CUDA or CPU profile, the estimate of CUDA.
    estimating = verify.is_fake(getattr(result, "measuring", "fake"))
    device = result.measuring if estimating else "fake"

    def measure_source(text: str, at_batch: int = batch) -> StepReport:
        return source.measure_source_variant(
            target, text, init_args, with_batch(shapes, at_batch), dtype=result.dtype, device=device
        )

    baseline = result.report if estimating else measure_source(target.text)
    check = check_budget(baseline, budget, request.optimizer, request.reserve_bytes, batch)
    if check.verdict != FITS:
        findings = source.lint_target(target, settings)
        verdicts = result.findings if verified else None
        _judge_findings(check, verify, target.text, findings, verdicts, measure_source)
    if request.max_batch or check.verdict != FITS:
        check.batch_search = largest_batch(
            lambda at_batch: measure_source(target.text, at_batch),
            request.optimizer, check.usable_bytes, batch, known_reports={batch: baseline},
        )
    return check


def json_fields(check: BudgetCheck) -> Dict[str, Any]:
    """The keys ``profile --output-format json`` adds at its top level."""
    fields = {
        "budget_bytes": check.budget.bytes,
        "fits": check.verdict,
        "fixes_that_fit": [fix.to_dict() for fix in check.fixes_that_fit],
    }
    if check.batch_search is not None:
        fields["max_batch"] = check.batch_search.max_batch
    return fields


def _judge_findings(
    check: BudgetCheck, verify: Any, text: str, findings: Sequence[Any],
    verdicts: Optional[Sequence[Any]], measure_source: Callable[[str], StepReport],
) -> None:
    """Measure the fixes of ``findings``: the confirmed ones among ``verdicts``
    (the profile's), or every one that has a fix or variant (``verdicts`` None)."""
    placed = sorted({f.code for f in findings if f.code in verify.PLACEMENT_RULES})
    if placed:
        check.notes.append("%s: checkpoint placements are not judged against the budget"
                           % ", ".join(placed))
    confirmed = {(v.code, v.row, v.column): v.variant for v in verdicts or []
                 if v.verdict == verify.CONFIRMED}
    measured = []
    for finding in findings:
        key = (finding.code, finding.location.row, finding.location.column)
        unconfirmed = verdicts is not None and key not in confirmed
        if finding.code in verify.PLACEMENT_RULES or unconfirmed:
            continue
        variant = verify.variant_for(finding, text)
        if variant.text is None:
            continue
        description = confirmed.get(key) or (
            "%s (numerics not compared: --no-verify)" % variant.description)
        check.fixes.append(check.judge(measure_source(variant.text), [finding], description))
        measured.append(finding)
    if len(measured) > 1:
        combined = combined_source(verify, text, measured)
        if combined is None:
            check.notes.append("the fixes touch the same code: not measured together")
        else:
            check.combined = check.judge(measure_source(combined), measured, "all together")


def combined_source(verify: Any, text: str, findings: Sequence[Any]) -> Optional[str]:
    """``text`` with every finding's fix (or suggested variant) applied, or
    None when they cannot all be applied.

    Findings are applied bottom-up, each to the text its successors left.
    Their positions refer to the original text, which is unchanged above
    the first row changed so far: a change that reaches that row is refused.
    """
    frontier = text.count("\n") + 2  # first original row changed so far
    for finding in sorted(findings, key=lambda f: f.location, reverse=True):
        changed = verify.variant_for(finding, text).text
        if changed is None:
            return None
        before, after = text.splitlines(), changed.splitlines()
        shorter = min(len(before), len(after))
        first = next((i for i in range(shorter) if before[i] != after[i]), shorter)
        common_tail = 0
        while common_tail < shorter - first and before[-1 - common_tail] == after[-1 - common_tail]:
            common_tail += 1
        if len(before) - common_tail >= frontier:  # last changed row, 1-based
            return None
        frontier, text = first + 1, changed
    return text
