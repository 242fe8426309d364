from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("torch")

from torchmemlint.dynamic.target import load_module  # noqa: E402

FIXTURE_MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"


@pytest.fixture(scope="session")
def models():
    """``models("activations")`` imports fixtures/models/activations.py."""
    cache: dict[str, ModuleType] = {}

    def load(stem: str) -> ModuleType:
        if stem not in cache:
            cache[stem] = load_module("%s:_" % (FIXTURE_MODELS / (stem + ".py")))
        return cache[stem]

    return load


@pytest.fixture(autouse=True)
def _quiet_checkpoint_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*use_reentrant.*")
        warnings.filterwarnings("ignore", message=".*requires_grad=True.*")
        yield
