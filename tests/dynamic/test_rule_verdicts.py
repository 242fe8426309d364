"""`torchmemlint profile` verdicts for TML603, TML604 and TML605: the variant each message
suggests, built from the source, measured (CPU estimate of CUDA, fake tensors) and
numerics-checked on real CPU tensors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.dynamic import verify
from torchmemlint.dynamic.errors import DynamicError
from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.source import import_source_variant, measure_source_variant, read_target_source
from torchmemlint.dynamic.variants import checkpoint_function_variants, checkpoint_module_variants
from torchmemlint.dynamic.verify import CONFIRMED, NOT_VERIFIED, REFUTED, UNSAFE, run_profile
from torchmemlint.rules.attention import CheckpointFunctionWithoutRng, CheckpointModuleCalled, TrainingWithoutAutocast

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
RECOMPUTE = MODELS / "recompute.py"
CHECKPOINT_MODULE = MODELS / "checkpoint_module.py"
FP32_TRAINING = MODELS / "fp32_training.py"


def documented(rule, *figures):
    """The rule's docstring quotes these measured byte counts (as 1,234,567 B)."""
    doc = " ".join(rule.__doc__.split())
    for figure in figures:
        assert "%s B" % format(figure, ",") in doc, (rule.code, figure)


def profile(spec, shape, code, init_args=None):
    return run_profile(spec, shape, init_args, settings=Settings(select=(code,)), device="cpu")


# -- TML603: hand-written checkpoint Function ----------------------------------------------

def test_handwritten_checkpoint_is_confirmed_by_gradients_against_the_plain_segment():
    spec = "%s:DropoutSegment" % RECOMPUTE
    result = profile(spec, [[64, 256]], "TML603")
    (verdict,) = result.findings
    assert (verdict.code, verdict.verdict) == ("TML603", CONFIRMED), verdict
    assert "torch.utils.checkpoint.checkpoint(run_function, *args[:length], use_reentrant=False)" in verdict.variant
    # the hand-written recomputation draws another dropout mask; torch's restores the RNG
    hand, _, torch_side = verdict.numerics.partition("; torch.utils.checkpoint ")
    assert "hand-written differs" in hand and "body.0.weight" in hand, verdict.numerics
    assert "(parameter gradients: max abs diff " in hand
    assert torch_side == "identical", verdict.numerics
    # bytes: the variant's step, measured from its text, is the peak reported
    fixed, plain, _ = checkpoint_function_variants(RECOMPUTE.read_text(), verdict.row)
    target = read_target_source(spec)
    assert measure_source_variant(target, fixed, None, [64, 256]).peak_bytes == verdict.peak_after
    assert verdict.peak_before == result.report.peak_bytes
    assert "peak %d -> %d B" % (verdict.peak_before, verdict.peak_after) in verdict.reason
    documented(CheckpointFunctionWithoutRng, verdict.peak_before, verdict.peak_after)


def test_handwritten_checkpoint_without_dropout_is_refuted():
    """p=0: nothing random in the segment, the recomputation gives the same gradients."""
    result = profile("%s:DropoutSegment" % RECOMPUTE, [[64, 256]], "TML603", {"p": 0.0})
    (verdict,) = result.findings
    assert verdict.verdict == REFUTED, verdict
    assert verdict.numerics.endswith("hand-written identical; torch.utils.checkpoint identical")


