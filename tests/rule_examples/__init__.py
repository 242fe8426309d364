"""Every rule's examples, one file per rule (Ruff's convention): ``tml201.py`` holds
``VALID`` (code that must give no finding) and ``INVALID`` (``Invalid`` cases: code that must
give a finding, with the fixed source when the rule fixes it). ``test_rule_examples.py`` runs
them all through the real engine and fixer; a new rule adds its file here.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from torchmemlint.rules.base import Invalid

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Examples:
    valid: Sequence[str]
    invalid: Sequence[Invalid]


@lru_cache(maxsize=None)
def examples(code: str) -> Examples:
    """The examples of rule ``code``; a rule without a file has none."""
    path = HERE / f"{code.lower()}.py"
    if not path.exists():
        return Examples((), ())
    spec = importlib.util.spec_from_file_location(f"rule_examples_{code.lower()}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return Examples(tuple(module.VALID), tuple(module.INVALID))
