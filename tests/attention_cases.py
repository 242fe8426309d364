"""Helpers the attention test files share: the sites TML601's analysis finds in a source, and
the CLI run from the repository root."""

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
