"""TML601 where the scores are handed to a function of ANOTHER project file that only checks
them: ``check_attention_mask_broadcasts(scores, mask)`` alone on its line (haloblocks' masked
attention) reads ``scores.shape`` and returns nothing. Nothing of the scores outlives the call,
so the attention is reported (``foreign.foreign_inspects``: the callee is run in its own file
with the caller's values, and every read of the scores there is of their shape, type or device).
The ``if`` that applies the mask also runs the check, so no fix is written.

Driven through the real CLI on a small package (a relative import and an absolute import of the
package's own module). The look-alikes stay quiet: a checker that keeps the scores on a module
attribute, one that returns them, one that hands them to a function it does not show, and a
checker imported from outside the project.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

pytestmark = pytest.mark.slow  # starts the CLI

MASKING = '''\
import torch

LAST = []


def check_broadcasts(scores, mask, *, name="mask"):
    """Raise ValueError if ``mask`` cannot broadcast to ``scores``."""
    try:
        torch.broadcast_shapes(scores.shape, mask.shape)
    except RuntimeError as error:
        raise ValueError(f"{name} {tuple(mask.shape)} vs {tuple(scores.shape)} ({scores.dtype})") from error


def keep_scores(scores, mask):
    LAST.append(scores)


def check_and_return(scores, mask):
    torch.broadcast_shapes(scores.shape, mask.shape)
    return scores


def check_elsewhere(scores, mask):
    report(scores)
'''

ATTENTION = '''\
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

{imports}


class Attention(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.dropout = nn.Dropout(p)

    def forward(self, q, k, v, mask=None):
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        if mask is not None:
            {check}(scores, mask)
            scores = scores.masked_fill(mask == 0, -1e9)
        attn = self.dropout(F.softmax(scores, dim=-1))
        return torch.matmul(attn, v){expect}
'''

CASES: Dict[str, Tuple[str, str, bool]] = {
    "relative_import": ("from .masking import check_broadcasts", "check_broadcasts", True),
    "absolute_import": ("from attn_pkg.masking import check_broadcasts as check", "check", True),
    "kept_on_a_module_list_stays_quiet": ("from .masking import keep_scores", "keep_scores", False),
    "returned_stays_quiet": ("from .masking import check_and_return", "check_and_return", False),
    "handed_on_stays_quiet": ("from .masking import check_elsewhere", "check_elsewhere", False),
    "outside_the_project_stays_quiet": ("from halo_checks import check_broadcasts", "check_broadcasts", False),
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, List[Tuple[str, int, bool]]]:
    root = tmp_path_factory.mktemp("inspecting_helpers")
    package = root / "attn_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "masking.py").write_text(MASKING, encoding="utf-8")
    for name, (imports, check, _) in CASES.items():
        source = ATTENTION.format(imports=imports, check=check, expect="")
        (package / f"{name}.py").write_text(source, encoding="utf-8")
    completed = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601",
         "--output-format", "json", "--exit-zero", "attn_pkg"],
        cwd=root, capture_output=True, text=True, timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    found: Dict[str, List[Tuple[str, int, bool]]] = {name: [] for name in CASES}
    for item in json.loads(completed.stdout):
        stem = Path(item["filename"]).stem
        found.setdefault(stem, []).append((item["code"], item["location"]["row"], item.get("fix") is not None))
    return found


def _product_row() -> int:
    lines = ATTENTION.format(imports="x", check="c", expect="").splitlines()
    return next(row for row, line in enumerate(lines, start=1) if "return torch.matmul(attn, v)" in line)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_where_the_helper_only_inspects(findings, name):
    expected = [("TML601", _product_row(), False)] if CASES[name][2] else []
    assert findings[name] == expected
    assert findings.get("masking", []) == []
