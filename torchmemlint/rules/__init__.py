"""Rule registry: every ``Rule`` subclass with a code in a module of this package.

Family modules are found by name, so a new family is a new module here and nothing else.
Modules whose name starts with ``_`` (shared analysis helpers) and ``base`` hold no rules.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import Dict, List, Type

from torchmemlint.rules.base import Rule


@lru_cache(maxsize=None)
def all_rules() -> Dict[str, Type[Rule]]:
    found: Dict[str, Type[Rule]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_") or info.name == "base":
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, Rule) and "code" in vars(value):
                if value.code in found and found[value.code] is not value:
                    raise RuntimeError(f"two rules share the code {value.code}")
                found[value.code] = value
    return dict(sorted(found.items()))


def rules_by_code(codes: List[str]) -> List[Type[Rule]]:
    registry = all_rules()
    return [registry[code] for code in codes]
