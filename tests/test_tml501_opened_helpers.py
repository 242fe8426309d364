"""TML501 in a helper that one caller runs under ``torch.no_grad()`` and another runs with
autograd on from evaluation code (hypermodule's ``_predict_image``: ``_predict_dataloader``
wraps its loop in ``no_grad``, ``predict(images)`` calls it directly after
``self.model.eval()``): the open caller records the graph, so the helper's model call is
reported (``module_calls.opened_by_caller``).

Look-alikes stay quiet: a helper every caller runs under ``no_grad``, one whose other caller
trains on what it returns, and one whose open caller is a method of a class deriving from a
base of another file or library (ultralytics' predictors: ``BasePredictor`` runs ``inference``
under inference mode)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CLASS = '''
    import torch
    from torch.nn.functional import softmax


    class HyperModule:
        def __init__(self, model, optimizer):
            self.model = model
            self.optimizer = optimizer

        def predict(self, images=None, loader=None):
            self.model.eval()
            if loader is not None:
                return self._predict_loader(loader)
            return {direct}

        def _predict_image(self, images):
            logits = self.model(images){mark}
            return torch.argmax(softmax(logits, dim=1), dim=1)

        def _predict_loader(self, loader):
            with torch.no_grad():
                return [self._predict_image(images) for images, _ in loader]
'''

LIBRARY_BASE = '''
    import torch
    from ultralytics.engine.predictor import BasePredictor


    class SAMPredictor(BasePredictor):
        def inference(self, images):
            return self._inference_features(self.get_im_features(images))

        def _inference_features(self, features):
            return self.model.forward_grounding(features)

        def batch_inference(self, batches):
            with torch.no_grad():
                return [self._inference_features(features) for features in batches]
'''

CASES: Dict[str, str] = {
    "library_base_runs_it": LIBRARY_BASE,
    "opened_by_predict": CLASS.format(direct="self._predict_image(images)", mark="  # expect: TML501"),
    "every_caller_under_no_grad": CLASS.format(direct="self._predict_loader([(images, None)])", mark=""),
    # (what it returns carries the graph there: the probabilities, not their argmax, which no loss could train on)
    "other_caller_trains": CLASS.format(direct="self._predict_loader([(images, None)])", mark="").replace(
        "return torch.argmax(softmax(logits, dim=1), dim=1)", "return softmax(logits, dim=1)") + '''
        def fit(self, images, labels):
            self.model.train()
            scores = self._predict_image(images)
            loss = (scores.float() - labels).pow(2).mean()
            loss.backward()
            self.optimizer.step()
''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("opened_helpers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
