"""TML501 on a model handed to a function as a parameter annotated with the project's module
class, imported by absolute name from the package itself (trecover's beam search: ``def
beam_step(candidates, ..., model: TRecover, ...)`` in ``trecover/utils/`` with ``from
trecover.model import TRecover``), whose method returns what its layers make
(``model.predict(chain, src)``): the output becomes ``log_softmax`` scores, ``topk``'s values
made numbers (``float(prob)``) and its indices, iterated together with ``zip`` (each item of
the loop's target gets its own argument's rows). Also in a closure reading the enclosing
function's annotated parameter.

Look-alikes stay quiet: the values kept (appended as tensors), ``zip`` whose result is stored
rather than iterated, a parameter annotated with a class of the package that is no module.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from marked_cases import marked, project_findings

pytestmark = pytest.mark.slow  # starts the CLI

MODEL = '''
import torch.nn as nn


class TRecover(nn.Module):
    def __init__(self, tokens, width):
        super().__init__()
        self.token_size = tokens
        self.embed = nn.Linear(tokens, width)
        self.inv_mapping = nn.Linear(width, tokens)

    def predict(self, chain, encoded_src):
        decoded = self.embed(chain) + encoded_src
        return self.inv_mapping(decoded).transpose(0, 1)


class Vocabulary:
    def predict(self, chain, encoded_src):
        return chain.argmax(-1)
'''

BEAM = '''
from typing import List, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from trecover.model import TRecover, Vocabulary


def beam_step(candidates: List[Tuple[Tensor, float]], step_mask: Tensor, encoded_src: Tensor, model: TRecover, beam_width: int):
    step_candidates = []
    for chain, score in candidates:
        prediction = model.predict(chain, encoded_src)  # expect: TML501
        probabilities = F.log_softmax(prediction[0, -1], dim=-1) + step_mask
        values, indices = probabilities.topk(k=beam_width)
        for prob, pos in zip(values, indices):
            new_token = torch.zeros(1, 1, model.token_size)
            new_token[0, 0, pos] = 1
            step_candidates.append((torch.cat([chain, new_token], dim=1), score + float(prob)))
    return sorted(step_candidates, key=lambda candidate: -candidate[1])[:beam_width]


def async_beam_step(candidates, step_mask: Tensor, encoded_src: Tensor, model: TRecover, beam_width: int):
    step_candidates = []

    def candidate_step(chain: Tensor, score: float) -> None:
        prediction = model.predict(chain, encoded_src)  # expect: TML501
        values, indices = F.log_softmax(prediction[0, -1], dim=-1).topk(k=beam_width)
        for prob, pos in zip(values, indices):
            step_candidates.append((pos.item(), score + float(prob)))

    for chain, score in candidates:
        candidate_step(chain, score)
    return step_candidates


def kept_step(candidates, encoded_src: Tensor, model: TRecover, beam_width: int):
    kept = []
    for chain, score in candidates:
        values, indices = model.predict(chain, encoded_src)[0, -1].topk(k=beam_width)
        for prob, pos in zip(values, indices):
            kept.append(prob)
    return kept


def zipped_step(candidates, encoded_src: Tensor, model: TRecover, beam_width: int):
    rows = []
    for chain, score in candidates:
        values, indices = model.predict(chain, encoded_src)[0, -1].topk(k=beam_width)
        rows.append(list(zip(values, indices)))
    return rows


def vocabulary_step(candidates, encoded_src: Tensor, vocabulary: Vocabulary):
    return [float(vocabulary.predict(chain, encoded_src).max()) for chain, _ in candidates]
'''


def test_a_model_annotated_with_the_packages_class(tmp_path: Path):
    package = tmp_path / "trecover"
    (package / "utils").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "utils" / "__init__.py").write_text("")
    (package / "model.py").write_text(MODEL)
    (package / "utils" / "beam_search.py").write_text(BEAM)
    expected = {("beam_search.py", row) for row, _ in marked(BEAM)}
    assert project_findings(tmp_path, "TML501") == expected
