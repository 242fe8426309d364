"""`torchmemlint profile` on models as people write them: their own inputs functions (a Hugging
Face causal LM with labels and an attention mask, a detection model with a list of target
dicts, a diffusion UNet's ``forward(x, t, cond=...)``), models by configuration, targets of the
user's project, and the largest batch in a few measurements. Run as a user runs them: the CLI as
a subprocess, or, where a group repeats it, the same CLI in this process (tests/dynamic/in_process.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from in_process import cli

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "fixtures" / "models"
UNET = "%s:DiffusionUNet" % (MODELS / "diffusion_unet.py")
UNET_INPUTS = "%s:make_batch" % (MODELS / "diffusion_unet.py")
DETECTOR = "%s:TinyDetector" % (MODELS / "detection.py")
DETECTOR_INPUTS = "%s:make_batch" % (MODELS / "detection.py")
VIT = "%s:ViT" % (MODELS / "vit.py")
GPT2 = ["transformers:GPT2LMHeadModel", "--model-config", str(MODELS / "tiny_gpt2.json")]
GPT2_INPUTS = "%s:causal_lm_batch" % (MODELS / "hf_inputs.py")


def env():
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}


def run(*args, cwd=None, command=None):
    result = subprocess.run(
        (command or [sys.executable, "-m", "torchmemlint"]) + list(args),
        cwd=cwd, capture_output=True, text=True, env=env(), timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def run_in_process(*args):
    """The same CLI in this process (tests/dynamic/in_process.py): for the cases whose point is
    the check and its message; each group below keeps one case that runs the subprocess."""
    result = cli(*args)
    assert "Traceback" not in result.stderr, result.stderr
    return result


def profile_json(*args, cwd=None):
    result = run("profile", "--isolated", "--output-format", "json", *args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


# -- inputs functions, without wrappers -----------------------------------------------------

def test_hugging_face_causal_lm_with_labels_and_attention_mask_uses_its_own_loss():
    report = profile_json(*GPT2, "--inputs", GPT2_INPUTS, "--batch-size", "2", "--no-verify")
    assert report["loss"] == "output.loss"
    assert report["inputs"]["made"] == (
        "kwargs: input_ids 2x32 int64, attention_mask 2x32 int64, labels 2x32 int64")
    assert report["inputs"]["batch_size"] == 2 and report["input_shapes"] == []
    assert "transformers:GPT2LMHeadModel is defined in transformers.models.gpt2.modeling_gpt2:GPT2LMHeadModel" \
        in report["notes"]
    assert report["peak_bytes"] > 0 and report["param_bytes"] > 0


def test_an_output_without_a_loss_falls_back_to_the_sum_of_means(tmp_path):
    """Look-alike: the same batch without labels; GPT-2 then returns no loss."""
    inputs = tmp_path / "no_labels.py"
    inputs.write_text(textwrap.dedent("""
        import torch

        def batch(batch_size):
            return {"input_ids": torch.randint(0, 1000, (batch_size, 32))}
    """))
    report = profile_json(*GPT2, "--inputs", "%s:batch" % inputs, "--batch-size", "2", "--no-verify")
    assert "loss" not in report
    text = run_in_process("profile", "--isolated", *GPT2, "--inputs", "%s:batch" % inputs, "--batch-size", "2",
                          "--no-verify").stdout
    assert "one training step: forward, mean loss, backward" in text


def test_detection_model_with_a_list_of_images_and_target_dicts():
    report = profile_json(DETECTOR, "--inputs", DETECTOR_INPUTS, "--batch-size", "4", "--no-verify")
    assert report["inputs"]["made"] == "args: list of 4 (4 tensors), list of 4 (8 tensors)"
    # The dict of losses (no "loss" key) is summed: both heads get gradients.
    assert "loss" not in report
    assert report["grad_bytes"] == report["param_bytes"]


def test_diffusion_unet_gets_its_timestep_and_keyword_condition():
    report = profile_json(UNET, "--inputs", UNET_INPUTS, "--batch-size", "4", "--no-verify")
    assert report["inputs"]["made"] == "args: 4x3x32x32 float32, 4 int64; kwargs: cond 4x8x64 float32"
    # The cross-attention runs only when `cond` reaches forward.
    assert report["emulated"] == {"memory-efficient attention": 1}


@pytest.mark.parametrize(
    "args, message, runner",
    [
        (["--inputs", UNET_INPUTS], "--inputs needs --batch-size N", run),
        (["--inputs", UNET_INPUTS, "--batch-size", "2", "--input-shape", "2,3,32,32"],
         "--inputs and --input-shape cannot be used together", run_in_process),
        (["--batch-size", "2", "--input-shape", "2,3,32,32"], "--batch-size is for --inputs", run_in_process),
        ([], "profile needs --input-shape SHAPE, or --inputs FILE.py:FUNCTION with --batch-size N", run_in_process),
        (["--inputs", "nothing.py:f", "--batch-size", "2"], "--inputs: no file nothing.py", run_in_process),
        (["--inputs", "%s:missing" % (MODELS / "diffusion_unet.py"), "--batch-size", "2"],
         "has no function 'missing'", run_in_process),
        (["--inputs", "%s:timestep_embedding" % (MODELS / "diffusion_unet.py"), "--batch-size", "2"],
         "it also requires dim", run),
    ],
)
def test_bad_inputs_options_are_one_line_errors(args, message, runner):
    result = runner("profile", "--isolated", UNET, *args)
    assert result.returncode == 2, result.stdout
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("torchmemlint: error: ")
    assert message in result.stderr


def test_an_inputs_function_that_returns_or_raises_the_wrong_thing(tmp_path):
    functions = tmp_path / "inputs.py"
    functions.write_text(textwrap.dedent("""
        def number(batch_size):
            return 3

        def broken(batch_size, device):
            raise ValueError("no data here")

        def keys(batch_size):
            import torch
            return {1: torch.zeros(batch_size, 3)}
    """))
    cases = {
        "number": "--inputs number returned int; expected a tensor, a tuple of args, a dict of keyword args, "
                  "or (args, kwargs)",
        "broken": "the inputs function broken failed at batch 2: ValueError: no data here",
        "keys": "a non-string key 1",
    }
    for name, message in cases.items():
        runner = run if name == "broken" else run_in_process
        result = runner("profile", "--isolated", UNET, "--inputs", "%s:%s" % (functions, name), "--batch-size", "2")
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert message in result.stderr, result.stderr


# -- models by configuration, targets of the user's project -------------------------------------

def test_auto_model_from_a_built_in_config_class_with_overrides():
    overrides = '{"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 1000, "n_positions": 64}'
    result = run_in_process("profile", "--isolated", "--output-format", "json", "transformers:AutoModelForCausalLM",
                            "--model-config", "gpt2", "--init-args", overrides, "--inputs", GPT2_INPUTS,
                            "--batch-size", "2", "--no-verify")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["loss"] == "output.loss"
    assert "built with AutoModelForCausalLM.from_config(gpt2) (no weights downloaded)" in report["notes"]
    # 1 layer of width 32 over a 1000-token vocabulary: embeddings dominate (tied head).
    assert report["param_bytes"] < 1000 * 32 * 4 * 2


def test_a_named_config_that_is_not_available_offline_is_one_line():
    result = run_in_process("profile", "--isolated", "transformers:AutoModelForCausalLM", "--model-config",
                            "someone/not-a-cached-model", "--inputs", GPT2_INPUTS, "--batch-size", "2")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--model-config 'someone/not-a-cached-model' is not available offline" in result.stderr


def write_project(root: Path) -> None:
    (root / "proj").mkdir()
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "nets.py").write_text(textwrap.dedent("""
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x)


        def factory(weights="DEFAULT"):
            if weights is not None:
                raise RuntimeError("would download %s" % weights)
            return Net()
    """))
    vision = root / "torchvision" / "models"
    vision.mkdir(parents=True)
    (root / "torchvision" / "__init__.py").write_text("")
    (vision / "__init__.py").write_text("from .tiny import tiny_net\n")
    (vision / "tiny.py").write_text(textwrap.dedent("""
        from proj.nets import Net

        def tiny_net(*, weights="DEFAULT", progress=True):
            if weights is not None:
                raise RuntimeError("would download %s" % weights)
            return Net()
    """))


def console_script():
    script = shutil.which("torchmemlint", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("no torchmemlint console script next to this Python")
    return [script]


def test_package_targets_resolve_from_the_working_directory_like_python_m(tmp_path):
    """Run through the console script, whose sys.path has no working directory of its own."""
    write_project(tmp_path)
    result = run("profile", "--isolated", "proj.nets:Net", "--input-shape", "4,8", "--no-verify",
                 cwd=tmp_path, command=console_script())
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Profile of proj.nets:Net\n")


def test_torchvision_factories_get_weights_none_and_the_report_says_so(tmp_path):
    write_project(tmp_path)
    report = profile_json("torchvision.models:tiny_net", "--input-shape", "4,8", "--no-verify", cwd=tmp_path)
    assert any("weights=None passed to tiny_net" in note for note in report["notes"])
    # Look-alike: the same factory outside torchvision is called as written (and refuses).
    result = run("profile", "--isolated", "proj.nets:factory", "--input-shape", "4,8", "--no-verify", cwd=tmp_path)
    assert result.returncode == 2 and "would download DEFAULT" in result.stderr


# -- the largest batch: few measurements, the same answer ---------------------------------------

# Answers of the search this one replaced (the straight line through batches start and
# start/2 or 2*start, then galloping and bisection), recorded once from it at commit bf70015,
# with the count it measured: torchmemlint's own largest_batch of that commit run on the same
# steps (the measurement of the profiled batch included).
OLD_SEARCH = {
    "unet": (100, 24, 4),
    "vit": (64, 31, 10),
    "vit-300": (300, 210, 10),
    "gpt2": (64, 42, 12),
}


def max_batch_search(args, budget_mib, in_process=False):
    args = [*args, "--budget", "%dMiB" % budget_mib, "--max-batch", "--no-verify"]
    if in_process:
        result = run_in_process("profile", "--isolated", "--output-format", "json", *args)
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
    else:
        report = profile_json(*args)
    return report["max_batch"], report["budget"]["max_batch_search"]


# The UNet and GPT-2 run the subprocess; the two ViT budgets the same CLI in this process.
@pytest.mark.parametrize("case, args, in_process", [
    ("unet", [UNET, "--inputs", UNET_INPUTS, "--batch-size", "4"], False),
    ("vit", [VIT, "--input-shape", "8,3,32,32"], True),
    ("vit-300", [VIT, "--input-shape", "8,3,32,32"], True),
    ("gpt2", GPT2 + ["--inputs", GPT2_INPUTS, "--batch-size", "2"], False),
])
def test_max_batch_in_at_most_six_measurements_with_the_old_answer(case, args, in_process):
    budget_mib, old_answer, old_count = OLD_SEARCH[case]
    answer, search = max_batch_search(args, budget_mib, in_process)
    measured = {item["batch"]: item["reserved_bytes"] for item in search["measured"]}
    assert answer == old_answer
    assert len(measured) <= 6 and len(measured) <= old_count
    # The answer is bracketed by measurements: it fits, the next batch does not.
    usable = budget_mib << 20
    assert measured[answer] <= usable < measured[answer + 1]


# -- verdicts ------------------------------------------------------------------------------------

def test_a_variant_that_changes_the_output_shape_is_not_confirmed_and_says_what_to_add():
    report = profile_json("%s:UNetFixedUpsampling" % (MODELS / "stem_pool_unet.py"), "--input-shape", "2,3,64,64")
    (finding,) = report["findings"]
    assert finding["code"] == "TML301" and finding["verdict"] == "not verified"
    assert finding["numerics"] == ("differs: output 2x1x32x32 instead of 2x1x64x64 (H/2xW/2 instead of HxW): "
                                   "add an upsampling stage to restore the resolution")
    assert finding["peak_after"] < finding["peak_before"]  # measured, shown, not a verdict


# -- --dynamic keeps what works --------------------------------------------------------------------

def test_dynamic_reports_every_target_that_works_and_the_errors_then_exits_2(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text((MODELS / "leaky_convnet.py").read_text())
    (tmp_path / "models" / "broken.py").write_text((MODELS / "leaky_convnet.py").read_text().replace(
        "super().__init__()", "super().__init__()\n        raise RuntimeError('broken constructor')", 1))
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""
        [tool.torchmemlint]
        select = ["TML201"]

        [[tool.torchmemlint.profile]]
        target = "models/broken.py:LeakyConvNet"
        input-shape = [2, 3, 32, 32]

        [[tool.torchmemlint.profile]]
        target = "models/net.py:LeakyConvNet"
        inputs = "models/batches.py:images"
        batch-size = 2
    """))
    (tmp_path / "models" / "batches.py").write_text("import torch\n\n\ndef images(batch_size):\n"
                                                    "    return torch.randn(batch_size, 3, 32, 32)\n")
    result = run("--dynamic", "models", cwd=tmp_path)
    assert result.returncode == 2
    assert "Profile of %s:LeakyConvNet" % (tmp_path / "models" / "net.py") in result.stdout
    assert "Not profiled (error): %s:LeakyConvNet: constructing" % (tmp_path / "models" / "broken.py") \
        in result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith("torchmemlint: error: ")]
    assert len(errors) == 1 and "broken constructor" in errors[0]
    data = json.loads(cli("--dynamic", "models", "--output-format", "json", cwd=tmp_path).stdout)
    assert len(data["profiles"]) == 1 and data["errors"][0]["target"].endswith("broken.py:LeakyConvNet")
    assert data["profiles"][0]["inputs"]["made"] == "args: 2x3x32x32 float32"


# -- progress on a terminal ------------------------------------------------------------------------

def test_progress_and_the_notice_on_a_terminal_only():
    import pty

    leader, follower = pty.openpty()
    args = [sys.executable, "-m", "torchmemlint", "profile", "--isolated", VIT, "--input-shape", "2,3,32,32",
            "--no-verify", "--budget", "64MiB", "--max-batch"]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=follower, env=env(), cwd=ROOT)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    stdout = process.communicate(timeout=300)[0]
    os.close(leader)
    terminal = b"".join(chunks).decode(errors="replace")
    assert process.returncode == 0 and stdout.startswith(b"Profile of ")
    assert "torchmemlint: profile imports and runs %s (your code)" % VIT in terminal
    assert "torchmemlint: building the model and measuring one training step (" in terminal
    assert "torchmemlint: measuring batch " in terminal
    piped = run("profile", "--isolated", VIT, "--input-shape", "2,3,32,32", "--no-verify")
    assert piped.returncode == 0 and piped.stderr == ""
