"""Per rank under DDP and FSDP2 (``profile --parallel``): torch's fully_shard on a fake
process group, DDP's buckets modelled; checked against the single-device step."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from torch import nn

from torchmemlint.dynamic.errors import DynamicError
from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.parallel import ParallelOptions, check_options, measure_parallel, wrap_targets

from in_process import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LM = os.path.join(ROOT, "fixtures", "models", "transformer_lm.py") + ":small_lm"
SHAPE = [[8, 256]]


class Blocks(nn.Module):
    """Four MLP blocks in an nn.ModuleList and a head: FSDP wraps each block."""

    def __init__(self, width: int = 256, depth: int = 4) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width)) for _ in range(depth)
        )
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def test_every_block_is_the_modulelist_children():
    names = [name for name, _ in wrap_targets(Blocks(), None)]
    assert names == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
    assert [name for name, _ in wrap_targets(Blocks(), ["Linear"])][:2] == ["blocks.0.0", "blocks.0.2"]
    with pytest.raises(DynamicError, match="no module of class Nope"):
        wrap_targets(Blocks(), ["Nope"])


def test_options_that_do_not_apply_are_refused():
    with pytest.raises(DynamicError, match="FSDP options"):
        check_options(ParallelOptions("ddp", 2, param_dtype="bfloat16"))
    with pytest.raises(DynamicError, match="DDP option"):
        check_options(ParallelOptions("fsdp", 2, gradient_as_bucket_view=True))
    with pytest.raises(DynamicError, match="at least 1"):
        check_options(ParallelOptions("fsdp", 0))


@pytest.mark.slow
def test_ddp_world_size_1_is_the_single_device_step_plus_the_buckets():
    single = measure_training_step(Blocks, SHAPE)
    ddp = measure_parallel(Blocks, SHAPE, ParallelOptions("ddp", 1))
    # One gradient-sized bucket set (two buckets: DDP's 1 MiB first bucket, then 25 MiB).
    assert len(ddp.buckets) == 2
    assert ddp.bucket_bytes >= single.grad_bytes - 512 * len(ddp.buckets)
    assert ddp.bucket_bytes <= single.grad_bytes + 512 * len(ddp.buckets)
    # The buckets are resident (allocated when DDP wraps the model); the step is unchanged.
    assert ddp.step.total_bytes() == single.total_bytes() + ddp.bucket_bytes
    assert ddp.step.buffer_bytes == single.buffer_bytes + ddp.bucket_bytes
    assert ddp.step.peak_bytes == single.peak_bytes
    assert ddp.step.param_bytes == single.param_bytes
    assert ddp.activation_bytes == single.kept_after_forward
    assert ddp.step.saved_bytes == single.saved_bytes
    # DDP replicates: the world size changes nothing on a rank.
    assert measure_parallel(Blocks, SHAPE, ParallelOptions("ddp", 8)).step.total_bytes() == ddp.step.total_bytes()


@pytest.mark.slow
def test_gradient_as_bucket_view_drops_the_second_copy_of_the_gradients():
    copy = measure_parallel(Blocks, SHAPE, ParallelOptions("ddp", 2))
    view = measure_parallel(Blocks, SHAPE, ParallelOptions("ddp", 2, gradient_as_bucket_view=True))
    # The gradients are views of the buckets: the .grad storages are the buckets'.
    assert view.step.grad_bytes == view.bucket_bytes
    # The step no longer allocates gradients: its peak (late in backward here) drops.
    assert copy.step.peak_bytes - view.step.peak_bytes >= copy.bucket_bytes // 2


@pytest.mark.slow
def test_fsdp_shards_model_states_by_the_world_size_and_leaves_activations_alone():
    single = measure_training_step(Blocks, SHAPE)
    one = measure_parallel(Blocks, SHAPE, ParallelOptions("fsdp", 1))
    assert one.step.param_bytes == single.param_bytes
    params = sum(p.numel() * 4 for p in Blocks().parameters())
    for world in (2, 4, 8):
        fsdp = measure_parallel(Blocks, SHAPE, ParallelOptions("fsdp", world))
        assert fsdp.wrapped == ["blocks.0", "blocks.1", "blocks.2", "blocks.3"]
        assert fsdp.unsharded_param_bytes == one.unsharded_param_bytes
        # Sharded to 1/N, up to the padding of dim 0 to a multiple of N and 512-byte blocks.
        slack = 10 * (512 + world * 256 * 4)
        assert abs(fsdp.step.param_bytes - params / world) <= slack
        assert abs(fsdp.step.grad_bytes - params / world) <= slack
        # Activations: what forward keeps (reshard_after_forward frees the gathered weights).
        assert fsdp.activation_bytes == single.kept_after_forward
        # The all-gather output holds one block's parameters, unsharded.
        block = sum(p.numel() * 4 for p in Blocks().blocks[0].parameters())
        assert block <= fsdp.all_gather_bytes <= block + world * 4 * 4 * 256
    # The step itself allocates more (gathered weights, reduce-scatter input); the rank holds less.
    assert fsdp.step.peak_bytes > single.peak_bytes
    assert fsdp.step.total_bytes(2) < single.total_bytes(2) * 0.6


@pytest.mark.slow
def test_fsdp_options_pass_through():
    plain = measure_parallel(Blocks, SHAPE, ParallelOptions("fsdp", 4))
    kept = measure_parallel(Blocks, SHAPE, ParallelOptions("fsdp", 4, reshard_after_forward=False))
    # Without resharding, forward keeps every block's gathered parameters for backward.
    gathered = sum(p.numel() * 4 for block in Blocks().blocks for p in block.parameters())
    assert kept.step.kept_after_forward - plain.step.kept_after_forward >= gathered * 0.9
    bf16 = measure_parallel(Blocks, SHAPE, ParallelOptions("fsdp", 4, param_dtype="bfloat16"))
    assert bf16.all_gather_bytes * 2 == pytest.approx(plain.all_gather_bytes, abs=1024)
    assert bf16.step.param_bytes == plain.step.param_bytes  # the sharded parameters stay float32


def _profile(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "profile", LM, "--input-shape", "4,64,int64", *args],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )


def _profile_in_process(*args: str):
    """The same CLI in this process (tests/dynamic/in_process.py)."""
    return cli("profile", LM, "--input-shape", "4,64,int64", *args, cwd=ROOT)


@pytest.mark.slow
def test_cli_reports_one_rank_with_a_budget():
    run = _profile("--parallel", "fsdp", "--world-size", "4", "--budget", "1GiB", "--output-format", "json")
    assert run.returncode == 0, run.stderr
    data = json.loads(run.stdout)
    rank = data["parallel"]
    assert rank["strategy"] == "fsdp" and rank["world_size"] == 4
    assert rank["wrapped"] == ["encoder.layers.0", "encoder.layers.1"]
    assert rank["param_bytes"] < rank["unsharded_param_bytes"] / 2
    assert data["fits"] == "fits" and data["budget"]["estimate"]["resident_bytes"] < rank["unsharded_param_bytes"]
    assert rank["allocated_peak_with_adam_bytes"] == data["budget"]["estimate"]["allocated_bytes"]
    text = _profile_in_process("--parallel", "ddp", "--world-size", "8", "--no-verify")
    assert text.returncode == 0, text.stderr
    assert "DDP buckets" in text.stdout and "DDP, world size 8" in text.stdout
    assert "rank peak with Adam" in text.stdout
    assert "Reducer cannot run on fake tensors" in text.stdout


# The last case (refused by FSDP's wrapping, after torch is imported) runs the subprocess.
@pytest.mark.slow
@pytest.mark.parametrize("args, message, runner", [
    (["--world-size", "8"], "--world-size needs --parallel", _profile_in_process),
    (["--parallel", "ddp"], "--parallel needs --world-size N", _profile_in_process),
    (["--parallel", "fsdp", "--world-size", "0"], "--world-size must be at least 1", _profile_in_process),
    (["--parallel", "ddp", "--world-size", "2", "--param-dtype", "bfloat16"], "are FSDP options",
     _profile_in_process),
    (["--parallel", "fsdp", "--world-size", "2", "--fsdp-wrap", "Nope"], "no module of class Nope", _profile),
])
def test_cli_bad_parallel_options_are_one_line(args, message, runner):
    run = runner(*args)
    assert run.returncode == 2
    assert message in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_bucket_view_budget_counts_the_gradients_once():
    from torchmemlint.dynamic.budget import Budget, check_budget, optimizer_model
    from torchmemlint.dynamic.parallel import _gradients_in_buckets

    adam, budget = optimizer_model("adam"), Budget(1 << 40, "test")
    copy = measure_parallel(Blocks, [[1, 256]], ParallelOptions("ddp", 8))
    view = measure_parallel(Blocks, [[1, 256]], ParallelOptions("ddp", 8, gradient_as_bucket_view=True))
    with_copies = check_budget(copy.step, budget, adam, 0, 1)
    as_views = check_budget(view.step, budget, adam, 0, 1)
    _gradients_in_buckets(as_views, view)
    # At batch 1 Adam's update is the peak: separate gradients + buckets + its temporaries,
    # against the buckets (the gradients) + its temporaries.
    assert with_copies.estimate.peak_phase == "optimizer step"
    grads = copy.step.grad_bytes
    assert with_copies.estimate.allocated_bytes - as_views.estimate.allocated_bytes == grads
    assert as_views.notes


@pytest.mark.slow
def test_largest_batch_per_rank_grows_with_fsdp_sharding():
    from torchmemlint.dynamic.budget import budget_request
    from torchmemlint.dynamic.parallel import run_parallel_profile

    request = budget_request("512MiB", "adam", None, True)
    # A 2-layer LM whose embedding and head (32,000 x 256) make the model states weigh.
    wide = {"vocab": 32000, "width": 256, "heads": 4, "layers": 2, "feedforward": 512}
    target = LM.replace(":small_lm", ":TransformerLM")
    found = {}
    for strategy, world in (("ddp", 4), ("fsdp", 4)):
        result, fields = run_parallel_profile(
            target, [[2, 64, "int64"]], wide, "float32", "cuda", ParallelOptions(strategy, world),
            request, request.resolve())
        found[strategy] = fields["max_batch"]
        assert result.sections[-1].key == "budget"
    # FSDP frees most of the model states per rank: a larger batch fits the same card.
    assert found["fsdp"] > found["ddp"] >= 1
