"""Puts tests/ on ``sys.path`` (pytest does so for a conftest's directory), so that every test,
tests/dynamic/ included, can ``from rule_examples import examples``: the rules' VALID/INVALID
examples, one file per rule under tests/rule_examples/.

It also byte-compiles the package once per session. The tests start hundreds of
``python -m torchmemlint`` processes; an editable install writes no bytecode, and where
``PYTHONDONTWRITEBYTECODE`` is set (as on this project's CI machines) no process writes any, so
each would compile every module of the package from source again."""

import compileall
from pathlib import Path


def pytest_configure(config):
    compileall.compile_dir(str(Path(__file__).resolve().parents[1] / "torchmemlint"), quiet=1)
