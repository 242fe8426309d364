"""``torchmemlint ARGS`` in the test's own process, for the tests whose point is what the CLI
checks, measures and prints rather than the process boundary (``from in_process import cli``:
pytest puts this directory on ``sys.path``, as it does for ``tests/rule_examples``).

Every file that uses it keeps tests of the same surface that run ``python -m torchmemlint`` as a
subprocess, as a user does; the rest skip the second ``import torch`` each subprocess pays
(several seconds of CPU, most of the dynamic tests' time)."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

import pytest


class Run(NamedTuple):
    """What a run of the CLI gave, as ``subprocess.run`` gives it."""

    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Optional[Path] = None) -> Run:
    """Through the real click entry point (``torchmemlint.cli.main``, what ``python -m
    torchmemlint`` calls): the same parsing, checks, one-line errors, exit status and output.
    An exception the CLI does not turn into its one-line error propagates, so the test fails
    with its traceback as it would fail on one in the subprocess's stderr."""
    from click.testing import CliRunner

    from torchmemlint.cli import main

    with pytest.MonkeyPatch.context() as patch:
        if cwd is not None:
            patch.chdir(cwd)
        result = CliRunner().invoke(main, list(args), prog_name="torchmemlint", catch_exceptions=False)
    return Run(result.exit_code, result.stdout, result.stderr)
