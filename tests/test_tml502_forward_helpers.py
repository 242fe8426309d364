"""TML502 leaves alone a method that the module's own ``forward`` runs: what it collects over a
loop is the training forward's (nano-deepseek-v4's ``_mtp_forward`` appends each multi-token
prediction head's logits over ``enumerate(self.mtp_modules)`` and returns them with the loss
``forward`` trains on). The same accumulation in evaluation code outside the module, over the
batches of a loader, is still reported.

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "multi_token_prediction_in_forward": """import torch
from torch import nn
import torch.nn.functional as F


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.mtp_modules = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.lm_head = nn.Linear(4, 10)

    def _mtp_forward(self, hidden, labels):
        mtp_logits = []
        losses = []
        previous = hidden
        for depth, module in enumerate(self.mtp_modules, start=1):
            previous = module(previous)
            logits = self.lm_head(previous)
            mtp_logits.append(logits)
            losses.append(F.cross_entropy(logits, labels))
        loss = torch.stack(losses).mean() if losses else None
        return mtp_logits, loss

    def forward(self, x, labels):
        logits = self.lm_head(x)
        mtp_logits, mtp_loss = self._mtp_forward(x, labels)
        return logits, mtp_loss
""",
    "the_same_collection_over_a_loader": """import torch
from torch import nn


def collect_logits(model: nn.Module, loader):
    all_logits = []
    for x, _ in loader:
        logits = model(x)
        all_logits.append(logits)  # expect: TML502
    return torch.cat(all_logits).softmax(-1).numpy()
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("forward_helpers"), CASES, "TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
