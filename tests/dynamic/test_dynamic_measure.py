from __future__ import annotations

import pytest
import torch

from torchmemlint.dynamic.errors import DynamicError, NoTensorOutputError
from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.numerics import compare_numerics
from torchmemlint.dynamic.placements import checkpoint_placements, default_placements, find_stages

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

SHAPE = (4, 3, 32, 32)


def peak(factory, shape=SHAPE):
    return measure_training_step(factory, shape, device="fake", round_to=1).peak_bytes


def test_leaky_relu_inplace_lowers_peak_and_relu_inplace_does_not(models):
    nets = models("activations")
    one_activation = 4 * 16 * 32 * 32 * 4
    assert peak(nets.LeakyNet) - peak(nets.LeakyInplaceNet) >= 2 * one_activation
    assert peak(nets.ReluNet) == peak(nets.ReluInplaceNet)
    assert peak(nets.SiluNet) == peak(nets.SiluInplaceNet)


def test_stateless_modules_cost_the_same_as_functional_calls(models):
    nets = models("activations")
    modules = measure_training_step(nets.StatelessModulesNet, (1, 3, 64, 64), device="fake")
    functional = measure_training_step(nets.FunctionalNet, (1, 3, 64, 64), device="fake")
    assert modules.peak_bytes == functional.peak_bytes
    assert modules.kept_after_forward == functional.kept_after_forward


def test_removing_the_stem_pool_quadruples_deep_stages(models):
    unet = models("resnet_unet")
    shape = (4, 3, 128, 128)  # memory-facts claim 3: saved x2.30, peak x1.65
    pooled = measure_training_step(lambda: unet.unet_resnet34(pool=True), shape, device="fake")
    unpooled = measure_training_step(lambda: unet.unet_resnet34(pool=False), shape, device="fake")
    assert pooled.param_bytes == unpooled.param_bytes
    assert 2.2 < unpooled.saved_bytes / pooled.saved_bytes < 2.4
    # kept = saved + the output (4x1x128x128 floats) + the scalar loss (one 512-byte block)
    assert pooled.kept_after_forward - pooled.saved_bytes == 4 * 128 * 128 * 4 + 512
    assert 1.6 < unpooled.peak_bytes / pooled.peak_bytes < 1.7
    layer3_pooled = dict(pooled.modules)["encoder.layer3.0.conv1"]
    layer3_unpooled = dict(unpooled.modules)["encoder.layer3.0.conv1"]
    assert layer3_unpooled == 4 * layer3_pooled


def test_module_instance_in_fake_mode_matches_factory(models):
    nets = models("activations")
    torch.manual_seed(0)
    instance = nets.LeakyNet()
    assert peak(instance) == peak(nets.LeakyNet)
    assert all(not p.is_meta and p.grad is None for p in instance.parameters())


def test_module_returning_no_tensor_raises_clear_error(models):
    with pytest.raises(NoTensorOutputError, match="no floating-point tensor .*got NoneType"):
        measure_training_step(models("activations").NoTensorNet, (2, 4), device="fake")


def test_data_dependent_op_in_fake_mode_raises_dynamic_error():
    class Thresholded(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x):
            out = self.fc(x)
            return out if out.sum().item() > 0 else -out

    with pytest.raises(DynamicError, match="data-dependent op"):
        measure_training_step(Thresholded, (2, 4), device="fake")
    assert measure_training_step(Thresholded, (2, 4), device="cpu").peak_bytes > 0


def test_bad_device_and_failing_factory_raise_dynamic_error():
    with pytest.raises(DynamicError, match="device must be one of"):
        measure_training_step(lambda: torch.nn.Linear(2, 2), (1, 2), device="tpu")

    def broken():
        raise ValueError("no such layer size")

    with pytest.raises(DynamicError, match="building the model failed: ValueError"):
        measure_training_step(broken, (1, 2), device="fake")


