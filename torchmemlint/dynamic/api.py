"""The Python API of dynamic mode, for notebooks and scripts.

``torchmemlint.profile(model, inputs, ...)`` and ``torchmemlint.fit(model, inputs, budget)``
run what ``torchmemlint profile`` runs and return a ``Report``: the same figures as
the command line (``Report.to_json()`` is its ``--output-format json``), a text table
as its ``repr``, an HTML table in Jupyter, and ``plot()``.

``model`` is a target as the command line takes it (``"path/file.py:Name"``,
``"package.module:Name"``), a class or factory function defined in a file (it is
profiled as that file's target, so the linter's findings in it are verified), or a
module instance or a class defined in a notebook: those are measured as they are,
without findings (there is no source file to lint and edit).

``inputs`` is a shape (``[8, 3, 224, 224]``), a list of shapes, an inputs function
(a callable given ``batch_size`` and, when it takes them, ``device`` and ``dtype``;
see ``inputs.py``) with ``batch_size=``, or ``"file.py:FUNCTION"``.
"""

from __future__ import annotations

import html
import inspect
import json
import os
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence, Union

from .errors import DynamicError


class Report:
    """The result of ``profile``/``fit``: figures, findings and, with a budget, the verdict."""

    def __init__(self, result: Any, budget: Optional[Dict[str, Any]] = None) -> None:
        self.result = result  # a verify.ProfileResult
        self.budget = budget or {}  # the JSON fields --budget adds at the top level

    # -- figures ------------------------------------------------------------------
    @property
    def peak_bytes(self) -> int:
        return int(self.result.report.peak_bytes)

    @property
    def total_bytes(self) -> int:
        return int(self.result.report.total_bytes())

    @property
    def findings(self) -> List[Any]:
        return list(self.result.findings)

    @property
    def max_batch(self) -> Optional[int]:
        return self.budget.get("max_batch")

    @property
    def fits(self) -> Optional[str]:
        return self.budget.get("fits")

    def to_dict(self) -> Dict[str, Any]:
        data = self.result.to_dict()
        data.update(self.budget)
        return data

    def to_json(self) -> str:
        """Exactly what ``torchmemlint profile ... --output-format json`` prints."""
        from .report import format_json

        payload = format_json([self.result])
        if self.budget:
            payload = json.dumps({**json.loads(payload), **self.budget}, indent=2) + "\n"
        return payload

    def to_text(self) -> str:
        """Exactly what ``torchmemlint profile`` prints."""
        from .report import format_text

        return format_text(self.result)

    # -- display ------------------------------------------------------------------
    def __repr__(self) -> str:
        return self.to_text()

    def _repr_html_(self) -> str:
        from .report import format_bytes, header_lines

        step = self.result.report
        rows = [
            ("peak memory", format_bytes(step.peak_bytes), "during %s, at %s" % (step.peak_phase, step.peak_op)),
            ("forward peak", format_bytes(step.forward_peak_bytes), ""),
            ("kept after forward", format_bytes(step.kept_after_forward),
             "saved for backward %s" % format_bytes(step.saved_bytes)),
            ("parameters", format_bytes(step.param_bytes), "gradients %s" % format_bytes(step.grad_bytes)),
            ("buffers", format_bytes(step.buffer_bytes), "input %s" % format_bytes(step.input_bytes)),
            ("total", format_bytes(step.total_bytes()), "parameters + buffers + input + peak"),
        ]
        if self.budget:
            rows.append(("budget", self.budget.get("fits", ""),
                         "largest batch %s" % self.max_batch if self.max_batch is not None else ""))
        parts = ["<div><b>Profile of %s</b>" % html.escape(self.result.target)]
        parts += ["<div><small>%s</small></div>" % html.escape(line.strip()) for line in header_lines(self.result)]
        parts.append(_html_table(("", "bytes", ""), rows))
        if self.result.findings:
            parts.append(_html_table(
                ("code", "at", "verdict", "peak before", "after", "numerics"),
                [(v.code, "%d:%d" % (v.row, v.column), v.verdict, format_bytes(v.peak_before),
                  "-" if v.peak_after is None else format_bytes(v.peak_after), v.numerics)
                 for v in self.result.findings]))
        parts.append("</div>")
        return "\n".join(parts)

    def plot(self, path: Optional[str] = None, optimizer: Optional[str] = "adam") -> Any:
        """Memory over the step, stacked by module (a matplotlib Figure; saved when ``path``)."""
        from .plot import draw

        figure = draw(self.result, optimizer)
        if path is not None:
            figure.savefig(path, dpi=100)
        return figure

    def snapshot(self, path: str) -> None:
        """Write the step's memory snapshot for PyTorch's memory_viz (``snapshot.py``)."""
        from .snapshot import write_snapshot

        write_snapshot(self.result, path)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    cells = "".join("<th>%s</th>" % html.escape(h) for h in header)
    body = "".join(
        "<tr>%s</tr>" % "".join("<td>%s</td>" % html.escape(str(cell)) for cell in row) for row in rows)
    return "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (cells, body)


