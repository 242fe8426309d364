"""TML501 in a script's top-level code (``if __name__ == "__main__":``) that runs the model
through a helper of the file: ``loss, acc = fast_adapt(model, batch)`` after ``model.eval()``
in a validation loop with autograd on is the model's run (learn2learn's protonet examples), as
it already was inside a function. Quiet where the loop is under ``torch.no_grad()``, where the
helper trains (``finetune``), and for the training loop whose loss is backpropagated."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """\
import torch


def fast_adapt(model, batch, ways, device):
    data, labels = batch
    embeddings = model(data.to(device))
    logits = embeddings @ embeddings.t()
    loss = torch.nn.functional.cross_entropy(logits, labels)
    return loss, (logits.argmax(1) == labels).float().mean()


def adapt_and_step(model, batch, optimizer):
    loss, _ = fast_adapt(model, batch, 5, "cuda")
    loss.backward()
    optimizer.step()
    return loss.item()


def finetune(model, loader, optimizer):
    model.eval()  # (frozen batch-norm statistics: the helper trains)
    for batch in loader:
        adapt_and_step(model, batch, optimizer)


if __name__ == "__main__":
    model = torch.nn.Linear(4, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.001)
    for epoch in range(10):
        model.train()
        for batch in train_loader:
            loss, acc = fast_adapt(model, batch, 5, "cuda")
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        total = 0
        for batch in valid_loader:
            loss, acc = fast_adapt(model, batch, 5, "cuda")
            total += loss.item()
        with torch.no_grad():
            for batch in valid_loader:
                loss, acc = fast_adapt(model, batch, 5, "cuda")
                total += loss.item()
    for batch in test_loader:
        loss, acc = fast_adapt(model, batch, 5, "cuda")
        print(acc)
"""


def test_a_helper_that_runs_the_model_in_a_script_s_evaluation_loops(tmp_path):
    (tmp_path / "protonet.py").write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML501", "protonet.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1) and "Traceback" not in result.stderr, result.stderr
    rows = sorted(int(line.split(":")[1]) for line in result.stdout.splitlines() if ": TML501" in line)
    assert rows == [38, 45], result.stdout  # the validation loop after eval(), the test loop after it
    assert "(run by `fast_adapt`)" in result.stdout
