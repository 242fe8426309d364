"""Will it fit? Budget parsing, optimizer state, the verdict band and the largest batch."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from torch import nn

from torchmemlint.dynamic.budget import (
    DOES_NOT_FIT,
    FITS,
    TOO_CLOSE,
    batch_of,
    check_budget,
    estimate_memory,
    largest_batch,
    optimizer_model,
    parse_budget,
    parse_size,
    with_batch,
)
from torchmemlint.dynamic.errors import DynamicError
from torchmemlint.dynamic.measure import measure_training_step, scalar_loss
from torchmemlint.dynamic.tracker import LiveTracker, storage_bytes

from in_process import cli

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)


def small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10),
    )


def wide_mlp():
    """Parameters dominate: the optimizer update sets the peak, not backward."""
    return nn.Sequential(
        nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
    )


class GramNet(nn.Module):
    """Memory quadratic in the batch: a batch x batch similarity matrix."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 64)

    def forward(self, x):
        h = self.fc(x)
        return torch.softmax(h @ h.t(), dim=1)


class BatchNormMlp(nn.Module):
    """Cannot train at batch 1: BatchNorm1d needs more than one value per channel."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4096)
        self.bn = nn.BatchNorm1d(4096)

    def forward(self, x):
        return self.bn(self.fc(x))


def estimate(factory, shape, optimizer="adam"):
    report = measure_training_step(factory, shape)
    return estimate_memory(report, optimizer_model(optimizer), shape[0])


# -- budgets ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8GiB", 8 * 2**30),
        ("8GB", 8 * 10**9),
        ("8000MiB", 8000 * 2**20),
        ("1.5 gib", 3 * 2**29),
        ("512B", 512),
        ("0.5KB", 500),
    ],
)
def test_sizes_in_binary_and_decimal_units(text, expected):
    assert parse_size(text) == expected
    assert parse_budget(text).bytes == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("8", "cannot parse budget '8'"),  # no unit: bytes or GiB?
        ("eight GiB", "cannot parse"),
        ("8 GiX", "cannot parse"),
        ("", "cannot parse"),
        ("0GiB", "must be positive"),
        ("-8GiB", "must be positive"),
        ("0.1B", "must be positive"),
    ],
)
def test_bad_budgets_are_one_line_errors(text, message):
    with pytest.raises(DynamicError, match=message) as caught:
        parse_budget(text)
    assert "\n" not in str(caught.value)


def test_cuda_budget_is_the_cards_free_memory():
    if not torch.cuda.is_available():
        with pytest.raises(DynamicError, match="needs a CUDA device"):
            parse_budget("cuda:0")
        return
    budget = parse_budget("cuda:0")
    free, total = torch.cuda.mem_get_info(0)
    assert 0 < budget.bytes <= total
    assert abs(budget.bytes - free) < 64 * 2**20
    with pytest.raises(DynamicError, match="no such device"):
        parse_budget("cuda:%d" % torch.cuda.device_count())


# -- the estimate against torch.optim -----------------------------------------------------

OPTIMIZERS = {
    "adam": lambda params: torch.optim.Adam(params, foreach=True),
    "adamw": lambda params: torch.optim.AdamW(params, foreach=True),
    "sgd": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=True),
    "none": None,
}


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
@pytest.mark.parametrize("factory, shape", [(small_cnn, (8, 3, 32, 32)), (wide_mlp, (4, 256))])
def test_allocated_peak_equals_three_real_training_iterations(factory, shape, optimizer):
    """The estimate from one fake step equals the peak of a real CPU training
    loop with torch.optim (foreach, CUDA's default), optimizer state included."""
    torch.manual_seed(0)
    model, batch = factory(), torch.randn(shape)
    resident = storage_bytes([*model.parameters(), *model.buffers(), batch], 512)
    tracker = LiveTracker(512, keep_events=False)
    with tracker:
        make = OPTIMIZERS[optimizer]
        opt = make(model.parameters()) if make else None
        for _ in range(3):
            model.zero_grad(set_to_none=True)
            output = model(batch)
            loss = scalar_loss(output)
            loss.backward()
            del output, loss
            if opt is not None:
                opt.step()
    assert estimate(factory, shape, optimizer).allocated_bytes == resident + tracker.peak.bytes


def test_optimizer_state_and_where_the_peak_is():
    cnn = estimate(small_cnn, (8, 3, 32, 32))
    cnn_grads = measure_training_step(small_cnn, (8, 3, 32, 32)).grad_bytes
    assert cnn.optimizer_state_bytes == 2 * cnn_grads
    assert cnn.peak_phase == "backward"
    mlp = {name: estimate(wide_mlp, (4, 256), name) for name in ("adam", "sgd", "none")}
    grads = measure_training_step(wide_mlp, (4, 256)).grad_bytes
    assert mlp["adam"].peak_phase == "optimizer step"  # grads + exp_avg_sq's sqrt for all params
    assert mlp["adam"].update_peak_bytes == 2 * grads
    assert mlp["sgd"].optimizer_state_bytes == grads and mlp["none"].optimizer_state_bytes == 0
    assert mlp["adam"].allocated_bytes > mlp["sgd"].allocated_bytes > mlp["none"].allocated_bytes


def test_unknown_optimizer():
    with pytest.raises(DynamicError, match="unknown optimizer 'lamb'"):
        optimizer_model("lamb")


# -- the verdict ------------------------------------------------------------------------


def test_verdict_band_between_allocated_and_reserved():
    report = measure_training_step(small_cnn, (8, 3, 32, 32))
    adam = optimizer_model("adam")
    band = estimate_memory(report, adam)
    assert band.reserved_bytes > band.allocated_bytes  # the allocator caches more than is live

    def verdict_at(budget_bytes, reserve=0):
        return check_budget(report, parse_budget("%dB" % budget_bytes), adam, reserve).verdict

    assert verdict_at(band.reserved_bytes) == FITS
    assert verdict_at(band.reserved_bytes - 1) == TOO_CLOSE
    assert verdict_at(band.allocated_bytes) == TOO_CLOSE
    assert verdict_at(band.allocated_bytes - 1) == DOES_NOT_FIT
    reserve = 300 * 2**20
    assert verdict_at(band.reserved_bytes + reserve, reserve) == FITS
    assert verdict_at(band.reserved_bytes + reserve - 1, reserve) == TOO_CLOSE
    with pytest.raises(DynamicError, match="--reserve .* must be smaller than the budget"):
        verdict_at(reserve, reserve)


# -- the largest batch --------------------------------------------------------------------


def measuring(factory, shape):
    calls = []

    def measure_at(batch):
        calls.append(batch)
        return measure_training_step(factory, with_batch([shape], batch))

    return measure_at, calls


def assert_largest(factory, shape, usable, answer, optimizer="adam"):
    """``answer`` fits and ``answer + 1`` does not, measured independently."""
    if answer:
        assert estimate(factory, (answer, *shape[1:]), optimizer).reserved_bytes <= usable
    assert estimate(factory, (answer + 1, *shape[1:]), optimizer).reserved_bytes > usable


def test_largest_batch_of_a_linear_model_from_the_allocated_fill_and_a_check():
    shape = (64, 3, 128, 128)
    usable = estimate(small_cnn, (100, 3, 128, 128)).reserved_bytes + 1
    measure_at, calls = measuring(small_cnn, shape)
    search = largest_batch(measure_at, optimizer_model("adam"), usable, start=64)
    assert_largest(small_cnn, shape, usable, search.max_batch)
    assert search.max_batch == 100
    assert search.method == (
        "allocated bytes fill the budget near batch 100; the modelled reserve of the interpolated steps "
        "predicted 100; 3 steps measured (64, 100, 101)")
    assert calls == [64, 100, 101]


def test_largest_batch_when_memory_is_not_linear_in_the_batch():
    shape = (8, 32)
    usable = estimate(GramNet, (600, 32)).reserved_bytes
    measure_at, calls = measuring(GramNet, shape)
    search = largest_batch(measure_at, optimizer_model("adam"), usable, start=8)
    assert_largest(GramNet, shape, usable, search.max_batch)
    assert search.max_batch == 600
    assert len(calls) > 4  # the linear prediction was off: searched


def test_nothing_fits_when_batch_one_is_over_budget():
    shape = (4, 3, 32, 32)
    usable = estimate(small_cnn, (1, 3, 32, 32)).reserved_bytes - 1
    search = largest_batch(measuring(small_cnn, shape)[0], optimizer_model("adam"), usable, start=4)
    assert search.max_batch == 0
    assert 1 in search.measured


def test_a_model_that_cannot_train_at_batch_one():
    usable = estimate(BatchNormMlp, (2, 8), "sgd").allocated_bytes - 1
    with pytest.raises(DynamicError, match="at batch 1: .*Expected more than 1 value per channel"):
        largest_batch(measuring(BatchNormMlp, (4, 8))[0], optimizer_model("sgd"), usable, start=4)


def test_the_batch_is_the_first_dimension_of_every_input():
    assert batch_of([[8, 3, 32, 32], [8, "int64"]]) == 8
    assert with_batch([[8, 3, 32, 32], [8, "int64"]], 5) == [[5, 3, 32, 32], [5, "int64"]]
    with pytest.raises(DynamicError, match="these differ"):
        batch_of([[8, 3, 32, 32], [4, "int64"]])
    with pytest.raises(DynamicError, match="must be positive"):
        batch_of([0, 3, 32, 32])


# -- `torchmemlint profile --budget` as a user runs it -----------------------------------------

TINY_UNET = '''\
import torch.nn as nn
import torch.nn.functional as F


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.LeakyReLU(0.1))
        self.layer2 = nn.Sequential(nn.Conv2d(64, 64, 3, stride=2, padding=1), nn.ReLU())


def resnet_tiny():
    return ResNet()


class NoPoolNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = resnet_tiny()
        self.stem = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)
        self.head = nn.Conv2d(64, 1, 1)

    def forward(self, x):
        out = self.head(self.encoder.layer2(self.encoder.layer1(self.stem(x))))
        return F.interpolate(out, size=x.shape[-2:])


class PoolNet(NoPoolNet):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            self.encoder.conv1, self.encoder.bn1, self.encoder.relu, self.encoder.maxpool
        )


class BatchNormMlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 4096)
        self.bn = nn.BatchNorm1d(4096)

    def forward(self, x):
        return self.bn(self.fc(x))
'''
STEM_ROW = 1 + TINY_UNET.splitlines().index(
    "        self.stem = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)"
)
SHAPE = (8, 3, 128, 128)
LEAKY_ROW = 12


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("budget") / "tiny_unet.py"
    path.write_text(TINY_UNET)
    from torchmemlint.dynamic.target import load_module

    return path, load_module("%s:_" % path)


def profile(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "profile", "--isolated", *args],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def test_profile_budget_names_the_fix_that_fits_and_the_batch_that_fits_unchanged(tiny):
    path, nets = tiny
    pooled, unpooled = estimate(nets.PoolNet, SHAPE), estimate(nets.NoPoolNet, SHAPE)
    budget = (pooled.reserved_bytes + unpooled.allocated_bytes) // 2
    assert pooled.reserved_bytes < budget < unpooled.allocated_bytes
    result = profile("%s:NoPoolNet" % path, "--input-shape", ",".join(map(str, SHAPE)),
                     "--budget", "%dB" % budget, "--output-format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["budget_bytes"] == budget and report["fits"] == DOES_NOT_FIT
    assert report["budget"]["estimate"]["allocated_bytes"] == unpooled.allocated_bytes
    # TML301's suggested variant puts the pool back into the stem: that is PoolNet.
    [fix] = report["fixes_that_fit"]
    assert (fix["code"], fix["row"], fix["fits"]) == ("TML301", STEM_ROW, FITS)
    assert fix["peak_after"] == pooled.allocated_bytes
    # TML201 (LeakyReLU in place) is confirmed but not enough alone; both together fit.
    leaky = [f for f in report["budget"]["fixes_measured"] if f["code"] == "TML201"]
    assert [(f["row"], f["fits"]) for f in leaky] == [(LEAKY_ROW, DOES_NOT_FIT)]
    assert leaky[0]["peak_after"] < unpooled.allocated_bytes
    together = report["budget"]["fixes_combined"]
    assert together["codes"] == ["TML201", "TML301"] and together["fits"] == FITS
    assert together["peak_after"] < fix["peak_after"]
    largest = report["max_batch"]
    assert_largest(nets.NoPoolNet, SHAPE, budget, largest)
    assert 0 < largest < SHAPE[0]


def test_profile_text_without_verification_still_measures_the_fixes(tiny):
    path, nets = tiny
    result = profile("%s:NoPoolNet" % path, "--input-shape", ",".join(map(str, SHAPE)),
                     "--budget", "16MiB", "--optimizer", "sgd", "--max-batch", "--no-verify")
    assert result.returncode == 0, result.stderr
    assert "verdict: does not fit" in result.stdout and "SGD with momentum" in result.stdout
    fix_rows = [line.split() for line in result.stdout.splitlines() if "--no-verify)" in line]
    assert [(row[0], row[1]) for row in fix_rows] == [
        ("TML201", "%d:70" % LEAKY_ROW), ("TML301", "%d:21" % STEM_ROW)]
    largest = int(re.search(r"largest batch that fits unchanged: (\d+)", result.stdout).group(1))
    assert_largest(nets.NoPoolNet, SHAPE, parse_size("16MiB"), largest, "sgd")


def profile_in_process(*args):
    """The same CLI in this process (tests/dynamic/in_process.py)."""
    result = cli("profile", "--isolated", *args)
    assert "Traceback" not in result.stderr, result.stderr
    return result


# The first case runs the subprocess; the others the same CLI in this process.
@pytest.mark.parametrize(
    "options, message, runner",
    [
        (["--budget", "eight"], "cannot parse budget 'eight': expected a size such as 8GiB", profile),
        (["--budget", "8"], "cannot parse budget '8'", profile_in_process),
        (["--budget", "0GiB"], "budget must be positive, got '0GiB'", profile_in_process),
        (["--budget", "-8GiB"], "budget must be positive, got '-8GiB'", profile_in_process),
        (["--budget", "8GiB", "--reserve", "-1MiB"], "--reserve must be positive", profile_in_process),
        (["--budget", "8GiB", "--reserve", "8GiB"], "--reserve 8.00 GiB leaves nothing", profile_in_process),
        (["--max-batch"], "--max-batch needs --budget", profile_in_process),
        (["--optimizer", "sgd"], "--optimizer needs --budget", profile_in_process),
    ],
)
def test_bad_budget_options_are_one_line_errors(tiny, options, message, runner):
    result = runner("%s:PoolNet" % tiny[0], "--input-shape", "8,3,64,64", *options)
    assert result.returncode == 2
    assert result.stderr.startswith("torchmemlint: error: ") and result.stderr.count("\n") == 1
    assert message in result.stderr and result.stdout == ""


def test_cuda_budget_without_cuda_and_a_model_that_cannot_run_at_batch_one(tiny):
    path, nets = tiny
    if not torch.cuda.is_available():
        result = profile("%s:PoolNet" % path, "--input-shape", "8,3,64,64", "--budget", "cuda:0")
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == ("torchmemlint: error: budget 'cuda:0' needs a CUDA device, "
                                 "but torch.cuda is not available\n")
    too_small = estimate(nets.BatchNormMlp, (2, 8), "sgd").allocated_bytes - 1
    result = profile_in_process("%s:BatchNormMlp" % path, "--input-shape", "4,8", "--budget",
                                "%dB" % too_small, "--optimizer", "sgd", "--no-verify")
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1
    assert "at batch 1: " in result.stderr
    assert "Expected more than 1 value per channel" in result.stderr
