"""Profile a model and confirm or refute each static finding by measuring it.

For every finding inside the profiled module, the finding's fix (or, for a
finding without one, the variant its message suggests) is applied to the
source text in memory.  The variant is imported under a fresh module name,
built, loaded with the original's weights (``load_state_dict(strict=True)``),
measured like the original and compared with it numerically after one real
training step (``dynamic/numerics.py``; ``tests/dynamic/test_verify.py``).
"""

from __future__ import annotations

import copy
import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchmemlint.config import Settings
from torchmemlint.findings import Finding
from torchmemlint.fixer import apply_edits

from .batch import batch_of, with_batch
from .emulate import ESTIMATE_FOR
from .errors import DynamicError
from .inputs import InputsFunction
from .measure import InputSpec, StepReport, _as_dtype, _normalise_specs, measure_training_step
from .describe import _with_grad_diff, describe_numerics, shape_change
from .numerics import compare_numerics
from .placements import PlacementResult, checkpoint_placements
from .source import (
    TargetSource,
    import_source_variant,
    lint_target,
    load_same_weights,
    measure_source_variant,
    model_factory,
    read_target_source,
)
from . import progress
from .target import InitArgs, resolve_target, use_working_directory
from .tracker import AllocatorEstimate
from .variants import autocast_variant, checkpoint_function_variants, checkpoint_module_variants, keep_stem_pool

MIB = 1 << 20
CONFIRMED = "confirmed"
REFUTED = "refuted"
UNSAFE = "unsafe"
NOT_VERIFIED = "not verified"
# Unsafe fixes may change results at rounding level (ELU/SELU/CELU in place):
# compared within this tolerance (atol, rtol) when not bitwise equal.
UNSAFE_TOLERANCE = (1e-6, 1e-5)
# Checkpoint placement advice answers this rule instead of a fix.
PLACEMENT_RULES = frozenset({"TML405"})
# Stem pooling dropped before a deep encoder: the variant keeps the pool.
STEM_POOL_FAMILY = "TML3"
NUMERICS_BATCH = 2
# TML603 (hand-written checkpoint Function) and TML604 (the checkpoint module called) are
# answered by their own comparisons, against the segment run without checkpointing.
CHECKPOINT_RNG = "TML603"
CHECKPOINT_MODULE = "TML604"
# TML605's variant runs the step under bfloat16 autocast: outputs and gradients are compared
# with float32's within this loose tolerance (atol, rtol), per element: bfloat16 keeps 8 bits
# of mantissa (a relative rounding of 2**-8 = 0.0039 per op).
AUTOCAST = "TML605"
AUTOCAST_TOLERANCE = (5e-2, 5e-2)

# A fix is confirmed when it lowers the peak by at least this fraction of it.
# Fake-tensor accounting is exact for what it counts, so a relative saving is
# real at any size (no absolute floor: 512 KiB of a 6 MiB peak is 8.3 %); 1 %
# is about the largest gap measured between the estimate and CUDA's
# max_memory_allocated on conv nets (x0.987 on an H200, benchmarks/gpu_check.py),
# so a smaller saving could be lost in what the estimate does not count.
CONFIRM_FRACTION = 0.01


def significant_saving(before: int, after: int) -> bool:
    """A peak drop of at least ``CONFIRM_FRACTION`` (1 %) of the peak."""
    return before > 0 and before - after >= CONFIRM_FRACTION * before


# -- verification ----------------------------------------------------------------------------

@dataclass
class FindingVerdict:
    """What measuring a finding's fix (or suggested variant) showed."""

    code: str
    row: int
    column: int
    message: str
    verdict: str  # confirmed / refuted / unsafe / not verified
    variant: str  # what was measured: the fix's title, a suggested variant, placements
    peak_before: int
    peak_after: Optional[int] = None
    numerics: str = "not compared"
    reason: str = ""
    # Peak saved by the variant at other batch sizes: [[batch, bytes saved], ...]
    scaling: List[List[int]] = field(default_factory=list)

    @property
    def saved(self) -> Optional[int]:
        return None if self.peak_after is None else self.peak_before - self.peak_after

    @property
    def change(self) -> Optional[float]:
        if self.peak_after is None or not self.peak_before:
            return None
        return (self.peak_after - self.peak_before) / self.peak_before

    def to_dict(self) -> Dict[str, Any]:
        data = asdict(self)
        data["change"] = self.change
        return data