def test_checkpoint_function_variants_keep_the_call_convention(tmp_path):
    text = RECOMPUTE.read_text()
    fixed, plain, _ = checkpoint_function_variants(text, 15)
    target = read_target_source("%s:DropoutSegment" % RECOMPUTE)
    fixed_module = import_source_variant(target, fixed)
    plain_module = import_source_variant(target, plain)
    assert not issubclass(fixed_module.CheckpointFunction, torch.autograd.Function)
    body = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4, requires_grad=True)
    out = fixed_module.CheckpointFunction.apply(body, 1, x, *body.parameters())
    torch.testing.assert_close(out, body(x), rtol=0, atol=0)
    assert out.grad_fn is not None
    torch.testing.assert_close(plain_module.CheckpointFunction.apply(body, 1, x), body(x), rtol=0, atol=0)
    # (ctx, run_function, *args): all of args are the inputs
    simple = text.replace("def forward(ctx, run_function, length, *args)", "def forward(ctx, run_function, *args)")
    fixed_simple, _, what = checkpoint_function_variants(simple, 15)
    assert "checkpoint(run_function, *args, use_reentrant=False)" in fixed_simple
    # a forward with another signature, or a row that is no class: no variant
    other = text.replace("def forward(ctx, run_function, length, *args)", "def forward(ctx, run_function, length, x)")
    assert checkpoint_function_variants(other, 15) is None
    assert checkpoint_function_variants(text, 16) is None


# -- TML604: the torch.utils.checkpoint module called -----------------------------------

def test_called_checkpoint_module_raises_and_the_fixed_step_is_measured():
    spec = "%s:MLPStack" % CHECKPOINT_MODULE
    result = profile(spec, [[1024, 256]], "TML604")
    (verdict,) = result.findings
    assert (verdict.code, verdict.verdict) == ("TML604", CONFIRMED), verdict
    assert "TypeError: 'module' object is not callable" in verdict.reason
    assert "the target as written raises" in result.limits[0]
    # the baseline is the model without checkpointing: the same file with checkpointing=False
    plain = measure_source_variant(
        read_target_source(spec), CHECKPOINT_MODULE.read_text(), {"checkpointing": False}, [1024, 256]
    )
    assert verdict.peak_before == plain.peak_bytes == result.report.peak_bytes
    # the fixed model checkpoints every block: its peak is lower, its results bitwise equal
    assert verdict.peak_after < 0.8 * verdict.peak_before, verdict
    assert verdict.numerics == "against the model without checkpointing: identical"
    documented(CheckpointModuleCalled, verdict.peak_after, verdict.peak_before)


def test_checkpoint_module_wrapping_a_submodule_in_init_is_fixed_with_the_same_parameter_names():
    result = profile("%s:FallbackNet" % CHECKPOINT_MODULE, [[256, 256]], "TML604")
    (verdict,) = result.findings
    assert verdict.verdict == CONFIRMED, verdict
    assert "constructing" in verdict.reason and "not callable" in verdict.reason
    assert "`self.inc` wrapped" in verdict.variant
    assert verdict.peak_after is not None and verdict.numerics.endswith("identical")


def test_checkpoint_module_not_reached_is_not_verified_and_other_errors_still_fail():
    result = profile("%s:MLPStack" % CHECKPOINT_MODULE, [[64, 256]], "TML604", {"checkpointing": False})
    (verdict,) = result.findings
    assert verdict.verdict == NOT_VERIFIED
    assert "does not reach the flagged call" in verdict.reason
    # a step that raises for another reason is still an error of the profile (wrong width)
    with pytest.raises(DynamicError):
        profile("%s:MLPStack" % CHECKPOINT_MODULE, [[64, 100]], "TML604")
    # and a target that raises without any TML604 finding too
    with pytest.raises(DynamicError, match="not callable"):
        profile("%s:MLPStack" % CHECKPOINT_MODULE, [[64, 256]], "TML601")


def test_checkpoint_module_variants_rewrite_both_forms():
    text = CHECKPOINT_MODULE.read_text()
    fixed, plain, what = checkpoint_module_variants(text, [(39, 21), (54, 20)])
    assert "x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)" in fixed
    assert "x = block(x)  # expect: TML604" in plain
    assert "self.inc = self.inc  # expect: TML604" in plain
    assert plain.count("torch.utils.checkpoint(") == text.count("torch.utils.checkpoint(") - 2  # docstring's left
    # keywords of checkpoint are kept in the fix and dropped from the reference
    keyworded = text.replace("torch.utils.checkpoint(block, x)", "torch.utils.checkpoint(block, x, use_reentrant=True)")
    fixed, plain, _ = checkpoint_module_variants(keyworded, [(39, 21)])
    assert "torch.utils.checkpoint.checkpoint(block, x, use_reentrant=True)" in fixed
    assert "x = block(x)  # expect" in plain
    assert checkpoint_module_variants(text, [(39, 22)]) is None  # no call there


