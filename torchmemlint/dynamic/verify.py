"""Profile a model and confirm or refute each static finding by measuring it.

For every finding inside the profiled module, the finding's fix (or, for a
finding without one, the variant its message suggests) is applied to the
source text in memory.  The variant is imported under a fresh module name,
built, loaded with the original's weights (``load_state_dict(strict=True)``),
measured like the original and compared with it numerically after one real
training step (memory-facts §5).
"""

from __future__ import annotations

import ast
import copy
import itertools
import os
import sys
import time
import warnings
from dataclasses import asdict, dataclass, field
from types import ModuleType
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple, Union

import libcst as cst
import torch
from libcst.metadata import MetadataWrapper, PositionProvider
from torch import nn
from torch.utils.checkpoint import checkpoint

from torchmemlint.config import Settings, resolve_settings
from torchmemlint.engine import lint_source
from torchmemlint.findings import Finding
from torchmemlint.fixer import apply_edits
from torchmemlint.sourcefile import SourceError, read_source

from .emulate import ESTIMATE_FOR
from .errors import USER_EXITS, DynamicError, user_exit
from .measure import InputSpec, StepReport, _as_dtype, _normalise_specs, measure_training_step
from .numerics import NumericsReport, compare_numerics
from .placements import PlacementResult, checkpoint_placements
from .target import InitArgs, instantiate, is_file_location, split_spec
from .tracker import AllocatorEstimate

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

_variant_numbers = itertools.count()


# A fix is confirmed when it lowers the peak by at least this fraction of it.
# Fake-tensor accounting is exact for what it counts, so a relative saving is
# real at any size (no absolute floor: 512 KiB of a 6 MiB peak is 8.3 %); 1 %
# is about the largest gap measured between the estimate and CUDA's
# max_memory_allocated on conv nets (x0.987, benchmarks/gpu_check.py, issue 11),
# so a smaller saving could be lost in what the estimate does not count.
CONFIRM_FRACTION = 0.01


def significant_saving(before: int, after: int) -> bool:
    """A peak drop of at least ``CONFIRM_FRACTION`` (1 %) of the peak."""
    return before > 0 and before - after >= CONFIRM_FRACTION * before


# -- the target's source -------------------------------------------------------------------

@dataclass(frozen=True)
class TargetSource:
    """The file that defines a target, and how to import variants of it."""

    spec: str
    path: str
    text: str
    package: Optional[str]  # the package of a dotted target, for its relative imports

    @property
    def name(self) -> str:
        return split_spec(self.spec)[1]


def read_target_source(spec: str) -> TargetSource:
    """Locate and read the source file of ``path/file.py:Name`` or ``pkg.module:Name``."""
    location, _ = split_spec(spec)
    package: Optional[str] = None
    if is_file_location(location):
        path = location
        if not os.path.isfile(path):
            raise DynamicError("target not found: no file %s" % path)
    else:
        import importlib.util

        try:
            module_spec = importlib.util.find_spec(location)
        except (ImportError, ValueError) as exc:
            raise DynamicError("target not found: no module named %r" % location) from exc
        if module_spec is None:
            raise DynamicError("target not found: no module named %r" % location)
        if not module_spec.origin or not module_spec.origin.endswith(".py"):
            raise DynamicError("cannot read the Python source of %s" % location)
        path = module_spec.origin
        is_package = module_spec.submodule_search_locations is not None
        package = location if is_package else location.rpartition(".")[0]
    try:
        text = read_source(path).text
    except SourceError as exc:
        raise DynamicError(str(exc)) from exc
    return TargetSource(spec, path, text, package or None)


def import_source_variant(target: TargetSource, text: str) -> ModuleType:
    """Execute ``text`` as a fresh module that stands where the target's file is.

    It gets the file's ``__file__`` and package (relative imports work) and
    its directory on ``sys.path`` while it runs, under a private name that
    never replaces an imported module.
    """
    name = "_torchmemlint_variant_%d" % next(_variant_numbers)
    module = ModuleType(name)
    module.__file__ = os.path.abspath(target.path)
    module.__package__ = target.package
    sys.modules[name] = module  # dataclasses look their module up while the file runs
    directory = os.path.dirname(os.path.abspath(target.path))
    sys.path.insert(0, directory)
    try:
        exec(compile(text, target.path, "exec", dont_inherit=True), module.__dict__)
    except USER_EXITS as exc:
        del sys.modules[name]
        raise user_exit(exc, "importing %s" % target.path) from None
    except Exception as exc:
        del sys.modules[name]
        raise DynamicError(
            "importing %s failed: %s: %s" % (target.path, type(exc).__name__, _first_line(exc))
        ) from exc
    finally:
        if directory in sys.path:
            sys.path.remove(directory)
    return module


