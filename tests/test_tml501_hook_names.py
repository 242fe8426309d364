"""TML501 and the names of Lightning's evaluation hooks: Lightning runs a module's
``validation_step`` / ``test_step`` / ``predict_step`` methods without autograd, but a function
of the module with such a name (DGLD's ``test_step(model, g, ...)``, which calls ``model.eval()``
and runs the model over a loader) is nobody's hook: what it does is read as any function's.
An inflected word of a name (``match_predicted_tree_species``) says evaluation as its stem does."""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "function_named_like_a_hook": '''
        import torch
        from tqdm import tqdm


        def loss_func(adj, x_hat, feat):
            return ((x_hat - feat) ** 2).sum(), (x_hat - feat).abs().sum(1)


        def test_step(model, g, adj, dataloader, device):
            model.eval()
            predict_score = torch.zeros(g.num_nodes())
            for sg in tqdm(dataloader):
                feat = sg.ndata["feat"].to(device)
                indices = sg.ndata["_ID"]
                x_hat = model(sg, adj[indices], feat)  # expect: TML501
                _, score = loss_func(adj[indices], x_hat, feat)
                predict_score[indices] = score.detach().cpu()
            return predict_score.numpy()
    ''',
    # treespec's match_predicted_tree_species: a name's word inflected ("predicted",
    # "evaluating", "inferring") still says evaluation; a function that trains on what it
    # predicts does not
    "inflected_names": '''
        import os

        import torch


        def match_predicted_tree_species(images_dir, classification_model, class_names):
            classification_model.eval()
            found = {}
            for name in os.listdir(images_dir):
                prediction = classification_model.predict(os.path.join(images_dir, name))  # expect: TML501
                found[name] = class_names[prediction["category"]]
            return found


        def fit_predicted_residuals(model, batches, optimizer):
            for x, y in batches:
                predicted = model(x)
                loss = ((predicted - y) ** 2).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
    ''',
    "hook_methods": '''
        import lightning as L
        import torch.nn.functional as F


        class Module(L.LightningModule):
            def __init__(self, model):
                super().__init__()
                self.model = model

            def test_step(self, batch, batch_idx):
                self.model.eval()
                x, y = batch
                self.log("test_loss", F.mse_loss(self.model(x), y).item())

            def validation_step(self, batch, batch_idx):
                self.model.eval()
                x, y = batch
                print(self.model(x).argmax(-1).tolist())
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("tml501_hook_names"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
