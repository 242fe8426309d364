from __future__ import annotations

import pytest
import torch
from torch import nn

from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.tracker import (
    LiveTracker,
    MemoryEvent,
    round_up,
    simulate_cuda_caching_allocator,
)

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)


def small_conv_net():
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(16, 10),
    )


@pytest.mark.parametrize("round_to", [1, 512])
def test_fake_cpu_matches_real_cpu_to_the_byte(round_to):
    fake = measure_training_step(small_conv_net, (4, 3, 32, 32), device="fake", round_to=round_to)
    real = measure_training_step(small_conv_net, (4, 3, 32, 32), device="cpu", round_to=round_to)
    assert fake.peak_bytes == real.peak_bytes
    assert fake.kept_after_forward == real.kept_after_forward
    assert fake.forward_peak_bytes == real.forward_peak_bytes
    assert (fake.peak_phase, fake.peak_op) == (real.peak_phase, real.peak_op)
    assert [e.delta for e in fake.events] == [e.delta for e in real.events]
    assert fake.modules == real.modules


def test_exact_bytes_of_a_linear_layer():
    # Linear(4, 3) on 2x4: forward allocates the 2x3 output (24 B) and the
    # scalar loss; backward allocates weight/bias grads (48 + 12 B).
    report = measure_training_step(lambda: nn.Linear(4, 3), (2, 4), device="cpu", round_to=1)
    assert report.param_bytes == 60
    assert report.grad_bytes == 60
    assert report.input_bytes == 32
    assert report.kept_after_forward == 24 + 4
    assert report.modules[0] == ("Linear", 24)
    assert report.peak_phase == "backward"


def test_saved_bytes_count_activations_autograd_keeps_once():
    # addmm saves the (untracked) input and weight; ReLU saves its output,
    # which is also the second Linear's saved input: one 3x8 float tensor.
    def mlp():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))

    report = measure_training_step(mlp, (3, 4), device="fake", round_to=1)
    assert report.saved_bytes == 3 * 8 * 4


def test_rounding_charges_512_byte_blocks():
    exact = measure_training_step(lambda: nn.Linear(4, 3), (2, 4), device="fake", round_to=1)
    rounded = measure_training_step(lambda: nn.Linear(4, 3), (2, 4), device="fake", round_to=512)
    assert exact.kept_after_forward == 28
    assert rounded.kept_after_forward == 1024
    assert round_up(513, 512) == 1024 and round_up(0, 512) == 0


def test_views_and_inplace_results_are_not_counted_twice():
    x = torch.randn(16, 16)
    with LiveTracker() as tracker:
        y = x * 2
        y.view(256).add_(1)
        z = y.t()
        assert tracker.live_bytes == 16 * 16 * 4
        del y, z
    assert tracker.live_bytes == 0
    assert tracker.peak.bytes == 1024 and tracker.peak.op == "mul"


def test_forward_allocations_are_attributed_to_the_innermost_module():
    model = nn.Sequential(nn.Linear(8, 32), nn.Sequential(nn.Linear(32, 16)))
    report = measure_training_step(model, (4, 8), device="fake", round_to=1)
    assert dict(report.modules) == {"0": 4 * 32 * 4, "1.0": 4 * 16 * 4, "(no module)": 4}


@pytest.mark.parametrize("reentrant", [False, True])
def test_checkpointed_stack_matches_real_cpu_and_lowers_kept_bytes(models, reentrant):
    stack = models("checkpointing").DeepStack

    def plain():
        return stack(depth=6)

    def checkpointed():
        return stack(depth=6, use_checkpoint=True, use_reentrant=reentrant)

    fake = measure_training_step(checkpointed, (4, 3, 32, 32), device="fake")
    real = measure_training_step(checkpointed, (4, 3, 32, 32), device="cpu")
    baseline = measure_training_step(plain, (4, 3, 32, 32), device="fake")
    assert fake.peak_bytes == real.peak_bytes
    assert fake.grad_bytes == baseline.grad_bytes
    assert fake.kept_after_forward < baseline.kept_after_forward / 3
    assert fake.peak_bytes < baseline.peak_bytes


def test_batchnorm_in_checkpoint_runs_in_fake_mode(models):
    model = models("checkpointing").BatchNormInCheckpoint
    fake = measure_training_step(model, (2, 3, 16, 16), device="fake")
    real = measure_training_step(model, (2, 3, 16, 16), device="cpu")
    assert fake.peak_bytes == real.peak_bytes > 0


def test_allocator_model_rounds_pools_and_reuses_blocks():
    mib = 1024 * 1024

    def alloc(storage, nbytes):
        return MemoryEvent(0, storage, nbytes, "op", "", "forward")

    def free(storage, nbytes):
        return MemoryEvent(0, storage, -nbytes, "free", "", "forward")

    events = [
        alloc(0, 100),  # 512 B block from a 2 MiB small-pool segment
        alloc(1, 5 * mib),  # split from a new 20 MiB segment
        free(1, 5 * mib),  # merges back into one free 20 MiB block
        alloc(2, 3 * mib),  # reuses the cached segment
        alloc(3, 25 * mib + mib // 2),  # new 26 MiB segment; 0.5 MiB rest is not split
        free(3, 25 * mib + mib // 2),
        alloc(4, 25 * mib),  # cached 26 MiB block within 1 MiB: charged whole
    ]
    estimate = simulate_cuda_caching_allocator(events)
    assert estimate.segments == 3
    assert estimate.max_reserved == (2 + 20 + 26) * mib
    assert estimate.max_allocated == 512 + 3 * mib + 26 * mib
