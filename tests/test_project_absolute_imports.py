"""A module class imported by absolute name from the file's own package, through the package's
``__init__.py`` re-exporting it (visualLLM's ``from vllm.blocks import VLLMEncoder`` in
``vllm/transformer.py``, with ``from vllm.blocks.encoder import VLLMEncoder`` in
``vllm/blocks/__init__.py``): what ``self.encoder = VLLMEncoder(ctx)`` builds is a module, as
it would be with the class pasted into the file, so the model's ``inference`` method running
it with autograd on is TML501's. Driven through the CLI over a temporary package.

Look-alikes stay quiet: the same class name imported from a library outside the project (an
unknown class is not known to be a module), and the method under ``torch.no_grad()``."""

from __future__ import annotations

from pathlib import Path
from typing import Set, Tuple

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

ENCODER = """import torch.nn as nn


class VLLMEncoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        return self.proj(x)
"""

MODEL = """import torch
import torch.nn as nn

from {source} import VLLMEncoder


class Transformer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.vllm_encoder = VLLMEncoder(dim)
        self.head = nn.Linear(dim, 4)

    def forward(self, x):
        return self.head(self.vllm_encoder(x))

    def inference(self, x):
        encoded = self.vllm_encoder(x)
        return encoded.argmax(-1).tolist()

    @torch.no_grad()
    def inference_quietly(self, x):
        encoded = self.vllm_encoder(x)
        return encoded.argmax(-1).tolist()
"""

SITE_ROW = MODEL.splitlines().index("        encoded = self.vllm_encoder(x)") + 1


def _project(root: Path, source: str) -> Path:
    package = root / "vllm"
    (package / "blocks").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "blocks" / "__init__.py").write_text("from vllm.blocks.encoder import VLLMEncoder\n")
    (package / "blocks" / "encoder.py").write_text(ENCODER)
    (package / "transformer.py").write_text(MODEL.format(source=source))
    return root


def _lint(project: Path) -> Set[Tuple[str, int]]:
    return lint_project(project, "TML501", "--no-cache")


def test_a_class_of_the_own_package_imported_by_absolute_name_is_a_module(tmp_path):
    assert _lint(_project(tmp_path, "vllm.blocks")) == {("transformer.py", SITE_ROW)}


def test_the_same_name_from_a_library_is_not_known(tmp_path):
    assert _lint(_project(tmp_path, "otherlib.blocks")) == set()
