"""The CPU estimate runs CUDA's attention and dropout kernels (issue 11).

Targets: the tracker's figures on CUDA for the issue's 12-layer LM (H200,
torch 2.11): 2,033,464,320 B in float32, 1,246,245,888 B in bfloat16; the
estimate must be within 3 %.  Views of deep-copied or re-wrapped parameters
must add nothing.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from torchmemlint.dynamic.emulate import (
    EFFICIENT, FLASH, MATH, NATIVE_DROPOUT, choose_attention_kernel, cuda_kernels,
)
from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.source import cast_floating

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

TOKENS = [4, 512, "int64"]
CUDA_TRACKER_FP32 = 2_033_464_320
CUDA_TRACKER_BF16 = 1_246_245_888
CPU_KERNELS_FP32 = 4_259_447_808  # the 4,599,186,432 less the 339,738,624 B of views
TOLERANCE = 0.03


def lm_factory(models, dtype=torch.float32, **kwargs):
    module = models("transformer_lm")
    return lambda: cast_floating(module.TransformerLM(**kwargs), dtype)


def test_fp32_lm_estimate_is_cudas_memory_efficient_attention(models):
    report = measure_training_step(lm_factory(models), TOKENS)
    assert abs(report.peak_bytes / CUDA_TRACKER_FP32 - 1) < TOLERANCE, report.peak_bytes
    assert report.estimate_for == "cuda"
    assert report.emulated == {EFFICIENT: 12, NATIVE_DROPOUT: 36}
    assert report.emulation_gaps == []
    ops = {event.op for event in report.events}
    assert "_scaled_dot_product_efficient_attention" in ops and "native_dropout" in ops
    assert not ops & {"bmm", "_safe_softmax", "bernoulli", "t"}


def test_bf16_lm_estimate_is_cudas_flash_attention(models):
    report = measure_training_step(lm_factory(models, torch.bfloat16), TOKENS, dtype="bfloat16")
    assert abs(report.peak_bytes / CUDA_TRACKER_BF16 - 1) < TOLERANCE, report.peak_bytes
    assert report.emulated == {FLASH: 12, NATIVE_DROPOUT: 36}


def test_cpu_kernels_keep_the_math_path_and_float_noise(models):
    report = measure_training_step(lm_factory(models), TOKENS, estimate_for="cpu")
    assert report.peak_bytes == CPU_KERNELS_FP32
    assert report.estimate_for == "cpu" and report.emulated == {}
    ops = {event.op for event in report.events}
    assert {"bmm", "_safe_softmax"} <= ops  # the softmax is kept: B*H*S*S per layer


def test_deep_copied_layers_cost_what_fresh_ones_do(models):
    copied = measure_training_step(lm_factory(models, layers=4), [2, 256, "int64"])
    fresh = measure_training_step(lm_factory(models, layers=4, fresh_layers=True), [2, 256, "int64"])
    assert copied.param_bytes == fresh.param_bytes
    assert copied.peak_bytes == fresh.peak_bytes
    assert copied.kept_after_forward == fresh.kept_after_forward
    assert "t" not in {event.op for event in copied.events}


@pytest.mark.parametrize("estimate_for", ["cuda", "cpu"])
def test_instance_target_counts_no_rewrapped_weight(models, estimate_for):
    module = models("transformer_lm")
    torch.manual_seed(0)
    instance = module.small_lm()
    from_instance = measure_training_step(instance, [2, 64, "int64"], estimate_for=estimate_for)
    from_factory = measure_training_step(module.small_lm, [2, 64, "int64"], estimate_for=estimate_for)
    assert from_instance.peak_bytes == from_factory.peak_bytes


@pytest.mark.parametrize("dropout", [0.1, 0.0])
def test_cpu_kernel_estimate_is_a_real_cpu_run(models, dropout):
    """The plain-CPU estimate is what a real CPU step allocates (tracker on real tensors)."""
    module = models("transformer_lm")
    shape = [2, 64, "int64"]
    real = measure_training_step(lambda: module.small_lm(dropout=dropout), shape, device="cpu")
    fake = measure_training_step(lambda: module.small_lm(dropout=dropout), shape, estimate_for="cpu")
    assert fake.peak_bytes == real.peak_bytes
    assert fake.kept_after_forward == real.kept_after_forward


class DropoutNet(nn.Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.drop = nn.Dropout(0.5, inplace=inplace)
        self.out = nn.Linear(256, 256)

    def forward(self, x):
        return self.out(self.drop(torch.relu(self.fc(x))))


def test_dropout_keeps_a_bool_mask_for_cuda_and_float_noise_for_cpu():
    elements = 1024 * 256
    cuda = measure_training_step(DropoutNet, [1024, 256], round_to=1)
    cpu = measure_training_step(DropoutNet, [1024, 256], round_to=1, estimate_for="cpu")
    assert cuda.emulated == {NATIVE_DROPOUT: 1}
    assert cpu.saved_bytes - cuda.saved_bytes == elements * (4 - 1)


def test_inplace_dropout_is_left_alone():
    """CUDA's in-place dropout keeps float noise too: same figure either way."""
    cuda = measure_training_step(lambda: DropoutNet(inplace=True), [1024, 256], round_to=1)
    cpu = measure_training_step(lambda: DropoutNet(inplace=True), [1024, 256], round_to=1, estimate_for="cpu")
    assert cuda.emulated == {} and cuda.peak_bytes == cpu.peak_bytes
    assert any("4-byte noise" in gap for gap in cuda.emulation_gaps)


