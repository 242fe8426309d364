"""Render a ``ProfileResult``: a text report, JSON, and a plot of memory over the step."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Sequence, Tuple

from .verify import ProfileResult

MODULE_ROWS = 10


def format_bytes(nbytes: float) -> str:
    """``512 B``, ``1.50 KiB``, ``20.01 MiB``, ``15.14 GiB`` (signed for changes)."""
    sign = "-" if nbytes < 0 else ""
    value = abs(float(nbytes))
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return "%s%d B" % (sign, value) if unit == "B" else "%s%.2f %s" % (sign, value, unit)
        value /= 1024
    raise AssertionError("unreachable")


def _shape(spec: Sequence[Any], dtype: str) -> str:
    dims = [str(d) for d in spec if not isinstance(d, str)]
    named = [d for d in spec if isinstance(d, str)]
    return "%s %s" % ("x".join(dims), named[0] if named else dtype)


def _table(rows: List[Tuple[str, ...]], indent: str = "  ") -> List[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths)]
        lines.append((indent + "  ".join(cells)).rstrip())
    return lines


def _change(after: int, before: int) -> str:
    """``-4.00 MiB (-20.0 %)``, ``+512 B (+0.1 %)`` or ``0 B``."""
    delta = after - before
    if delta == 0 or not before:
        return format_bytes(delta)
    return "%s%s (%+.1f %%)" % ("+" if delta > 0 else "", format_bytes(delta), 100.0 * delta / before)


def scaling_text(scaling: Sequence[Sequence[int]], peak: int) -> str:
    """``saves 512.00 KiB (8.3 %) at batch 4, 1.00 MiB at batch 8: +128.00 KiB per sample``."""
    (batch, saved), (batch2, saved2) = scaling[0], scaling[-1]
    text = "saves %s (%.1f %%) at batch %d, %s at batch %d" % (
        format_bytes(saved), 100.0 * saved / peak if peak else 0.0, batch, format_bytes(saved2), batch2)
    per_sample = (saved2 - saved) / (batch2 - batch)
    if saved2 == saved:
        return text + ": does not grow with the batch"
    return text + ": %s%s per sample" % ("+" if per_sample > 0 else "", format_bytes(per_sample))


def format_text(result: ProfileResult) -> str:
    step = result.report
    where = "during %s, at %s" % (step.peak_phase, step.peak_op)
    if step.peak_phase == "forward":
        where += " in %s" % step.peak_module
    lines = ["Profile of %s" % result.target] + header_lines(result) + [""]
    rows = [
        ("peak memory", format_bytes(step.peak_bytes), where),
        ("forward peak", format_bytes(step.forward_peak_bytes), ""),
        ("kept after forward", format_bytes(step.kept_after_forward),
         "saved for backward %s" % format_bytes(step.saved_bytes)),
        ("parameters", format_bytes(step.param_bytes), "gradients %s" % format_bytes(step.grad_bytes)),
        ("buffers", format_bytes(step.buffer_bytes), "input %s" % format_bytes(step.input_bytes)),
        ("total", format_bytes(step.total_bytes()),
         "parameters + buffers + input + peak (no optimizer state)"),
    ]
    if step.cuda is not None:
        untracked = format_bytes(step.cuda.untracked)
        rows.append(("max_memory_allocated", format_bytes(step.cuda.max_allocated),
                     "%s not seen by the tracker (workspaces, block slack)" % untracked))
        rows.append(("max_memory_reserved", format_bytes(step.cuda.max_reserved), ""))
    if step.emulated:
        rows.append(("CUDA kernels", "emulated", ", ".join(
            "%s x%d" % item for item in sorted(step.emulated.items()))))
    if result.allocator is not None:
        rows.append(("simulated allocator", format_bytes(result.allocator.max_allocated),
                     "allocated; reserved %s (a model of CUDA's caching allocator)"
                     % format_bytes(result.allocator.max_reserved)))
    lines += _table(rows)

    if step.modules:
        lines += ["", "Kept after forward, by module (largest first)"]
        module_rows = [
            (name, format_bytes(nbytes), "%.1f %%" % (100.0 * nbytes / step.kept_after_forward))
            for name, nbytes in step.modules[:MODULE_ROWS]
        ]
        lines += _table(module_rows)
        if len(step.modules) > MODULE_ROWS:
            lines.append("  ... %d more modules" % (len(step.modules) - MODULE_ROWS))

    if result.findings:
        lines += ["", "Findings (%d): the fix or suggested variant, measured" % len(result.findings)]
        finding_rows = [("code", "at", "verdict", "peak before", "after", "change", "numerics")]
        details = []
        for verdict in result.findings:
            at = "%d:%d" % (verdict.row, verdict.column)
            after = "-" if verdict.peak_after is None else format_bytes(verdict.peak_after)
            change = "" if verdict.peak_after is None else _change(verdict.peak_after, verdict.peak_before)
            finding_rows.append((
                verdict.code, at, verdict.verdict, format_bytes(verdict.peak_before), after, change,
                verdict.numerics,
            ))
            details.append((verdict.code, at, verdict.variant + ("; " + verdict.reason if verdict.reason else "")))
            if verdict.scaling:
                details.append(("", "", scaling_text(verdict.scaling, verdict.peak_before)))
        lines += _table(finding_rows)
        lines += [""] + _table(details)
    elif result.findings == [] and not result.placements:
        lines += ["", "No findings inside this model to verify."]

    if result.placements:
        lines += ["", "Checkpoint placements (best first; non-reentrant checkpoint)"]
        placement_rows = [("placement", "peak", "change", "FLOPs", "wrapped")]
        for placement in result.placements:
            wrapped = ", ".join(placement.wrapped[:3]) + (" ..." if len(placement.wrapped) > 3 else "")
            placement_rows.append((
                placement.name, format_bytes(placement.peak_bytes),
                "%+.1f %%" % (100 * placement.peak_change), "x%.2f" % placement.flops_ratio, wrapped or "-",
            ))
        lines += _table(placement_rows)

    for section in result.sections:
        lines += ["", section.title] + ["  " + line for line in section.lines]
    if result.limits:
        lines += ["", "What this figure does and does not count"] + ["  - " + limit for limit in result.limits]
    if result.warnings:
        lines += ["", "Warnings raised by the model's code"] + ["  - " + w for w in result.warnings]
    lines += ["", "Measured in %.1f s." % result.seconds]
    return "\n".join(lines) + "\n"


def inputs_text(result: ProfileResult) -> str:
    """``input 8x3x64x64 float32`` or ``inputs make_batch(batch_size=4): args: ...``."""
    function = result.inputs_function
    if function is not None:
        return "inputs %s: %s" % (function.describe(), result.report.inputs)
    return "input %s" % ", ".join(_shape(spec, result.dtype) for spec in result.input_shapes)


def loss_text(loss: str) -> str:
    return "mean loss" if loss == "mean" else "the model's own loss (%s)" % loss


def header_lines(result: ProfileResult) -> List[str]:
    """What ran: the model's code, the loss, the inputs, the device; how the target was built."""
    lines = [
        "  ran the model's code: built it (seed 0), then one training step: forward, %s, backward"
        % loss_text(result.report.loss),
        "  %s; device %s: %s" % (inputs_text(result), result.device, result.method),
    ]
    return lines + ["  " + note for note in result.notes]