def test_integer_inputs_from_shape_with_dtype():
    def embedder():
        return torch.nn.Sequential(torch.nn.Embedding(10, 8), torch.nn.Linear(8, 2))

    report = measure_training_step(embedder, [3, 5, "int64"], device="fake", round_to=1)
    assert report.input_bytes == 3 * 5 * 8
    assert report.kept_after_forward > 0


def test_numerics_detect_batchnorm_double_update_only_in_buffers(models):
    ckpt = models("checkpointing")
    x = torch.randn(4, 3, 16, 16)
    report = compare_numerics(ckpt.BatchNormInCheckpoint(False), ckpt.BatchNormInCheckpoint(True), x)
    assert not report.equal
    assert "segment.1.num_batches_tracked" in report.differing_buffers
    assert report.buffer_diffs["segment.1.num_batches_tracked"] == 1.0
    assert "segment.1.running_mean" in report.differing_buffers
    assert report.differing_params == [] and report.output_diff == 0.0


def test_numerics_detect_changed_gradient_and_accept_exact_fix(models):
    nets = models("activations")
    x = torch.randn(2, 3, 16, 16)
    wrong = compare_numerics(nets.ResidualNet(inplace=False), nets.ResidualNet(inplace=True), x)
    assert not wrong.equal and wrong.differing_outputs
    assert "conv1.weight" in wrong.differing_params
    exact = compare_numerics(nets.LeakyNet(), nets.LeakyInplaceNet(), x)
    assert exact.equal and exact.output_diff == 0.0


def test_numerics_report_missing_gradient_and_backward_errors(models):
    nets = models("activations")
    x = torch.randn(2, 3, 8, 8)

    class Frozen(nets.ResidualNet):
        def forward(self, inp):
            return self.conv2(self.act(self.conv1(inp).detach()))

    missing = compare_numerics(nets.ResidualNet(), Frozen(), x)
    assert missing.param_grad_diffs["conv1.weight"] is None
    assert "conv1.weight" in missing.differing_params

    broken = compare_numerics(nets.SigmoidInplaceNet(), nets.SigmoidInplaceNet(), x)
    assert not broken.equal and "inplace operation" in (broken.error_a or "")


def test_checkpoint_placements_rank_by_peak_and_count_recompute(models):
    resnet = models("resnet_unet").resnet18
    assert find_stages(resnet()) == ["layer1", "layer2", "layer3", "layer4"]
    defaults = default_placements(resnet())
    assert defaults["late stages"] == ["layer3", "layer4"]
    assert len(defaults["every block"]) == 8 and defaults["every block"][0] == "layer1.0"
    results = checkpoint_placements(
        resnet, (8, 3, 64, 64), placements={"layer1": ["layer1"], "every block": ["layer1.*", "layer2.*", "layer3.*", "layer4.*"]}
    )
    assert [r.peak_bytes for r in results] == sorted(r.peak_bytes for r in results)
    by_name = {r.name: r for r in results}
    assert by_name["none"].flops_ratio == 1.0
    assert 1.05 < by_name["layer1"].flops_ratio < 1.15
    assert 1.25 < by_name["every block"].flops_ratio < 1.4
    assert by_name["every block"].kept_after_forward < by_name["none"].kept_after_forward


def test_checkpoint_placements_leave_a_module_instance_untouched(models):
    stack = models("checkpointing").DeepStack(depth=4)
    results = checkpoint_placements(stack, (2, 3, 16, 16))
    # One ModuleList stage: its blocks are wrapped one by one, never the list.
    assert {r.name: r.wrapped for r in results} == {
        "none": [],
        "every block": ["blocks.0", "blocks.1", "blocks.2", "blocks.3"],
        "early blocks": ["blocks.0", "blocks.1"],
    }
    assert type(stack.blocks[0]).__name__ == "Block"
    assert all(p.grad is None and type(p) is torch.nn.Parameter for p in stack.parameters())
    by_name = {r.name: r for r in results}
    assert by_name["every block"].kept_after_forward < by_name["none"].kept_after_forward