def test_eval_dropout_and_functions_are_restored():
    original = torch.nn.functional.scaled_dot_product_attention, torch.nn.functional.dropout
    with cuda_kernels() as log:
        x = torch.ones(4, 4)
        assert torch.equal(torch.nn.functional.dropout(x, 0.5, training=False), x)
    assert log.calls == {}
    assert (torch.nn.functional.scaled_dot_product_attention, torch.nn.functional.dropout) == original


def q(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


@pytest.mark.parametrize(
    "query, mask, kernel",
    [
        (q(2, 12, 512, 64), None, EFFICIENT),
        (q(2, 12, 512, 64, dtype=torch.bfloat16), None, FLASH),
        (q(2, 12, 512, 64, dtype=torch.float16), None, FLASH),
        (q(2, 12, 512, 64, dtype=torch.bfloat16), q(512, 512), EFFICIENT),  # flash takes no mask
        (q(2, 12, 512, 64), q(512, 512), EFFICIENT),
        (q(2, 12, 512, 6), None, MATH),  # fp32 head dim not a multiple of 4
        (q(2, 12, 512, 320, dtype=torch.bfloat16), None, EFFICIENT),  # over flash's 256
        (q(2, 12, 512, 12, dtype=torch.bfloat16), q(512, 512), MATH),  # not a multiple of 8
        (q(24, 512, 64), None, MATH),  # 3-D: no fused kernel
        (q(2, 12, 512, 64, dtype=torch.float64), None, MATH),
    ],
)
def test_kernel_choice(query, mask, kernel):
    assert choose_attention_kernel(query, query, query, mask) == kernel


def test_each_emulated_kernel_trains_under_fake_tensors():
    """Flash with a padded head dim, efficient with a bool mask, math with causal GQA."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    cases = [
        (torch.bfloat16, 20, None, {}),
        (torch.float32, 64, "bool", {}),
        (torch.float32, 6, None, {"is_causal": True}),
    ]
    for dtype, head, mask, kwargs in cases:
        with FakeTensorMode():
            x = torch.randn(2, 4, 32, head, dtype=dtype, requires_grad=True)
            attn_mask = torch.ones(32, 32, dtype=torch.bool) if mask else None
            with cuda_kernels() as log:
                out = torch.nn.functional.scaled_dot_product_attention(
                    x, x, x, attn_mask=attn_mask, dropout_p=0.1, **kwargs
                )
            out.float().sum().backward()
            assert out.shape == x.shape and out.dtype == dtype and x.grad.shape == x.shape
            assert sum(log.calls.values()) >= 1


from torch.nn.functional import scaled_dot_product_attention as bound_sdpa  # noqa: E402


class BoundAttention(nn.Module):
    """Calls SDPA through a name bound at import: the swap cannot reach it."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(64, 64)

    def forward(self, x):
        q = self.qkv(x).view(2, 32, 4, 16).transpose(1, 2)
        return bound_sdpa(q, q, q, dropout_p=0.1)


def test_attention_bound_before_the_step_is_reported_not_emulated():
    report = measure_training_step(BoundAttention, [2, 32, 64])
    assert EFFICIENT not in report.emulated
    assert any("math path" in gap for gap in report.emulation_gaps)
    assert any("4-byte noise" in gap for gap in report.emulation_gaps)


def test_emulated_math_attention_is_not_reported_as_a_gap():
    class MathAttention(BoundAttention):
        def forward(self, x):
            q = self.qkv(x).view(2, 32, 4, 16).transpose(1, 2)[..., :6]  # head dim 6: math path
            return torch.nn.functional.scaled_dot_product_attention(q, q, q, dropout_p=0.1)

    report = measure_training_step(MathAttention, [2, 32, 64])
    assert report.emulated == {MATH: 1, NATIVE_DROPOUT: 1} and report.emulation_gaps == []