def format_json(results: Sequence[ProfileResult]) -> str:
    """One profile as an object, several as a list."""
    data: Any = [r.to_dict() for r in results]
    if len(results) == 1:
        data = data[0]
    return json.dumps(data, indent=2) + "\n"


# -- memory by source line, findings from measurement ---------------------------------------

LINE_MODULES = 8
LINES_PER_MODULE = 3


def _where(filename: str, row: int) -> str:
    if not row:
        return filename
    try:
        shown = os.path.relpath(filename)
    except ValueError:  # another drive (Windows)
        shown = filename
    if shown.startswith(".." + os.sep + ".."):
        shown = filename
    return "%s:%d" % (shown, row)


def lines_text(lines: Sequence[Any], peak_bytes: int) -> List[str]:
    """The top lines at the peak, grouped by module (largest module first)."""
    step = [line for line in lines if line.what not in ("parameter", "buffer")]
    resident = [line for line in lines if line.what in ("parameter", "buffer")]
    by_module: Dict[str, List[Any]] = {}
    for line in lines:
        by_module.setdefault(line.module or "(no module)", []).append(line)
    ranked = sorted(by_module.items(), key=lambda item: (-sum(item.bytes for item in item[1]), item[0]))
    rows: List[Tuple[str, ...]] = [("module / line", "bytes", "what")]
    for module, members in ranked[:LINE_MODULES]:
        rows.append((module, format_bytes(sum(item.bytes for item in members)), ""))
        for line in members[:LINES_PER_MODULE]:
            rows.append(("  " + _where(line.filename, line.row), format_bytes(line.bytes), line.what))
        if len(members) > LINES_PER_MODULE:
            rows.append(("  ... %d more lines" % (len(members) - LINES_PER_MODULE), "", ""))
    out = _table(rows, indent="")
    if len(ranked) > LINE_MODULES:
        out.append("... %d more modules (all lines in the JSON report)" % (len(ranked) - LINE_MODULES))
    step_total = sum(line.bytes for line in step)
    share = 100.0 * step_total / peak_bytes if peak_bytes else 100.0
    resident_total = sum(line.bytes for line in resident)
    out.append("the step's lines add up to %s, %.1f %% of the peak %s; parameters and buffers, "
               "present before the step: %s"
               % (format_bytes(step_total), share, format_bytes(peak_bytes), format_bytes(resident_total)))
    return out