@dataclass
class _Variant:
    text: Optional[str]
    description: str
    exact_numerics_expected: bool  # a fix keeps numerics; a suggested rewrite need not
    tolerance: Tuple[float, float] = (0.0, 0.0)
    reason: str = ""  # why no variant could be built


def variant_for(finding: Finding, text: str, target_name: str = "") -> _Variant:
    """The source with the finding's fix applied, or with the variant its message
    suggests; ``text`` None when neither exists (with the reason)."""
    if finding.code == AUTOCAST:
        autocast_text = autocast_variant(text, target_name)
        what = "suggested variant: the training step under torch.autocast(device_type, dtype=torch.bfloat16)"
        if autocast_text is None:
            return _Variant(None, what, False, reason="the target %r is not a top-level name" % target_name)
        return _Variant(autocast_text, what, False, tolerance=AUTOCAST_TOLERANCE)
    if finding.fix is not None:
        tolerance = (0.0, 0.0) if finding.fix.is_safe else UNSAFE_TOLERANCE
        return _Variant(
            apply_edits(text, finding.fix.edits),
            "%s fix: %s" % (finding.fix.applicability.value, finding.fix.title),
            exact_numerics_expected=True,
            tolerance=tolerance,
        )
    if finding.code.startswith(STEM_POOL_FAMILY):
        rewritten = keep_stem_pool(text, finding.location.row, finding.location.column)
        if rewritten is None:
            reason = "no variant that keeps the stem pool could be built from this code"
            return _Variant(None, "keep the stem pool", False, reason=reason)
        variant_text, what = rewritten
        return _Variant(variant_text, "suggested variant: keep the stem pool (%s)" % what, False)
    reason = "no fix, and no variant of its suggestion is built automatically"
    return _Variant(None, "none", False, reason=reason)


def verify_findings(
    target: Union[str, TargetSource],
    findings: Sequence[Finding],
    init_args: InitArgs,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    baseline: StepReport,
    dtype: Union[str, torch.dtype] = "float32",
    device: str = "fake",
    placements: Optional[List[PlacementResult]] = None,
    round_to: int = 512,
    seed: int = 0,
    original_error: Optional[str] = None,
) -> List[FindingVerdict]:
    """Measure each finding's variant against ``baseline`` (the original's
    step on ``device``) and compare numerics on real CPU at batch <= 2.

    Verdicts: *confirmed* (peak drops by at least 1 % of it, ``CONFIRM_FRACTION``),
    *refuted* (no such saving), *unsafe* (the fix changes numerics beyond its
    tolerance - bitwise for safe fixes - or raises), *not verified* (nothing
    to build, or the variant's parameters differ from the original's).
    Deep-stack findings are answered by the best checkpoint placement
    (``placements``, or measured here), whose numerics are compared too.
    ``original_error``: the target's own step raised it (``baseline`` is then the step of
    the target with its TML604 calls run without checkpointing, ``broken_target_baseline``).
    """
    if isinstance(target, str):
        target = read_target_source(target)
    verifier = _Verifier(target, init_args, input_shapes, baseline, dtype, device, round_to, seed)
    verifier.original_error = original_error
    module_calls = [(f.location.row, f.location.column) for f in findings if f.code == CHECKPOINT_MODULE]
    verdicts = []
    for number, finding in enumerate(findings, 1):
        with progress.stage("verifying %s at %d:%d (%d of %d)" % (
                finding.code, finding.location.row, finding.location.column, number, len(findings))):
            if finding.code == CHECKPOINT_MODULE:
                verdicts.append(verifier.checkpoint_module(finding, module_calls))
            elif original_error is not None:
                verdict = verifier._verdict(finding, "none")
                verdict.reason = "the target's training step raises: %s" % original_error
                verdicts.append(verdict)
            elif finding.code == CHECKPOINT_RNG:
                verdicts.append(verifier.checkpoint_rng(finding))
            elif finding.code in PLACEMENT_RULES:
                if placements is None:
                    placements = advise_checkpointing(target, init_args, input_shapes, dtype, device, round_to)
                verdicts.append(verifier.placement(finding, placements))
            else:
                verdicts.append(verifier.variant(finding))
    return verdicts


