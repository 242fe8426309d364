"""Verdicts are relative to the peak (1 %, no absolute floor) and show how a
saving scales with the batch (issue 11)."""

from __future__ import annotations

from pathlib import Path

from torchmemlint.config import Settings
from torchmemlint.dynamic.report import format_text, scaling_text
from torchmemlint.dynamic.verify import CONFIRM_FRACTION, run_profile, significant_saving
import pytest

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

DCGAN = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "dcgan.py"
KIB = 1024


def test_threshold_is_relative_at_any_size():
    assert CONFIRM_FRACTION == 0.01
    assert significant_saving(6 * 1024 * KIB, 5 * 1024 * KIB + 512 * KIB)  # 512 KiB of 6 MiB
    assert significant_saving(1000, 990) and not significant_saving(1000, 991)
    assert not significant_saving(0, 0)


def test_small_real_saving_is_confirmed_and_its_scaling_printed():
    result = run_profile("%s:Discriminator" % DCGAN, [[4, 3, 64, 64]], settings=Settings(select=("TML201",)))
    verdicts = {finding.row: finding for finding in result.findings}
    first, last = verdicts[16], verdicts[25]
    # under 1 MiB, but 5.2 % of the peak: confirmed
    assert first.peak_before - first.peak_after == 768 * KIB
    assert first.verdict == "confirmed" and first.numerics == "identical"
    assert first.scaling == [[4, 768 * KIB], [8, 2048 * KIB]]
    # the last LeakyReLU's activation is not live at the peak: nothing saved, at either batch
    assert last.verdict == "refuted" and last.scaling == [[4, 0], [8, 0]]
    text = format_text(result)
    assert "saves 768.00 KiB (5.2 %) at batch 4, 2.00 MiB at batch 8: +320.00 KiB per sample" in text
    assert "does not grow with the batch" in text
    assert result.to_dict()["findings"][0]["scaling"] == first.scaling


def test_scaling_text_signs():
    assert scaling_text([[2, 1024], [4, 512]], 10240).endswith("-256 B per sample")


UNET = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "resnet_unet.py"


def test_stem_pool_variant_for_an_encoder_local_to_init():
    """``encoder = resnet(); self.input_adjust = Sequential(encoder.conv1, ...);
    self.conv1 = encoder.layer1``: the pool is kept as an attribute next to the
    alias, and the variant loads the original's weights strictly."""
    import torch

    from torchmemlint.dynamic.measure import measure_training_step
    from torchmemlint.dynamic.verify import (
        import_source_variant, keep_stem_pool, measure_source_variant, model_factory,
        read_target_source,
    )

    target = read_target_source("%s:UNetLocalEncoder" % UNET)
    row = next(number for number, line in enumerate(target.text.splitlines(), 1)
               if "nn.Sequential(encoder.conv1, encoder.bn1, encoder.relu)" in line)
    variant, what = keep_stem_pool(target.text, row, 29)
    assert what == "`self.conv1` fed through `encoder.maxpool` (kept as `self._stem_pool`)"
    assert "self._stem_pool = encoder.maxpool" in variant
    assert "conv1 = self.conv1(self._stem_pool(input_adjust))" in variant
    args, shape = {"encoder_depth": 18}, [2, 3, 64, 64]
    torch.manual_seed(0)
    original = model_factory(import_source_variant(target, target.text), target.spec, args, "float32")()
    after = measure_source_variant(target, variant, args, shape, state_dict=original.state_dict())
    before = measure_training_step(original, shape)
    assert after.param_bytes == before.param_bytes
    assert after.peak_bytes < 0.95 * before.peak_bytes  # 60,659,200 vs 65,803,776 B