def measured_text(findings: Sequence[Any]) -> List[str]:
    """Findings from measurement, each marked with whether the linter reported it."""
    if not findings:
        return ["none: no eager attention, overwritten saved tensor, out-of-place LeakyReLU-like "
                "activation kept twice, float dropout mask, BatchNorm updated twice or dropped "
                "strided pool in this step"]
    rows: List[Tuple[str, ...]] = [("code", "at", "bytes", "linter", "what")]
    for finding in findings:
        linter = {True: "found", False: "MISSED", None: "-"}[finding.static]
        at = _where(finding.filename, finding.row)
        if finding.ran_at:
            at += " (ran at line %d)" % finding.ran_at
        rows.append((finding.code, at, format_bytes(finding.bytes), linter, finding.what))
    out = _table(rows, indent="")
    missed = sum(1 for finding in findings if finding.static is False)
    if missed:
        out.append("MISSED: %d of %d not reported by the static linter (all rules selected)" % (missed, len(findings)))
    return out


def add_step_sections(result: Any, observer: Any, settings: Any = None) -> None:
    """Add "lines" (memory at the peak by source line) and "measured" (findings from
    measurement) to ``result`` from the ``lines.StepObserver`` of its measured step."""
    from .detectors import detect, static_flags

    if observer.failed is not None:
        result.limits.append("memory by source line and findings from measurement are missing: "
                             "recording the step failed (%s)" % observer.failed)
        return
    if not observer.finished:
        return
    result.add_section(
        "lines", "Memory at the peak by source line (grouped by module, largest first)",
        lines_text(observer.lines, observer.peak_bytes), [line.to_dict() for line in observer.lines],
    )
    findings = detect(observer, cuda_kernels=result.measuring in ("fake", "cuda"))
    static_flags(findings, settings)
    result.add_section(
        "measured", "Found by measurement (from the ops the step ran; linter: whether the static linter reported it)",
        measured_text(findings), [finding.to_dict() for finding in findings],
    )
