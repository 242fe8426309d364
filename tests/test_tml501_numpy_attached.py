"""TML501 stays quiet where the model's output reaches ``.numpy()`` with its graph: torch raises
there ("Can't call numpy() on Tensor that requires grad") unless the output carries no graph, so
code that runs records none (measured miss of precision on a held-out set: hummingbird's
containers, ``self.model.forward(*inputs)[0].cpu().numpy().ravel()``, whose executor turns
autograd off itself). ``module_calls.runs_no_module`` asks the sink follower
(``Reach.attached_numpy``).

Still reported: a ``.detach()``, ``.data`` or ``.argmax()`` before ``.numpy()`` (what they give
never requires grad, so they prove nothing of the output), and ``.tolist()`` (torch allows it on
a tensor that requires grad)."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "quiet_numpy_without_detach": '''
        import torch


        class Container:
            def __init__(self, model):
                self.model = model

            def _predict(self, *inputs):
                return self.model.forward(*inputs)[0].cpu().numpy().ravel()

            def _predict_proba(self, *inputs):
                return self.model.forward(*inputs)[1].cpu().numpy()


        def predict(model, loader):
            model.eval()
            preds = []
            for x in loader:
                probs = torch.softmax(model(x), dim=1)
                preds.append(probs.cpu().numpy())
            return preds
    ''',
    "detached_or_indices_first": '''
        import torch


        def predict(model, loader):
            model.eval()
            preds = []
            for x in loader:
                preds.append(model(x).detach().cpu().numpy())  # expect: TML501
            return preds


        def classify(model, loader):
            model.eval()
            labels = []
            for x in loader:
                labels.append(model(x).argmax(1).cpu().numpy())  # expect: TML501
            return labels


        def evaluate(model, loader):
            model.eval()
            scores = []
            for x in loader:
                scores.extend(model(x).softmax(1).cpu().tolist())  # expect: TML501
            return scores
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("numpy_attached"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_torch_refuses_numpy_on_a_tensor_that_requires_grad():
    """The fact the rule relies on, checked against torch where it is installed."""
    torch = pytest.importorskip("torch")
    out = torch.nn.Linear(3, 2)(torch.randn(4, 3))
    with pytest.raises(RuntimeError):
        out.cpu().numpy()
    assert out.softmax(1).tolist() and out.argmax(1).numpy().shape == (4,)