def test_profile_cli_reports_the_typeerror_verdict_as_json():
    command = [
        sys.executable, "-m", "torchmemlint", "profile", "%s:MLPStack" % CHECKPOINT_MODULE,
        "--input-shape", "256,256", "--device", "cpu", "--select", "TML604", "--isolated",
        "--output-format", "json",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    (finding,) = data["findings"]
    assert (finding["code"], finding["verdict"]) == ("TML604", "confirmed")
    assert "not callable" in data["limits"][0]


# -- TML605: the step under bf16 autocast ------------------------------------------------

def _autocast_lm():
    from torchmemlint.dynamic.target import load_module

    lm = load_module("%s:_" % FP32_TRAINING)
    model = lm.TinyLM()
    plain = model.forward

    def forward(ids):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return plain(ids)

    model.forward = forward
    return model


def test_training_without_autocast_is_confirmed_with_bytes_and_a_stated_tolerance():
    spec = "%s:TinyLM" % FP32_TRAINING
    result = profile(spec, [[4, 128, "int64"]], "TML605")
    (verdict,) = result.findings
    assert (verdict.code, verdict.verdict) == ("TML605", CONFIRMED), verdict
    assert verdict.row == 33  # the loop's backward, outside the target: a file-level finding
    assert "torch.autocast(device_type, dtype=torch.bfloat16)" in verdict.variant
    assert verdict.numerics.startswith("within atol=0.05, rtol=0.05 (max abs diff"), verdict.numerics
    # the peak after is the step of the model under autocast, measured directly
    direct = measure_training_step(_autocast_lm, (4, 128, "int64"))
    assert verdict.peak_after == direct.peak_bytes
    assert verdict.peak_after < 0.85 * verdict.peak_before, verdict
    assert verdict.scaling[1][0] == 8 and verdict.scaling[1][1] > verdict.saved
    documented(TrainingWithoutAutocast, verdict.peak_before, verdict.peak_after, verdict.saved, verdict.scaling[1][1])


def test_autocast_beyond_the_tolerance_is_unsafe(monkeypatch):
    monkeypatch.setattr(verify, "AUTOCAST_TOLERANCE", (1e-7, 1e-7))
    result = profile("%s:TinyLM" % FP32_TRAINING, [[2, 32, "int64"]], "TML605")
    (verdict,) = result.findings
    assert verdict.verdict == UNSAFE, verdict
    assert "beyond atol=1e-07, rtol=1e-07" in verdict.reason


def test_autocast_variant_of_a_module_instance_target(tmp_path):
    """A target that is a module instance is wrapped in place, not called."""
    path = tmp_path / "instance_training.py"
    path.write_text(FP32_TRAINING.read_text() + "\n\nmodel = TinyLM()\n")
    result = profile("%s:model" % path, [[2, 32, "int64"]], "TML605")
    (verdict,) = result.findings
    assert verdict.verdict == CONFIRMED, verdict
    assert verdict.peak_after < verdict.peak_before


def test_autocast_is_off_by_default_and_quiet_in_a_file_with_mixed_precision(tmp_path):
    result = run_profile("%s:TinyLM" % FP32_TRAINING, [[2, 32, "int64"]], settings=Settings(), device="cpu")
    assert [v.code for v in result.findings] == []
    mixed = tmp_path / "amp_training.py"
    mixed.write_text(FP32_TRAINING.read_text().replace(
        "        logits = model(ids)\n",
        "        with torch.autocast('cuda', dtype=torch.bfloat16):\n            logits = model(ids)\n"))
    result = profile("%s:TinyLM" % mixed, [[2, 32, "int64"]], "TML605")
    assert result.findings == []
