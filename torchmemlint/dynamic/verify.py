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

from torchmemlint.config import Settings, resolve_settings
from torchmemlint.engine import lint_source
from torchmemlint.findings import Finding
from torchmemlint.fixer import apply_edits
from torchmemlint.sourcefile import SourceError, read_source

from .errors import DynamicError
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


def significant_saving(before: int, after: int) -> bool:
    """A peak drop of at least max(1 MiB, 1 %) (memory-facts §5.2)."""
    return before - after >= max(MIB, 0.01 * before)


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
    except Exception as exc:
        del sys.modules[name]
        raise DynamicError("importing %s failed: %s: %s" % (target.path, type(exc).__name__, _first_line(exc))) from exc
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
    return measure_training_step(model, input_shapes, dtype=dtype, device=device, round_to=round_to, seed=seed)


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
        rewritten = keep_stem_pool(text, finding.location.row, finding.end_location.row)
        if rewritten is None:
            return _Variant(None, "keep the stem pool", False, reason="no variant that keeps the stem pool could be built from this code")
        return _Variant(rewritten, "suggested variant: keep the stem pool", exact_numerics_expected=False)
    return _Variant(None, "none", False, reason="no fix, and no variant of its suggestion is built automatically")


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

    Verdicts: *confirmed* (peak drops by at least max(1 MiB, 1 %)),
    *refuted* (no such saving), *unsafe* (the fix changes numerics beyond its
    tolerance - bitwise for safe fixes - or raises), *not verified* (nothing
    to build, or the variant's parameters differ from the original's).
    Deep-stack findings are answered by checkpoint placements (``placements``
    or measured here).
    """
    if isinstance(target, str):
        target = read_target_source(target)
    original_module: Optional[ModuleType] = None
    original: Optional[nn.Module] = None
    numerics_inputs: List[torch.Tensor] = []
    verdicts = []
    for finding in findings:
        before = baseline.peak_bytes
        if finding.code in PLACEMENT_RULES:
            if placements is None:
                placements = advise_checkpointing(target, init_args, input_shapes, dtype, device, round_to)
            verdicts.append(_placement_verdict(finding, before, placements))
            continue
        variant = variant_for(finding, target.text)
        verdict = FindingVerdict(
            finding.code, finding.location.row, finding.location.column, finding.message,
            NOT_VERIFIED, variant.description, before,
        )
        verdicts.append(verdict)
        if variant.text is None:
            verdict.reason = variant.reason
            continue
        if original is None:
            original_module = import_source_variant(target, target.text)
            torch.manual_seed(seed)
            original = model_factory(original_module, target.spec, init_args, dtype)()
            numerics_inputs = _numerics_inputs(input_shapes, dtype, seed)
        _verify_variant(verdict, variant, target, original, numerics_inputs, init_args, input_shapes, dtype, device, round_to, seed)
    return verdicts


def _verify_variant(
    verdict: FindingVerdict,
    variant: _Variant,
    target: TargetSource,
    original: nn.Module,
    numerics_inputs: List[torch.Tensor],
    init_args: InitArgs,
    input_shapes: Any,
    dtype: Any,
    device: str,
    round_to: int,
    seed: int,
) -> None:
    # A fix that breaks the code is unsafe; a suggested rewrite that does was ours to build.
    broken = UNSAFE if variant.exact_numerics_expected else NOT_VERIFIED
    try:
        factory = model_factory(import_source_variant(target, variant.text or ""), target.spec, init_args, dtype)
        torch.manual_seed(seed)
        rebuilt = factory()
    except DynamicError as exc:
        verdict.verdict, verdict.reason = broken, str(exc)
        return
    try:
        load_same_weights(rebuilt, original.state_dict())
    except DynamicError as exc:
        verdict.reason = "the variant cannot take the original's weights: %s" % exc
        return
    try:
        after = measure_training_step(factory, input_shapes, dtype=dtype, device=device, round_to=round_to, seed=seed)
    except DynamicError as exc:
        verdict.verdict, verdict.reason = broken, str(exc)
        return
    verdict.peak_after = after.peak_bytes
    numerics = compare_numerics(original, rebuilt, numerics_inputs, seed=seed)
    atol, rtol = variant.tolerance
    if not numerics.equal and not (numerics.error_a or numerics.error_b) and (atol or rtol):
        numerics = compare_numerics(original, rebuilt, numerics_inputs, atol=atol, rtol=rtol, seed=seed)
    verdict.numerics = describe_numerics(numerics)
    if numerics.error_a:
        verdict.verdict = NOT_VERIFIED
        verdict.reason = "the original's training step failed at batch %d" % NUMERICS_BATCH
    elif numerics.error_b:
        verdict.verdict, verdict.reason = broken, "the variant's training step raises"
    elif not numerics.equal and variant.exact_numerics_expected:
        verdict.verdict, verdict.reason = UNSAFE, "the fix changes outputs, gradients or buffers"
    else:
        saving = significant_saving(verdict.peak_before, after.peak_bytes)
        verdict.verdict = CONFIRMED if saving else REFUTED
        if not variant.exact_numerics_expected and not numerics.equal:
            verdict.numerics += " (expected: the variant changes the model)"


def describe_numerics(report: NumericsReport) -> str:
    """One phrase: identical, within a tolerance, what differs, or what raised."""
    if report.error_a or report.error_b:
        side, error = ("original", report.error_a) if report.error_a else ("variant", report.error_b)
        return "%s raises: %s" % (side, (error or "").splitlines()[0])
    if report.equal:
        if report.atol or report.rtol:
            worst = max([report.output_diff, report.input_grad_diff] + [d for d in report.param_grad_diffs.values() if d is not None])
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


def _placement_verdict(finding: Finding, before: int, placements: List[PlacementResult]) -> FindingVerdict:
    best = placements[0]
    verdict = FindingVerdict(
        finding.code, finding.location.row, finding.location.column, finding.message,
        REFUTED, "checkpoint placements (best: %s)" % best.name, before, best.peak_bytes,
        numerics="not compared (checkpointing recomputes the same ops)",
    )
    if significant_saving(before, best.peak_bytes):
        verdict.verdict = CONFIRMED
        verdict.reason = "checkpointing %s: %+.1f %% peak at x%.2f FLOPs" % (
            best.name, 100 * best.peak_change, best.flops_ratio,
        )
    else:
        verdict.reason = "no placement lowers the peak by max(1 MiB, 1 %) at this shape"
    return verdict


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

_ACTIVATION_ATTRIBUTES = ("relu", "act", "act1", "activation")


def keep_stem_pool(text: str, start_row: int, end_row: int) -> Optional[str]:
    """The source with the stem pooling put back, for a finding on rows
    ``start_row..end_row``; None when no known pattern is found.

    Within the top-level definition that holds the finding, either
    ``<x>.<...pool...> = <...>Identity()`` is removed (the encoder keeps its
    own pool) or, in the one ``Sequential(P.conv1, P.bn1, P.relu)`` that
    rebuilds a stem from an encoder ``P`` without its pool, ``P.maxpool`` is
    appended after the activation (the torchvision/timm ResNet layout).
    """
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    module = wrapper.module
    enclosing = next(
        (
            node
            for node in module.body
            if positions[node].start.line <= start_row <= positions[node].end.line
        ),
        None,
    )
    if enclosing is None:
        return None
    finder = _StemFinder()
    enclosing.visit(finder)
    if finder.identity_pools:
        return module.visit(_StemRewriter(removed=set(map(id, finder.identity_pools)))).code
    stems = finder.stems
    if len(stems) > 1:
        stems = [s for s in stems if positions[s].start.line <= end_row and start_row <= positions[s].end.line]
    if len(stems) != 1:
        return None
    return module.visit(_StemRewriter(extended={id(stems[0])})).code


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return "%s.%s" % (_dotted(node.value), node.attr.value)
    return ""


class _StemFinder(cst.CSTVisitor):
    def __init__(self) -> None:
        self.identity_pools: List[cst.SimpleStatementLine] = []
        self.stems: List[cst.Call] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        for statement in node.body:
            if (
                isinstance(statement, cst.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0].target, cst.Attribute)
                and "pool" in statement.targets[0].target.attr.value
                and isinstance(statement.value, cst.Call)
                and _dotted(statement.value.func).endswith("Identity")
            ):
                self.identity_pools.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        if not _dotted(node.func).endswith("Sequential") or not node.args:
            return
        values = [arg.value for arg in node.args]
        if not all(isinstance(value, cst.Attribute) for value in values):
            return
        prefixes = {_dotted(value.value) for value in values}  # type: ignore[attr-defined]
        names = [value.attr.value for value in values]  # type: ignore[attr-defined]
        if len(prefixes) == 1 and names[-1] in _ACTIVATION_ATTRIBUTES and not any("pool" in n for n in names):
            self.stems.append(node)


class _StemRewriter(cst.CSTTransformer):
    def __init__(self, removed: Set[int] = frozenset(), extended: Set[int] = frozenset()) -> None:  # type: ignore[assignment]
        super().__init__()
        self.removed = removed
        self.extended = extended

    def leave_SimpleStatementLine(self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine) -> Any:
        return cst.RemoveFromParent() if id(original) in self.removed else updated

    def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
        if id(original) not in self.extended:
            return updated
        last = original.args[-1].value
        pool = cst.Attribute(value=last.value, attr=cst.Name("maxpool"))  # type: ignore[attr-defined]
        args = list(updated.args)
        args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated.with_changes(args=args + [cst.Arg(pool)])


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

    def add_section(self, key: str, title: str, lines: List[str], data: Any) -> None:
        self.sections.append(ReportSection(key, title, lines, data))

    def to_dict(self) -> Dict[str, Any]:
        step = self.report
        data: Dict[str, Any] = {
            "target": self.target,
            "device": self.device,
            "method": self.method,
            "dtype": self.dtype,
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


def resolve_device(device: str) -> str:
    """``auto``/``cpu``/``cuda`` -> the measuring device: ``cuda`` or ``fake``."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "fake"
    if device == "cpu":
        return "fake"
    if device == "cuda":
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
) -> ProfileResult:
    """Build the target, measure one training step, verify the findings inside it.

    Findings come from linting the target's file with ``settings`` (the
    linter's selection).  Checkpoint placements are measured when asked or
    when a deep-stack finding needs them.
    """
    started = time.perf_counter()
    measuring = resolve_device(device)
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
        allocator=report.simulate_allocator() if measuring == "fake" else None,
        findings=verdicts,
        placements=placements or [],
        limits=estimate_limits(report) if measuring == "fake" else [],
        warnings=_unique_messages(caught),
    )
    result.seconds = time.perf_counter() - started
    return result


