"""TML501 where the model is switched through a chain of moves and its part is called with
keywords only: lobster's perplexity script, ``model.to(device).eval()`` (each move returns the
module itself, so ``model`` is in evaluation mode) and then, on every batch of the loader,
``model.model(input_ids=..., attention_mask=..., labels=...)["loss"].detach()`` (a part named
as a model takes its inputs by keyword, as transformers' models do).

Look-alikes stay quiet: the same loop under ``torch.no_grad()``, the model moved and switched
back to training (``model.to(device).train()``), a method of the model called with keywords
that is not named as a model (``model.configure(name="x")``).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "perplexity": '''
        import math

        import torch


        def perplexity(model_cls, checkpoint, loader, device):
            model = model_cls.load_from_checkpoint(checkpoint).to(device)
            model.to(device).eval()
            total = 0.0
            for batch in loader:
                loss = model.model(input_ids=batch["ids"], labels=batch["labels"])["loss"].detach()  # expect: TML501
                total += loss.item()
            return math.exp(total / len(loader))


        def perplexity_quietly(model_cls, checkpoint, loader, device):
            model = model_cls.load_from_checkpoint(checkpoint).to(device)
            model.to(device).eval()
            total = 0.0
            with torch.no_grad():
                for batch in loader:
                    total += model.model(input_ids=batch["ids"], labels=batch["labels"])["loss"].item()
            return math.exp(total / len(loader))


        def fine_tune_scores(model_cls, checkpoint, loader, device):
            model = model_cls.load_from_checkpoint(checkpoint).to(device)
            model.to(device).train()
            total = 0.0
            for batch in loader:
                total += model.model(input_ids=batch["ids"], labels=batch["labels"])["loss"].detach().item()
            return total


        def configured(model_cls, checkpoint, loader, device):
            model = model_cls.load_from_checkpoint(checkpoint).to(device)
            model.to(device).eval()
            names = []
            for batch in loader:
                names.append(model.configure(name=batch["name"]).detach().numpy())
            return names
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("keyword_parts"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