def model_factory(
    module: ModuleType, spec: str, init_args: InitArgs, dtype: Union[str, torch.dtype]
) -> Callable[[], nn.Module]:
    """A zero-argument factory of ``spec``'s model from ``module``, cast to ``dtype``
    (floating-point parameters and buffers only, as ``Module.to`` does)."""
    resolved = _as_dtype(dtype)

    def build() -> nn.Module:
        return cast_floating(instantiate(module, spec, init_args), resolved)

    return build


def cast_floating(model: nn.Module, dtype: torch.dtype) -> nn.Module:
    """Floating-point parameters and buffers to ``dtype``, in place.

    Not ``Module.to``: it swaps tensors in place, which fake tensors refuse.
    """
    if not dtype.is_floating_point:
        return model
    for submodule in model.modules():
        for name, param in submodule._parameters.items():
            if param is not None and param.is_floating_point() and param.dtype != dtype:
                submodule._parameters[name] = nn.Parameter(param.detach().to(dtype), param.requires_grad)
        for name, buffer in submodule._buffers.items():
            if buffer is not None and buffer.is_floating_point() and buffer.dtype != dtype:
                submodule._buffers[name] = buffer.to(dtype)
    return model


def measure_source_variant(
    target: Union[str, TargetSource],
    source_text: str,
    init_args: InitArgs,
    input_shapes: Union[InputSpec, Sequence[InputSpec]],
    dtype: Union[str, torch.dtype] = "float32",
    device: str = "fake",
    state_dict: Optional[Dict[str, torch.Tensor]] = None,
    round_to: int = 512,
    seed: int = 0,
) -> StepReport:
    """Measure one training step of the target built from ``source_text``
    (the target's file with some change) instead of the file on disk.

    ``dtype`` is the dtype of the model and of floating inputs.  With a
    ``state_dict`` the variant is built for real and loaded strictly (a
    variant whose parameters differ raises ``DynamicError``); memory does not
    depend on the values, so without one it is built as ``device`` demands
    (under fake tensors: nothing allocated).
    """
    if isinstance(target, str):
        target = read_target_source(target)
    factory = model_factory(import_source_variant(target, source_text), target.spec, init_args, dtype)
    model: Union[nn.Module, Callable[[], nn.Module]] = factory
    if state_dict is not None:
        torch.manual_seed(seed)
        model = factory()
        load_same_weights(model, state_dict)
    return measure_training_step(
        model, input_shapes, dtype=dtype, device=device, round_to=round_to, seed=seed
    )


def load_same_weights(model: nn.Module, state_dict: Dict[str, torch.Tensor]) -> None:
    """``load_state_dict(strict=True)``; a mismatch becomes a one-line DynamicError."""
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as exc:
        expected, actual = set(state_dict), set(model.state_dict())
        missing, unexpected = sorted(expected - actual), sorted(actual - expected)
        if missing or unexpected:
            detail = "missing %s; unexpected %s" % (_names(missing), _names(unexpected))
        else:
            detail = _first_line(exc).replace("Error(s) in loading state_dict for", "in")
        raise DynamicError("its parameters and buffers differ from the original's (%s)" % detail) from exc


# -- which findings belong to the target ---------------------------------------------------