class _Verifier:
    """Measures variants of one target against its baseline; builds the
    original for numerics once, when the first variant needs it."""

    def __init__(
        self, target: TargetSource, init_args: InitArgs, input_shapes: Any, baseline: StepReport,
        dtype: Any, device: str, round_to: int, seed: int,
    ) -> None:
        self.target = target
        self.init_args = init_args
        self.input_shapes = input_shapes
        self.baseline = baseline
        self.dtype = dtype
        self.device = device
        self.round_to = round_to
        self.seed = seed
        self._original: Optional[nn.Module] = None
        self.original_error: Optional[str] = None
        self._doubled_baseline: Optional[int] = None
        self.inputs = _numerics_inputs(input_shapes, dtype, seed)

    @property
    def original(self) -> nn.Module:
        if self._original is None:
            self._original = self._build(self.target.text)
        return self._original

    def _build(self, text: str) -> nn.Module:
        module = import_source_variant(self.target, text)
        factory = model_factory(module, self.target.spec, self.init_args, self.dtype)
        torch.manual_seed(self.seed)
        return factory()

    def _verdict(self, finding: Finding, variant: str) -> FindingVerdict:
        return FindingVerdict(
            finding.code, finding.location.row, finding.location.column, finding.message,
            NOT_VERIFIED, variant, self.baseline.peak_bytes,
        )

    def variant(self, finding: Finding) -> FindingVerdict:
        variant = variant_for(finding, self.target.text, self.target.name)
        verdict = self._verdict(finding, variant.description)
        if variant.text is None:
            verdict.reason = variant.reason
            return verdict
        # A fix that breaks the code is unsafe; a suggested rewrite that does was ours to build.
        broken = UNSAFE if variant.exact_numerics_expected else NOT_VERIFIED
        try:
            rebuilt = self._build(variant.text)
        except DynamicError as exc:
            verdict.verdict, verdict.reason = broken, str(exc)
            return verdict
        try:
            load_same_weights(rebuilt, self.original.state_dict())
        except DynamicError as exc:
            verdict.reason = "the variant cannot take the original's weights: %s" % exc
            return verdict
        try:
            after = self._measure(rebuilt, variant.text)
        except DynamicError as exc:
            verdict.verdict, verdict.reason = broken, str(exc)
            return verdict
        verdict.peak_after = after.peak_bytes
        verdict.scaling = self._scaling(variant.text, verdict.peak_before - after.peak_bytes)
        numerics = compare_numerics(self.original, rebuilt, self.inputs, seed=self.seed)
        atol, rtol = variant.tolerance
        if not numerics.equal and not (numerics.error_a or numerics.error_b) and (atol or rtol):
            numerics = compare_numerics(
                self.original, rebuilt, self.inputs, atol=atol, rtol=rtol, seed=self.seed
            )
        verdict.numerics = describe_numerics(numerics)
        reshaped = shape_change(numerics.output_shapes_a, numerics.output_shapes_b)
        if reshaped is not None and not (numerics.error_a or numerics.error_b):
            # A different network, not a cheaper one: its saving is not a like-for-like saving.
            verdict.numerics = "differs: %s" % reshaped
            verdict.reason = "the variant changes the model's output shape (%s); its peak is shown for " \
                             "information, not confirmed" % reshaped
            return verdict
        if numerics.error_a:
            verdict.reason = "the original's training step failed at batch %d" % NUMERICS_BATCH
        elif numerics.error_b:
            verdict.verdict, verdict.reason = broken, "the variant's training step raises"
        elif not numerics.equal and variant.exact_numerics_expected:
            verdict.verdict, verdict.reason = UNSAFE, "the fix changes outputs, gradients or buffers"
        elif not numerics.equal and (atol or rtol):
            verdict.verdict = UNSAFE
            verdict.reason = "the variant changes outputs or gradients beyond atol=%g, rtol=%g" % (atol, rtol)
        else:
            saving = significant_saving(verdict.peak_before, after.peak_bytes)
            verdict.verdict = CONFIRMED if saving else REFUTED
            if not numerics.equal:  # a suggested rewrite, not a fix: it may change the model
                verdict.numerics = (
                    "differs, as this variant changes the model (outputs: max abs diff %.3g)"
                    % numerics.output_diff
                )
        return verdict

    def _measure(self, rebuilt: nn.Module, text: str) -> StepReport:
        """The variant's step: the built model under fake tensors, else rebuilt on the device."""
        if is_fake(self.device):
            return measure_training_step(
                rebuilt, self.input_shapes, dtype=self.dtype, device=self.device,
                round_to=self.round_to, seed=self.seed,
            )
        return measure_source_variant(
            self.target, text, self.init_args, self.input_shapes, self.dtype, self.device,
            round_to=self.round_to, seed=self.seed,
        )

    def checkpoint_rng(self, finding: Finding) -> FindingVerdict:
        """TML603: the hand-written checkpoint Function against
        ``torch.utils.checkpoint.checkpoint(..., use_reentrant=False)``, both compared with
        the segment run without checkpointing (one seeded step, dropout on): the finding is
        confirmed when the hand-written one's gradients differ from it and the variant's are
        bitwise equal to it.  Bytes: the variant's peak beside the original's."""
        variants = checkpoint_function_variants(self.target.text, finding.location.row)
        what = "suggested variant: torch.utils.checkpoint.checkpoint(..., use_reentrant=False)"
        verdict = self._verdict(finding, what)
        if variants is None:
            verdict.reason = "forward's signature is not (ctx, run_function[, length], *args): no variant built"
            return verdict
        fixed_text, plain_text, description = variants
        verdict.variant = "suggested variant: %s" % description
        try:
            fixed, plain = self._build(fixed_text), self._build(plain_text)
            for model in (fixed, plain):
                load_same_weights(model, self.original.state_dict())
            verdict.peak_after = self._measure(fixed, fixed_text).peak_bytes
        except DynamicError as exc:
            verdict.reason = str(exc)
            return verdict
        handwritten = compare_numerics(plain, self.original, self.inputs, seed=self.seed)
        variant = compare_numerics(plain, fixed, self.inputs, seed=self.seed)
        verdict.numerics = (
            "against the segment without checkpointing: hand-written %s; torch.utils.checkpoint %s"
            % (_with_grad_diff(handwritten), _with_grad_diff(variant))
        )
        change = (verdict.peak_after - verdict.peak_before) / max(verdict.peak_before, 1)
        bytes_note = "peak %d -> %d B (%+.1f %%%s)" % (
            verdict.peak_before, verdict.peak_after, 100 * change,
            ", about equal: both keep the segment's inputs and recompute it" if abs(change) < CONFIRM_FRACTION else "")
        if handwritten.error_a or handwritten.error_b or variant.error_b:
            verdict.reason = "a step raises; " + bytes_note
        elif handwritten.equal:
            verdict.verdict = REFUTED
            verdict.reason = "the hand-written recomputation gives the same gradients here (no random op " \
                             "in the segment at this step); " + bytes_note
        elif not variant.equal:
            verdict.verdict = UNSAFE
            verdict.reason = "the variant does not give the un-checkpointed segment's results either; " + bytes_note
        else:
            verdict.verdict = CONFIRMED
            verdict.reason = "the hand-written recomputation draws other random numbers (gradients differ); " \
                             "torch.utils.checkpoint restores the RNG state; a correctness finding: " + bytes_note
        return verdict

    def checkpoint_module(self, finding: Finding, locations: List[Tuple[int, int]]) -> FindingVerdict:
        """TML604: the target's step raises TypeError (``original_error``); the variant with
        the flagged calls fixed is measured and compared with the target run without
        checkpointing (the baseline then), bitwise."""
        verdict = self._verdict(
            finding, "suggested variant: torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=False)"
        )
        variants = checkpoint_module_variants(self.target.text, locations)
        if variants is None:
            verdict.reason = "a flagged call has no argument: no variant built"
            return verdict
        fixed_text, plain_text, description = variants
        verdict.variant = "suggested variant: %s" % description
        if self.original_error is None:
            verdict.reason = "the target's step does not reach the flagged call (it runs without error)"
            return verdict
        if "not callable" not in self.original_error:
            verdict.reason = "the target's step raises something else: %s" % self.original_error
            return verdict
        try:
            plain = self._build(plain_text)
            fixed = self._build(fixed_text)
            load_same_weights(fixed, plain.state_dict())
            verdict.peak_after = self._measure(fixed, fixed_text).peak_bytes
        except DynamicError as exc:
            verdict.reason = "the original raises (%s); the fixed variant too: %s" % (self.original_error, exc)
            return verdict
        numerics = compare_numerics(plain, fixed, self.inputs, seed=self.seed)
        verdict.numerics = "against the model without checkpointing: %s" % describe_numerics(numerics)
        change = (verdict.peak_after - verdict.peak_before) / max(verdict.peak_before, 1)
        verdict.reason = (
            "the target as written raises (%s); fixed, the step runs: peak %d B beside %d B "
            "without checkpointing (%+.1f %%)"
            % (self.original_error, verdict.peak_after, verdict.peak_before, 100 * change)
        )
        verdict.verdict = CONFIRMED if numerics.equal else UNSAFE
        return verdict

    def _scaling(self, text: str, saved: int) -> List[List[int]]:
        """The saving at this batch and at twice it (fake tensors: cheap), to show
        how it scales; empty when the batch is not the shared first dimension."""
        if not is_fake(self.device):
            return []
        try:
            batch = batch_of(self.input_shapes)
            doubled = with_batch(self.input_shapes, 2 * batch)
            if self._doubled_baseline is None:
                self._doubled_baseline = measure_source_variant(
                    self.target, self.target.text, self.init_args, doubled, self.dtype, self.device,
                    round_to=self.round_to, seed=self.seed,
                ).peak_bytes
            after = measure_source_variant(
                self.target, text, self.init_args, doubled, self.dtype, self.device,
                round_to=self.round_to, seed=self.seed,
            ).peak_bytes
        except DynamicError:
            return []
        return [[batch, saved], [2 * batch, self._doubled_baseline - after]]

    def placement(self, finding: Finding, placements: List[PlacementResult]) -> FindingVerdict:
        """The best placement stands for the finding: its saving, and its numerics
        (BatchNorm statistics updated twice under checkpoint show up here)."""
        best = placements[0]
        verdict = self._verdict(finding, "checkpoint placements (best: %s)" % best.name)
        verdict.peak_after = best.peak_bytes
        summary = "checkpointing %s: %+.1f %% peak at x%.2f FLOPs" % (
            best.name, 100 * best.peak_change, best.flops_ratio,
        )
        if not significant_saving(verdict.peak_before, best.peak_bytes):
            verdict.verdict = REFUTED
            verdict.reason = "no placement lowers the peak by 1 % at this shape"
            return verdict
        # A full copy: the two steps must not update each other's BatchNorm buffers.
        wrapped = checkpoint_forwards(copy.deepcopy(self.original), best.wrapped)
        numerics = compare_numerics(self.original, wrapped, self.inputs, seed=self.seed)
        verdict.numerics = describe_numerics(numerics)
        if numerics.equal:
            verdict.verdict, verdict.reason = CONFIRMED, summary
        else:
            verdict.verdict, verdict.reason = UNSAFE, summary + ", but it changes the step's results"
        return verdict


