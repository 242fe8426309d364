"""TML501 where a library function runs the model for the code: monai's
``sliding_window_inference(image, roi_size, sw_batch_size, predictor)`` runs ``predictor`` on
every window and stitches the outputs (fluospotter's and rhizonet's evaluation and prediction
code, measured misses on two held-out sets). The call is the model's run
(``model_helpers.LIBRARY_RUNNERS``): in a loop after ``model.eval()``, and through a helper
that takes the model as a parameter and hands it to the library (``pred_function(image,
model)``), judged at the caller.

Quiet: the same calls under ``torch.no_grad()``, a predictor that is no model the function
knows (a lambda), and a function that trains the model it runs this way."""

from __future__ import annotations

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

EVALUATE = """import numpy as np
import torch
from monai.inferers import sliding_window_inference


def evaluate(model, loader, patch_size, batch_size=2):
    model.eval()
    scores = []
    for batch in loader:
        images = batch["img"]
        preds = sliding_window_inference(images, patch_size, batch_size, model, overlap=0.1).cpu()
        scores.append(preds.argmax(dim=1).numpy().mean())
    return np.mean(scores)


def pred_function(image, model, pred_patch_size):
    return sliding_window_inference(inputs=image, roi_size=pred_patch_size, sw_batch_size=1, predictor=model)


def predict_all(unet, images, pred_patch_size):
    unet.eval()
    masks = []
    for image in images:
        pred = pred_function(image, unet, pred_patch_size)
        masks.append(torch.argmax(pred, dim=1).numpy())
    return masks
"""

ROWS = {("evaluate.py", 11), ("evaluate.py", 24)}


def test_reported_where_the_library_runs_the_model(tmp_path):
    (tmp_path / "evaluate.py").write_text(EVALUATE)
    assert lint_project(tmp_path, "TML501", "--no-cache") == ROWS


@pytest.mark.parametrize("edit", [
    # under no_grad
    ("    model.eval()\n    scores = []\n    for batch in loader:\n",
     "    model.eval()\n    scores = []\n    with torch.no_grad():\n     for batch in loader:\n"),
    # a predictor that is no model the function knows
    (", batch_size, model, overlap=0.1)", ", batch_size, lambda x: x.flip(-1), overlap=0.1)"),
    # the function trains the model it runs this way
    ("        scores.append(preds.argmax(dim=1).numpy().mean())\n",
     "        scores.append(preds.argmax(dim=1).numpy().mean())\n        preds.sum().backward()\n"),
], ids=["no_grad", "lambda", "trains"])
def test_quiet_elsewhere(tmp_path, edit):
    text = EVALUATE.replace(*edit)
    assert text != EVALUATE
    (tmp_path / "evaluate.py").write_text(text)
    assert ("evaluate.py", 11) not in lint_project(tmp_path, "TML501", "--no-cache")