def target_line_ranges(text: str, name: str) -> List[Tuple[int, int]]:
    """Line ranges of the top-level definition ``name`` and of every top-level
    class, function or assignment it uses, transitively (same file only)."""
    tree = ast.parse(text)
    definitions: Dict[str, List[ast.stmt]] = {}
    for node in tree.body:
        for defined in _defined_names(node):
            definitions.setdefault(defined, []).append(node)
    wanted = [name.split(".")[0]]
    seen: Set[str] = set()
    ranges: List[Tuple[int, int]] = []
    while wanted:
        current = wanted.pop()
        if current in seen or current not in definitions:
            continue
        seen.add(current)
        for node in definitions[current]:
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            ranges.append((first, node.end_lineno or node.lineno))
            wanted.extend(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in seen)
    return sorted(set(ranges))


def _defined_names(node: ast.stmt) -> Iterable[str]:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        yield node.name
    elif isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for leaf in ast.walk(target):
                if isinstance(leaf, ast.Name):
                    yield leaf.id


def findings_in_target(target: TargetSource, findings: Iterable[Finding]) -> List[Finding]:
    """The findings whose first row lies in the target's definitions."""
    ranges = target_line_ranges(target.text, target.name)
    return [f for f in findings if any(start <= f.location.row <= end for start, end in ranges)]


def lint_target(target: TargetSource, settings: Optional[Settings] = None) -> List[Finding]:
    """The linter's findings inside the target (selection from ``settings``,
    or the nearest configuration as ``torchmemlint check`` would find it)."""
    if settings is None:
        settings = resolve_settings(None, False, os.path.dirname(os.path.abspath(target.path)), {})
    findings = lint_source(target.text, target.path, settings)
    return findings_in_target(target, [f for f in findings if f.code.startswith("TML")])


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


def variant_for(finding: Finding, text: str) -> _Variant:
    """The source with the finding's fix applied, or with the variant its message
    suggests; ``text`` None when neither exists (with the reason)."""
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
) -> List[FindingVerdict]:
    """Measure each finding's variant against ``baseline`` (the original's
    step on ``device``) and compare numerics on real CPU at batch <= 2.

    Verdicts: *confirmed* (peak drops by at least 1 % of it, ``CONFIRM_FRACTION``),
    *refuted* (no such saving), *unsafe* (the fix changes numerics beyond its
    tolerance - bitwise for safe fixes - or raises), *not verified* (nothing
    to build, or the variant's parameters differ from the original's).
    Deep-stack findings are answered by the best checkpoint placement
    (``placements``, or measured here), whose numerics are compared too.
    """
    if isinstance(target, str):
        target = read_target_source(target)
    verifier = _Verifier(target, init_args, input_shapes, baseline, dtype, device, round_to, seed)
    verdicts = []
    for finding in findings:
        if finding.code in PLACEMENT_RULES:
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
        variant = variant_for(finding, self.target.text)
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
            after = measure_training_step(
                rebuilt, self.input_shapes, dtype=self.dtype, device=self.device,
                round_to=self.round_to, seed=self.seed,
            ) if is_fake(self.device) else measure_source_variant(
                self.target, variant.text, self.init_args, self.input_shapes, self.dtype, self.device,
                round_to=self.round_to, seed=self.seed,
            )
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
        if numerics.error_a:
            verdict.reason = "the original's training step failed at batch %d" % NUMERICS_BATCH
        elif numerics.error_b:
            verdict.verdict, verdict.reason = broken, "the variant's training step raises"
        elif not numerics.equal and variant.exact_numerics_expected:
            verdict.verdict, verdict.reason = UNSAFE, "the fix changes outputs, gradients or buffers"
        else:
            saving = significant_saving(verdict.peak_before, after.peak_bytes)
            verdict.verdict = CONFIRMED if saving else REFUTED
            if not numerics.equal:  # a suggested rewrite, not a fix: it may change the model
                verdict.numerics = (
                    "differs, as this variant changes the model (outputs: max abs diff %.3g)"
                    % numerics.output_diff
                )
        return verdict

    def _scaling(self, text: str, saved: int) -> List[List[int]]:
        """The saving at this batch and at twice it (fake tensors: cheap), to show
        how it scales; empty when the batch is not the shared first dimension."""
        if not is_fake(self.device):
            return []
        from .budget import batch_of, with_batch

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