def checkpoint_forwards(model: nn.Module, paths: Sequence[str]) -> nn.Module:
    """Run the submodules at ``paths`` under non-reentrant checkpoint, in place.

    Each module's own ``forward`` is wrapped, so parameter and buffer names
    stay those of the original (unlike a wrapper module) and a strict
    ``load_state_dict`` between the two works.
    """
    for path in paths:
        module = model.get_submodule(path)
        plain = module.forward

        def forward(*args: Any, _plain: Callable[..., Any] = plain, **kwargs: Any) -> Any:
            return checkpoint(_plain, *args, use_reentrant=False, **kwargs)

        module.forward = forward  # type: ignore[method-assign]
    return model


def advise_checkpointing(
    target: Union[str, TargetSource],
    init_args: InitArgs,
    input_shapes: Any,
    dtype: Any = "float32",
    device: str = "fake",
    round_to: int = 512,
) -> List[PlacementResult]:
    """Measured checkpoint placements (every block, each stage, early stages...), best first."""
    if isinstance(target, str):
        target = read_target_source(target)
    factory = model_factory(import_source_variant(target, target.text), target.spec, init_args, dtype)
    with progress.stage("measuring checkpoint placements"):
        return checkpoint_placements(factory, input_shapes, dtype=dtype, device=device, round_to=round_to)


