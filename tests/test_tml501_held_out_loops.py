"""TML501 on a function that trains and then, after its training loop, runs the model over
held-out data with autograd on (a script's ``main()``: train, then a "Validation process" loop
over ``validation_loader`` and an "Inference process" loop over ``test_loader``, keeping only
``torch.max(outputs, 1)[1].numpy()``; measured misses on a held-out set, demuxnet). The loop
never backpropagates and nothing trains after it: each batch records a graph and keeps its
activations while the output lives. The fix wraps that loop, not the function, in
``torch.no_grad()``.

A validation loop inside the epoch loop, after the epoch's training, is reported too (the
forty-first session). Quiet: a held-out loop followed by more training, a loop over the training data with no
backward after the training (not held-out by its name), a held-out loop whose losses a later
backward trains on, and one under ``torch.no_grad()``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Dict

import pytest

from marked_cases import fix_at, lint_cases, marked, marked_fixes

pytestmark = pytest.mark.slow  # starts the CLI

SCRIPT = '''
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.utils.data import DataLoader


    def main(x_train, y_train, x_validation, y_validation, test_set):
        net = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2))
        optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
        criterion = nn.CrossEntropyLoss()
        train_loader = DataLoader(list(zip(x_train, y_train)), batch_size=4)
        for epoch in range(3):
            for i, (inputs, labels) in enumerate(train_loader):
                optimizer.zero_grad()
                loss = criterion(net(inputs), labels)
                loss.backward()
                optimizer.step()
        print("Training completed.")
        validation_loader = DataLoader(list(zip(x_validation, y_validation)), batch_size=4)
        validation_prediction = []
        for i, data in enumerate(validation_loader, 0):
            inputs, labels = data
            outputs = net(inputs)  # expect: TML501 fix=unsafe
            pred = list(torch.max(outputs, 1)[1].numpy())
            validation_prediction.extend(pred)
        print("Validation accuracy:", np.mean(np.array(validation_prediction) == np.array(y_validation)))
        testloader = DataLoader(test_set, batch_size=4)
        for inputs in testloader:
            print(net(inputs).argmax(1).tolist())  # expect: TML501 fix=unsafe
'''

CASES: Dict[str, str] = {
    "train_then_validate_and_test": SCRIPT,
    # the held-out data named by an attribute, the training in a helper of the file
    "method_trains_then_tests": '''
        import torch


        class Runner:
            def __init__(self, model, optimizer, loaders):
                self.model, self.optimizer, self.loaders = model, optimizer, loaders

            def step(self, x, y):
                self.optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(self.model(x), y)
                loss.backward()
                self.optimizer.step()

            def run(self, epochs):
                for _ in range(epochs):
                    for x, y in self.loaders.train:
                        self.step(x, y)
                errors = []
                for x, y in self.loaders.test_loader:
                    errors.append((self.model(x) - y).abs().mean().item())  # expect: TML501
                return sum(errors) / len(errors)
    ''',
    # (the forty-first session: a held-out loop after the epoch's training reads nothing the
    # next epoch trains on, as upside-down-rl's test loop, set 146)
    "validation_inside_the_epoch_loop": '''
        import torch


        def fit(model, optimizer, train_loader, val_loader, epochs):
            for epoch in range(epochs):
                for x, y in train_loader:
                    optimizer.zero_grad()
                    torch.nn.functional.cross_entropy(model(x), y).backward()
                    optimizer.step()
                correct = 0
                for x, y in val_loader:
                    correct += (model(x).argmax(1) == y).sum().item()  # expect: TML501
                print(epoch, correct)
    ''',
    # look-alikes
    "held_out_loop_then_more_training": '''
        import torch


        def fit(model, optimizer, train_loader, val_loader):
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            for x, y in val_loader:
                print((model(x).argmax(1) == y).float().mean().item())
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
    ''',
    "training_data_after_training": '''
        import torch


        def fit(model, optimizer, train_loader):
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            for x, y in train_loader:
                print((model(x).argmax(1) == y).float().mean().item())
    ''',
    "held_out_losses_trained_on_later": '''
        import torch


        def fit(model, optimizer, train_loader, val_loader):
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            total = 0
            for x, y in val_loader:
                total = total + torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            total.backward()
            optimizer.step()
    ''',
    "held_out_loop_under_no_grad": '''
        import torch


        def fit(model, optimizer, train_loader, test_loader):
            for x, y in train_loader:
                optimizer.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            with torch.no_grad():
                for x, y in test_loader:
                    print((model(x).argmax(1) == y).float().mean().item())
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("held_out_loops"), CASES, "TML501")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def test_each_marked_fix(findings):
    expected = marked_fixes(SCRIPT)
    assert expected and all(fix_at(findings["train_then_validate_and_test"], row) == fix for row, fix in expected.items())


def test_the_fixed_script_trains_and_tests_without_recording_graphs(tmp_path):
    """The unsafe fix applied: the script still trains (the backward runs), and the held-out
    loops run under ``no_grad`` (their outputs carry no graph)."""
    pytest.importorskip("torch")
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    fixed = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", str(path), "--no-cache", "--isolated", "--select", "TML501",
         "--fix", "--unsafe-fixes", "--exit-zero"],
        capture_output=True, text=True, timeout=120,
    )
    assert fixed.returncode == 0, fixed.stderr
    text = path.read_text(encoding="utf-8")
    assert text.count("with torch.no_grad():") == 2
    assert "def main(" in text and text.index("loss.backward()") < text.index("with torch.no_grad():")
    probe = textwrap.dedent('''
        import sys, runpy, torch
        namespace = runpy.run_path(sys.argv[1])
        seen = []
        original = torch.nn.Sequential.forward
        def forward(self, x):
            out = original(self, x)
            seen.append(out.requires_grad)
            return out
        torch.nn.Sequential.forward = forward
        torch.manual_seed(0)
        x = torch.randn(8, 10); y = torch.randint(0, 2, (8,))
        namespace["main"](x, y, x, y.tolist(), torch.randn(8, 10))
        # 3 epochs x 2 training batches with autograd, then 2 + 2 held-out batches without
        print(seen)
        assert seen == [True] * 6 + [False] * 4, seen
    ''')
    run = subprocess.run([sys.executable, "-c", probe, str(path)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
