"""TML601's fix verified by `torchmemlint profile`: eager attention -> SDPA, measured and
numerics-checked on the small LM of fixtures/models/attention.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from torchmemlint.config import Settings
from torchmemlint.dynamic.emulate import EFFICIENT, NATIVE_DROPOUT
from torchmemlint.dynamic.source import measure_source_variant, read_target_source
from torchmemlint.dynamic.verify import CONFIRMED, run_profile
from torchmemlint.engine import lint_source
from torchmemlint.fixer import apply_edits

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "models" / "attention.py"
B, S = 4, 128
HEADS, LAYERS = 4, 2  # small_lm()


def fixed_text() -> str:
    text = FIXTURE.read_text()
    (finding,) = lint_source(text, str(FIXTURE), Settings(select=("TML601",)))
    return apply_edits(text, finding.fix.edits)


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_fix_is_confirmed_with_the_bytes_of_the_attention_weights(causal):
    spec = "%s:small_lm" % FIXTURE
    result = run_profile(spec, [[B, S, "int64"]], {"causal": causal}, settings=Settings(select=("TML601",)), device="cpu")
    (verdict,) = result.findings
    assert verdict.code == "TML601"
    assert verdict.verdict == CONFIRMED, verdict
    assert verdict.variant == "unsafe fix: Use F.scaled_dot_product_attention"
    # numerics compared after one real training step (dropout on, same seed)
    assert verdict.numerics == "identical" or verdict.numerics.startswith("within"), verdict.numerics
    # Eager attention keeps per layer the softmax output (4 B), the dropout mask (1 B) and
    # the dropped weights (4 B) per B*H*S*S element; the fix saves most of that.
    weights = B * HEADS * S * S
    assert verdict.saved >= 0.8 * LAYERS * 9 * weights, verdict.saved
    # the saving doubles with the batch (fake tensors, batch 8)
    assert verdict.scaling[1][0] == 2 * B and verdict.scaling[1][1] >= 1.9 * verdict.saved
    # the variant measured is the fixed source, with CUDA's kernels emulated
    after = measure_source_variant(read_target_source(spec), fixed_text(), {"causal": causal}, [B, S, "int64"])
    assert after.peak_bytes == verdict.peak_after
    assert after.emulated[EFFICIENT] == LAYERS
    assert result.report.emulated[NATIVE_DROPOUT] == 4 * LAYERS  # attention weights + 3 module dropouts


def test_fixed_model_computes_what_the_eager_one_does():
    """Without dropout (eval), the fixed model's outputs and gradients match within float32 rounding."""
    target = read_target_source("%s:small_lm" % FIXTURE)
    from torchmemlint.dynamic.source import import_source_variant

    eager_module = import_source_variant(target, target.text)
    fixed_module = import_source_variant(target, fixed_text())
    torch.manual_seed(0)
    eager = eager_module.small_lm().eval()
    fixed = fixed_module.small_lm().eval()
    fixed.load_state_dict(eager.state_dict())
    ids = torch.randint(0, 1000, (2, 32))
    out_a, out_b = eager(ids), fixed(ids)
    torch.testing.assert_close(out_a, out_b, atol=1e-5, rtol=1e-4)
    out_a.square().mean().backward()
    out_b.square().mean().backward()
    for (name, a), (_, b) in zip(eager.named_parameters(), fixed.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_profile_cli_reports_the_confirmed_fix_as_json():
    command = [
        sys.executable, "-m", "torchmemlint", "profile", "%s:small_lm" % FIXTURE,
        "--input-shape", "2,64,int64", "--device", "cpu", "--select", "TML601", "--isolated",
        "--output-format", "json",
    ]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    (finding,) = json.loads(run.stdout)["findings"]
    assert (finding["code"], finding["verdict"]) == ("TML601", "confirmed")
    assert finding["peak_after"] < finding["peak_before"]
