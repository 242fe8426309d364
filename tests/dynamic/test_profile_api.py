"""The notebook API (``torchmemlint.profile``/``fit``) against the command line, the plot's
bands, the memory_viz snapshot, and the stochastic-depth look-alike of dropout."""

from __future__ import annotations

import json
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "fixtures" / "models"
LEAKY = "%s:LeakyConvNet" % (MODELS / "leaky_convnet.py")
UNET = "%s:DiffusionUNet" % (MODELS / "diffusion_unet.py")
UNET_INPUTS = "%s:make_batch" % (MODELS / "diffusion_unet.py")


def cli(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, "-m", "torchmemlint", "profile", *args], cwd=ROOT,
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def without_time(payload: str) -> str:
    """The JSON with its ``seconds`` (wall time, differs between any two runs) removed."""
    data = json.loads(payload)
    data.pop("seconds")
    return json.dumps(data, indent=2)


def test_importing_torchmemlint_does_not_import_torch_and_the_api_is_lazy():
    code = ("import sys, torchmemlint; print('torch' in sys.modules, 'profile' in dir(torchmemlint)); "
            "print(callable(torchmemlint.fit), 'torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["False", "True", "True", "False"], result.stderr


@pytest.mark.slow
def test_the_api_gives_the_cli_figures_to_the_byte():
    import torchmemlint

    args = [LEAKY, "--input-shape", "8,3,64,64", "--select", "TML201", "--isolated"]
    report = torchmemlint.profile(LEAKY, [8, 3, 64, 64], select="TML201", isolated=True)
    assert without_time(report.to_json()) == without_time(cli(*args, "--output-format", "json"))
    text = re.sub(r"Measured in .* s\.", "", cli(*args))
    assert re.sub(r"Measured in .* s\.", "", repr(report)) == text
    assert report.findings[0].verdict == "confirmed"


@pytest.mark.slow
def test_fit_with_an_inputs_function_gives_the_cli_figures_to_the_byte():
    import torchmemlint
    from torchmemlint.dynamic.target import load_module

    unet = load_module(UNET_INPUTS)
    report = torchmemlint.fit(UNET, unet.make_batch, "100MiB", batch_size=4, isolated=True)
    args = [UNET, "--inputs", UNET_INPUTS, "--batch-size", "4", "--budget", "100MiB", "--max-batch",
            "--no-verify", "--isolated", "--output-format", "json"]
    expected = json.loads(cli(*args))
    got = json.loads(report.to_json())
    # The inputs function is named by its module when given as an object, by its file on the CLI.
    assert got.pop("inputs")["made"] == expected.pop("inputs")["made"]
    for data in (got, expected):
        data.pop("seconds")
    assert json.dumps(got, indent=2) == json.dumps(expected, indent=2)
    assert report.max_batch == 24 and report.fits == "fits"


@pytest.mark.slow
def test_a_notebook_model_without_a_source_file_is_measured_and_displayed():
    import torch
    from torch import nn

    import torchmemlint
    from torchmemlint.dynamic.measure import measure_training_step

    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))
    report = torchmemlint.profile(model, [16, 32])
    assert report.peak_bytes == measure_training_step(model, [16, 32]).peak_bytes
    assert report.findings == [] and "no source file" in repr(report)
    html = report._repr_html_()
    assert html.startswith("<div><b>Profile of Sequential instance</b>") and "<table>" in html
    figure = report.plot()
    assert [t.get_text() for t in figure.axes[0].texts][:3] == ["forward", "backward", "optimizer\n(modelled)"]
    assert torch.is_tensor(next(model.parameters()))


DOCS_EXAMPLE = re.compile(r"```python\n(# notebook example\n.*?)```", re.S)


@pytest.mark.slow
def test_the_docs_example_runs(tmp_path):
    (example,) = DOCS_EXAMPLE.findall((ROOT / "docs" / "dynamic.md").read_text())
    script = tmp_path / "example.py"
    script.write_text(example)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "Profile of fixtures/models/diffusion_unet.py:DiffusionUNet" in result.stdout
    assert "largest batch that fits unchanged: 24" in result.stdout


# -- the plot and the snapshot -------------------------------------------------------------------

