"""Verification of static findings: each fix (or suggested variant) measured and checked."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.dynamic.errors import DynamicError
from torchmemlint.dynamic.measure import measure_training_step
from torchmemlint.dynamic.placements import checkpoint_placements
from torchmemlint.dynamic.source import (
    findings_in_target,
    import_source_variant,
    measure_source_variant,
    model_factory,
    read_target_source,
    target_line_ranges,
)
from torchmemlint.dynamic.variants import keep_stem_pool
from torchmemlint.dynamic.verify import CONFIRMED, NOT_VERIFIED, UNSAFE, run_profile, verify_findings
from torchmemlint.engine import lint_source
from torchmemlint.findings import Applicability, Edit, Finding, Fix, Location

from rule_examples import examples

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
ALL_RULES = Settings(select=("ALL",))

# One activation of the LeakyConvNet at batch 8 x 16 channels x 64 x 64, float32.
ACTIVATION = 8 * 16 * 64 * 64 * 4

HEAD_SOURCE = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn


    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(16, 16)
            self.act = nn.LeakyReLU(0.1)

        def forward(self, x):
            return self.act(self.fc(x))
    """
)


def edit_replacing(text: str, old: str, new: str) -> Edit:
    """An edit that replaces the first ``old`` in ``text``."""
    offset = text.index(old)
    row = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Edit(new, Location(row, column), Location(row, column + len(old)))


def finding_with_fix(path: Path, text: str, edits, applicability=Applicability.SAFE) -> Finding:
    first = edits[0]
    fix = Fix(applicability, "test fix", tuple(edits))
    return Finding("TML201", "test finding", str(path), first.location, first.end_location, fix)


def test_unsafe_fix_is_compared_within_a_tolerance(tmp_path):
    path = tmp_path / "elu_net.py"
    path.write_text(
        textwrap.dedent(
            """\
            import torch.nn as nn


            class EluNet(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.body = nn.Sequential(
                        nn.Conv2d(3, 16, kernel_size=3, padding=1), nn.BatchNorm2d(16), nn.ELU()
                    )

                def forward(self, x):
                    return self.body(x)
            """
        )
    )
    result = run_profile("%s:EluNet" % path, [[8, 3, 64, 64]], settings=ALL_RULES, device="cpu")
    (elu,) = result.findings
    assert elu.code == "TML201" and elu.verdict == CONFIRMED
    assert elu.variant.startswith("unsafe fix")
    assert elu.numerics.startswith("within atol=1e-06, rtol=1e-05")


def test_fix_that_changes_results_or_raises_is_unsafe_and_renaming_is_not_verified(tmp_path):
    path = tmp_path / "head.py"
    path.write_text(HEAD_SOURCE)
    target = read_target_source("%s:Head" % path)
    shape = [4, 16]
    baseline = measure_training_step(
        model_factory(import_source_variant(target, target.text), target.spec, None, "float32"), shape
    )
    changes_slope = finding_with_fix(
        path, HEAD_SOURCE, [edit_replacing(HEAD_SOURCE, "LeakyReLU(0.1)", "LeakyReLU(0.2)")]
    )
    saved_output_overwritten = edit_replacing(
        HEAD_SOURCE, "self.act(self.fc(x))", "torch.sigmoid(self.fc(x)).mul_(2)"
    )
    breaks_backward = finding_with_fix(path, HEAD_SOURCE, [saved_output_overwritten])
    renames = finding_with_fix(
        path,
        HEAD_SOURCE,
        [
            edit_replacing(HEAD_SOURCE, "self.fc = ", "self.linear = "),
            edit_replacing(HEAD_SOURCE, "self.act(self.fc(x))", "self.act(self.linear(x))"),
        ],
    )
    no_fix = Finding("TML504", "a leak", str(path), Location(12, 9), Location(12, 20))
    slope, backward, renamed, unfixable = verify_findings(
        target, [changes_slope, breaks_backward, renames, no_fix], None, shape, baseline
    )
    assert slope.verdict == UNSAFE and slope.numerics.startswith("differs: outputs")
    assert backward.verdict == UNSAFE
    assert "modified by an inplace operation" in backward.reason + backward.numerics
    assert renamed.verdict == NOT_VERIFIED and renamed.peak_after is None
    assert "missing fc.bias, fc.weight; unexpected linear.bias, linear.weight" in renamed.reason
    assert unfixable.verdict == NOT_VERIFIED and "no fix" in unfixable.reason


