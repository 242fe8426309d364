"""The picture of a profile: memory over the training step, stacked by module.

Each live storage of the step is charged to the module whose forward made it (a
tensor kept for backward stays in its module's band until backward frees it);
what backward makes (gradients, temporaries) is one band, and the parameters,
buffers and input batch that exist before the step are the base.  The forward and
backward phases are shaded and labelled; after backward, the optimizer step is
drawn as modelled (its state and update temporaries, ``budget.OptimizerModel``),
and labelled so.  The peak is annotated with its phase, op and module, and the source lines that
hold the most of the step's memory there (the profile's "lines" section).
Needs matplotlib.
"""

from __future__ import annotations

import os
import textwrap
from typing import Any, Dict, List, Optional, Sequence, Tuple

BANDS = 8  # named module bands; the rest are "other modules"
BACKWARD_BAND = "backward: gradients and temporaries"
RESIDENT_BAND = "parameters, buffers, input"
OTHER_BAND = "other modules"
OPTIMIZER_BAND = "gradients, optimizer state and update (modelled)"


def module_group(name: str, depth: int) -> str:
    return ".".join(name.split(".")[:depth]) if name else name


def choose_depth(names: Sequence[str], limit: int = BANDS + 2) -> int:
    """The deepest module-name depth that gives at most ``limit`` groups (at least 1)."""
    deepest = max((name.count(".") + 1 for name in names), default=1)
    best = 1
    for depth in range(1, deepest + 1):
        if len({module_group(name, depth) for name in names}) <= limit:
            best = depth
    return best


def stacked_series(events: Sequence[Any], bands: int = BANDS) -> Tuple[List[int], List[str], Dict[str, List[int]]]:
    """x (event index), band names (largest first), and each band's live bytes after each event."""
    forward_modules = sorted({e.module for e in events if e.phase == "forward" and e.delta > 0})
    depth = choose_depth(forward_modules)
    owner: Dict[int, str] = {}
    live: Dict[str, int] = {}
    rows: List[Dict[str, int]] = []
    xs: List[int] = []
    for event in events:
        if event.delta > 0:
            group = BACKWARD_BAND if event.phase == "backward" else module_group(event.module, depth)
            owner[event.storage_id] = group
        group = owner.get(event.storage_id, OTHER_BAND)
        live[group] = live.get(group, 0) + event.delta
        xs.append(event.index)
        rows.append(dict(live))
    peaks: Dict[str, int] = {}
    for row in rows:
        for group, nbytes in row.items():
            peaks[group] = max(peaks.get(group, 0), nbytes)
    named = [g for g in sorted(peaks, key=lambda g: -peaks[g]) if g not in (BACKWARD_BAND, OTHER_BAND)]
    kept, rest = named[:bands], set(named[bands:])
    order = kept + ([OTHER_BAND] if rest or OTHER_BAND in peaks else []) + (
        [BACKWARD_BAND] if BACKWARD_BAND in peaks else [])
    series: Dict[str, List[int]] = {name: [] for name in order}
    for row in rows:
        other = sum(nbytes for group, nbytes in row.items() if group in rest or group == OTHER_BAND)
        for name in order:
            series[name].append(other if name == OTHER_BAND else row.get(name, 0))
    return xs, order, series