@pytest.fixture(scope="module")
def unet_profile(tmp_path_factory):
    """One `profile` of the UNet (the CLI, a subprocess) writing both --plot and --snapshot,
    for the two tests below: (the PNG, the snapshot, the JSON report)."""
    root = tmp_path_factory.mktemp("unet")
    plot, snapshot = root / "memory.png", root / "snapshot.pickle"
    report = json.loads(cli(UNET, "--inputs", UNET_INPUTS, "--batch-size", "4", "--no-verify", "--plot", str(plot),
                            "--snapshot", str(snapshot), "--output-format", "json"))
    return plot, snapshot, report


@pytest.mark.slow
def test_plot_bands_add_up_to_the_live_memory_and_name_the_modules(unet_profile):
    from torchmemlint.dynamic.inputs import load_inputs_function
    from torchmemlint.dynamic.measure import measure_training_step
    from torchmemlint.dynamic.plot import BACKWARD_BAND, stacked_series
    from torchmemlint.dynamic.target import load_module

    module = load_module(UNET)
    step = measure_training_step(module.DiffusionUNet, load_inputs_function(UNET_INPUTS, 4))
    xs, order, series = stacked_series(step.events)
    live = 0
    for position, event in enumerate(step.events):
        live += event.delta
        assert sum(series[name][position] for name in order) == live
    assert max(sum(series[name][i] for name in order) for i in range(len(xs))) == step.peak_bytes
    assert {"down1", "up1", "mid", BACKWARD_BAND} <= set(order)  # named bands, top-level modules here
    plot = unet_profile[0]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_snapshot_is_read_by_pytorchs_memory_viz(unet_profile):
    from torch.cuda import _memory_viz

    _, path, report = unet_profile
    with open(path, "rb") as handle:
        snapshot = pickle.load(handle)
    trace = snapshot["device_traces"][0]
    # The segments are the allocator model's: they add up to its reserved figure.
    assert sum(e["size"] for e in trace if e["action"] == "segment_alloc") == \
        report["simulated_allocator"]["max_reserved"]
    assert sum(s["total_size"] for s in snapshot["segments"]) == report["simulated_allocator"]["max_reserved"]
    live = peak = 0
    for entry in trace:
        if entry["action"] == "alloc":
            live += entry["size"]
        elif entry["action"] == "free_completed":
            live -= entry["size"]
        peak = max(peak, live)
    assert peak == report["simulated_allocator"]["max_allocated"]
    assert any(frame["filename"] == "down1" for e in trace for frame in e["frames"])
    assert "Summary of segments" in _memory_viz.segsum(snapshot)
    assert "entries" in _memory_viz.trace(snapshot)
    assert "snapshot.pickle" in _memory_viz.trace_plot(snapshot)


# -- stochastic depth is not dropout ----------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name, noted", [
    ("DropPathNet", False),
    ("StochasticDepthNet", False),
    ("DropPathAndInplaceDropout", True),
])
def test_no_dropout_note_on_stochastic_depth(name, noted):
    from torchmemlint.dynamic.measure import measure_training_step
    from torchmemlint.dynamic.target import load_module

    module = load_module("%s:_" % (MODELS / "stochastic_depth.py"))
    step = measure_training_step(getattr(module, name), [4, 16, 64])
    assert any("4-byte noise" in gap for gap in step.emulation_gaps) is noted


# -- what an inputs function may return -------------------------------------------------------------

def test_the_forms_an_inputs_function_may_return():
    from collections import UserDict

    import torch

    from torchmemlint.dynamic.errors import DynamicError
    from torchmemlint.dynamic.inputs import as_model_inputs

    x, y = torch.zeros(2, 3), torch.zeros(2, dtype=torch.long)
    forms = {
        "tensor": (x, "args: 2x3 float32"),
        "tuple": ((x, y), "args: 2x3 float32, 2 int64"),
        "dict": ({"input_ids": y}, "kwargs: input_ids 2 int64"),
        "BatchEncoding-like": (UserDict(input_ids=y, labels=y), "kwargs: input_ids 2 int64, labels 2 int64"),
        "args and kwargs": (((x,), {"cond": x}), "args: 2x3 float32; kwargs: cond 2x3 float32"),
        "a list is one argument": ([x, x], "args: list of 2 (2 tensors)"),
        "nested targets": (([x], [{"boxes": x, "labels": y}]), "args: list of 1 (1 tensors), list of 1 (2 tensors)"),
    }
    for name, (value, described) in forms.items():
        assert as_model_inputs(value, "f").describe() == described, name
    for value, message in ((3, "returned int"), ((1, 2), "returned no tensor"), ({1: x}, "non-string key")):
        with pytest.raises(DynamicError, match=message):
            as_model_inputs(value, "f")
