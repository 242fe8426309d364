"""A helper of the file that is handed the model and switches that parameter to evaluation mode
(a top-level ``model.eval()`` in its body, nothing switching it back) leaves the caller's model in
evaluation mode, as ``model.eval()`` in the caller would (``returned_mode.left_in_eval``):
attentionodorify's ``train_epoch`` trains, calls ``check_accuracy_per_epoch(model, ...)``, then
runs its test batches with autograd on. The message names the helper (``after `model.eval()` in
`check()` ``).

Look-alikes stay quiet where ``model.eval()`` in place is reported: a helper that switches the
model back with ``model.train()``, one that switches it only in an ``if`` arm, and a helper given
another model (a teacher).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES = {
    "helpers_switching_the_model": """import torch


def check(model, x, y):
    model.eval()
    with torch.no_grad():
        out = model(x)
    return (out.argmax(-1) == y).float().mean().item()


def check_and_restore(model, x, y):
    model.eval()
    with torch.no_grad():
        out = model(x)
    model.train()
    return (out.argmax(-1) == y).float().mean().item()


def maybe_switch(model, fast=False):
    if fast:
        model.eval()


def fit(model, x_train, y_train, optimizer, criterion, bs=16):
    for i in range(0, x_train.shape[0], bs):
        optimizer.zero_grad()
        loss = criterion(model(x_train[i:i + bs]), y_train[i:i + bs])
        loss.backward()
        optimizer.step()


def train_epoch(model, x_train, y_train, x_test, y_test, optimizer, criterion, bs=16):
    model.train()
    fit(model, x_train, y_train, optimizer, criterion, bs)
    check(model, x_train, y_train)
    scores = []
    for i in range(0, x_test.shape[0], bs):
        y_test_pred = model(x_test[i:i + bs])  # expect: TML501
        scores.append(criterion(y_test_pred, y_test[i:i + bs]).item())
    return scores


def train_epoch_restored(model, x_train, y_train, x_test, y_test, optimizer, criterion, bs=16):
    model.train()
    fit(model, x_train, y_train, optimizer, criterion, bs)
    check_and_restore(model, x_train, y_train)
    maybe_switch(model)
    scores = []
    for i in range(0, x_test.shape[0], bs):
        y_test_pred = model(x_test[i:i + bs])
        scores.append(criterion(y_test_pred, y_test[i:i + bs]).item())
    return scores


def teacher_checked(model, teacher, x_train, y_train, x_test, y_test, optimizer, criterion, bs=16):
    model.train()
    fit(model, x_train, y_train, optimizer, criterion, bs)
    check(teacher, x_train, y_train)
    scores = []
    for i in range(0, x_test.shape[0], bs):
        y_test_pred = model(x_test[i:i + bs])
        scores.append(criterion(y_test_pred, y_test[i:i + bs]).item())
    return scores
""",
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("switching_helpers"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])


def test_message_names_the_helper(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(CASES["helpers_switching_the_model"], encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", "--no-cache", "--exit-zero", "--select", "TML501",
         "--output-format", "json", str(path)],
        capture_output=True, text=True, timeout=300,
    )
    messages = [item["message"] for item in json.loads(proc.stdout)]
    assert len(messages) == 1 and messages[0].startswith("`model` is called after `model.eval()` in `check()` with autograd on"), messages