def profile(
    model: Any,
    inputs: Any,
    *,
    batch_size: Optional[int] = None,
    init_args: Any = None,
    model_config: Optional[str] = None,
    dtype: str = "float32",
    device: str = "auto",
    estimate_for: str = "cuda",
    real_tensors: bool = False,
    verify: bool = True,
    select: Optional[Union[str, Sequence[str]]] = None,
    ignore: Optional[Union[str, Sequence[str]]] = None,
    config: Optional[str] = None,
    isolated: bool = False,
    checkpoint_advice: bool = False,
    budget: Optional[str] = None,
    optimizer: Optional[str] = None,
    reserve: Optional[str] = None,
    max_batch: bool = False,
) -> Report:
    """Measure one training step of ``model`` on ``inputs`` and verify the findings in it,
    as ``torchmemlint profile`` does (same options, same figures); see the module doc."""
    from torchmemlint.config import ConfigError, resolve_settings, split_selectors

    from . import verify as verify_module
    from .budget import budget_request, check_profile, json_fields
    from .model_config import ModelConfig

    request = budget_request(budget, optimizer, reserve, max_batch)
    arguments = init_args
    if model_config is not None:
        if init_args is not None and not isinstance(init_args, dict):
            raise DynamicError("with model_config, init_args must be a dict of configuration attributes")
        arguments = ModelConfig(model_config, dict(init_args or {}))
    spec = _target_spec(model)
    inputs_spec = _inputs(inputs, batch_size)
    if spec is None:
        return _profile_object(model, inputs_spec, arguments, dtype, device, estimate_for, real_tensors, request)
    location = spec.rpartition(":")[0]
    is_file = location.endswith(".py") or "/" in location or os.sep in location
    overrides = {
        "select": split_selectors(_codes(select)) if select else None,
        "ignore": split_selectors(_codes(ignore)) if ignore else None,
    }
    try:
        start = os.path.dirname(os.path.abspath(location)) if is_file else os.getcwd()
        settings = resolve_settings(config, isolated, start, overrides)
    except ConfigError as error:
        raise DynamicError(str(error)) from None
    budget_bytes = request.resolve() if request else None
    from torchmemlint.dynamic.lines import StepObserver
    from torchmemlint.dynamic.report import add_step_sections

    observer = StepObserver()  # memory by source line and findings from measurement, as the CLI
    result = verify_module.run_profile(
        spec, inputs_spec, arguments, dtype, device, settings, verify=verify,
        checkpoint_advice=checkpoint_advice, estimate_for=estimate_for, real_tensors=real_tensors,
        observer=observer,
    )
    add_step_sections(result, observer, settings)
    fields: Dict[str, Any] = {}
    if request is not None:
        check = check_profile(result, request, budget_bytes, arguments, settings, verified=verify)
        result.add_section("budget", "Will it fit? (--budget)", check.text_lines(), check.to_dict())
        fields = json_fields(check)
    return Report(result, fields)


def fit(
    model: Any,
    inputs: Any,
    budget: str,
    *,
    optimizer: str = "adam",
    reserve: Optional[str] = None,
    max_batch: bool = True,
    verify: bool = False,
    **options: Any,
) -> Report:
    """Will it fit in ``budget`` (``"8GiB"``, ``"cuda:0"``) with ``optimizer``'s state, and
    what is the largest batch that does: ``profile --budget B --max-batch --no-verify``."""
    return profile(model, inputs, budget=budget, optimizer=optimizer, reserve=reserve,
                   max_batch=max_batch, verify=verify, **options)


def _codes(codes: Union[str, Sequence[str]]) -> List[str]:
    return [codes] if isinstance(codes, str) else list(codes)


