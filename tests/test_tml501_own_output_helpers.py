"""TML501 on a module class's evaluation method that runs the module through a method of its own
class (``batch_preds = self._get_model_output(texts)``, where ``_get_model_output`` returns
``self.forward(indexed)``): a run of the module, judged as ``self(x)`` is (measured misses on a
held-out set: caver's ``LSTM.predict`` and ``CNN.predict``, whose outputs only reach ``topk``
indices). And a method a file of the project calls is left to that caller only when the caller
decides something: ``CaverModel.predict`` handing ``self._inside_model.predict(texts)`` on with
autograd on, itself evaluation code nobody calls under ``no_grad``, decides nothing.

Quiet: a helper the forward itself runs, a helper whose result is returned (the caller decides),
a method that other methods of the file call, and one an importing file calls under
``torch.no_grad()``."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Dict

import pytest

from marked_cases import lint_cases, marked
from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

CLASSIFIER = '''
    import torch
    import torch.nn as nn


    class Classifier(nn.Module):
        def __init__(self, vocab):
            super().__init__()
            self.vocab = vocab
            self.embed = nn.EmbeddingBag(len(vocab), 8)
            self.fc = nn.Linear(8, 4)

        def forward(self, indexed):
            return self.fc(self.embed(indexed))

        def labels(self, index):
            return [[self.vocab[i] for i in row] for row in index.tolist()]

        def predict(self, texts, top_k=2):
            batch_preds = self._get_model_output(texts)  # expect: TML501
            _, index = torch.topk(torch.sigmoid(batch_preds), k=top_k, dim=1)
            return self.labels(index)

        def predict_prob(self, texts):
            batch_preds = self._get_model_output(texts)
            return torch.softmax(batch_preds, dim=1)

        def _get_model_output(self, texts):
            indexed = torch.LongTensor([[self.vocab.index(w) for w in t.split()] for t in texts])
            batch_preds = self.forward(indexed)
            return batch_preds
'''

CASES: Dict[str, str] = {
    "helper_returning_forward": CLASSIFIER,
    "helper_returning_a_submodule_output": '''
        import torch.nn as nn


        class Encoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 4)

            def forward(self, x):
                return self.body(x)

            def _encode(self, x):
                return self.body(x.float())

            def embed(self, x):
                return self._encode(x).detach().cpu().numpy()  # expect: TML501
    ''',
    # look-alikes
    "helper_run_by_forward": '''
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 2)

            def _logits(self, x):
                return self.body(x)

            def forward(self, x):
                return self._scores(x)

            def _scores(self, x):
                return self._logits(x).argmax(1)
    ''',
    "method_called_by_another_method": '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 2)

            def forward(self, x):
                return self.body(x)

            def _output(self, x):
                return self.forward(x)

            def predict(self, x):
                return self._output(x).argmax(1).tolist()

            def fit_step(self, x, y, opt):
                with torch.no_grad():
                    guess = self.predict(x)
                return guess
    ''',
    "helper_that_turns_autograd_off": '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 2)

            def forward(self, x):
                return self.body(x)

            def _output(self, x):
                with torch.no_grad():
                    return self.forward(x)

            def predict(self, x):
                return self._output(x).argmax(1).tolist()
    ''',
    # torchify's `performance`: `self.predict(dataset)`, whose helper runs the model under no_grad
    "method_whose_helper_turns_autograd_off": '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = nn.Linear(4, 2)

            def forward(self, x):
                return self.body(x)

            def _predict_from_tensor(self, x):
                with torch.no_grad():
                    return self(x).argmax(1)

            def predict(self, x):
                return self._predict_from_tensor(x)

            def performance(self, x, y):
                self.eval()
                predictions = self.predict(x)
                return (predictions == y).float().mean().item()
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("own_output_helpers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


WRAPPER = """import torch

from .classifier import Classifier


class Wrapper(object):
    def __init__(self, vocab):
        self._inside_model = Classifier(vocab)
        self._inside_model.eval()

{decorator}    def predict(self, texts, top_k=2):
        return self._inside_model.predict(texts, top_k=top_k)
"""


def _project(root: Path, decorator: str) -> Path:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "classifier.py").write_text(textwrap.dedent(CLASSIFIER).lstrip("\n").replace("  # expect: TML501", ""))
    (package / "wrapper.py").write_text(WRAPPER.format(decorator=decorator))
    return root


ROW = [line.strip() for line in CLASSIFIER.strip("\n").splitlines()].index(
    "batch_preds = self._get_model_output(texts)  # expect: TML501") + 1


WRAPPER_ROW = WRAPPER.splitlines().index("        return self._inside_model.predict(texts, top_k=top_k)") + 1


def test_an_importer_calling_it_from_open_evaluation_decides_nothing(tmp_path):
    # (the wrapper's own call of the evaluated model is reported too: either `no_grad` fixes it)
    assert lint_project(_project(tmp_path, ""), "TML501", "--no-cache") == {
        ("classifier.py", ROW), ("wrapper.py", WRAPPER_ROW)}


def test_an_importer_calling_it_under_no_grad_decides(tmp_path):
    assert lint_project(_project(tmp_path, "    @torch.no_grad()\n"), "TML501", "--no-cache") == set()
