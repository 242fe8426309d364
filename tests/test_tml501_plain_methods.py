"""TML501 and a method of the model's class that runs no module (``module_calls.runs_no_module``).

In an evaluation loop a model wrapper is often asked for more than its output: fusilli's
``new_model.get_data_from_batch(batch)`` unpacks the batch, ``new_model.safe_squeeze(out)``
squeezes a tensor already computed. Where the receiver is built in the function from a class of
this file or of another project file (by relative or absolute import) and that class's own
method calls only builtins and data methods, the call records no graph: only the call that runs
the model is reported. A method that runs the model (``self.model(x)``, through another method),
one the class inherits, one that calls a helper, and a method of a wrapper handed in as a
parameter stay reported; so does the unpacking method once the class's file makes it run the
model (the result cache keys the finding by that file)."""

from __future__ import annotations

from pathlib import Path

from project_cli import lint_project

WRAPPER = '''import torch
from torch import nn


class Wrapper(nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    @staticmethod
    def safe_squeeze(tensor):
        if len(tensor.shape) > 1 and tensor.shape[1] == 1:
            return tensor.squeeze(1)
        return tensor

    def get_data_from_batch(self, batch):
        if self.model.kind == "graph":
            x = (batch.x, batch.edge_index)
            y = batch.y
        else:
            if len(batch) < 2:
                raise ValueError("a batch holds inputs and labels")
            x = tuple(batch[:-1])
            y = batch[-1]
        return x, y

    def outputs(self, x):
        return self.model(x)

    def outputs_and_loss(self, x, y):
        out = self.outputs(x)
        return nn.functional.mse_loss(out, y), out

    def prepare(self, batch):
        return preprocess(batch)


def preprocess(batch):
    return batch
'''

EVALUATE = '''import torch

from {source} import Wrapper


def evaluate_folds(net, dataloader):
    new_model = Wrapper(net)
    new_model.eval()
    preds, reals = [], []
    for batch in dataloader:
        x, y = new_model.get_data_from_batch(batch)
        loss, out = new_model.outputs_and_loss(x, y)  # RUNS
        preds.append(new_model.safe_squeeze(out).cpu().detach())
        reals.append(new_model.safe_squeeze(y).cpu().detach())
    return torch.cat(preds), torch.cat(reals)


def evaluate_prepared(net, dataloader):
    new_model = Wrapper(net)
    new_model.eval()
    preds = []
    for batch in dataloader:
        x = new_model.prepare(batch)  # HELPER
        preds.append(new_model.outputs(x).cpu())  # OUTPUTS
    return preds


def evaluate_inherited(net, dataloader):
    new_model = Wrapper(net)
    new_model.eval()
    preds = []
    for batch in dataloader:
        preds.append(new_model.forward_features(batch).cpu())  # INHERITED
    return preds


def evaluate_given(new_model, dataloader):
    new_model.eval()
    preds = []
    for batch in dataloader:
        x, y = new_model.get_data_from_batch(batch)  # GIVEN
        preds.append(new_model.outputs(x).cpu())  # GIVEN_OUTPUTS
    return preds
'''


def _rows(text: str, *markers: str) -> set:
    return {n for n, line in enumerate(text.splitlines(), 1) if any(line.endswith("# " + m) for m in markers)}


REPORTED = ("RUNS", "HELPER", "OUTPUTS", "INHERITED", "GIVEN", "GIVEN_OUTPUTS")


def _project(root: Path, source: str) -> str:
    package = root / "fuse"
    (package / "models").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "models" / "__init__.py").write_text("")
    (package / "models" / "base.py").write_text(WRAPPER)
    text = EVALUATE.format(source=source)
    (package / "evaluate.py").write_text(text)
    return text


def test_methods_that_run_no_module_are_quiet_by_absolute_import(tmp_path: Path) -> None:
    text = _project(tmp_path, "fuse.models.base")
    expected = {("evaluate.py", row) for row in _rows(text, *REPORTED)}
    assert lint_project(tmp_path, "TML501") == expected
    # the class's file changes: the unpacking method now runs the model, from a warm cache too
    cache = str(tmp_path / "cache")
    assert lint_project(tmp_path, "TML501", "--cache-dir", cache) == expected
    base = tmp_path / "fuse" / "models" / "base.py"
    base.write_text(WRAPPER.replace("            y = batch[-1]\n", "            y = self.model(batch[-1])\n"))
    unpacking = {n for n, line in enumerate(text.splitlines(), 1) if "= new_model.get_data_from_batch" in line}
    assert lint_project(tmp_path, "TML501", "--cache-dir", cache) == expected | {("evaluate.py", row) for row in unpacking}


def test_methods_that_run_no_module_are_quiet_by_relative_import(tmp_path: Path) -> None:
    text = _project(tmp_path, ".models.base")
    assert lint_project(tmp_path, "TML501") == {("evaluate.py", row) for row in _rows(text, *REPORTED)}


def test_methods_that_run_no_module_are_quiet_in_the_same_file(tmp_path: Path) -> None:
    text = WRAPPER + "\n\n" + EVALUATE.format(source="os").replace("from os import Wrapper\n", "")
    (tmp_path / "evaluate.py").write_text(text)
    assert lint_project(tmp_path, "TML501") == {("evaluate.py", row) for row in _rows(text, *REPORTED)}


REPORTER = '''class Reporter:
    def __init__(self):
        self.stats = {}

    def sort_epochs(self, key):
        return sorted(self.stats[key], key=lambda epoch: self.stats[key][epoch])

    def get_best_epoch(self, key, nbest=0):
        return self.sort_epochs(key)[nbest]

    def load_state_dict(self, state):
        self.stats = dict(state)
'''

RUN = '''import torch

from fuse.reporter import Reporter


def run(model, epochs, path):
    reporter = Reporter()
    reporter.load_state_dict(torch.load(path))
    for epoch in range(epochs):
        best_epoch = reporter.get_best_epoch("loss")
        if best_epoch == epoch:
            torch.save(model.state_dict(), path)
'''


def test_a_method_of_a_plain_class_of_the_package_is_not_a_model_run(tmp_path: Path) -> None:
    """ESPnet's trainer: ``reporter.get_best_epoch(...)`` returns what another of its methods
    returns, and the trainer loads its state (``reporter.load_state_dict(...)``, as a module's),
    but ``Reporter`` (imported by absolute name from the package) is no module: the comparison
    of its result is not a model output reaching a sink."""
    package = tmp_path / "fuse"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "reporter.py").write_text(REPORTER)
    (package / "trainer.py").write_text(RUN)
    assert lint_project(tmp_path, "TML501") == set()
