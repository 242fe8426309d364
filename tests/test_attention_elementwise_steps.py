"""TML601 through elementwise steps that keep the weights' axes: ``torch.nan_to_num`` (stribor's
``safe_softmax``: a fully masked row gives 0, not NaN), ``clamp``/``clip`` (``compound.py``). The
computation is still eager attention keeping its weights; SDPA does not run the step, so the
site has no fix. Also through a helper of another project file imported by absolute name from
the file's own package (``from pkg.util import safe_softmax``, ``import pkg as P`` then
``P.util.safe_softmax``), as through a relative import.

Look-alikes stay quiet: a step that is not elementwise on the weights (a sigmoid gate instead of
a softmax), the weights returned.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

CASES: Dict[str, str] = {
    "elementwise_steps": '''
        import torch


        def nan_to_num_weights(q, k, v):
            att = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
            att = torch.nan_to_num(torch.softmax(att, -1))
            return att @ v  # expect: TML601 fix=none


        def clamped_weights(q, k, v):
            att = (q @ k.transpose(-1, -2)).softmax(dim=-1).clamp(min=1e-9)
            return att @ v  # expect: TML601 fix=none


        def clipped_scores(q, k, v):
            att = torch.clip(q @ k.transpose(-1, -2), -50.0, 50.0)
            return torch.softmax(att, dim=-1) @ v  # expect: TML601 fix=none


        def gate_not_softmax(q, k, v):
            att = torch.sigmoid(q @ k.transpose(-1, -2)).clamp(max=0.99)
            return att @ v


        def weights_returned(q, k, v):
            att = torch.nan_to_num(torch.softmax(q @ k.transpose(-1, -2), -1))
            return att @ v, att
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("attention_elementwise"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    for (row, code), fix in findings[name].items():
        assert fix is None, (row, code)


UTIL = '''
import torch


def safe_softmax(x, dim=-1):
    x = torch.softmax(x, dim)
    x = torch.nan_to_num(x)
    return x


def gate(x, dim=-1):
    return torch.sigmoid(x)
'''

ATTENTION = '''
import torch

import pkg as P
from pkg.util import gate, safe_softmax


def absolute_import(q, k, v):
    att = safe_softmax(q @ k.transpose(-1, -2), -1)
    return att @ v  # <-


def through_the_package_alias(q, k, v):
    att = P.util.safe_softmax(q @ k.transpose(-1, -2), dim=-1)
    return att @ v  # <-


def gated(q, k, v):
    att = gate(q @ k.transpose(-1, -2), -1)
    return att @ v
'''


def test_a_helper_of_the_own_package_imported_by_absolute_name(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from . import util\n")
    (package / "util.py").write_text(textwrap.dedent(UTIL))
    (package / "att.py").write_text(textwrap.dedent(ATTENTION))
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML601", "--output-format", "json",
         "--exit-zero", "--no-cache", "--isolated", "pkg"],
        capture_output=True, text=True, cwd=tmp_path, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    rows = {f["location"]["row"] for f in json.loads(result.stdout) if Path(f["filename"]).name == "att.py"}
    lines = textwrap.dedent(ATTENTION).splitlines()
    assert rows == {i for i, line in enumerate(lines, start=1) if line.endswith("# <-")}
