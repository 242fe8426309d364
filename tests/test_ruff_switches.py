"""The switches, formats and settings a Ruff user expects, driven through the real CLI.

Each test states the Ruff behaviour it mirrors (ruff 0.17, `ruff check`), side by side with
what torchmemlint prints for the same request. The tests that start several processes are
marked slow; `pytest -m "not slow"` keeps the cheap ones.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List, Optional

import pytest

from torchmemlint.output.pretty import message_title

# TML201 (on by default, safe fix): LeakyReLU after a conv without inplace=True, at 9:20.
BAD = textwrap.dedent(
    """\
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
)
# TML501 (on by default, no fix): the model called in evaluation code with autograd on.
EVAL = textwrap.dedent(
    """\
    import torch


    def validate(model, loader):
        model.eval()
        for x in loader:
            out = model(x)
            print(out.sum().item())
    """
)
ANSI = "\x1b["


def run(
    args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None, stdin: Optional[str] = None
) -> subprocess.CompletedProcess:
    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST") and k not in ("NO_COLOR", "FORCE_COLOR")
        and not k.startswith("TORCHMEMLINT_")
    }
    environment.update(env or {})
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd, capture_output=True, text=True, env=environment, input=stdin, timeout=120,
    )
    assert "Traceback" not in result.stderr + result.stdout, result.stderr
    return result


def run_on_terminal(args: List[str], cwd: Path, env: Optional[Dict[str, str]] = None) -> str:
    """What the command prints when its standard output is a terminal (a pseudo-terminal)."""
    import pty

    environment = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("PYTEST") and k not in ("NO_COLOR", "FORCE_COLOR")
    }
    environment.update(env or {})
    master, slave = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd, stdout=slave, stderr=subprocess.PIPE, env=environment,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def json_findings(cwd: Path, *args: str) -> List[dict]:
    return json.loads(run(["--no-cache", "--output-format", "json", *args], cwd).stdout)


# -- the formats ----------------------------------------------------------------------------
def test_concise_is_one_short_line_per_finding(tmp_path):
    # ruff: `t.py:1:8: F401 [*] `os` imported but unused` and the summary.
    write(tmp_path / "bad.py", BAD)
    result = run(["--no-cache", "--output-format", "concise", "bad.py"], tmp_path)
    lines = result.stdout.splitlines()
    message = json_findings(tmp_path, "bad.py")[0]["message"]
    title = message_title(message)
    assert lines[0] == f"bad.py:9:20: TML201 [*] {title}"
    assert len(title) <= 90 and len(message) > len(title) + 40
    assert message.startswith(title)  # JSON keeps the whole message
    assert lines[1:] == ["Found 1 finding.", "[*] 1 fixable with `--fix`."]
    assert result.returncode == 1


@pytest.mark.slow
def test_full_shows_the_source_line_a_caret_and_the_fix(tmp_path):
    # ruff: `F401 [*] title`, ` --> t.py:1:8`, the numbered source rows, `^^` under the
    # range, `help: <fix title>`.
    write(tmp_path / "bad.py", BAD)
    result = run(["--no-cache", "--output-format", "full", "bad.py"], tmp_path)
    finding = json_findings(tmp_path, "bad.py")[0]
    out = result.stdout.splitlines()
    assert out[0] == f"TML201 [*] {message_title(finding['message'])}"
    assert out[1] == " --> bad.py:9:20"
    source = next(line for line in out if line.startswith(" 9 |"))
    assert source == " 9 |         self.act = nn.LeakyReLU(0.1)"
    caret = out[out.index(source) + 1]
    assert caret.index("^") == source.index("nn.LeakyReLU")
    assert caret.count("^") == len("nn.LeakyReLU(0.1)")
    assert f"help: {finding['fix']['message']}" in out
    assert any(line.startswith("  = ") for line in out)  # the rest of the message
    assert out[-2:] == ["Found 1 finding.", "[*] 1 fixable with `--fix`."]
    assert ANSI not in result.stdout  # a pipe gets no colour