def draw(result: Any, optimizer: Optional[str] = "adam") -> Any:
    """A matplotlib Figure of ``result``'s step (a ``verify.ProfileResult``)."""
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline"):
        matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from .budget import optimizer_model
    from .report import format_bytes, inputs_text

    step = result.report
    events = step.events
    xs, order, series = stacked_series(events)
    mib = 1 << 20
    resident = step.resident_bytes
    figure = Figure(figsize=(11, 5.5))
    axes = figure.add_subplot(1, 1, 1)
    end = xs[-1] + 1 if xs else 1
    tail = max(end // 8, 4)
    model = optimizer_model(optimizer) if optimizer else None
    state = model.state_slots * step.grad_bytes if model else 0
    # As budget.estimate_memory: the update holds the gradients and its temporaries.
    update = step.grad_bytes * (1 + model.update_slots) if model and model.state_slots else 0
    # The step, then the optimizer phase (the last row of every band held over it).
    x_all = [-1] + xs + ([end, end + tail] if model else [])
    stacks = [[resident / mib] * len(x_all)]
    labels = [RESIDENT_BAND]
    for name in order:
        values = [0] + series[name] + ([series[name][-1]] * 2 if model else [])
        stacks.append([v / mib for v in values])
        labels.append(name)
    if model:
        stacks.append([0.0] * (len(xs) + 1) + [(state + update) / mib] * 2)
        labels.append("%s: %s" % (OPTIMIZER_BAND, model.name))
    colours = ["#bbbbbb"] + [matplotlib.colormaps["tab10"](i % 10) for i in range(len(order))] + ["#444444"]
    axes.stackplot(x_all, *stacks, labels=labels, colors=colours[:len(stacks)], step="post", alpha=0.85)
    top = max((sum(column) for column in zip(*stacks)), default=0.0)
    backward_at = next((e.index for e in events if e.phase == "backward"), end)
    phases = [("forward", -1, backward_at), ("backward", backward_at, end)]
    if model:
        phases.append(("optimizer\n(modelled)", end, end + tail))
    for number, (name, first, last) in enumerate(phases):
        if number % 2:
            axes.axvspan(first, last, color="#000000", alpha=0.04, linewidth=0)
        axes.text((first + last) / 2, 0.985, name, ha="center", va="top", fontsize="small",
                  transform=axes.get_xaxis_transform())
    peak_index = max(range(len(events)), key=lambda i: sum(series[n][i] for n in order)) if events else None
    if peak_index is not None:
        peak_x = xs[peak_index]
        peak_y = resident / mib + sum(series[n][peak_index] for n in order) / mib
        where = "%s, at %s" % (step.peak_phase, step.peak_op)
        if step.peak_phase == "forward" and step.peak_module:
            where += " in %s" % step.peak_module
        axes.annotate("peak %s (step) + %s resident\n%s%s" % (
            format_bytes(step.peak_bytes), format_bytes(resident), where, _top_lines(result)),
            (peak_x, peak_y), xytext=(0.02, 0.88), textcoords="axes fraction", va="top", fontsize="small",
            arrowprops={"arrowstyle": "->", "color": "black", "linewidth": 0.8})
    axes.set_ylim(0, top * 1.35 if top else 1)
    axes.set_xlim(-1, x_all[-1])
    axes.set_xlabel("allocation/free event of the step")
    axes.set_ylabel("memory (MiB)")
    axes.set_title(textwrap.fill("%s, %s" % (result.target, inputs_text(result)), 100), fontsize="medium")
    axes.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title="by module (forward)")
    figure.tight_layout()
    return figure


def _top_lines(result: Any, count: int = 3) -> str:
    """The source lines that hold the most of the step's memory at the peak (the profile's
    "lines" section, ``lines.StepObserver``), as lines for the peak's annotation."""
    data = next((section.data for section in getattr(result, "sections", ())
                 if section.key == "lines"), None)
    if not data:
        return ""
    from .report import format_bytes

    step_lines = [line for line in data if line.get("what") not in ("parameter", "buffer")]
    top = sorted(step_lines, key=lambda line: -line["bytes"])[:count]
    return "".join(
        "\n%s:%s  %s  %s%s" % (os.path.basename(line["filename"]), line["row"],
                               format_bytes(line["bytes"]), line["what"],
                               "  (%s)" % line["module"] if line.get("module") else "")
        for line in top
    )


def save(result: Any, path: str, optimizer: Optional[str] = "adam") -> None:
    draw(result, optimizer).savefig(path, dpi=100)
