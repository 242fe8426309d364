"""TML501 follows a method of the class the output is handed to, whatever its name says: a
knowledge-graph model's ``forward_enc_dec`` computes ``score = self.score_func(head, tail)`` and
returns it for the trainer's loss (openukge's UPGAT): ``score_func`` is the model's own scoring,
no metric, and what it returns goes back to the caller, so the method stays quiet. The same
scores printed as a list (``print(self.score_func(head, tail).tolist())``) stay reported, and so
does an output handed to a method named for saving whose reading is lost (``self._save_to_file(seq,
path)`` keeping it on ``self``: musicgen-trainer's ``_save_to_midi``): its name decides then.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "scorer": '''
        import torch.nn as nn


        class Scorer(nn.Module):
            def __init__(self, dim):
                super().__init__()
                self.encoder = nn.Linear(dim, dim)

            def score_func(self, head, tail):
                return (head * tail).sum(-1)

            def forward_enc_dec(self, x, y):
                head = self.encoder(x)
                tail = self.encoder(y)
                score = self.score_func(head, tail)
                return score

            def report_scores(self, x, y):
                head = self.encoder(x)  # expect: TML501
                tail = self.encoder(y)  # expect: TML501
                print(self.score_func(head, tail).tolist())

            def save_generated(self, x, path):
                out = self.encoder(x)  # expect: TML501
                self._save_to_file(out.detach().cpu().numpy(), path)

            def _save_to_file(self, sequence, path):
                self.last_saved = (sequence, path)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("scoring_methods"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
