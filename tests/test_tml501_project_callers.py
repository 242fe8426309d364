"""TML501 on a module class's method that runs its own forward (``self(x)``) and only makes a
number of the output: reported when no other code can be its caller, left to the caller when a
file of the project that imports the class reads ``.<method>`` (a pipeline that calls it under
``torch.no_grad()``, as diffusers' LTX-2 pipelines call their duration head's
``predict_num_frames``). Driven through the CLI, with the result cache: adding the caller in the
importing file makes the finding go on a warm run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Set, Tuple

import pytest

ROOT = Path(__file__).resolve().parent.parent

HEAD = """import torch
import torch.nn as nn


class DurationHead(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, 1)

    def forward(self, tokens):
        return self.proj(tokens).mean()

    def predict_num_frames(self, tokens, frame_rate=24.0):
        seconds = self(tokens)
        return round(seconds.item() * frame_rate)
"""

PIPELINE_CALLS = """import torch

from .duration_head import DurationHead


class Pipeline:
    def __init__(self):
        self.duration_head = DurationHead(16)

    @torch.no_grad()
    def __call__(self, tokens):
        return self.duration_head.predict_num_frames(tokens)
"""

# a look-alike: the importing file builds the head but never calls the method
PIPELINE_BUILDS = """import torch

from .duration_head import DurationHead


class Pipeline:
    def __init__(self):
        self.duration_head = DurationHead(16)

    @torch.no_grad()
    def __call__(self, tokens):
        return self.duration_head(tokens)
"""


def _lint(project: Path, *extra: str) -> Set[Tuple[str, int]]:
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML501", "--output-format", "json",
         "--exit-zero", *extra, "."],
        capture_output=True, text=True, cwd=project, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    found: List[dict] = json.loads(result.stdout)
    return {(Path(f["filename"]).name, f["location"]["row"]) for f in found if f["code"] == "TML501"}


def _project(root: Path, pipeline: str) -> Path:
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "duration_head.py").write_text(HEAD)
    (package / "pipeline.py").write_text(pipeline)
    return root


SITE = ("duration_head.py", HEAD.splitlines().index("        seconds = self(tokens)") + 1)


@pytest.mark.parametrize("extra", [("--no-cache",), ("--no-cache", "--isolated")], ids=["default", "isolated"])
def test_a_method_an_importer_calls_is_left_to_it(tmp_path, extra):
    assert _lint(_project(tmp_path, PIPELINE_CALLS), *extra) == set()


def test_a_method_no_importer_calls_is_reported(tmp_path):
    assert _lint(_project(tmp_path, PIPELINE_BUILDS), "--no-cache") == {SITE}


def test_the_head_alone_is_reported(tmp_path):
    (tmp_path / "duration_head.py").write_text(HEAD)
    assert _lint(tmp_path, "--no-cache") == {SITE}


def test_adding_the_caller_in_the_importer_clears_the_cached_finding(tmp_path):
    project = _project(tmp_path, PIPELINE_BUILDS)
    assert _lint(project) == {SITE}
    (project / "pkg" / "pipeline.py").write_text(PIPELINE_CALLS)
    assert _lint(project) == set()  # warm: the head's cache entry is keyed by its importers' texts
