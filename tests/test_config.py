"""Configuration as users meet it: each file's settings come from the closest config above it.

Driven through the real processes: the CLI and flake8 as subprocesses, from inside and from
outside the project (the language server's side is in test_lsp.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

# TML201 (on by default): LeakyReLU after a conv without inplace=True, at 9:20.
BAD = """\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.act = nn.LeakyReLU(0.1)

    def forward(self, x):
        return self.act(self.conv(x))
"""


def run(args: List[str], cwd: Path, stdin: str = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, input=stdin,
        env=env, timeout=120,
    )
    assert "Traceback" not in result.stderr + result.stdout, result.stderr + result.stdout
    return result


def lint(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return run(["torchmemlint", "check", *args], cwd)


def reported(result: subprocess.CompletedProcess, root: Path) -> List[str]:
    """The flagged files, relative to ``root``, from text output (CLI or flake8)."""
    files = []
    for line in result.stdout.splitlines():
        if ": TML" in line:
            path = Path(line.split(":", 1)[0])
            absolute = path if path.is_absolute() else (result.args_cwd / path)
            files.append(absolute.resolve().relative_to(root.resolve()).as_posix())
    return sorted(set(files))


def lint_files(*args: str, cwd: Path, root: Path) -> List[str]:
    result = lint(*args, cwd=cwd)
    result.args_cwd = cwd
    assert result.returncode in (0, 1), result.stderr
    return reported(result, root)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(
        root / "pyproject.toml",
        "[project]\nname = 'proj'\n\n"
        "[tool.torchmemlint]\n"
        'extend-exclude = ["generated"]\n'
        'per-file-ignores = { "tests/*" = ["TML2"] }\n',
    )
    for name in ("src/model.py", "tests/test_model.py", "generated/model.py"):
        write(root / name, BAD)
    return root


@pytest.mark.slow
def test_settings_come_from_the_files_linted_not_the_working_directory(project, tmp_path):
    inside = lint_files(".", cwd=project, root=project)
    assert inside == ["src/model.py"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert lint_files(str(project), cwd=elsewhere, root=project) == inside
    assert lint_files("src", "tests", cwd=project, root=project) == inside
    assert lint_files("proj/tests/test_model.py", cwd=tmp_path, root=project) == []
    # Without the config (--isolated), all three are reported: the config is what quiets them.
    everything = ["generated/model.py", "src/model.py", "tests/test_model.py"]
    assert lint_files("--isolated", str(project), cwd=elsewhere, root=project) == everything


@pytest.mark.slow
def test_the_closest_config_governs_and_config_overrides_them_all(project, tmp_path):
    write(project / "pyproject.toml", '[tool.torchmemlint]\nignore = ["TML201"]\n')
    for name in ("a.py", "sub/b.py", "sub/deeper/c.py", "other/d.py", "own/e.py"):
        write(project / name, BAD)
    # torchmemlint.toml (top-level keys) wins over a pyproject.toml in the same directory.
    write(project / "sub" / "torchmemlint.toml", 'select = ["TML2"]\n')
    write(project / "sub" / "pyproject.toml", '[tool.torchmemlint]\nignore = ["TML2"]\n')
    # A pyproject.toml without the table is not a torchmemlint config: the parent's counts.
    write(project / "other" / "pyproject.toml", "[project]\nname = 'other'\n")
    # A torchmemlint.toml may also use the [tool.torchmemlint] table.
    write(project / "own" / "torchmemlint.toml", "[tool.torchmemlint]\nselect = ['TML201']\n")
    expected = ["own/e.py", "sub/b.py", "sub/deeper/c.py"]
    assert lint_files(".", cwd=project, root=project) == expected
    assert lint_files(str(project), cwd=tmp_path, root=project) == expected
    assert lint_files(".", cwd=project / "sub" / "deeper", root=project) == ["sub/deeper/c.py"]
    config = str(project / "sub" / "pyproject.toml")
    assert lint_files("--config", config, ".", cwd=project, root=project) == []
    # Command-line options apply on top of whichever config governs each file.
    assert lint_files("--ignore", "TML201", ".", cwd=project, root=project) == []


@pytest.mark.slow
def test_a_nested_configs_excludes_apply_in_its_directory(project):
    write(project / "sub" / "torchmemlint.toml", 'extend-exclude = ["gen"]\n')
    write(project / "sub" / "gen" / "model.py", BAD)
    write(project / "gen" / "model.py", BAD)
    assert lint_files(".", cwd=project, root=project) == ["gen/model.py", "src/model.py"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "text, line",
    [
        ('[tool.torchmemlint]\nselect = ["TML4"\n', 2),  # unclosed list: the example
        ("[project]\nname = 'x'\n\n[tool.torchmemlint\nselect = []\n", 4),
        ('[tool.torchmemlint]\nignore = ["TML201"]\nignore = []\n', 3),  # duplicate key
    ],
)
def test_invalid_toml_is_one_line_naming_file_and_line_and_exit_two(
    project, tmp_path, text, line
):
    config = write(project / "pyproject.toml", text)
    expected = f"torchmemlint: error: {config}:{line}: invalid TOML: "
    for args, cwd in (
        ([str(project)], tmp_path),
        (["."], project / "src"),
        (["src/model.py"], project),
        (["--stdin-filename", "src/model.py", "-"], project),
    ):
        result = run(["torchmemlint", *args], cwd, stdin=BAD)
        assert result.returncode == 2, (args, result.stdout)
        assert result.stdout == ""
        [message] = result.stderr.splitlines()
        assert message.startswith(expected), (args, message)


@pytest.mark.slow
def test_a_broken_pyproject_below_the_config_is_an_error_too(project):
    # It may be meant to hold the sub-project's settings: not silently skipped.
    write(project / "src" / "pyproject.toml", "[tool.torchmemlint]\nselect = [\n")
    result = lint(".", cwd=project)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"torchmemlint: error: {project / 'src' / 'pyproject.toml'}:2: invalid TOML"
    )
    # One beyond the closest config is never read, as for Ruff.
    write(project / "src" / "pyproject.toml", "[project]\nname = 'src'\n")
    write(project.parent / "pyproject.toml", "[tool.torchmemlint\n")
    assert lint(".", cwd=project).returncode == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, line, words",
    [
        ('# comment\nextend-select = ["TML1"]\nselect = ["TML9"]\n', 4, "select: unknown"),
        ('\n\nignore = "TML201"\n', 4, "'ignore' must be a list"),
        ('\n[tool.torchmemlint.options]\ncheckpoint-min-blocks = "x"\n', 4, "expected int"),
        ('\n[tool.torchmemlint.per-file-ignores]\n"tests/*" = ["NOPE"]\n', 4, "'NOPE'"),
        ("colour = true\n", 2, "unknown key 'colour'"),
    ],
)
def test_bad_values_name_the_file_and_line(project, body, line, words):
    config = write(project / "pyproject.toml", f"[tool.torchmemlint]\n{body}")
    result = lint(".", cwd=project)
    assert result.returncode == 2
    [message] = result.stderr.splitlines()
    assert message.startswith(f"torchmemlint: error: {config}:{line}: "), message
    assert words in message


# -- flake8: the same resolution --------------------------------------------------------------
def flake8_files(*args: str, cwd: Path, root: Path) -> List[str]:
    result = run(["flake8", "--select", "TML201", *args], cwd)
    result.args_cwd = cwd
    return reported(result, root)


@pytest.mark.slow
def test_flake8_uses_the_config_that_governs_each_file(project, tmp_path):
    write(project / "sub" / "torchmemlint.toml", 'ignore = ["TML201"]\n')
    write(project / "sub" / "model.py", BAD)
    # flake8 does not know torchmemlint's excludes: the generated file is flake8's to exclude.
    expected = ["generated/model.py", "src/model.py"]
    assert flake8_files(".", cwd=project, root=project) == expected
    assert flake8_files(str(project), cwd=tmp_path, root=project) == expected
    assert lint_files("generated/model.py", "src", "sub", "tests", cwd=project, root=project) == (
        expected
    )
    # flake8's select adds rules the config leaves off, never those it ignores for a file.
    result = run(["flake8", "--select", "TML101", "."], project)
    assert sorted({line.split(":")[0] for line in result.stdout.splitlines()}) == [
        "./generated/model.py", "./src/model.py", "./sub/model.py", "./tests/test_model.py"
    ]
    write(project / "sub" / "torchmemlint.toml", 'ignore = ["TML1", "TML201"]\n')
    result = run(["flake8", "--select", "TML101", "sub"], project)
    assert (result.returncode, result.stdout) == (0, "")
    # flake8's --isolated ignores every config file, torchmemlint's too.
    assert flake8_files("--isolated", "sub", "tests", cwd=project, root=project) == [
        "sub/model.py",
        "tests/test_model.py",
    ]


@pytest.mark.slow
def test_flake8_stops_on_a_broken_config_with_its_file_and_line(project):
    config = write(project / "pyproject.toml", '[tool.torchmemlint]\nselect = ["TML4"\n')
    for jobs in ("-j1", "-j2"):
        result = run(["flake8", jobs, "src", "tests"], project)
        assert result.returncode != 0
        lines = [line for line in result.stdout.splitlines() if "torchmemlint" in line]
        assert lines == [f"torchmemlint: error: {config}:2: invalid TOML: Unclosed array at the "
                         "end of the file"]
