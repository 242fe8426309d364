"""TML502 over batches cut by hand, and over a helper that runs the model it is handed.

A loop over ``range(0, len(data), batch_size)`` (the step), ``range(n // bs)`` or
``range(math.ceil(n / batch_size))`` (the count), ``torch.split(x, batch_size)`` or
``chunked(items, bs)`` (the batches) iterates batches as a loader does: an evaluation that
appends every batch's output and concatenates them after the loop keeps every batch's graph
(chebai's ``evaluate_model``), not one batch's items. A helper of the file handed the model
(``preds, labels = _run_batch(data[i:i + bs], model, collate)``) runs it: what it returns of
the output is a model output of each iteration, element by element.

Look-alikes stay quiet: ``range(batch_size)`` (the items of one batch, stacked after the
loop), the same loops under ``torch.no_grad()``, a helper handed the model that returns only
what it was given, and the element of a helper's tuple that is not the output (the labels).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

HEAD = """import math

import torch
from more_itertools import chunked


"""

CASES = {
    # chebai's evaluate_model: a helper runs the model handed to it, per slice of the data
    "helper_handed_the_model": HEAD + """def _run_batch(batch, model, collate):
    collated = collate(batch)
    output = model(collated)
    return output.sigmoid(), collated


def evaluate_model(model, data_list, collate, batch_size):
    model.eval()
    preds_list = []
    labels_list = []
    for i in range(0, len(data_list), batch_size):
        preds, labels = _run_batch(data_list[i : i + batch_size], model, collate)
        preds_list.append(preds)  # expect: TML502
        labels_list.append(labels)
    return torch.cat(preds_list), torch.cat(labels_list)
""",
    "range_step": HEAD + """def predict(net, x, bs=64):
    net.eval()
    outs = []
    for start in range(0, x.shape[0], bs):
        out = net(x[start:start + bs])
        outs.append(out.softmax(-1))  # expect: TML502
    return torch.cat(outs)
""",
    "range_count": HEAD + """class Scorer:
    def score(self, model, x):
        scores = []
        for i in range(math.ceil(len(x) / self.batch_size)):
            chunk = x[i * self.batch_size:(i + 1) * self.batch_size]
            scores.append(model(chunk))  # expect: TML502
        return torch.cat(scores).numpy()
""",
    "split_batches": HEAD + """def embed_all(model, x, batch_size=128):
    model.eval()
    embeddings = []
    for part in torch.split(x, batch_size):
        embeddings.append(model(part))  # expect: TML502
    return torch.cat(embeddings)


def embed_items(model, items, bs=32):
    model.eval()
    out = []
    for group in chunked(items, bs):
        out.append(model(torch.stack(group)))  # expect: TML502
    return torch.cat(out)
""",
    # look-alikes
    "items_of_one_batch": HEAD + """def per_item(model, x, batch_size):
    model.eval()
    rows = []
    for b in range(batch_size):
        rows.append(model(x[b:b + 1]))
    return torch.stack(rows)
""",
    "under_no_grad": HEAD + """def _run_batch(batch, model):
    return model(batch)


@torch.no_grad()
def evaluate(model, data, batch_size):
    model.eval()
    preds = []
    for i in range(0, len(data), batch_size):
        preds.append(_run_batch(data[i:i + batch_size], model))
    return torch.cat(preds)


def evaluate_inline(model, data, batch_size):
    model.eval()
    preds = []
    with torch.no_grad():
        for i in range(0, len(data), batch_size):
            preds.append(model(data[i:i + batch_size]))
    return torch.cat(preds)
""",
    "helper_returns_the_input": HEAD + """def _prepare(batch, model):
    model.to(batch.device)
    return batch * 2


def gather(model, data, batch_size):
    kept = []
    for i in range(0, len(data), batch_size):
        kept.append(_prepare(data[i:i + batch_size], model))
    return torch.cat(kept)
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("batched_loops"), CASES, "TML502")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