def describe_numerics(report: NumericsReport) -> str:
    """One phrase: identical, within a tolerance, what differs, or what raised."""
    if report.error_a or report.error_b:
        side, error = ("original", report.error_a) if report.error_a else ("variant", report.error_b)
        return "%s raises: %s" % (side, (error or "").splitlines()[0])
    if report.equal:
        if report.atol or report.rtol:
            grads = [diff for diff in report.param_grad_diffs.values() if diff is not None]
            worst = max([report.output_diff, report.input_grad_diff] + grads)
            return "within atol=%g, rtol=%g (max abs diff %.3g)" % (report.atol, report.rtol, worst)
        return "identical"
    parts = []
    if report.differing_outputs:
        parts.append("outputs (max abs diff %.3g)" % report.output_diff)
    if report.differing_input_grads:
        parts.append("input grads")
    missing_grads = [n for n, d in report.param_grad_diffs.items() if d is None]
    if missing_grads:
        parts.append("gradient present on one side only: %s" % _names(missing_grads))
    other = [n for n in report.differing_params if n not in missing_grads]
    if other:
        parts.append("grads of %s" % _names(other))
    if report.differing_buffers:
        parts.append("buffers %s" % _names(report.differing_buffers))
    if report.missing_params:
        parts.append("parameters %s" % _names(report.missing_params))
    return "differs: " + "; ".join(parts)


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
    return checkpoint_placements(factory, input_shapes, dtype=dtype, device=device, round_to=round_to)


def _numerics_inputs(input_shapes: Any, dtype: Any, seed: int) -> List[torch.Tensor]:
    """The user's inputs at batch <= 2 (first dimension), on real CPU."""
    default = _as_dtype(dtype)
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


# -- suggested variants for findings without a fix -----------------------------------------

_STEM_ACTIVATIONS = frozenset({"relu", "act1"})


def keep_stem_pool(text: str, row: int, column: int) -> Optional[Tuple[str, str]]:
    """The source with a ResNet stem's downsampling put back, for a TML3xx
    finding at ``row:column``, and what was changed; None when the code
    matches no known pattern.

    In order: a flagged ``<x>.maxpool = nn.Identity()`` (or empty
    ``Sequential()``) statement is removed; a flagged stride-1
    ``<x>.conv1 = nn.Conv2d(...)`` gets stride 2 (a ``<x>.conv1.stride = ...``
    statement is removed).  For the one stem rebuilt without its pool as
    ``Sequential(P.conv1, P.bn1, P.relu, ...)`` in the flagged definition, the
    single call of ``P.layer1`` (or of an alias ``self.x = P.layer1``) becomes
    ``f(P.maxpool(h))``, else ``P.maxpool`` goes into the ``Sequential`` after
    the activation.  A flagged ``P.layer1(h)`` becomes ``P.layer1(P.maxpool(h))``.
    The pool is assumed to be ``maxpool``, as in torchvision's and timm's ResNets.
    """
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    module = wrapper.module

    def covers(node: cst.CSTNode) -> bool:
        return positions[node].start.line <= row <= positions[node].end.line

    finder = _StemFinder()
    module.visit(finder)
    for line in finder.assignments:
        if covers(line):
            assign = line.body[0]
            assert isinstance(assign, cst.Assign)
            target = assign.targets[0].target
            assert isinstance(target, cst.Attribute)
            if target.attr.value == "maxpool" and _is_no_op(assign.value):
                return _rewrite(module, line, cst.RemoveFromParent(), "removed `%s = ...`" % _dotted(target))
            if target.attr.value == "conv1" and isinstance(assign.value, cst.Call):
                return _rewrite(module, assign.value, _with_stride_two(assign.value),
                                "`%s` with stride 2" % _dotted(target))
            if target.attr.value == "stride" and _dotted(target.value).endswith(".conv1"):
                return _rewrite(module, line, cst.RemoveFromParent(), "removed `%s = ...`" % _dotted(target))
    enclosing = next((node for node in module.body if covers(node)), None)
    stems = [call for call in finder.stems if enclosing is not None and _inside(positions, call, enclosing)]
    if len(stems) == 1:
        # Feed layer1 through the pool where the class calls it (under an alias such
        # as ``self.conv1 = self.encoder.layer1``), so the stem's output, often a
        # UNet's first skip, stays what it was; else put the pool into the stem.
        owner = stems[0].args[0].value.value  # type: ignore[attr-defined]
        layer1 = _dotted(owner) + ".layer1"
        names = {layer1} | {
            alias for alias, value, node in finder.aliases
            if value == layer1 and _inside(positions, node, enclosing)  # type: ignore[arg-type]
        }
        feeds = [
            call for call in finder.one_argument_calls
            if _dotted(call.func) in names and _inside(positions, call, enclosing)  # type: ignore[arg-type]
        ]
        local_owner = isinstance(owner, cst.Name) and owner.value != "self"
        if len(feeds) == 1 and local_owner:
            # ``encoder = ResNet()`` is a local of __init__, gone by forward: keep its
            # pool as an attribute (no parameters: the state_dict is unchanged) next
            # to the alias of layer1, and feed the alias through it.
            aliases = [
                node for alias, value, node in finder.aliases
                if value == layer1 and alias == _dotted(feeds[0].func) and alias.startswith("self.")
                and _inside(positions, node, enclosing)  # type: ignore[arg-type]
            ]
            if len(aliases) == 1:
                keep = cst.parse_statement("self._stem_pool = %s.maxpool\n" % owner.value)
                fed = _through_pool(feeds[0], cst.Name("self"), "_stem_pool")
                new_code = module.visit(_Replace({
                    id(aliases[0]): cst.FlattenSentinel([aliases[0], keep]), id(feeds[0]): fed,
                })).code
                return new_code, "`%s` fed through `%s.maxpool` (kept as `self._stem_pool`)" % (
                    _dotted(feeds[0].func), owner.value)
        elif len(feeds) == 1:
            return _rewrite(module, feeds[0], _through_pool(feeds[0], owner),
                            "`%s` fed through `%s.maxpool`" % (_dotted(feeds[0].func), _dotted(owner)))
        return _rewrite(module, stems[0], _with_pool(stems[0]), "`%s.maxpool` added to the stem" % _dotted(owner))
    for call in finder.one_argument_calls:
        start = positions[call].start
        if (start.line, start.column + 1) == (row, column) and _dotted(call.func).endswith(".layer1"):
            owner = call.func.value  # type: ignore[attr-defined]
            return _rewrite(module, call, _through_pool(call, owner),
                            "`%s` fed through `%s.maxpool`" % (_dotted(call.func), _dotted(owner)))
    return None


