"""Helpers the attention test files share: the sites TML601's analysis finds in a source, the
CLI run from the repository root, and a source's module as written and as TML601's fix leaves it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst

from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

ROOT = Path(__file__).resolve().parent.parent


def found_sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return AttentionSites(FileAnalysis(module, bindings, text=module.code)).sites()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )


def fixed_modules(tmp_path: Path, source: str, stem: str, count: int):
    """``source`` loaded as written and after ``--select TML601 --fix --unsafe-fixes`` (each from
    a file of ``tmp_path``), once the fix has written ``count`` SDPA calls and left no softmax."""
    from torchmemlint.dynamic.target import load_module

    eager_path, copy = tmp_path / f"eager_{stem}.py", tmp_path / f"{stem}_fixed.py"
    eager_path.write_text(source)
    copy.write_text(source)
    result = run_cli("--no-cache", "--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == count and "softmax(" not in fixed_source, fixed_source
    return load_module("%s:_" % eager_path), load_module("%s:_" % copy)