@pytest.mark.slow
def test_default_is_full_on_a_terminal_and_text_in_a_pipe(tmp_path):
    write(tmp_path / "bad.py", BAD)
    piped = run(["--no-cache", "bad.py"], tmp_path).stdout
    assert piped.startswith("bad.py:9:20: TML201 [*] `self.act`")  # the whole message
    assert len(piped.splitlines()[0]) > 200
    terminal = run_on_terminal(["--no-cache", "bad.py"], tmp_path)
    assert ANSI in terminal  # colour on a terminal (--color auto)
    uncoloured = re.sub(r"\x1b\[[0-9;]*m", "", terminal)
    assert " --> bad.py:9:20" in uncoloured and "^^^" in uncoloured
    plain = run_on_terminal(["--no-cache", "bad.py"], tmp_path, {"NO_COLOR": "1"})
    assert ANSI not in plain and " --> bad.py:9:20" in plain
    configured = tmp_path / "cfg"
    write(configured / "bad.py", BAD)
    write(configured / "pyproject.toml", '[tool.torchmemlint]\noutput-format = "concise"\n')
    assert run_on_terminal(
        ["--no-cache", "--color", "never", "bad.py"], configured
    ).startswith("bad.py:9:20: TML201 [*] ")


@pytest.mark.slow
def test_color_switch_and_environment(tmp_path):
    write(tmp_path / "bad.py", BAD)
    args = ["--no-cache", "--output-format", "concise", "bad.py"]
    assert ANSI in run(["--color", "always", *args], tmp_path).stdout
    assert ANSI in run(args, tmp_path, {"FORCE_COLOR": "1"}).stdout
    assert ANSI not in run(["--color", "never", *args], tmp_path, {"FORCE_COLOR": "1"}).stdout
    assert ANSI not in run(args, tmp_path).stdout
    text = run(["--no-cache", "--color", "always", "--output-format", "text", "bad.py"], tmp_path)
    assert ANSI in text.stdout and "measured" in text.stdout  # the whole message, coloured
    bad = run(["--color", "sometimes", *args], tmp_path)
    assert bad.returncode == 2 and "sometimes" in bad.stderr


@pytest.mark.slow
def test_quiet_prints_findings_but_no_summary(tmp_path):
    # ruff -q: "Print diagnostics, but nothing else".
    write(tmp_path / "bad.py", BAD)
    result = run(["--no-cache", "-q", "--output-format", "concise", "bad.py"], tmp_path)
    assert result.stdout.splitlines() == [result.stdout.splitlines()[0]]
    assert result.stdout.startswith("bad.py:9:20: TML201") and result.returncode == 1
    write(tmp_path / "good.py", "x = 1\n")
    clean = run(["--no-cache", "--quiet", "good.py"], tmp_path)
    assert clean.stdout == "" and clean.returncode == 0


def test_output_file_short_option(tmp_path):
    write(tmp_path / "bad.py", BAD)
    result = run(["--no-cache", "-o", "out/report.json", "--output-format", "json", "."], tmp_path)
    assert result.stdout == "" and result.returncode == 1
    assert json.loads((tmp_path / "out" / "report.json").read_text())[0]["code"] == "TML201"


# -- fixing -----------------------------------------------------------------------------------
def test_show_fixes_lists_what_fix_changed(tmp_path):
    # ruff --fix --show-fixes: "Fixed 2 errors:\n- a.py:\n    1 × F401 (unused-import)" before
    # the summary.
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "eval.py", EVAL)
    result = run(
        ["--no-cache", "--fix", "--show-fixes", "--output-format", "concise", "."], tmp_path
    )
    lines = result.stdout.splitlines()
    listing = lines.index("Fixed 1 finding:")
    assert lines[listing:listing + 3] == [
        "Fixed 1 finding:", "- bad.py:", "    1 × TML201 (missing-inplace-saves-memory)",
    ]
    assert lines[0].startswith("eval.py:7:15: TML501 ")  # the one left, listed first
    assert lines[-2:] == ["Found 2 findings (1 fixed, 1 remaining).", "1 more with `--unsafe-fixes`."]
    assert result.returncode == 1


@pytest.mark.slow
def test_fix_only_reports_the_fixes_not_the_findings(tmp_path):
    # ruff --fix-only: "Fixed 2 errors (1 additional fix available with `--unsafe-fixes`)."
    # and exit 0 though findings remain; "No errors fixed (1 fix available ...)." next time.
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "eval.py", EVAL)  # TML501: an unsafe fix, not applied
    result = run(["--no-cache", "--fix-only", "."], tmp_path)
    assert result.stdout == (
        "Fixed 1 finding (1 more fix available with `--unsafe-fixes`).\n"
    )
    assert result.returncode == 0
    assert "inplace=True" in (tmp_path / "bad.py").read_text()
    again = run(["--no-cache", "--fix-only", "."], tmp_path)
    assert again.stdout == "No findings fixed (1 fix available with `--unsafe-fixes`).\n"
    assert again.returncode == 0
    (tmp_path / "eval.py").unlink()
    assert run(["--no-cache", "--fix-only", "."], tmp_path).stdout == "No findings fixed.\n"
    write(tmp_path / "bad.py", BAD)
    machine = run(["--no-cache", "--fix-only", "--output-format", "json", "."], tmp_path)
    assert machine.stdout == "" and machine.returncode == 0  # ruff prints nothing either
    assert "inplace=True" in (tmp_path / "bad.py").read_text()