def _numerics_inputs(input_shapes: Any, dtype: Any, seed: int) -> Any:
    """The user's inputs at batch <= 2 (first dimension, or an inputs function's
    batch_size), on real CPU."""
    default = _as_dtype(dtype)
    if isinstance(input_shapes, InputsFunction):
        torch.manual_seed(seed)
        return input_shapes.make("cpu", default, min(input_shapes.batch, NUMERICS_BATCH))
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for spec in _normalise_specs(input_shapes):
        dims = list(spec)
        dtype_here = _as_dtype(dims.pop()) if dims and isinstance(dims[-1], str) else default
        if dims:
            dims[0] = min(dims[0], NUMERICS_BATCH)
        if dtype_here.is_floating_point:
            tensors.append(torch.randn(dims, generator=generator).to(dtype_here))
        else:
            tensors.append(torch.zeros(dims, dtype=dtype_here))
    return tensors


# -- the whole profile --------------------------------------------------------------------

@dataclass
class ReportSection:
    """An extra part of the profile (e.g. a memory budget): text lines and JSON data."""

    key: str
    title: str
    lines: List[str]
    data: Any


@dataclass
class ProfileResult:
    target: str
    device: str  # "cpu" (an estimate under fake tensors) or "cuda"
    method: str
    dtype: str
    input_shapes: List[List[Union[int, str]]]
    report: StepReport
    allocator: Optional[AllocatorEstimate]
    findings: List[FindingVerdict] = field(default_factory=list)
    placements: List[PlacementResult] = field(default_factory=list)
    limits: List[str] = field(default_factory=list)  # what this method cannot see
    warnings: List[str] = field(default_factory=list)  # raised by the user's code
    sections: List[ReportSection] = field(default_factory=list)
    seconds: float = 0.0
    # The measuring device: "fake" (CUDA's kernels), "fake-cpu", "cpu" (real) or "cuda".
    measuring: str = "fake"
    # What the step was given: the shapes, or an inputs.InputsFunction (not in JSON).
    inputs: Any = field(default=None, repr=False)
    init_args: Any = field(default=None, repr=False)
    notes: List[str] = field(default_factory=list)  # how the target was resolved and built
    source_spec: str = ""  # the spec whose file defines the target (a package's re-export resolved)

    @property
    def inputs_function(self) -> Optional[InputsFunction]:
        return self.inputs if isinstance(self.inputs, InputsFunction) else None

    def add_section(self, key: str, title: str, lines: List[str], data: Any) -> None:
        self.sections.append(ReportSection(key, title, lines, data))

    def to_dict(self) -> Dict[str, Any]:
        step = self.report
        data: Dict[str, Any] = {
            "target": self.target,
            "device": self.device,
            "method": self.method,
            "dtype": self.dtype,
            "estimate_for": step.estimate_for,
            "emulated": step.emulated,
            "input_shapes": self.input_shapes,
            "peak_bytes": step.peak_bytes,
            "peak_phase": step.peak_phase,
            "peak_op": step.peak_op,
            "peak_module": step.peak_module,
            "forward_peak_bytes": step.forward_peak_bytes,
            "kept_after_forward": step.kept_after_forward,
            "saved_bytes": step.saved_bytes,
            "param_bytes": step.param_bytes,
            "grad_bytes": step.grad_bytes,
            "buffer_bytes": step.buffer_bytes,
            "input_bytes": step.input_bytes,
            "total_bytes": step.total_bytes(),
            "modules": [{"name": name, "bytes": nbytes} for name, nbytes in step.modules],
            "findings": [verdict.to_dict() for verdict in self.findings],
            "placements": [asdict(p) for p in self.placements],
            "limits": self.limits,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
        }
        if self.inputs_function is not None:
            data["inputs"] = {"function": self.inputs_function.spec, "batch_size": self.inputs_function.batch,
                              "made": step.inputs}
        if step.loss != "mean":
            data["loss"] = step.loss
        if self.notes:
            data["notes"] = list(self.notes)
        if self.allocator is not None:
            data["simulated_allocator"] = asdict(self.allocator)
        if step.cuda is not None:
            data["cuda"] = asdict(step.cuda)
        for section in self.sections:
            data[section.key] = section.data
        return data


