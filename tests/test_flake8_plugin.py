"""The flake8 plugin, through the real ``flake8`` run as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

LAUNCH = str(Path(__file__).parent / "data" / "surface_rules" / "launch.py")
FORMAT = "--format=%(path)s:%(row)d:%(col)d: %(code)s %(text)s"

# Findings after non-ASCII and astral characters, a tab, and in a multi-line statement.
MODEL = """\
import torch
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):
    def forward(self, größe):
        größe = checkpoint(self.a, größe)
        s = "😀😀"; t = checkpoint(self.b, größe)
        return t


def tabbed(f, x):
\treturn torch.utils.checkpoint.checkpoint(
\t    f,
\t    x,
\t)
"""
NOQA = """\
from torch.utils.checkpoint import checkpoint

a = checkpoint(f, x)  # noqa: TML401
b = checkpoint(f, x)  # noqa: E501
c = checkpoint(  # noqa: TML4
    f, x
)
"""
ZEROS = "import torch\n\na = torch.zeros(2, 3)\nb = torch.zeros(4)\n"


def flake8(*args: str, cwd: Path, launcher: bool = False) -> subprocess.CompletedProcess:
    command = [sys.executable, LAUNCH, "flake8"] if launcher else [sys.executable, "-m", "flake8"]
    return subprocess.run(
        [*command, FORMAT, *args], cwd=cwd, capture_output=True, text=True, encoding="utf-8"
    )


def tml_lines(result: subprocess.CompletedProcess) -> List[Tuple[str, int, int, str]]:
    found = []
    for line in result.stdout.splitlines():
        path, row, column, rest = line.split(":", 3)
        code = rest.split()[0]
        if code.startswith("TML"):
            found.append((path, int(row), int(column), code))
    return found


@pytest.mark.slow
def test_reports_the_cli_findings_at_the_cli_rows_and_columns(tmp_path):
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    result = flake8("--isolated", "model.py", cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    cli = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--output-format", "json", "model.py"],
        cwd=tmp_path, capture_output=True, text=True, encoding="utf-8",
    )
    expected = [
        (Path(f["filename"]).name, f["location"]["row"], f["location"]["column"], f["code"])
        for f in json.loads(cli.stdout)
    ]
    assert tml_lines(result) == expected
    # The columns are where the calls start, counted in characters and 1-based as flake8 prints.
    lines = MODEL.splitlines()
    calls = [
        (row, lines[row - 1].index(name) + 1)
        for row, name in ((7, "checkpoint("), (8, "checkpoint("), (13, "torch.utils"))
    ]
    assert [(row, column) for _, row, column, code in expected if code == "TML401"] == calls


@pytest.mark.slow
def test_flake8_select_ignore_and_noqa_decide(tmp_path):
    (tmp_path / "model.py").write_text(MODEL, encoding="utf-8")
    (tmp_path / "noqa.py").write_text(NOQA, encoding="utf-8")
    default = tml_lines(flake8("--isolated", "model.py", "noqa.py", cwd=tmp_path))
    assert [(path, row) for path, row, _, _ in default if path == "noqa.py"] == [("noqa.py", 4)]

    assert tml_lines(flake8("--isolated", "--extend-ignore=TML4", ".", cwd=tmp_path)) == []
    assert tml_lines(flake8("--isolated", "--ignore=TML401", ".", cwd=tmp_path)) == []
    assert tml_lines(flake8("--isolated", "--select=F", ".", cwd=tmp_path)) == []
    only_tml = flake8("--isolated", "--select=TML401", "model.py", "noqa.py", cwd=tmp_path)
    assert tml_lines(only_tml) == default
    assert all(": TML401 " in line for line in only_tml.stdout.splitlines())

    unsuppressed = tml_lines(flake8("--isolated", "--disable-noqa", "noqa.py", cwd=tmp_path))
    assert [row for _, row, _, _ in unsuppressed] == [3, 4, 5]


@pytest.mark.slow
@pytest.mark.parametrize(
    "directive, rows",
    [
        ("# torchmemlint: noqa", []),
        ("# torchmemlint: noqa: TML4", []),
        ("# torchmemlint: noqa: TML401, TML2", []),
        ("# TorchMemLint: NOQA:TML401", []),
        ("# torchmemlint: noqa: TML2", [3, 4, 5]),  # another rule's code: no effect
        ("# noqa: TML401", [3, 4, 5]),  # a row's noqa covers that row only
        ("x = '# torchmemlint: noqa'", [3, 4, 5]),  # a string, not a comment
    ],
)
def test_the_file_level_directive_is_honoured_as_by_the_cli(tmp_path, directive, rows):
    source = NOQA.replace("  # noqa: TML401", "").replace("  # noqa: TML4", "")
    (tmp_path / "noqa.py").write_text(f"{directive}\n{source}", encoding="utf-8")
    shifted = [row + 1 for row in rows]
    result = flake8("--isolated", "noqa.py", cwd=tmp_path)
    assert [row for _, row, _, _ in tml_lines(result)] == shifted, result.stdout
    cli = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "noqa.py"],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert [int(line.split(":")[1]) for line in cli.stdout.splitlines() if ": TML" in line] == (
        shifted
    )
    # --disable-noqa shows them again, as --ignore-noqa does for the CLI.
    shown = flake8("--isolated", "--disable-noqa", "noqa.py", cwd=tmp_path)
    assert [row for _, row, _, _ in tml_lines(shown)] == [4, 5, 6]


@pytest.mark.slow
def test_default_off_rule_runs_only_when_selected(tmp_path):
    (tmp_path / "zeros.py").write_text(ZEROS, encoding="utf-8")
    assert tml_lines(flake8("--isolated", "zeros.py", cwd=tmp_path, launcher=True)) == []
    # --ignore replaces flake8's default ignore list; a default-off rule must stay off anyway.
    ignoring = flake8("--isolated", "--ignore=E501", "zeros.py", cwd=tmp_path, launcher=True)
    assert tml_lines(ignoring) == []
    for selection in ("--extend-select=TML991", "--select=TML9"):
        selected = flake8("--isolated", selection, "zeros.py", cwd=tmp_path, launcher=True)
        assert tml_lines(selected) == [("zeros.py", 3, 5, "TML991")], selection


@pytest.mark.slow
def test_rule_options_come_from_the_flake8_config(tmp_path):
    (tmp_path / "zeros.py").write_text(ZEROS, encoding="utf-8")
    (tmp_path / "setup.cfg").write_text(
        "[flake8]\nextend-select = TML991\ntml-fixture-max-args = 0\n", encoding="utf-8"
    )
    from_config = flake8("zeros.py", cwd=tmp_path, launcher=True)
    assert tml_lines(from_config) == [("zeros.py", 3, 5, "TML991"), ("zeros.py", 4, 5, "TML991")]
    overridden = flake8("--tml-fixture-max-args=1", "zeros.py", cwd=tmp_path, launcher=True)
    assert tml_lines(overridden) == [("zeros.py", 3, 5, "TML991")]

    (tmp_path / "setup.cfg").write_text("[flake8]\ntml-fixture-max-args = many\n", encoding="utf-8")
    invalid = flake8("zeros.py", cwd=tmp_path, launcher=True)
    assert invalid.returncode != 0
    assert "--tml-fixture-max-args" in invalid.stderr and "'many'" in invalid.stderr
    assert "Traceback" not in invalid.stderr


@pytest.mark.slow
def test_a_file_that_does_not_parse_gives_flake8_its_own_syntax_error(tmp_path):
    (tmp_path / "broken.py").write_text("import torch\ndef f(:\n", encoding="utf-8")
    result = flake8("--isolated", "broken.py", cwd=tmp_path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert [line.split(": ")[1].split()[0] for line in result.stdout.splitlines()] == ["E999"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "config_value, expected_rows", [("false", [3]), ("no", [3]), ("true", [3, 5]), ("on", [3, 5])]
)
def test_boolean_options_read_flake8_words(tmp_path, config_value, expected_rows):
    (tmp_path / "zeros.py").write_text(ZEROS + "c = torch.zeros(4, dtype=d)\n", encoding="utf-8")
    (tmp_path / "setup.cfg").write_text(
        f"[flake8]\nextend-select = TML991\ntml-fixture-count-keywords = {config_value}\n",
        encoding="utf-8",
    )
    result = flake8("zeros.py", cwd=tmp_path, launcher=True)
    assert "Traceback" not in result.stderr, result.stderr
    assert [row for _, row, _, _ in tml_lines(result)] == expected_rows