@pytest.mark.slow
def test_exit_non_zero_on_fix(tmp_path):
    # ruff --fix --exit-non-zero-on-fix: exit 1 when a file was fixed, even if nothing remains.
    write(tmp_path / "bad.py", BAD)
    plain = run(["--no-cache", "--fix", "bad.py"], tmp_path)
    assert plain.returncode == 0  # fixed, nothing remains
    write(tmp_path / "bad.py", BAD)
    strict = run(["--no-cache", "--fix", "--exit-non-zero-on-fix", "bad.py"], tmp_path)
    assert strict.returncode == 1
    assert run(["--no-cache", "--fix", "--exit-non-zero-on-fix", "bad.py"], tmp_path).returncode == 0
    write(tmp_path / "bad.py", BAD)
    only = run(["--no-cache", "--fix-only", "--exit-non-zero-on-fix", "bad.py"], tmp_path)
    assert only.returncode == 1 and only.stdout == "Fixed 1 finding.\n"


@pytest.mark.slow
def test_fixable_and_unfixable(tmp_path):
    # ruff: an unfixable rule loses its [*] and --fix leaves it alone.
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nunfixable = ["TML2"]\n')
    result = run(["--no-cache", "--output-format", "concise", "--fix", "bad.py"], tmp_path)
    assert "TML201 `self.act`" in result.stdout and "[*]" not in result.stdout
    assert "inplace=True" not in (tmp_path / "bad.py").read_text()
    assert json_findings(tmp_path, "bad.py")[0]["fix"] is None
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nfixable = ["TML4"]\n')
    assert "[*]" not in run(["--no-cache", "--output-format", "concise", "bad.py"], tmp_path).stdout
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nfixable = ["TML201"]\n')
    run(["--no-cache", "--fix", "bad.py"], tmp_path)
    assert "inplace=True" in (tmp_path / "bad.py").read_text()


