"""Each file is linted in isolation: a rule that raises becomes one TML900 finding.

The rules that raise are test-only (tests/data/crash_rules), registered by running the real CLI
through ``launch.py``, so these tests stay valid whatever bugs the real rules have or lose.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchmemlint import engine
from torchmemlint.config import Settings
from torchmemlint.engine import INTERNAL_ERROR, lint_source

LAUNCH = str(Path(__file__).parent / "data" / "crash_rules" / "launch.py")

CRASHES = textwrap.dedent(
    """\
    import torch
    boom()
    explode()
    boom()
    marker()
    needs_one()
    """
)
BAD_ANALYSIS = textwrap.dedent(
    """\
    import torch
    analysis_bomb = 1
    marker()
    needs_one()
    needs_two()
    boom()
    """
)
CLEAN_RULES = "import torch\nboom()\nmarker()\nneeds_one()\nneeds_two()\n"


def run(args, cwd):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, LAUNCH, "torchmemlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def findings_of(result):
    return [
        (Path(item["filename"]).name, item["location"]["row"], item["code"], item["message"])
        for item in json.loads(result.stdout)
    ]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "crashes.py").write_text(CRASHES)
    (tmp_path / "bad_analysis.py").write_text(BAD_ANALYSIS)
    for index in range(4):  # enough files for the process pool to be used with -j 2
        (tmp_path / f"clean_{index}.py").write_text(CLEAN_RULES)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_rule_that_raises_is_one_finding_and_the_rest_still_report(tree, jobs):
    result = run(["--isolated", "-j", jobs, "--output-format", "json", "."], tree)
    assert result.returncode == 1, result.stderr
    found = findings_of(result)
    crashes = [f for f in found if f[0] == "crashes.py"]
    # The rule reported before it raised, raised once at `explode()` (line 3), and was then
    # skipped for the rest of this file: the second `boom()` (line 4) is not reported.
    assert [(row, code) for _, row, code, _ in crashes] == [
        (2, "TML995"),
        (3, INTERNAL_ERROR),
        (5, "TML998"),
        (6, "TML996"),
    ]
    message = crashes[1][3]
    assert "TML995" in message and "fixture-raises-on-explode" in message
    assert "AttributeError" in message and "'Name' object has no attribute 'endswith'" in message
    assert "crash_rules.py:" in message  # where it was raised
    # Every other file still reports all its findings.
    for index in range(4):
        assert sorted(code for name, _, code, _ in found if name == f"clean_{index}.py") == [
            "TML995",
            "TML996",
            "TML997",
            "TML998",
        ]


@pytest.mark.slow
def test_a_failed_shared_analysis_disables_only_the_rules_that_need_it(tree):
    result = run(["--isolated", "-j", "1", "--output-format", "json", "."], tree)
    found = [f for f in findings_of(result) if f[0] == "bad_analysis.py"]
    assert [(row, code) for _, row, code, _ in found] == [
        (3, "TML998"),
        (4, INTERNAL_ERROR),
        (5, INTERNAL_ERROR),
        (6, "TML995"),
    ]
    assert "TML996" in found[1][3] and "TML997" in found[2][3]
    for _, _, _, message in found[1:3]:
        assert "shared analysis 'crash-fixture.analysis'" in message
        assert "KeyError: 'analysis_bomb'" in message


@pytest.mark.slow
def test_text_sarif_and_exit_code(tree):
    text = run(["--isolated", "crashes.py"], tree)
    assert text.returncode == 1
    assert f"crashes.py:3:1: {INTERNAL_ERROR} internal error in rule TML995" in text.stdout
    sarif = run(["--isolated", "--output-format", "sarif", "crashes.py"], tree)
    assert sarif.returncode == 1
    run_ = json.loads(sarif.stdout)["runs"][0]
    rules = [rule["id"] for rule in run_["tool"]["driver"]["rules"]]
    results = [(r["ruleId"], rules[r["ruleIndex"]]) for r in run_["results"]]
    assert (INTERNAL_ERROR, INTERNAL_ERROR) in results
    stats = run(["--isolated", "--statistics", "crashes.py"], tree)
    assert INTERNAL_ERROR in stats.stdout


@pytest.mark.slow
def test_fix_still_runs_on_a_file_where_a_rule_raises(tmp_path):
    """--fix goes on with the rules that work; the TML900 finding stays in the report."""
    target = tmp_path / "mixed.py"
    target.write_text("import torch\nexplode()\ny = torch.autograd.Variable(x)\n")
    launch = str(Path(__file__).parent / "data" / "surface_rules" / "rules")
    # Both test rule sets: TML990 (surface rules) has a safe fix.
    code = (
        "import runpy, sys, torchmemlint.rules as r\n"
        f"r.__path__.append({launch!r})\n"
        f"r.__path__.append({str(Path(LAUNCH).parent / 'rules')!r})\n"
        "sys.argv = ['torchmemlint', *sys.argv[1:]]\n"
        "runpy.run_module('torchmemlint', run_name='__main__', alter_sys=True)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-c", code, "--isolated", "--fix", "mixed.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    assert target.read_text() == "import torch\nexplode()\ny = x\n"
    assert f"mixed.py:2:1: {INTERNAL_ERROR}" in result.stdout
    assert result.returncode == 1


def test_an_engine_error_outside_the_rules_is_one_finding_for_the_file(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("positions exploded")

    monkeypatch.setattr(engine, "resolve_findings", broken)
    text = "import torch\nimport torch.nn as nn\nnn.Dropout(inplace=True)\n"
    findings = lint_source(text, "x.py", Settings(select=("ALL",)))
    assert [(f.code, f.location.row) for f in findings] == [(INTERNAL_ERROR, 1)]
    assert "RuntimeError: positions exploded" in findings[0].message
    assert "torchmemlint's engine" in findings[0].message