def test_dropped_stem_pool_is_confirmed_by_the_variant_that_keeps_it():
    spec = "%s:UNetResNetNoPool" % (MODELS / "resnet_unet.py")
    shape = [1, 3, 64, 64]
    result = run_profile(spec, [shape], {"encoder_depth": 18}, settings=Settings(select=("TML301",)))
    (stem,) = result.findings
    assert stem.verdict == CONFIRMED
    assert stem.variant == (
        "suggested variant: keep the stem pool (`self.conv1` fed through `self.encoder.maxpool`)"
    )
    assert stem.numerics.startswith("differs, as this variant changes the model")
    # The variant feeds layer1 through the pool and keeps the stem's output as the
    # first skip: the same network as the fixture that keeps the pool.
    target = read_target_source(spec)
    pooled_spec = "%s:UNetResNet" % target.path
    fixture = import_source_variant(target, target.text)
    pooled_net = model_factory(fixture, pooled_spec, {"encoder_depth": 18}, "float32")
    pooled = measure_training_step(pooled_net, shape)
    assert stem.peak_after == pooled.peak_bytes < stem.peak_before


def test_deep_stack_is_answered_by_measured_placements_with_numerics(tmp_path):
    path = tmp_path / "stack.py"
    path.write_text(
        textwrap.dedent(
            """\
            import torch.nn as nn


            class Block(nn.Module):
                def __init__(self, channels, norm):
                    super().__init__()
                    self.conv1 = nn.Conv2d(channels, channels, 3, padding=1)
                    self.norm1 = nn.BatchNorm2d(channels) if norm else nn.Identity()
                    self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)

                def forward(self, x):
                    out = self.norm1(self.conv1(x)).relu()
                    return self.conv2(out).relu() + x


            class Stack(nn.Module):
                def __init__(self, norm=False, depth=6, channels=16):
                    super().__init__()
                    self.stem = nn.Conv2d(3, channels, 3, padding=1)
                    self.blocks = nn.ModuleList([Block(channels, norm) for _ in range(depth)])

                def forward(self, x):
                    x = self.stem(x)
                    for block in self.blocks:
                        x = block(x)
                    return x
            """
        )
    )
    shape = [4, 3, 64, 64]
    deep_stack = Finding("TML405", "deep stack", str(path), Location(25, 9), Location(25, 20))
    target = read_target_source("%s:Stack" % path)
    plain_net = model_factory(import_source_variant(target, target.text), target.spec, None, "float32")
    (plain,) = verify_findings(target, [deep_stack], None, shape, measure_training_step(plain_net, shape))
    assert plain.verdict == CONFIRMED and plain.numerics == "identical"
    assert plain.variant == "checkpoint placements (best: every block)"
    assert plain.peak_after < 0.8 * plain.peak_before

    norm = {"norm": True}
    norm_net = model_factory(import_source_variant(target, target.text), target.spec, norm, "float32")
    every_block = checkpoint_placements(norm_net, shape, {"every block": ["blocks.%d" % i for i in range(6)]})
    baseline = measure_training_step(norm_net, shape)
    (batchnorm,) = verify_findings(target, [deep_stack], norm, shape, baseline, placements=every_block)
    # BatchNorm inside a checkpointed block updates its statistics again in backward.
    assert batchnorm.verdict == UNSAFE
    assert batchnorm.numerics.startswith("differs: buffers blocks.0.norm1.num_batches_tracked")