# -- --add-noqa -------------------------------------------------------------------------------
@pytest.mark.slow
def test_add_noqa_writes_merges_and_is_idempotent(tmp_path):
    # ruff --add-noqa: `# noqa: F401` on each reported row, codes merged and sorted into an
    # existing noqa, "Added N noqa directives." on stderr, exit 0; a second run adds none.
    write(tmp_path / "bad.py", BAD.replace("nn.LeakyReLU(0.1)", "nn.LeakyReLU(0.1)  # noqa: E501"))
    write(tmp_path / "eval.py", EVAL)
    result = run(["--no-cache", "--add-noqa", "."], tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "Added 2 noqa directives.\n"
    assert "        self.act = nn.LeakyReLU(0.1)  # noqa: E501, TML201\n" in (
        tmp_path / "bad.py"
    ).read_text()
    assert "        out = model(x)  # noqa: TML501\n" in (tmp_path / "eval.py").read_text()
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*.py")}
    again = run(["--no-cache", "--add-noqa", "."], tmp_path)
    assert again.stderr == "Added 0 noqa directives.\n"
    assert {p.name: p.read_bytes() for p in tmp_path.glob("*.py")} == before
    assert run(["--no-cache", "."], tmp_path).returncode == 0  # every finding suppressed


def test_add_noqa_keeps_line_endings_and_encoding(tmp_path):
    # A form feed is no line break to Python: the rows stay Python's.
    crlf = ("# -*- coding: latin-1 -*-\n# é\x0c page two\n" + BAD).replace("\n", "\r\n")
    (tmp_path / "crlf.py").write_bytes(crlf.encode("latin-1"))
    (tmp_path / "bom.py").write_bytes(b"\xef\xbb\xbf" + BAD.encode("utf-8"))
    assert run(["--no-cache", "--add-noqa", "."], tmp_path).returncode == 0
    written = (tmp_path / "crlf.py").read_bytes()
    assert b"nn.LeakyReLU(0.1)  # noqa: TML201\r\n" in written
    assert written.count(b"\r\n") == crlf.count("\r\n") and b"\n" not in written.replace(b"\r\n", b"")
    assert "# é".encode("latin-1") in written
    bom = (tmp_path / "bom.py").read_bytes()
    assert bom.startswith(b"\xef\xbb\xbf") and b"# noqa: TML201\n" in bom


@pytest.mark.slow
def test_add_noqa_leaves_a_read_only_file_and_writes_the_others(tmp_path):
    write(tmp_path / "ro.py", BAD)
    write(tmp_path / "rw.py", BAD)
    os.chmod(tmp_path / "ro.py", 0o444)  # no write bit: refused, root or not
    result = run(["--no-cache", "--add-noqa", "ro.py", "rw.py"], tmp_path)
    assert result.returncode == 2
    assert "torchmemlint: error: cannot write ro.py: the file is read-only" in result.stderr
    assert (tmp_path / "ro.py").read_text() == BAD
    assert "# noqa: TML201" in (tmp_path / "rw.py").read_text()


@pytest.mark.slow
def test_add_noqa_refuses_fix_and_stdin(tmp_path):
    # ruff: "the argument '--add-noqa' cannot be used with '--fix'" (exit 2).
    write(tmp_path / "bad.py", BAD)
    result = run(["--no-cache", "--add-noqa", "--fix", "bad.py"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == "torchmemlint: error: --add-noqa cannot be combined with --fix"
    assert "noqa" not in (tmp_path / "bad.py").read_text()
    piped = run(["--add-noqa", "-"], tmp_path, stdin=BAD)
    assert piped.returncode == 2 and "standard input" in piped.stderr


# -- --show-files, --show-settings ------------------------------------------------------------
def test_show_files_lists_the_files_and_lints_nothing(tmp_path):
    write(tmp_path / "b.py", BAD)
    write(tmp_path / "a" / "c.py", "x = 1\n")
    write(tmp_path / "build" / "d.py", "x = 1\n")  # excluded by default
    result = run(["--no-cache", "--show-files", "."], tmp_path)
    assert result.stdout.splitlines() == [
        str((tmp_path / "a" / "c.py").resolve()), str((tmp_path / "b.py").resolve()),
    ]
    assert result.returncode == 0


def test_show_settings_prints_the_resolved_settings(tmp_path):
    write(tmp_path / "b.py", BAD)
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nextend-ignore = ["TML5"]\n')
    result = run(["--no-cache", "--show-settings", "b.py"], tmp_path)
    lines = result.stdout.splitlines()
    assert lines[0] == f"Resolved settings for: {(tmp_path / 'b.py').resolve()}"
    assert lines[1] == f"Settings path: {(tmp_path / 'pyproject.toml').resolve()}"
    assert 'extend-ignore = ["TML5"]' in lines
    rules = next(line for line in lines if line.startswith("rules = "))
    assert "TML201" in rules and "TML501" not in rules
    assert result.returncode == 0


# -- --config "key = value" -------------------------------------------------------------------
@pytest.mark.slow
def test_config_overrides_are_toml_settings_over_every_file(tmp_path):
    # ruff --config "lint.select = ['F']": a TOML fragment, over every configuration file;
    # --config PATH is still a file.
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nselect = ["TML201"]\n')
    assert run(["--no-cache", "bad.py"], tmp_path).returncode == 1
    quiet = run(["--no-cache", "--config", "ignore = ['TML201']", "bad.py"], tmp_path)
    assert quiet.returncode == 0 and quiet.stdout == "All checks passed!\n"
    write(tmp_path / "other.toml", 'select = ["TML5"]\n')
    both = run(
        ["--no-cache", "--config", "other.toml", "--config", 'extend-select = ["TML2"]', "bad.py"],
        tmp_path,
    )
    assert both.returncode == 1  # TML5 from the file, TML2 from the override
    bad_key = run(["--no-cache", "--config", "colour = 1", "bad.py"], tmp_path)
    assert bad_key.returncode == 2
    assert bad_key.stderr == "torchmemlint: error: --config 'colour = 1': unknown key 'colour' in [tool.torchmemlint]\n"
    missing = run(["--no-cache", "--config", "nowhere.toml", "bad.py"], tmp_path)
    assert missing.returncode == 2 and "no such file: nowhere.toml" in missing.stderr


# -- extend, extend-ignore --------------------------------------------------------------------
@pytest.mark.slow
def test_extend_inherits_a_shared_config_relative_to_the_file(tmp_path):
    write(tmp_path / "shared" / "base.toml", textwrap.dedent(
        """\
        extend-select = ["TML101"]
        ignore = ["TML501"]
        """
    ))
    project = tmp_path / "project"
    write(project / "pyproject.toml", '[tool.torchmemlint]\nextend = "../shared/base.toml"\n')
    write(project / "eval.py", EVAL)
    write(project / "bad.py", BAD)
    codes = sorted(f["code"] for f in json_findings(project, "."))
    assert codes == ["TML101", "TML201"]  # TML101 selected, TML501 ignored by the base
    write(project / "pyproject.toml", textwrap.dedent(
        """\
        [tool.torchmemlint]
        extend = "../shared/base.toml"
        extend-ignore = ["TML2", "TML101"]
        """
    ))
    assert json_findings(project, ".") == []  # base ignore and this file's extend-ignore add up
    elsewhere = run(["--no-cache", "project"], tmp_path)  # run from another directory
    assert elsewhere.returncode == 0, elsewhere.stdout + elsewhere.stderr


@pytest.mark.slow
def test_extend_cycle_and_missing_file_are_one_line_errors(tmp_path):
    write(tmp_path / "a.toml", 'extend = "b.toml"\n')
    write(tmp_path / "b.toml", 'extend = "a.toml"\n')
    write(tmp_path / "bad.py", BAD)
    cycle = run(["--no-cache", "--config", "a.toml", "bad.py"], tmp_path)
    assert cycle.returncode == 2 and "`extend` makes a cycle" in cycle.stderr
    assert len(cycle.stderr.strip().splitlines()) == 1
    write(tmp_path / "c.toml", 'select = ["TML2"]\nextend = "gone.toml"\n')
    missing = run(["--no-cache", "--config", "c.toml", "bad.py"], tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.strip() == "torchmemlint: error: c.toml:2: extend: no such file: gone.toml"


@pytest.mark.slow
def test_extended_globs_keep_their_meaning(tmp_path):
    # A glob of the extended file names the same files once its settings are inherited.
    root = tmp_path
    write(root / "config" / "shared.toml", textwrap.dedent(
        """\
        [per-file-ignores]
        "legacy/*.py" = ["TML201"]
        "**/gen_*.py" = ["TML201"]
        """
    ))
    write(root / "pyproject.toml", '[tool.torchmemlint]\nextend = "config/shared.toml"\n')
    write(root / "legacy" / "old.py", BAD)  # root/legacy: not the shared file's legacy/
    write(root / "config" / "legacy" / "old.py", BAD)  # config/legacy: the shared file's
    write(root / "pkg" / "gen_x.py", BAD)
    files = sorted(f["filename"] for f in json_findings(root, "."))
    assert files == [str((root / "legacy" / "old.py").resolve())]
    # extend-per-file-ignores adds to the inherited per-file-ignores (Ruff's key).
    write(root / "pyproject.toml", textwrap.dedent(
        """\
        [tool.torchmemlint]
        extend = "config/shared.toml"
        extend-per-file-ignores = { "legacy/old.py" = ["TML2"] }
        """
    ))
    assert json_findings(root, ".") == []


# -- gitignore --------------------------------------------------------------------------------
def _git_repo(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)


@pytest.mark.slow
def test_gitignored_files_are_not_linted(tmp_path):
    # ruff: inside a git repository, .gitignore (nested ones too) and .git/info/exclude hide
    # files from discovery; a path named on the command line is still linted;
    # --no-respect-gitignore lints them all.
    _git_repo(tmp_path)
    write(tmp_path / ".gitignore", "generated/\n*.tmp.py\n")
    write(tmp_path / "pkg" / ".gitignore", "local_*.py\n!local_keep.py\n")
    (tmp_path / ".git" / "info").mkdir(exist_ok=True)
    (tmp_path / ".git" / "info" / "exclude").write_text("scratch.py\n")
    for name in (
        "kept.py", "generated/a.py", "x.tmp.py", "pkg/local_a.py", "pkg/local_keep.py",
        "scratch.py", "pkg/deep/local_b.py",
    ):
        write(tmp_path / name, BAD)
    listed = run(["--no-cache", "--show-files", "."], tmp_path).stdout.splitlines()
    assert [Path(p).relative_to(tmp_path.resolve()).as_posix() for p in listed] == [
        "kept.py", "pkg/local_keep.py",
    ]
    assert len(run(["--no-cache", "--show-files", "--no-respect-gitignore", "."], tmp_path)
               .stdout.splitlines()) == 7
    write(tmp_path / "pyproject.toml", "[tool.torchmemlint]\nrespect-gitignore = false\n")
    assert len(run(["--no-cache", "--show-files", "."], tmp_path).stdout.splitlines()) == 7
    (tmp_path / "pyproject.toml").unlink()
    named = run(["--no-cache", "--output-format", "concise", "generated/a.py"], tmp_path)
    assert named.stdout.startswith("generated/a.py:9:20: TML201")


def test_global_excludes_file_is_read(tmp_path):
    home = tmp_path / "home"
    write(home / ".gitconfig", "[core]\n\texcludesFile = ~/global_ignore\n")
    write(home / "global_ignore", "secret_*.py\n")
    repo = tmp_path / "repo"
    _git_repo(repo)
    write(repo / "secret_a.py", BAD)
    write(repo / "open.py", BAD)
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config")}
    listed = run(["--no-cache", "--show-files", "."], repo, env).stdout.splitlines()
    assert [Path(p).name for p in listed] == ["open.py"]


def test_gitignore_outside_a_repository_is_not_read(tmp_path):
    # ruff reads .gitignore only inside a git repository.
    write(tmp_path / ".gitignore", "*.py\n")
    write(tmp_path / "a.py", BAD)
    assert len(run(["--no-cache", "--show-files", "."], tmp_path).stdout.splitlines()) == 1


@pytest.mark.slow
def test_exclude_globs_are_gitignore_style(tmp_path):
    # `*` stays within a directory, `**` crosses them, a pattern without "/" matches at any depth.
    for name in ("src/a.py", "src/sub/b.py", "gen/x/c.py", "tests/t.py", "deep/tests/u.py"):
        write(tmp_path / name, BAD)
    write(tmp_path / "pyproject.toml", textwrap.dedent(
        """\
        [tool.torchmemlint]
        extend-exclude = ["src/*.py", "gen/**/*.py", "tests"]
        """
    ))
    listed = run(["--no-cache", "--show-files", "."], tmp_path).stdout.splitlines()
    assert [Path(p).relative_to(tmp_path.resolve()).as_posix() for p in listed] == [
        "src/sub/b.py",
    ]
    write(tmp_path / "pyproject.toml", textwrap.dedent(
        """\
        [tool.torchmemlint.per-file-ignores]
        "src/*.py" = ["TML201"]
        """
    ))
    files = sorted(
        Path(f["filename"]).relative_to(tmp_path.resolve()).as_posix()
        for f in json_findings(tmp_path, ".")
    )
    assert files == ["deep/tests/u.py", "gen/x/c.py", "src/sub/b.py", "tests/t.py"]


# -- titles -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "message, title",
    [
        # The first sentence; a period inside a figure, a call or backticks ends none.
        ("`x` keeps 2.5 MB. It is measured (x2.33 peak).", "`x` keeps 2.5 MB."),
        ("`m.eval()` then `m(x)` runs with autograd on. Detail.", "`m.eval()` then `m(x)` runs with autograd on."),
        ("`a. b` is odd (e.g. here). Then more.", "`a. b` is odd (e.g. here)."),
        # No sentence break: a short message is its own title...
        ("SyntaxError: invalid syntax", "SyntaxError: invalid syntax"),
        # ...a long one is cut to its first clause outside backticks and brackets.
        (
            "internal error in rule TML201 (missing-inplace, visit_Call), which was skipped for "
            "this file: ValueError: boom (raised at torchmemlint/rules/inplace.py:10); please report it",
            "internal error in rule TML201 (missing-inplace, visit_Call), which was skipped …",
        ),
        ("`f(a: int)` " + "word " * 20 + ": detail", "`f(a: int)` " + " ".join(["word"] * 13) + " …"),
    ],
)
def test_message_title(message, title):
    assert message_title(message) == title


@pytest.mark.slow
def test_every_rule_message_leads_with_a_short_sentence():
    """Every finding of the fixtures and of every rule's INVALID examples (every rule, most of
    their message variants) has a first sentence of at most 90 characters, and more after it."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.rules import all_rules

    from rule_examples import examples

    root = Path(__file__).resolve().parents[1]
    sources = [(str(path), path.read_text(encoding="utf-8")) for path in sorted((root / "fixtures").rglob("*.py"))]
    for code in sorted(all_rules()):  # every INVALID case of every rule: all its message forms
        for index, case in enumerate(examples(code).invalid):
            sources.append((f"{code.lower()}_invalid_{index}.py", case.code))
    settings = Settings(select=("ALL",))
    seen = set()
    for filename, text in sources:
        for finding in lint_source(text, filename, settings):
            if finding.code not in all_rules():
                continue
            seen.add(finding.code)
            title = message_title(finding.message)
            assert title.endswith(".") and finding.message.startswith(title), finding.message
            assert len(title) <= 90, (finding.code, title)
            assert len(finding.message) > len(title) + 20, finding.message
    assert seen == set(all_rules())


def test_info_exclude_of_a_linked_worktree_is_read(tmp_path):
    # A linked worktree has a `.git` file; its info/exclude is the main repository's.
    main = tmp_path / "main"
    _git_repo(main)
    git = ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", str(tmp_path / "wt")], check=True)
    (main / ".git" / "info").mkdir(exist_ok=True)
    (main / ".git" / "info" / "exclude").write_text("local_*.py\n")
    write(tmp_path / "wt" / "local_a.py", BAD)
    write(tmp_path / "wt" / "kept.py", BAD)
    listed = run(["--no-cache", "--show-files", "."], tmp_path / "wt").stdout.splitlines()
    assert [Path(p).name for p in listed] == ["kept.py"]


@pytest.mark.slow
def test_a_bad_glob_is_a_one_line_error(tmp_path):
    write(tmp_path / "bad.py", BAD)
    cli = run(["--no-cache", "--extend-exclude", "[z-a]", "bad.py"], tmp_path)
    assert cli.returncode == 2
    assert cli.stderr.startswith("torchmemlint: error: --extend-exclude: invalid glob '[z-a]'")
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint.per-file-ignores]\n"a\\\\" = ["TML2"]\n')
    config = run(["--no-cache", "bad.py"], tmp_path)
    assert config.returncode == 2 and len(config.stderr.splitlines()) == 1
    assert "pyproject.toml:2: per-file-ignores: invalid glob 'a\\'" in config.stderr
    # A .gitignore line git cannot read is skipped, as git skips it.
    (tmp_path / "pyproject.toml").unlink()
    _git_repo(tmp_path)
    write(tmp_path / ".gitignore", "a\\\nbad.py\n")
    write(tmp_path / "kept.py", "x = 1\n")
    listed = run(["--no-cache", "--show-files", "."], tmp_path)
    assert [Path(p).name for p in listed.stdout.splitlines()] == ["kept.py"]


def test_a_directory_named_on_the_command_line_is_walked_even_if_ignored(tmp_path):
    # ruff check --show-files generated/: generated/a.py although .gitignore says generated/;
    # what a pattern names by itself inside it (*.tmp.py) stays out.
    _git_repo(tmp_path)
    write(tmp_path / ".gitignore", "generated/\n*.tmp.py\n")
    write(tmp_path / "generated" / "a.py", BAD)
    write(tmp_path / "generated" / "sub" / "b.py", BAD)
    write(tmp_path / "generated" / "x.tmp.py", BAD)
    listed = run(["--no-cache", "--show-files", "generated"], tmp_path).stdout.splitlines()
    assert [Path(p).relative_to(tmp_path.resolve()).as_posix() for p in listed] == [
        "generated/a.py", "generated/sub/b.py",
    ]


@pytest.mark.slow
def test_add_noqa_moves_past_a_row_that_ends_inside_a_string(tmp_path):
    # The reported row ends inside a triple-quoted string: the comment goes on the statement's
    # next row, where it is honoured, and the file still parses.
    source = EVAL.replace("out = model(x)", 'out = model(x, note="""a\n        b""")')
    write(tmp_path / "e.py", source)
    assert run(["--no-cache", "--add-noqa", "e.py"], tmp_path).stderr == "Added 1 noqa directive.\n"
    written = (tmp_path / "e.py").read_text()
    assert 'out = model(x, note="""a\n        b""")  # noqa: TML501\n' in written
    compile(written, "e.py", "exec")
    assert run(["--no-cache", "e.py"], tmp_path).returncode == 0
