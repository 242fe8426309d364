"""Memory at the peak by source line: `torchmemlint profile` as a user runs it (the UNet's JSON
from a subprocess; the rest from the same CLI in this process, tests/dynamic/in_process.py).

The step's lines are the storages live at the tracker's peak, each charged to the line of the
user's code that made it; parameters and buffers to the line that built their module. The
lines must add up to the peak (within 1 %) on a UNet, an attention LM and a timm-like ViT.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from in_process import cli

pytest.importorskip("torch")

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
SPELLINGS = MODELS / "measured_spellings.py"
RESIDENT = ("parameter", "buffer")
TITLE = "Memory at the peak by source line"


def profile(target, *args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "profile", target, "--no-verify", *args],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def profile_in_process(target, *args):
    """The same CLI in this process (tests/dynamic/in_process.py)."""
    result = cli("profile", target, "--no-verify", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def row_of(path: Path, text: str) -> int:
    rows = [number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(rows) == 1, (text, rows)
    return rows[0]


def check_lines_add_up(data):
    lines = data["lines"]
    assert lines and all(set(line) == {"filename", "row", "module", "bytes", "what"} for line in lines)
    step = sum(line["bytes"] for line in lines if line["what"] not in RESIDENT)
    peak = data["peak_bytes"]
    assert abs(step - peak) <= 0.01 * peak, (step, peak)
    resident = sum(line["bytes"] for line in lines if line["what"] in RESIDENT)
    assert resident == data["param_bytes"] + data["buffer_bytes"]
    # Attributed to the model's own lines, not left unplaced (the scalar loss is the exception).
    unplaced = sum(line["bytes"] for line in lines if line["row"] == 0)
    assert unplaced <= 0.01 * (peak + resident), unplaced
    return lines


# The UNet's JSON comes from the subprocess, the others' from the same CLI in this process.
MODELS_AT_PEAK = [
    pytest.param("resnet_unet.py:UNetResNetNoPool", [], "1,3,64,64", profile, id="unet"),
    pytest.param("transformer_lm.py:TransformerLM",
                 ["--init-args", '{"vocab": 1000, "width": 64, "heads": 4, "layers": 2, "feedforward": 128}'],
                 "2,32,int64", profile_in_process, id="attention-lm"),
    pytest.param("vit_timm_like.py:vit_tiny_patch16", ["--init-args", '{"img_size": 64}'], "2,3,64,64",
                 profile_in_process, id="vit"),
]


@pytest.mark.slow
@pytest.mark.parametrize("target, extra, shape, runner", MODELS_AT_PEAK)
def test_lines_add_up_to_the_peak_in_json_and_text(target, extra, shape, runner):
    spec = str(MODELS / target)
    data = json.loads(runner(spec, *extra, "--input-shape", shape, "--output-format", "json"))
    lines = check_lines_add_up(data)
    path = spec.rpartition(":")[0]
    # The peaks are in backward: parameters and gradients are there, in the model's file.
    kinds = {line["what"] for line in lines if os.path.abspath(line["filename"]) == os.path.abspath(path)}
    assert data["peak_phase"] == "backward"
    assert {"parameter", "gradient"} <= kinds and kinds - {"parameter", "gradient"}, kinds
    text = profile_in_process(spec, *extra, "--input-shape", shape)
    section = text[text.index(TITLE):]
    assert "100.0 % of the peak" in section
    biggest = max((item for item in lines if item["what"] not in RESIDENT), key=lambda item: item["bytes"])
    assert "%s:%d" % (os.path.relpath(biggest["filename"]), biggest["row"]) in section


@pytest.mark.slow
def test_parameters_where_built_activations_where_made_real_tensors_too():
    target = "%s:ModuleSoftmaxAttention" % SPELLINGS
    for device in ([], ["--device", "cpu", "--real-tensors"]):
        data = json.loads(profile_in_process(target, *device, "--input-shape", "2,16,32", "--output-format", "json"))
        lines = check_lines_add_up(data)
        built = row_of(SPELLINGS, "self.to_qkv = nn.Linear")
        qkv = {(item["what"], item["bytes"]) for item in lines if item["module"] == "to_qkv" and item["row"] == built}
        assert ("parameter", 32 * 96 * 4) in qkv, lines  # no bias
        assert data["peak_phase"] == "forward"  # no gradient yet
        # The softmax module's output (2 x 4 heads x 16 x 16 float32), saved by `attn @ v`,
        # belongs to the forward line that called the module.
        attend = row_of(SPELLINGS, "attn = self.attend(dots)")
        saved = [item for item in lines if item["row"] == attend and item["what"] == "saved for backward"]
        assert sum(item["bytes"] for item in saved) == 2 * 4 * 16 * 16 * 4, lines
        assert {item["module"] for item in saved} == {"attend"}


@pytest.mark.slow
def test_an_observer_that_fails_leaves_the_measurement_as_it_was(models):
    from torchmemlint.dynamic.lines import StepObserver
    from torchmemlint.dynamic.measure import measure_training_step

    class Broken(StepObserver):
        def saved(self, storage_id):
            raise ValueError("boom")

    net = models("measured_spellings").HelperActivationsNet
    broken = Broken()
    watched = measure_training_step(net, [[2, 8, 16, 16]], observer=broken)
    plain = measure_training_step(net, [[2, 8, 16, 16]])
    assert broken.failed == "ValueError: boom" and not broken.finished
    assert (watched.peak_bytes, watched.saved_bytes) == (plain.peak_bytes, plain.saved_bytes)
    # A working observer changes nothing either.
    observer = StepObserver()
    assert measure_training_step(net, [[2, 8, 16, 16]], observer=observer).peak_bytes == plain.peak_bytes
    assert observer.finished and observer.failed is None
