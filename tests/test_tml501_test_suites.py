"""TML501 leaves the test suite alone, wherever its tests call the model: a top-level
``test_*`` function of a file pytest collects (``encoder_test.py``, ``test_model.py``) and a
method of a test class run the model on purpose, after ``.eval()`` and in loops too (hume-tada's
``test_token_values_are_local`` comparing two outputs). The same names in a training script
are its evaluation code and stay reported: ``def test(model, loader)`` and ``def
test_epoch(...)`` in ``train.py``, GDmicro's ``test_unknown(model, ...)`` in ``gcn_model.py``, a
runner's ``test_model`` method (Lightning's ``test_step`` hook runs without autograd, and a
``test_forward`` that asserts is a test wherever it is: quiet).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = """import torch

from model import Encoder


"""

CASES = {
    "encoder_test": HEAD + """def test_token_values_are_local():
    encoder = Encoder()
    encoder.eval()
    audio1 = torch.randn(1, 24000)
    audio2 = audio1.clone()
    out1, out2 = [encoder(audio) for audio in [audio1, audio2]]
    assert (out1 - out2).abs().mean() < 1e-3


def test_batches(loader):
    encoder = Encoder()
    encoder.eval()
    for x in loader:
        assert encoder(x).shape[0] == x.shape[0]
""",
    "test_model": HEAD + """class TestEncoder:
    def test_eval_outputs(self, loader):
        model = Encoder()
        model.eval()
        for x in loader:
            out = model(x)
            assert out.isfinite().all().item()
""",
    "train": HEAD + """def test(model, loader):
    model.eval()
    correct = 0
    for x, y in loader:
        out = model(x)  # expect: TML501
        correct += (out.argmax(1) == y).sum().item()
    return correct


def test_epoch(model, loader):
    model.eval()
    for x, y in loader:
        print(model(x).argmax(1).tolist())  # expect: TML501
""",
    # GDmicro's gcn_model.py: top-level ``test_*`` functions of a module pytest does not collect
    "gcn_model": HEAD + """def test_unknown(model, features, adj, idx_test):
    model.eval()
    output = model(features, adj)  # expect: TML501
    return torch.exp(output[idx_test]).data.numpy()


def test_new_acc(model, features, adj, labels):
    model.eval()
    output = model(features, adj)  # expect: TML501
    return (output.max(1)[1] == labels).float().mean().item()


class Runner:
    def test_model(self, x):
        self.model.eval()
        return self.model(x).detach().cpu().numpy()  # expect: TML501


def test_forward(model, x):
    model.eval()
    out = model(x)
    assert out.shape == x.shape


class LitEncoder:
    def test_step(self, batch, batch_idx):
        self.model.eval()
        return self.model(batch).detach().cpu().numpy()
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("test_suites"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