def _target_spec(model: Any) -> Optional[str]:
    """A ``path.py:Name`` or ``module:Name`` spec for ``model``, or None for an object
    without a source file to lint (an instance, a class defined in a notebook)."""
    if isinstance(model, str):
        return model
    if not (inspect.isclass(model) or inspect.isfunction(model)):
        return None
    qualname = getattr(model, "__qualname__", "")
    if "<" in qualname:  # defined inside a function
        return None
    try:
        path = inspect.getsourcefile(model)
    except TypeError:
        return None
    if not path or not path.endswith(".py") or not os.path.isfile(path):
        return None
    return "%s:%s" % (path, qualname)


def _inputs(inputs: Any, batch_size: Optional[int]) -> Any:
    """Shapes, or an ``InputsFunction`` (callable or ``"file.py:FUNCTION"``, with ``batch_size``)."""
    from .inputs import inputs_function, load_inputs_function

    if isinstance(inputs, str):
        if batch_size is None:
            raise DynamicError("an inputs function needs batch_size=")
        return load_inputs_function(inputs, batch_size)
    if callable(inputs):
        if batch_size is None:
            raise DynamicError("an inputs function needs batch_size=")
        name = getattr(inputs, "__qualname__", type(inputs).__name__)
        module = getattr(inputs, "__module__", "") or "__main__"
        return inputs_function(inputs, "%s:%s" % (module, name), batch_size)
    if batch_size is not None:
        raise DynamicError("batch_size is for an inputs function; with shapes the batch is the first dimension")
    shapes = list(inputs)
    if shapes and all(isinstance(item, (int, str)) for item in shapes):
        return [shapes]
    return [list(shape) for shape in shapes]


def _profile_object(
    model: Any, inputs: Any, init_args: Any, dtype: str, device: str, estimate_for: str,
    real_tensors: bool, request: Any,
) -> Report:
    """Measure a model without a source file (an instance, a notebook class): no findings."""
    from torch import nn

    from . import verify as verify_module
    from .batch import batch_of, with_batch
    from .budget import check_budget, json_fields, largest_batch
    from .measure import measure_training_step
    from .source import cast_floating
    from .measure import _as_dtype

    started = time.perf_counter()
    measuring = verify_module.resolve_device(device, estimate_for, real_tensors)
    if isinstance(model, nn.Module):
        if init_args:
            raise DynamicError("a module instance takes no init_args")
        source: Any = model
        name = "%s instance" % type(model).__name__
    else:
        from .target import instantiate

        holder = type("_Holder", (), {"model": model})
        name = getattr(model, "__qualname__", repr(model))

        def source() -> nn.Module:
            return cast_floating(instantiate(holder, "<notebook>:model", init_args), _as_dtype(dtype))

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = measure_training_step(source, inputs, dtype=dtype, device=measuring)
    result = verify_module.ProfileResult(
        target=name, device="cuda" if measuring == "cuda" else "cpu", method=verify_module._method(measuring),
        dtype=str(dtype), input_shapes=verify_module.input_shape_lists(inputs), report=report,
        allocator=report.simulate_allocator() if measuring != "cuda" else None,
        limits=verify_module.estimate_limits(report, measuring) if measuring != "cuda" else [],
        warnings=verify_module._unique_messages(caught), measuring=measuring, inputs=inputs,
        init_args=init_args, notes=["no source file: the model was measured, findings not linted or verified"],
    )
    if report.built:
        result.limits.insert(0, report.built)
    fields: Dict[str, Any] = {}
    if request is not None:
        fake = measuring if verify_module.is_fake(measuring) else "fake"
        baseline = report if verify_module.is_fake(measuring) else measure_training_step(
            source, inputs, dtype=dtype, device=fake)
        batch = batch_of(inputs)
        check = check_budget(baseline, request.resolve(), request.optimizer, request.reserve_bytes, batch)
        if request.max_batch or check.verdict != "fits":
            check.batch_search = largest_batch(
                lambda at: measure_training_step(source, with_batch(inputs, at), dtype=dtype, device=fake),
                request.optimizer, check.usable_bytes, batch, known_reports={batch: baseline})
        result.add_section("budget", "Will it fit? (--budget)", check.text_lines(), check.to_dict())
        fields = json_fields(check)
    result.seconds = time.perf_counter() - started
    return Report(result, fields)