def _method(measuring: str) -> str:
    if measuring == "cuda":
        return "torch.cuda.max_memory_allocated after reset_peak_memory_stats and a warm-up step"
    return "fake tensors on the cpu device (FakeTensorMode), exact bytes in 512-byte blocks, nothing allocated"


def estimate_limits(report: StepReport) -> List[str]:
    """What a CPU estimate cannot see, for this model (memory-facts §2)."""
    ops = {event.op for event in report.events}
    limits = [
        "a lower bound of CUDA's max_memory_allocated: kernel workspaces (cuDNN, cuBLAS) are not counted",
        "max_memory_reserved (what runs out) is often 9-50 % above the allocated peak; "
        "the simulated allocator figure is a model",
    ]
    if "bernoulli" in ops or "native_dropout" in ops:
        limits.append("dropout: CUDA keeps a 1-byte mask per element where CPU keeps 4 bytes (estimate is high)")
    if any("scaled_dot_product" in op for op in ops):
        limits.append("attention: a GPU may pick another scaled_dot_product_attention kernel than the CPU")
    return limits


def _unique_messages(caught: Sequence[warnings.WarningMessage]) -> List[str]:
    messages: List[str] = []
    for item in caught:
        text = "%s: %s" % (item.category.__name__, str(item.message).strip().splitlines()[0] if str(item.message).strip() else "")
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