def input_shape_lists(input_shapes: Any) -> List[List[Union[int, str]]]:
    """The shapes as lists; empty for an inputs function (its batch is described apart)."""
    if isinstance(input_shapes, InputsFunction):
        return []
    return [list(spec) for spec in _normalise_specs(input_shapes)]


def is_fake(measuring: str) -> bool:
    """A measuring device that runs on fake tensors (an estimate, nothing allocated)."""
    return measuring in ("fake", "fake-cpu")


def resolve_device(device: str, estimate_for: str = "cuda", real_tensors: bool = False) -> str:
    """``auto``/``cpu``/``cuda`` -> the measuring device: ``cuda``; ``fake`` (an
    estimate with CUDA's kernels), ``fake-cpu`` (with the CPU's) or, with
    ``real_tensors``, ``cpu`` (a real CPU step)."""
    if estimate_for not in ESTIMATE_FOR:
        raise DynamicError("--estimate-for must be cuda or cpu, not %r" % (estimate_for,))
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() and not real_tensors else "cpu"
    if device == "cpu":
        if real_tensors:
            return "cpu"
        return "fake" if estimate_for == "cuda" else "fake-cpu"
    if device == "cuda":
        if real_tensors:
            raise DynamicError("--real-tensors measures on the CPU; it cannot be used with --device cuda")
        if not torch.cuda.is_available():
            raise DynamicError("--device cuda requested but torch.cuda is not available")
        return "cuda"
    raise DynamicError("device must be auto, cpu or cuda, not %r" % device)


