"""`torchmemlint --stdin-filename PATH -`: a piped buffer is linted and fixed as if it were PATH."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from torchmemlint.cli import main

BAD = (
    "from torch.utils.checkpoint import checkpoint\n"
    "y = checkpoint(block, x)  # größer\n"
)
FIX = ["--fix", "--unsafe-fixes"]  # whatever the applicability of TML401's fix is today
CONFIG = """\
[tool.torchmemlint]
extend-exclude = ["generated"]

[tool.torchmemlint.per-file-ignores]
"tests/*" = ["TML401"]
"""


def run_stdin(args, data: bytes, cwd: Path) -> Result:
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        return CliRunner().invoke(main, list(args), input=data, catch_exceptions=False)


def fixed_as_a_file(project: Path, data: bytes) -> bytes:
    """What `--fix` writes for a file with these bytes: the buffer's fix must be the same."""
    path = project / "src" / "on_disk.py"
    path.write_bytes(data)
    run_stdin([*FIX, "src/on_disk.py"], b"", project)
    fixed = path.read_bytes()
    path.unlink()
    assert fixed != data
    return fixed


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(CONFIG, encoding="utf-8")
    for directory in ("src", "tests", "generated"):
        (tmp_path / directory).mkdir()
    return tmp_path


def test_buffer_gives_the_findings_the_file_would_give_under_its_name(project):
    (project / "src" / "model.py").write_text(BAD, encoding="utf-8")
    from_file = run_stdin(["--output-format", "json", "src/model.py"], b"", project)
    # The file on disk is stale: an editor pipes the buffer it holds, which is what counts.
    (project / "src" / "model.py").write_text("", encoding="utf-8")
    from_stdin = run_stdin(
        ["--output-format", "json", "--stdin-filename", "src/model.py", "-"],
        BAD.encode(),
        project,
    )
    assert from_stdin.exit_code == from_file.exit_code == 1
    assert json.loads(from_stdin.stdout) == json.loads(from_file.stdout)
    assert json.loads(from_stdin.stdout)[0]["filename"] == str(project / "src" / "model.py")


def test_per_file_ignores_and_excludes_follow_the_stdin_filename(project):
    args = ["--stdin-filename"]
    assert run_stdin([*args, "src/model.py", "-"], BAD.encode(), project).exit_code == 1
    for quiet_path in ("tests/test_model.py", "generated/model.py"):
        result = run_stdin([*args, quiet_path, "-"], BAD.encode(), project)
        assert (result.exit_code, result.stdout) == (0, "All checks passed!\n"), quiet_path


def test_config_is_found_from_the_stdin_filename_not_the_working_directory(
    project, tmp_path_factory
):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    target = str(project / "tests" / "test_model.py")
    result = run_stdin(["--stdin-filename", target, "-"], BAD.encode(), elsewhere)
    assert result.exit_code == 0, result.stdout  # the project's per-file-ignores applied


def test_fix_prints_the_fixed_buffer_and_reports_on_stderr(project):
    result = run_stdin([*FIX, "--stdin-filename", "src/model.py", "-"], BAD.encode(), project)
    assert result.exit_code == 0
    assert result.stdout_bytes == fixed_as_a_file(project, BAD.encode())
    assert "Fixed 1 finding" in result.stderr
    assert not (project / "src" / "model.py").exists()  # nothing written to disk


def test_fix_keeps_crlf_and_bom_and_echoes_excluded_buffers_unchanged(project):
    data = b"\xef\xbb\xbf" + BAD.replace("\n", "\r\n").encode("utf-8")
    fixed = run_stdin([*FIX, "--stdin-filename", "src/model.py", "-"], data, project)
    expected = fixed_as_a_file(project, data)
    assert expected.startswith(b"\xef\xbb\xbf") and expected.count(b"\r\n") == 2
    assert fixed.stdout_bytes == expected
    excluded = run_stdin([*FIX, "--stdin-filename", "generated/m.py", "-"], data, project)
    assert (excluded.exit_code, excluded.stdout_bytes) == (0, data)


def test_fix_of_an_unparsable_buffer_echoes_it_and_reports_the_syntax_error(project):
    broken = b"import torch\ndef f(:\n"
    result = run_stdin([*FIX, "--stdin-filename", "src/m.py", "-"], broken, project)
    assert result.exit_code == 1
    assert result.stdout_bytes == broken
    assert "src/m.py:2:" in result.stderr and "E999" in result.stderr


def test_dash_cannot_be_mixed_with_paths(project):
    result = run_stdin(["src", "-"], BAD.encode(), project)
    assert result.exit_code == 2
    assert "standard input" in result.stderr


@pytest.mark.slow
def test_a_real_pipe_into_the_installed_command(project):
    # What ALE / none-ls / efm do: spawn the command and write the buffer to its stdin.
    completed = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *FIX, "--stdin-filename", "src/model.py", "-"],
        input=BAD.encode(),
        cwd=project,
        capture_output=True,
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout == fixed_as_a_file(project, BAD.encode())