def test_measure_source_variant_measures_the_given_text_with_the_same_weights(tmp_path):
    path = tmp_path / "leaky.py"
    text = (MODELS / "leaky_convnet.py").read_text()
    path.write_text(text)
    spec = "%s:LeakyConvNet" % path
    shape = [8, 3, 64, 64]
    original = measure_source_variant(spec, text, None, shape)
    inplace_text = text.replace("LeakyReLU(0.1)", "LeakyReLU(0.1, inplace=True)")
    inplace = measure_source_variant(spec, inplace_text, None, shape)
    assert original.peak_bytes - inplace.peak_bytes >= ACTIVATION

    target = read_target_source(spec)
    weights = model_factory(import_source_variant(target, text), spec, None, "float32")().state_dict()
    with_weights = measure_source_variant(spec, text, None, shape, state_dict=weights)
    assert with_weights.peak_bytes == original.peak_bytes
    renamed = text.replace("self.head", "self.classifier")
    with pytest.raises(DynamicError, match="unexpected classifier.bias"):
        measure_source_variant(spec, renamed, None, shape, state_dict=weights)


def test_measuring_an_instance_with_aliased_submodules_leaves_its_tensors_real(models):
    unet = models("resnet_unet").UNetResNetNoPool(encoder_depth=18)  # stem parts registered twice
    measure_training_step(unet, [1, 3, 32, 32])
    tensors = list(unet.state_dict(keep_vars=True).values())
    assert all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in tensors)
    assert int(unet.encoder.bn1.num_batches_tracked) == 0


def test_findings_count_only_inside_the_target_and_what_it_uses(tmp_path):
    text = textwrap.dedent(
        """\
        import torch.nn as nn


        def block(channels):
            return nn.Sequential(nn.Conv2d(channels, channels, 3), nn.BatchNorm2d(channels), nn.LeakyReLU())


        LAYOUT = {"small": block}


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = LAYOUT["small"](8)


        class Other(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU())
        """
    )
    path = tmp_path / "two_nets.py"
    path.write_text(text)
    assert target_line_ranges(text, "Net") == [(4, 5), (8, 8), (11, 14)]
    findings = lint_source(text, str(path), ALL_RULES)
    assert sorted(f.location.row for f in findings if f.code == "TML201") == [5, 20]
    inside = findings_in_target(read_target_source("%s:Net" % path), findings)
    assert [f.location.row for f in inside] == [5]


@pytest.mark.parametrize("example", range(len(examples("TML301").invalid)))
def test_stem_pool_variant_of_every_dropped_pool_example(example):
    source = examples("TML301").invalid[example].code
    (finding,) = lint_source(source, "model.py", Settings(select=("TML301",)))
    rewritten = keep_stem_pool(source, finding.location.row, finding.location.column)
    assert rewritten is not None
    variant, what = rewritten
    old, new, expected_what = {
        0: ("self.conv1(input_adjust)", "self.conv1(self.encoder.maxpool(input_adjust))",
            "`self.conv1` fed through `self.encoder.maxpool`"),
        1: ("model.maxpool = nn.Identity()\n", "", "removed `model.maxpool = ...`"),
        2: ("r.relu, r.layer1", "r.relu, r.maxpool, r.layer1", "`r.maxpool` added to the stem"),
        3: ("stride=1", "stride=2", "`enc.conv1` with stride 2"),
        4: ("self.backbone.layer1(x)", "self.backbone.layer1(self.backbone.maxpool(x))",
            "`self.backbone.layer1` fed through `self.backbone.maxpool`"),
        5: ("self.conv2(c1)", "self.conv2(self.encoder.layer0.pool(c1))",
            "`self.conv2` fed through `self.encoder.layer0.pool`"),
        6: ("list(resnet.children())[:3]", "list(resnet.children())[:4]",
            "`list(resnet.children())[:4]` up to the pool"),
        7: ("list(model.children())[:3]", "list(model.children())[:4]",
            "`list(model.children())[:4]` up to the pool"),
    }[example]
    assert (variant, what) == (source.replace(old, new), expected_what)
    assert lint_source(variant, "model.py", Settings(select=("TML301",))) == []


def test_stem_pool_variant_is_not_invented_for_unknown_code():
    source = (
        "import torch.nn as nn\n\n"
        "class Net(nn.Module):\n    def forward(self, x):\n        return self.trunk(x)\n"
    )
    assert keep_stem_pool(source, 5, 16) is None