def run_profile(
    target_spec: str,
    input_shapes: Sequence[InputSpec],
    init_args: InitArgs = None,
    dtype: str = "float32",
    device: str = "auto",
    settings: Optional[Settings] = None,
    verify: bool = True,
    checkpoint_advice: bool = False,
    seed: int = 0,
    estimate_for: str = "cuda",
    real_tensors: bool = False,
    observer: Any = None,
) -> ProfileResult:
    """Build the target, measure one training step, verify the findings inside it.

    Findings come from linting the target's file with ``settings`` (the
    linter's selection).  Checkpoint placements are measured when asked or
    when a deep-stack finding needs them.  ``estimate_for``/``real_tensors``:
    see ``resolve_device``.  ``observer`` (a ``lines.StepObserver``) watches the measured
    step of the target as written (``report.add_step_sections`` reads it).
    """
    started = time.perf_counter()
    measuring = resolve_device(device, estimate_for, real_tensors)
    use_working_directory()
    with progress.stage("importing %s" % target_spec):
        source_spec, notes = resolve_target(target_spec, init_args)
        target = read_target_source(source_spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = import_source_variant(target, target.text)
        factory = model_factory(module, source_spec, init_args, dtype)
        findings: Optional[List[Finding]] = None
        original_error: Optional[str] = None
        try:
            with progress.stage("building the model and measuring one training step"):
                report = measure_training_step(
                    factory, input_shapes, dtype=dtype, device=measuring, seed=seed, observer=observer
                )
        except DynamicError as exc:
            findings = lint_target(target, settings) if verify else []
            report = broken_target_baseline(target, findings, exc, init_args, input_shapes, dtype, measuring, seed)
            original_error = str(exc)
        if findings is None:
            findings = lint_target(target, settings) if verify else []
        placements: Optional[List[PlacementResult]] = None
        if checkpoint_advice or any(f.code in PLACEMENT_RULES for f in findings):
            placements = advise_checkpointing(target, init_args, input_shapes, dtype, measuring)
        verdicts = verify_findings(
            target, findings, init_args, input_shapes, report, dtype, measuring, placements, seed=seed,
            original_error=original_error,
        )
    result = ProfileResult(
        target=target_spec,
        device="cuda" if measuring == "cuda" else "cpu",
        method=_method(measuring),
        dtype=str(dtype),
        input_shapes=input_shape_lists(input_shapes),
        report=report,
        allocator=report.simulate_allocator() if measuring != "cuda" else None,
        findings=verdicts,
        placements=placements or [],
        limits=estimate_limits(report, measuring) if measuring != "cuda" else [],
        warnings=_unique_messages(caught),
        measuring=measuring,
        inputs=input_shapes,
        init_args=init_args,
        notes=notes,
        source_spec=source_spec,
    )
    if report.built:
        result.limits.insert(0, report.built)
    if original_error is not None:
        result.limits.insert(0, (
            "the target as written raises (%s): the step measured is the target with its "
            "`torch.utils.checkpoint(...)` calls (TML604) run without checkpointing" % original_error
        ))
    if report.compiled:
        result.limits.insert(0, (
            "torch.compile: measured the original module's eager code (compile disabled while "
            "measuring); a compiled graph can keep fewer tensors"
        ))
    elif "torch.compile" in target.text:
        result.limits.insert(0, (
            "this file uses torch.compile: whatever it compiles ran as eager code while measuring"
        ))
    result.seconds = time.perf_counter() - started
    return result


def broken_target_baseline(
    target: TargetSource, findings: Sequence[Finding], error: DynamicError, init_args: InitArgs,
    input_shapes: Any, dtype: Any, measuring: str, seed: int,
) -> StepReport:
    """The step of the target with its TML604 calls (``torch.utils.checkpoint(f, x)``)
    run without checkpointing, when the target's own step raised ``error``; ``error`` is
    raised again when there is no such call or the reference raises too."""
    locations = [(f.location.row, f.location.column) for f in findings if f.code == CHECKPOINT_MODULE]
    variants = checkpoint_module_variants(target.text, locations) if locations else None
    if variants is None:
        raise error
    try:
        return measure_source_variant(target, variants[1], init_args, input_shapes, dtype, measuring, seed=seed)
    except DynamicError:
        raise error from None


def _method(measuring: str) -> str:
    if measuring == "cuda":
        return "torch.cuda.max_memory_allocated after reset_peak_memory_stats and a warm-up step"
    if measuring == "cpu":
        return "a real step on the CPU (real tensors, CPU kernels), every storage tracked in 512-byte blocks"
    kernels = (
        "an estimate of CUDA: its attention and dropout kernels emulated"
        if measuring == "fake" else "an estimate of the CPU: the CPU's own kernels"
    )
    return ("fake tensors on the cpu device (FakeTensorMode), %s; exact bytes in 512-byte blocks, "
            "nothing allocated" % kernels)


_ATTENTION_OPS = ("scaled_dot_product", "_safe_softmax")
_DROPOUT_OPS = ("bernoulli", "native_dropout")


def estimate_limits(report: StepReport, measuring: str = "fake") -> List[str]:
    """What this measurement does and does not see, for this model (emulate.py)."""
    ops = {event.op for event in report.events}
    limits = [
        "kernel workspaces and temporaries inside kernels (cuDNN, cuBLAS, attention backward) are in "
        "CUDA's max_memory_allocated but not in this figure, which counts op outputs (measured on an H200: "
        "0-4 % of it for 14 of 16 models, about 18 % for two small conv nets whose cuDNN convolutions "
        "take a workspace; docs/dynamic.md, 'Measured on a GPU')",
        "max_memory_reserved (what runs out) can be well above the allocated peak; "
        "the simulated allocator figure is a model (on an H200 the real one, after a warm-up step, "
        "was 5-117 % above it)",
    ]
    uses_attention = any(name in op for op in ops for name in _ATTENTION_OPS)
    uses_dropout = any(name in op for op in ops for name in _DROPOUT_OPS)
    if measuring == "fake":
        if report.emulated:
            limits.append(
                "estimate of CUDA: scaled_dot_product_attention runs the kernel torch picks on a GPU of "
                "compute capability 8.0 or later (flash for fp16/bf16, memory-efficient for fp32 or a mask, "
                "else math; cuDNN attention is not emulated); dropout keeps a 1-byte mask (native_dropout)"
            )
        limits.extend(report.emulation_gaps)
    elif uses_attention or uses_dropout:
        limits.append(
            "CPU kernels: attention and dropout ran as on the CPU (with dropout, attention keeps the "
            "softmax; dropout keeps 4-byte noise); CUDA keeps less: --estimate-for cuda estimates it"
        )
    return limits


_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
# Warnings this tool causes, not the model: the tracker's global module hooks
# seen by torch.compile, deep copies of fake tensors (nn.TransformerEncoder),
# torch's own deprecations while it imports.
_OWN_WARNINGS = ("global hooks on modules", "data pointer of FakeTensor")


def _unique_messages(caught: Sequence[warnings.WarningMessage]) -> List[str]:
    messages: List[str] = []
    for item in caught:
        if any(own in str(item.message) for own in _OWN_WARNINGS) or (
            issubclass(item.category, DeprecationWarning)
            and os.path.abspath(item.filename).startswith(_TORCH_DIR)
        ):
            continue
        lines = str(item.message).strip().splitlines()
        text = "%s: %s" % (item.category.__name__, lines[0] if lines else "")
        if text not in messages:
            messages.append(text)
    return messages
