"""`torchmemlint profile` and `torchmemlint --dynamic` as a user runs them: a subprocess (most of
the bad-input cases through the same CLI in this process, tests/dynamic/in_process.py)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from in_process import cli

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
LEAKY = "%s:LeakyConvNet" % (MODELS / "leaky_convnet.py")
NO_TORCH = "torchmemlint profile needs torch: pip install torch (or './torchmemlint[dynamic]' from the clone's directory)"
# One activation of the LeakyConvNet at batch 8 x 16 channels x 64 x 64, float32.
ACTIVATION = 8 * 16 * 64 * 64 * 4


def run(args, cwd=None, extra_path=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def blocked_package(tmp_path: Path, name: str) -> Path:
    """A directory whose ``name`` package fails to import, as if not installed."""
    package = tmp_path / "blocked" / name
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('raise ImportError("No module named %r")\n' % name)
    return package.parent


def test_json_report_has_measurements_and_a_verdict_per_finding():
    result = run(
        ["profile", LEAKY, "--input-shape", "8,3,64,64", "--select", "ALL", "--output-format", "json"]
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["device"] == "cpu" and "FakeTensorMode" in report["method"]
    assert report["input_shapes"] == [[8, 3, 64, 64]]
    assert report["peak_bytes"] > report["kept_after_forward"] >= report["saved_bytes"] > 0
    # parameters: 3 convs (3x3, no bias), 3 BatchNorms, 2 Linear layers, in 512-byte blocks
    assert report["param_bytes"] == report["grad_bytes"] > 0
    sizes = [module["bytes"] for module in report["modules"]]
    assert sizes == sorted(sizes, reverse=True) and report["modules"][0]["name"].startswith("block")
    verdicts = {(f["code"], f["row"]): f for f in report["findings"]}
    assert set(verdicts) == {("TML201", 15), ("TML101", 25), ("TML101", 27), ("TML202", 27)}
    leaky = verdicts["TML201", 15]
    assert leaky["verdict"] == "confirmed" and leaky["numerics"] == "identical"
    assert leaky["peak_before"] == report["peak_bytes"]
    # in place, autograd keeps the activation once instead of twice, at least at one layer
    assert leaky["peak_before"] - leaky["peak_after"] >= ACTIVATION
    assert -0.30 < leaky["change"] < -0.10
    for stateless in (verdicts["TML101", 25], verdicts["TML101", 27], verdicts["TML202", 27]):
        assert stateless["verdict"] == "refuted" and stateless["numerics"] == "identical"
        assert stateless["peak_after"] == stateless["peak_before"] == report["peak_bytes"]
    assert any("cuDNN" in limit for limit in report["limits"])


def test_text_report_and_plot(tmp_path):
    plot = tmp_path / "memory.png"
    result = run(["profile", LEAKY, "--input-shape", "8,3,64,64", "--no-verify", "--plot", str(plot)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("Profile of %s\n" % LEAKY)
    headings = ("peak memory", "kept after forward", "Kept after forward, by module",
                "What this figure does and does not count")
    for heading in headings:
        assert heading in result.stdout
    assert "Findings" not in result.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def in_process(args):
    return cli(*args)


# Two cases run the CLI as a subprocess (one refused before torch is imported, one from the
# training step); the others call the same entry point in this process (tests/dynamic/in_process.py).
@pytest.mark.parametrize(
    "target, args, message, runner",
    [
        ("{models}/missing.py:Net", [], "target not found: no file", run),
        ("{models}/leaky_convnet.py:Missing", [], "target not found: .* has no attribute 'Missing'", in_process),
        ("{models}/leaky_convnet.py:LeakyConvNet", ["--init-args", '{"width": 3}'],
         "constructing .* failed: TypeError: .*unexpected keyword argument 'width'", in_process),
        ("{models}/leaky_convnet.py:LeakyConvNet", ["--input-shape", "2,4,32,32"],
         "the training step failed: RuntimeError: .*expected input.* to have 3 channels", run),
        ("{models}/activations.py:NoTensorNet", ["--input-shape", "2,4"],
         "forward returned no floating-point tensor", in_process),
        ("{models}/leaky_convnet.py:LeakyConvNet", ["--input-shape", "2,x,32"], "--input-shape must be", in_process),
        ("{models}/leaky_convnet.py:LeakyConvNet", ["--init-args", "{width: 3}"],
         "--init-args is not valid JSON", in_process),
    ],
)
def test_bad_input_is_one_line_and_exit_2(target, args, message, runner):
    if "--input-shape" not in args:
        args = args + ["--input-shape", "2,3,32,32"]
    result = runner(["profile", target.format(models=MODELS), *args])
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("torchmemlint: error: ")
    assert re.search(message, lines[0]), lines[0]


def test_without_torch_profile_says_how_to_install_and_the_linter_still_works(tmp_path):
    blocked = blocked_package(tmp_path, "torch")
    result = run(["profile", LEAKY, "--input-shape", "2,3,32,32"], extra_path=blocked)
    assert (result.returncode, result.stderr) == (2, "torchmemlint: error: %s\n" % NO_TORCH)
    lint = run(["--isolated", str(MODELS / "leaky_convnet.py")], extra_path=blocked)
    assert lint.returncode == 1 and "TML201" in lint.stdout and lint.stderr == ""
    assert run(["--help"], extra_path=blocked).returncode == 0


def test_plot_without_matplotlib_is_one_line_and_exit_2(tmp_path):
    blocked = blocked_package(tmp_path, "matplotlib")
    args = ["profile", LEAKY, "--input-shape", "2,3,32,32", "--plot", str(tmp_path / "m.png")]
    result = run(args, extra_path=blocked)
    assert result.returncode == 2
    assert result.stderr == "torchmemlint: error: --plot needs matplotlib: pip install matplotlib (or './torchmemlint[plot]' from the clone's directory)\n"


def project_with_profile(tmp_path: Path, table: str) -> Path:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "net.py").write_text((MODELS / "leaky_convnet.py").read_text())
    (tmp_path / "models" / "clean.py").write_text("import torch\n")
    (tmp_path / "pyproject.toml").write_text("[tool.torchmemlint]\n" + textwrap.dedent(table))
    return tmp_path


def test_dynamic_flag_profiles_configured_targets_that_carry_findings(tmp_path):
    project = project_with_profile(
        tmp_path,
        """
        select = ["TML201"]

        [[tool.torchmemlint.profile]]
        target = "models/net.py:LeakyConvNet"
        input-shape = [8, 3, 64, 64]

        [[tool.torchmemlint.profile]]
        target = "torch.nn:Identity"
        input-shape = [2, 2]
        """,
    )
    result = run(["--dynamic", "models"], cwd=project)
    assert result.returncode == 1, result.stderr
    lint, _, profile = result.stdout.partition("\nProfile of ")
    assert "models/net.py:15:9: TML201" in lint
    assert profile.startswith(str(project / "models" / "net.py") + ":LeakyConvNet")
    assert "TML201  15:9" in profile and "confirmed" in profile
    assert "Not profiled (no findings inside): torch.nn:Identity" in result.stdout
    assert result.stderr == "torchmemlint: --dynamic imports and runs %s:LeakyConvNet\n" % (
        project / "models" / "net.py"
    )


def test_dynamic_flag_without_a_profile_table_is_an_error(tmp_path):
    project = project_with_profile(tmp_path, "select = ['ALL']\n")
    result = run(["--dynamic", "models"], cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith(
        "torchmemlint: error: --dynamic needs a [tool.torchmemlint.profile] table"
    )
    assert len(result.stderr.splitlines()) == 1


def test_importing_the_cli_does_not_import_torch():
    code = "import sys, torchmemlint.cli; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout == "False\n", result.stderr


def test_dynamic_profile_table_takes_estimate_for(tmp_path):
    table = """
        select = ["TML201"]

        [[tool.torchmemlint.profile]]
        target = "models/net.py:LeakyConvNet"
        input-shape = [2, 3, 32, 32]
        estimate-for = "%s"
        """
    project = project_with_profile(tmp_path, table % "cpu")
    result = run(["--dynamic", "models", "--output-format", "json"], cwd=project)
    assert result.returncode == 1, result.stderr
    (profile,) = json.loads(result.stdout)["profiles"]
    assert profile["estimate_for"] == "cpu" and "the CPU's own kernels" in profile["method"]
    (project / "pyproject.toml").write_text("[tool.torchmemlint]\n" + textwrap.dedent(table % "tpu"))
    bad = run(["--dynamic", "models"], cwd=project)
    assert bad.returncode == 2 and bad.stderr.endswith("'estimate-for' must be cuda or cpu\n")
    assert len(bad.stderr.splitlines()) == 1
