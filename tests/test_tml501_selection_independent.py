"""TML501's findings do not depend on which other rules are selected. The loop rules' gate
replays, when TML501 is the only loop rule whose file gate passes by its sink case, only the
functions that may run a module and reach a sink; a function that hands the model to a helper of
the file (``_, pred = classify_online(model, categories, url)``, the helper running
``model(x)``: phenocam-snow's ``run_model_online``) may run it too. It was replayed only when
TML502's gate also opened (an accumulating loop), so ``--select TML501`` missed the finding that
the default rules gave.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts the CLI

SOURCE = textwrap.dedent('''
    import torch


    def classify_online(model, categories, url):
        x = torch.load(url)
        y_hat = model(x)
        return x, categories[int(y_hat.argmax().item())]


    def run_model_online(model, categories, urls, many):
        if many:
            predictions = []
            for url in urls:
                predictions.append(classify_online(model, categories, url)[1])
            return predictions
        _, pred = classify_online(model, categories, urls)
        print(pred)
''')


def _rows(root: Path, select: str):
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--exit-zero", "--select", select,
         "--output-format", "json", str(root / "predict.py")],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return sorted((f["location"]["row"], f["code"]) for f in json.loads(result.stdout) if f["code"] == "TML501")


def test_tml501_alone_finds_what_the_default_rules_find(tmp_path: Path):
    (tmp_path / "predict.py").write_text(SOURCE)
    alone, beside = _rows(tmp_path, "TML501"), _rows(tmp_path, "TML501,TML502")
    assert alone == beside
    assert (SOURCE.splitlines().index("    _, pred = classify_online(model, categories, urls)") + 1, "TML501") in alone