def _rewrite(module: cst.Module, old: cst.CSTNode, new: Any, what: str) -> Tuple[str, str]:
    return module.visit(_Replace({id(old): new})).code, what


def _through_pool(call: cst.Call, owner: cst.BaseExpression, pool_name: str = "maxpool") -> cst.Call:
    """``f(h)`` -> ``f(owner.maxpool(h))``."""
    argument = call.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    pool = cst.Call(cst.Attribute(owner, cst.Name(pool_name)), [argument])
    return call.with_changes(args=[cst.Arg(pool)])


def _inside(positions: Any, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    inner, around = positions[node], positions[outer]
    return around.start.line <= inner.start.line and inner.end.line <= around.end.line


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return "%s.%s" % (_dotted(node.value), node.attr.value)
    return ""


def _is_no_op(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = _dotted(value.func)
    return name.endswith("Identity") or (name.endswith("Sequential") and not value.args)


def _with_stride_two(conv: cst.Call) -> cst.Call:
    args = list(conv.args)
    for index, arg in enumerate(args):
        keyword = arg.keyword.value if arg.keyword else None
        if keyword == "stride" or (keyword is None and index == 3):
            args[index] = arg.with_changes(value=cst.Integer("2"))
            return conv.with_changes(args=args)
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return conv.with_changes(args=args + [cst.Arg(cst.Integer("2"), keyword=cst.Name("stride"))])


def _with_pool(stem: cst.Call) -> cst.Call:
    args = list(stem.args)
    index = next(i for i, arg in enumerate(args) if arg.value.attr.value in _STEM_ACTIVATIONS)  # type: ignore
    owner = args[index].value.value  # type: ignore[attr-defined]
    pool = cst.Arg(
        cst.Attribute(owner, cst.Name("maxpool")),
        comma=args[index].comma if index + 1 < len(args) else cst.MaybeSentinel.DEFAULT,
    )
    args[index] = args[index].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return stem.with_changes(args=args[: index + 1] + [pool] + args[index + 1:])


class _StemFinder(cst.CSTVisitor):
    """Assignments to ``<x>.maxpool``/``<x>.conv1``/``<x>.conv1.stride``, stems rebuilt
    as a ``Sequential`` of one owner's parts without a pool, and one-argument calls."""

    def __init__(self) -> None:
        self.assignments: List[cst.SimpleStatementLine] = []
        self.stems: List[cst.Call] = []
        self.one_argument_calls: List[cst.Call] = []
        # (alias, aliased, statement) for ``self.conv1 = self.encoder.layer1``
        self.aliases: List[Tuple[str, str, cst.SimpleStatementLine]] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        statement = node.body[0] if len(node.body) == 1 else None
        if (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.value, cst.Attribute)
        ):
            self.aliases.append((_dotted(statement.targets[0].target), _dotted(statement.value), node))
        if (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Attribute)
            and statement.targets[0].target.attr.value in ("maxpool", "conv1", "stride")
        ):
            self.assignments.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        if len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            self.one_argument_calls.append(node)
        if not _dotted(node.func).endswith("Sequential") or not node.args:
            return
        values = [arg.value for arg in node.args]
        if any(arg.star or not isinstance(arg.value, cst.Attribute) for arg in node.args):
            return
        owners = {_dotted(value.value) for value in values}  # type: ignore[attr-defined]
        names = [value.attr.value for value in values]  # type: ignore[attr-defined]
        if (
            len(owners) == 1
            and names[0] == "conv1"
            and any(name in _STEM_ACTIVATIONS for name in names)
            and not any("pool" in name for name in names)
        ):
            self.stems.append(node)


