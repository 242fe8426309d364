"""How a variant's numerics and outputs compare with the original's, in words (the
``numerics`` column of a finding's verdict)."""

from __future__ import annotations

from typing import Optional, Sequence

from .numerics import NumericsReport
from .source import _names


def shape_change(before: Sequence[Sequence[int]], after: Sequence[Sequence[int]]) -> Optional[str]:
    """What a variant did to the output's shape, or None when it kept it:
    ``output 2x1x32x32 instead of 2x1x64x64 (H/2xW/2 instead of HxW): add an upsampling stage``."""
    if [list(s) for s in before] == [list(s) for s in after]:
        return None
    if len(before) != len(after):
        return "%d output tensors instead of %d" % (len(after), len(before))
    for old, new in zip(before, after):
        if list(old) == list(new):
            continue
        text = "output %s instead of %s" % (_dims(new), _dims(old))
        if len(old) == len(new) >= 3 and list(old[:-2]) == list(new[:-2]):
            ratios = [_ratio(n, o) for n, o in zip(new[-2:], old[-2:])]
            if None not in ratios:
                text += " (H%sxW%s instead of HxW)" % tuple(ratios)  # type: ignore[str-format]
                if all(n < o for n, o in zip(new[-2:], old[-2:])):
                    text += ": add an upsampling stage to restore the resolution"
                elif all(n > o for n, o in zip(new[-2:], old[-2:])):
                    text += ": it needs one downsampling stage less"
        return text
    return None


def _dims(shape: Sequence[int]) -> str:
    return "x".join(str(d) for d in shape) or "scalar"


def _ratio(new: int, old: int) -> Optional[str]:
    if new == old:
        return ""
    if new and old % new == 0:
        return "/%d" % (old // new)
    if old and new % old == 0:
        return "*%d" % (new // old)
    return None


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


def _with_grad_diff(report: NumericsReport) -> str:
    """``describe_numerics``, with the largest parameter-gradient difference when they differ."""
    text = describe_numerics(report)
    grads = [diff for diff in report.param_grad_diffs.values() if diff is not None]
    if not report.equal and grads and max(grads) > 0:
        text += " (parameter gradients: max abs diff %.3g)" % max(grads)
    return text
