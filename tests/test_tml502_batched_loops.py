"""TML502 over batches cut by hand, and over a helper that runs the model it is handed.

A loop over ``range(0, len(data), batch_size)`` (the step), ``range(n // bs)`` or
``range(math.ceil(n / batch_size))`` (the count), ``torch.split(x, batch_size)`` or
``chunked(items, bs)`` (the batches) iterates batches as a loader does: an evaluation that
appends every batch's output and concatenates them after the loop keeps every batch's graph
(chebai's ``evaluate_model``), not one batch's items. A helper of the file handed the model
(``preds, labels = _run_batch(data[i:i + bs], model, collate)``) runs it: what it returns of
the output is a model output of each iteration, element by element.

Under ``torch.set_grad_enabled(phase == "train")`` around a backward (aisee's trainer, the
fine-tuning tutorial's loop) autograd is on in the train phase: the outputs joined to an
accumulator across batches keep their graphs. Look-alikes stay quiet: the same mode set by a
flag around no backward (it may be off), ``range(batch_size)`` (the items of one batch, stacked after the
loop), the same loops under ``torch.no_grad()``, a helper handed the model that returns only
what it was given or what a method of the model makes of the outputs (torchify's
``validation_epoch_end``: numbers), the element of a helper's tuple that is not the output (the
labels), and (TML501) a model method per batch whose own definition in the file is
``@torch.no_grad()`` (uncorrupt-smiles' ``generate``).

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
    # aisee's trainer, torchvision's fine-tuning tutorial loop: autograd on in the train phase,
    # where the backward inside ``set_grad_enabled(phase == "train")`` runs
    "grad_enabled_by_phase": HEAD + """def train(model, dataloaders, criterion, optimizer, epochs):
    for epoch in range(epochs):
        for phase in ["train", "val"]:
            epoch_outputs = torch.tensor([])
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == "train"):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == "train":
                        loss.backward()
                        optimizer.step()
                epoch_outputs = torch.cat((epoch_outputs, outputs), 0)  # expect: TML502
                running_corrects += torch.sum(preds == labels.data)
            print(epoch_outputs.detach().numpy().mean(), running_corrects.item())


def evaluate(model, loader, use_grad):
    outputs_all = torch.tensor([])
    for inputs, _ in loader:
        with torch.set_grad_enabled(use_grad):
            outputs = model(inputs)
        outputs_all = torch.cat((outputs_all, outputs), 0)
    return outputs_all
""",
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
    # torchify's fit_one_cycle: the helper returns what a method of the model makes of the
    # outputs (``validation_epoch_end``: numbers), not an output
    "helper_returns_a_summary": HEAD + """def evaluate_model(model, val_loader):
    model.eval()
    outputs = [model.validation_step(batch) for batch in val_loader]  # expect: TML502
    return model.validation_epoch_end(outputs)


def fit(model, train_loader, val_loader, optimizer, epochs):
    history = []
    for epoch in range(epochs):
        for batch in train_loader:
            loss = model.training_step(batch)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        result = evaluate_model(model, val_loader)
        history.append(result)
    return history
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


TML501_CASES = {
    # uncorrupt-smiles' fix_smiles: the batches of a list, a model method per batch after eval()
    "own_generate": """import torch
from torch import nn


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Linear(8, 8)

    @torch.no_grad()
    def generate(self, src):
        return self.encoder(src).argmax(-1)

    def run_ids(self, src):
        return self.encoder(src)

    def fix(self, items, batch_size=64):
        self.eval()
        results = []
        for start in range(0, len(items), batch_size):
            ids = self.generate(items[start:start + batch_size])
            results.extend(ids.tolist())
        return results

    def fix_plain(self, items, batch_size=64):
        self.eval()
        results = []
        for start in range(0, len(items), batch_size):
            logits = self.run_ids(items[start:start + batch_size])  # expect: TML501
            results.extend(logits.argmax(-1).tolist())
        return results
""",
}


@pytest.fixture(scope="module")
def found_501(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("batched_loops_501"), TML501_CASES, "TML501")


@pytest.mark.parametrize("name", sorted(TML501_CASES))
def test_a_model_method_per_batch_is_judged_by_its_own_autograd(found_501, name):
    """A model's method run on each batch after ``eval()`` is reported, unless the file's own
    definition of that method turns autograd off (``@torch.no_grad() def generate``)."""
    assert set(found_501[name]) == marked(TML501_CASES[name])