class _Replace(cst.CSTTransformer):
    """Replace (or remove) nodes of the visited tree, found by identity."""

    def __init__(self, replacements: Dict[int, Any]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.replacements.get(id(original_node), updated_node)


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
        if self.allocator is not None:
            data["simulated_allocator"] = asdict(self.allocator)
        if step.cuda is not None:
            data["cuda"] = asdict(step.cuda)
        for section in self.sections:
            data[section.key] = section.data
        return data


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
) -> ProfileResult:
    """Build the target, measure one training step, verify the findings inside it.

    Findings come from linting the target's file with ``settings`` (the
    linter's selection).  Checkpoint placements are measured when asked or
    when a deep-stack finding needs them.  ``estimate_for``/``real_tensors``:
    see ``resolve_device``.
    """
    started = time.perf_counter()
    measuring = resolve_device(device, estimate_for, real_tensors)
    target = read_target_source(target_spec)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = import_source_variant(target, target.text)
        factory = model_factory(module, target_spec, init_args, dtype)
        report = measure_training_step(factory, input_shapes, dtype=dtype, device=measuring, seed=seed)
        findings = lint_target(target, settings) if verify else []
        placements: Optional[List[PlacementResult]] = None
        if checkpoint_advice or any(f.code in PLACEMENT_RULES for f in findings):
            placements = advise_checkpointing(target, init_args, input_shapes, dtype, measuring)
        verdicts = verify_findings(
            target, findings, init_args, input_shapes, report, dtype, measuring, placements, seed=seed
        )
    result = ProfileResult(
        target=target_spec,
        device="cuda" if measuring == "cuda" else "cpu",
        method=_method(measuring),
        dtype=str(dtype),
        input_shapes=[list(spec) for spec in _normalise_specs(input_shapes)],
        report=report,
        allocator=report.simulate_allocator() if measuring != "cuda" else None,
        findings=verdicts,
        placements=placements or [],
        limits=estimate_limits(report, measuring) if measuring != "cuda" else [],
        warnings=_unique_messages(caught),
        measuring=measuring,
    )
    if report.built:
        result.limits.insert(0, report.built)
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
        "CUDA's max_memory_allocated but not in this figure, which counts op outputs",
        "max_memory_reserved (what runs out) can be well above the allocated peak; "
        "the simulated allocator figure is a model",
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


def _names(names: Sequence[str], limit: int = 3) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (" (+%d more)" % (len(names) - limit) if len(names) > limit else "")


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__
