"""Render a ``ProfileResult``: a text report, JSON, and a plot of memory over the step."""

from __future__ import annotations

import json
from typing import Any, List, Sequence, Tuple

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
