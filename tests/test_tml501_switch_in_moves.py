"""A mode switch with moves chained after it is a mode switch: ``model =
from_pretrained(name).eval().to(device)`` (torchao's SmoothQuant example) puts ``model`` in
evaluation mode as ``from_pretrained(name).to(device).eval()`` does, so the calibration loop that
runs it with autograd on is reported (``model_names.bound_mode``). The look-alike
``.train().to(device)`` puts it in training mode, as ``.to(device).train()`` and a ``model.train()``
statement do: quiet, as those are.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "switch_then_moves": """import torch
from transformers import AutoModelForCausalLM


def quantize_and_calibrate(model_id, calibration_data, device):
    model = (
        AutoModelForCausalLM.from_pretrained(model_id, dtype=torch.bfloat16)
        .eval()
        .to(device)
    )
    for batch in calibration_data:
        model(batch.to(device))  # expect: TML501
    return model


def finetune(model_id, loader, device):
    model = AutoModelForCausalLM.from_pretrained(model_id).train().to(device)
    outs = []
    for batch in loader:
        outs.append(model(batch.to(device)).logits.argmax(-1).tolist())  # in training mode on purpose
    return outs
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("switch_in_moves"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
