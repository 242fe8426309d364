"""The CLI as a user runs it: a subprocess over real files."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchmemlint.findings import Applicability, Edit, Finding, Fix, Location
from torchmemlint.fixer import FixError, fix_text

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
# TML201: LeakyReLU after a conv without inplace=True; its fix is safe.
BAD_CALL = "nn.LeakyReLU(0.1)"
GOOD = BAD.replace(BAD_CALL, "nn.LeakyReLU(0.1, inplace=True)")

def run(args, cwd, stdin=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        input=stdin,
        env=env,
        timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# -- exit codes and output -----------------------------------------------------------------
@pytest.mark.slow
def test_clean_code_exits_zero(tmp_path):
    write(tmp_path / "good.py", GOOD)
    result = run(["."], tmp_path)
    assert result.returncode == 0
    assert result.stdout == "All checks passed!\n"


@pytest.mark.slow
def test_findings_exit_one_with_exact_position_and_summary(tmp_path):
    write(tmp_path / "bad.py", BAD)
    result = run(["bad.py"], tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("bad.py:9:20: TML201 [*] `self.act` (nn.LeakyReLU) runs out of place")
    assert lines[1] == "Found 1 finding."
    assert lines[2] == "[*] 1 fixable with `--fix`."


@pytest.mark.slow
def test_exit_zero(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert run(["--exit-zero", "."], tmp_path).returncode == 0


@pytest.mark.slow
def test_runs_without_subcommand_and_with_check(tmp_path):
    write(tmp_path / "bad.py", BAD)
    assert run(["check", "bad.py"], tmp_path).stdout == run(["bad.py"], tmp_path).stdout


@pytest.mark.slow
def test_bare_command_lints_the_current_directory_as_check_does(tmp_path):
    write(tmp_path / "pkg" / "bad.py", BAD)
    bare = run([], tmp_path)
    assert bare.returncode == 1
    assert bare.stdout == run(["check"], tmp_path).stdout == run(["."], tmp_path).stdout
    assert bare.stdout.startswith("pkg/bad.py:9:20: TML201")
    assert run(["--fix"], tmp_path).returncode == 0  # and --fix alone fixes the same files
    assert run([], tmp_path).stdout == "All checks passed!\n"
    usage = run(["--help"], tmp_path)
    assert usage.returncode == 0 and "Usage:" in usage.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    "args, named",
    [
        (["--statistics", "--output-format", "json"], "--statistics"),
        (["--statistics", "--output-format", "sarif"], "--statistics"),
        (["--statistics", "--output-format", "github"], "--statistics"),
        (["--statistics", "--diff"], "--statistics"),
        (["--diff", "--output-format", "json"], "--diff"),
        (["--diff", "--output-file", "report.txt"], "--diff"),
        (["--stdin-filename", "bad.py"], "--stdin-filename"),  # with a path, not `-`
    ],
)
def test_options_that_would_do_nothing_together_are_usage_errors(tmp_path, args, named):
    path = write(tmp_path / "bad.py", BAD)
    result = run([*args, "bad.py"], tmp_path, stdin=GOOD)
    assert (result.returncode, result.stdout) == (2, "")
    [message] = result.stderr.splitlines()
    assert message.startswith("torchmemlint: error: ") and named in message
    assert path.read_text() == BAD and not (tmp_path / "report.txt").exists()


@pytest.mark.slow
def test_json_output_follows_ruff_schema(tmp_path):
    write(tmp_path / "bad.py", BAD)
    result = run(["--output-format", "json", "bad.py"], tmp_path)
    assert result.returncode == 1
    [item] = json.loads(result.stdout)
    # The keys of `ruff check --output-format json` (Ruff 0.17.6), no more, no fewer.
    assert sorted(item) == [
        "cell", "code", "end_location", "filename", "fix", "location", "message", "name",
        "noqa_row", "severity", "url",
    ]
    assert (item["name"], item["severity"]) == ("missing-inplace-saves-memory", "warning")
    assert sorted(item["fix"]) == ["applicability", "edits", "message"]
    assert item["cell"] is None
    assert item["filename"] == str(tmp_path / "bad.py")  # absolute, as Ruff's
    assert item["noqa_row"] == 9
    assert item["message"].startswith("`self.act` (nn.LeakyReLU) runs out of place")
    assert item["code"] == "TML201"
    assert item["location"] == {"row": 9, "column": 20}
    assert item["end_location"] == {"row": 9, "column": 37}
    assert item["fix"]["applicability"] == "safe"
    assert item["fix"]["edits"] == [
        {
            "content": ", inplace=True",
            "location": {"row": 9, "column": 36},
            "end_location": {"row": 9, "column": 36},
        }
    ]
    assert item["url"].endswith("#tml201-missing-inplace-saves-memory")
    write(tmp_path / "broken.py", "import torch\ndef f(:\n")
    [syntax] = json.loads(run(["--output-format", "json", "broken.py"], tmp_path).stdout)
    assert (syntax["code"], syntax["name"], syntax["severity"]) == ("E999", "syntax-error", "error")
    assert (syntax["noqa_row"], syntax["url"], syntax["fix"]) == (None, None, None)


@pytest.mark.slow
def test_statistics(tmp_path):
    write(tmp_path / "a.py", BAD)
    write(tmp_path / "b.py", BAD)
    result = run(["--statistics", "."], tmp_path)
    assert result.returncode == 1
    assert result.stdout.split() == ["2", "TML201", "[*]", "missing-inplace-saves-memory"]


# -- selection -------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "args, expected",
    [
        (["--select", "TML201"], 1),
        (["--select", "TML2"], 1),
        (["--select", "ALL"], 1),
        (["--ignore", "TML201"], 0),
        (["--ignore", "TML2"], 0),
        (["--select", "TML4", "--extend-select", "TML201"], 1),
        (["--select", "TML4,TML201"], 1),
        (["--select", "ALL", "--ignore", "TML"], 0),
        (["--select", "TML4"], 0),
    ],
)
def test_selection(tmp_path, args, expected):
    write(tmp_path / "bad.py", BAD)
    result = run([*args, "bad.py"], tmp_path)
    assert result.returncode == expected, result.stdout
    assert ("TML201" in result.stdout) == bool(expected)


@pytest.mark.slow
@pytest.mark.parametrize("selector", ["TML999", "FOO", "TML4x"])
def test_unknown_selector_exits_two_with_message(tmp_path, selector):
    write(tmp_path / "bad.py", BAD)
    result = run(["--select", selector, "bad.py"], tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip() == f"torchmemlint: error: select: unknown rule selector '{selector.upper()}'"


@pytest.mark.slow
def test_default_off_rules_need_select(tmp_path):
    from torchmemlint.rules import all_rules

    off = [rule for rule in all_rules().values() if not rule.default_enabled]
    assert off, "the rule set has rules that are off by default"
    rule = off[0]
    from rule_examples import examples

    example = examples(rule.code).invalid[0].code
    write(tmp_path / "example.py", example)
    assert rule.code not in run(["example.py"], tmp_path).stdout
    assert rule.code in run(["--select", rule.code, "example.py"], tmp_path).stdout


# -- noqa ----------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize(
    "comment, suppressed",
    [
        ("# noqa", True),
        ("# noqa: TML201", True),
        ("# noqa: TML2", True),
        ("# NOQA:TML401,TML201", True),
        ("# noqa: TML4", False),
        ("# noqa: TML202", False),
    ],
)
def test_noqa(tmp_path, comment, suppressed):
    write(tmp_path / "bad.py", BAD.replace("nn.LeakyReLU(0.1)", f"nn.LeakyReLU(0.1)  {comment}"))
    result = run(["bad.py"], tmp_path)
    assert result.returncode == (0 if suppressed else 1)
    shown = run(["--ignore-noqa", "bad.py"], tmp_path)
    assert shown.returncode == 1


@pytest.mark.slow
def test_noqa_on_any_line_of_a_multiline_statement(tmp_path):
    source = BAD.replace("nn.LeakyReLU(0.1)", "nn.LeakyReLU(\n            0.1,\n        )  # noqa: TML201")
    write(tmp_path / "bad.py", source)
    assert run(["bad.py"], tmp_path).returncode == 0


@pytest.mark.slow
def test_file_level_noqa(tmp_path):
    write(tmp_path / "bad.py", "# torchmemlint: noqa\n" + BAD)
    assert run(["bad.py"], tmp_path).returncode == 0
    write(tmp_path / "other.py", "# torchmemlint: noqa: TML4\n" + BAD)
    assert run(["other.py"], tmp_path).returncode == 1


@pytest.mark.slow
def test_a_noqa_string_is_not_a_comment(tmp_path):
    write(tmp_path / "bad.py", BAD.replace("nn.LeakyReLU(0.1)", "nn.LeakyReLU(0.1 if '# noqa' else 0.2)"))
    assert run(["bad.py"], tmp_path).returncode == 1


@pytest.mark.slow
def test_suppressed_findings_are_never_fixed(tmp_path):
    path = write(tmp_path / "bad.py", BAD.replace("nn.LeakyReLU(0.1)", "nn.LeakyReLU(0.1)  # noqa"))
    before = path.read_text()
    assert run(["--fix", "bad.py"], tmp_path).returncode == 0
    assert path.read_text() == before


# -- configuration ---------------------------------------------------------------------------
@pytest.mark.slow
def test_pyproject_select_ignore_and_per_file_ignores(tmp_path):
    write(tmp_path / "src" / "model.py", BAD)
    write(tmp_path / "tests" / "test_model.py", BAD)
    write(
        tmp_path / "pyproject.toml",
        '[tool.torchmemlint]\nper-file-ignores = { "tests/*" = ["TML2"] }\n',
    )
    result = run(["."], tmp_path)
    assert "src/model.py:9:20: TML201" in result.stdout
    assert "tests/" not in result.stdout
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nignore = ["TML201"]\n')
    assert run(["."], tmp_path).returncode == 0
    # found from a sub-directory too: the nearest pyproject.toml with the table
    assert run(["."], tmp_path / "src").returncode == 0
    assert run(["--isolated", "."], tmp_path / "src").returncode == 1


@pytest.mark.slow
def test_config_option_points_at_a_file(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "conf" / "pyproject.toml", '[tool.torchmemlint]\nignore = ["TML2"]\n')
    assert run(["--config", "conf/pyproject.toml", "bad.py"], tmp_path).returncode == 0
    missing = run(["--config", "nope.toml", "bad.py"], tmp_path)
    assert missing.returncode == 2 and "nope.toml" in missing.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    "table, key",
    [
        ('select = "TML4"', "select"),
        ('select = ["TML9"]', "select"),
        ("colour = true", "colour"),
        ('per-file-ignores = { "a.py" = ["BAD"] }', "per-file-ignores"),
        ("options = { no-such-option = 1 }", "no-such-option"),
    ],
)
def test_bad_config_exits_two_naming_the_key(tmp_path, table, key):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "pyproject.toml", f"[tool.torchmemlint]\n{table}\n")
    result = run(["bad.py"], tmp_path)
    assert result.returncode == 2
    assert key in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_invalid_toml_exits_two(tmp_path):
    write(tmp_path / "bad.py", BAD)
    write(tmp_path / "pyproject.toml", "[tool.torchmemlint\nselect = [")
    result = run(["--config", "pyproject.toml", "bad.py"], tmp_path)
    assert result.returncode == 2 and "invalid TOML" in result.stderr


# -- discovery -------------------------------------------------------------------------------
@pytest.mark.slow
def test_discovery_skips_hidden_venv_build_and_honours_excludes(tmp_path):
    for directory in (".hidden", "venv", "build", "__pycache__", "pkg/.tox", "generated"):
        write(tmp_path / directory / "bad.py", BAD)
    write(tmp_path / "pkg" / "bad.py", BAD)
    write(tmp_path / "pkg" / "stubs.pyi", BAD)
    write(tmp_path / "pkg" / "notes.txt", BAD)
    result = run(["--extend-exclude", "generated", "."], tmp_path)
    files = sorted({line.split(":")[0] for line in result.stdout.splitlines() if ": TML" in line})
    assert files == ["pkg/bad.py", "pkg/stubs.pyi"]
    # a file named explicitly is always linted
    assert run(["--extend-exclude", "generated", "generated/bad.py"], tmp_path).returncode == 1


@pytest.mark.slow
def test_parallel_output_equals_serial(tmp_path):
    for index in range(12):
        write(tmp_path / f"m{index:02d}.py", BAD if index % 2 else GOOD)
    serial = run(["-j", "1", "."], tmp_path)
    parallel = run(["-j", "2", "."], tmp_path)
    assert serial.stdout == parallel.stdout
    assert serial.stdout.count("TML201") == 6


# -- bad input -------------------------------------------------------------------------------
@pytest.mark.slow
def test_bad_input_is_reported_and_the_run_goes_on(tmp_path):
    write(tmp_path / "a_syntax.py", "import torch\ndef broken(:\n    pass\n")
    (tmp_path / "b_binary.py").write_bytes(b"import torch\nx = '\xff\xfe'\n")
    write(tmp_path / "c_bad.py", BAD)
    os.symlink("loop", tmp_path / "loop")
    result = run([".", "missing.py", "loop"], tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert any(line.startswith("a_syntax.py:2:") and " E999 SyntaxError" in line for line in lines)
    assert any(line.startswith("b_binary.py:1:1: E902 cannot decode") for line in lines)
    assert any(line.startswith("c_bad.py:9:20: TML201") for line in lines)
    assert any(line.startswith("missing.py:1:1: E902") for line in lines)
    assert any(line.startswith("loop:1:1: E902") for line in lines)


@pytest.mark.slow
def test_syntax_error_in_a_file_without_torch(tmp_path):
    write(tmp_path / "plain.py", "x = (1,\n")
    result = run(["plain.py"], tmp_path)
    assert result.returncode == 1 and "plain.py:" in result.stdout and "E999" in result.stdout


@pytest.mark.slow
def test_unknown_option_is_a_usage_error(tmp_path):
    result = run(["--no-such-flag", "."], tmp_path)
    assert result.returncode == 2


# -- fixing ----------------------------------------------------------------------------------
@pytest.mark.slow
def test_diff_prints_and_writes_nothing(tmp_path):
    path = write(tmp_path / "bad.py", BAD)
    result = run(["--diff", "bad.py"], tmp_path)
    assert result.returncode == 1
    assert (
        "-        self.act = nn.LeakyReLU(0.1)\n+        self.act = nn.LeakyReLU(0.1, inplace=True)\n"
        in result.stdout
    )
    assert path.read_text() == BAD
    write(tmp_path / "bad.py", GOOD)
    clean = run(["--diff", "bad.py"], tmp_path)
    assert clean.returncode == 0 and clean.stdout == ""


@pytest.mark.slow
def test_fix_writes_and_second_run_finds_nothing(tmp_path):
    path = write(tmp_path / "bad.py", BAD)
    os.chmod(path, 0o754)
    result = run(["--fix", "bad.py"], tmp_path)
    assert result.returncode == 0, result.stdout
    assert path.read_text() == GOOD
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o754
    again = run(["--fix", "bad.py"], tmp_path)
    assert again.returncode == 0 and again.stdout == "All checks passed!\n"
    assert path.read_text() == GOOD
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".torchmemlint-")]


@pytest.mark.slow
def test_fix_keeps_bom_and_crlf(tmp_path):
    path = tmp_path / "bad.py"
    path.write_bytes(b"\xef\xbb\xbf" + BAD.replace("\n", "\r\n").encode())
    assert run(["--fix", "bad.py"], tmp_path).returncode == 0
    assert path.read_bytes() == b"\xef\xbb\xbf" + GOOD.replace("\n", "\r\n").encode()


@pytest.mark.slow
def test_fix_keeps_a_declared_encoding(tmp_path):
    header = "# -*- coding: latin-1 -*-\n# caf\xe9\n"
    path = tmp_path / "bad.py"
    path.write_bytes((header + BAD).encode("latin-1"))
    assert run(["--fix", "bad.py"], tmp_path).returncode == 0
    assert path.read_bytes() == (header + GOOD).encode("latin-1")


def _unsafe_example():
    """An INVALID example of some rule whose fix is unsafe (found through the real engine)."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.rules import all_rules

    from rule_examples import examples

    for rule in all_rules().values():
        for case in examples(rule.code).invalid:
            if case.fixed is None or case.options:
                continue
            findings = lint_source(case.code, "x.py", Settings(select=(rule.code,)))
            if findings and all(f.fix and not f.fix.is_safe for f in findings):
                return rule.code, case
    raise AssertionError("no rule offers an unsafe fix")


@pytest.mark.slow
def test_unsafe_fixes_need_the_flag(tmp_path):
    code, case = _unsafe_example()
    path = write(tmp_path / "model.py", case.code)
    listed = run(["--select", code, "model.py"], tmp_path)
    assert "[*]" not in listed.stdout and "more with `--unsafe-fixes`" in listed.stdout
    assert run(["--select", code, "--fix", "model.py"], tmp_path).returncode == 1
    assert path.read_text() == case.code
    shown = run(["--select", code, "--unsafe-fixes", "model.py"], tmp_path)
    assert "[*]" in shown.stdout
    fixed = run(["--select", code, "--fix", "--unsafe-fixes", "model.py"], tmp_path)
    assert path.read_text() == case.fixed, fixed.stdout


def test_fix_that_would_not_parse_is_refused():
    text = "import torch\nx = 1\n"
    broken = Finding(
        "TML401",
        "m",
        "x.py",
        Location(2, 1),
        Location(2, 6),
        Fix(Applicability.SAFE, "t", (Edit("x = (", Location(2, 1), Location(2, 6)),)),
    )
    with pytest.raises(FixError):
        fix_text(text, lambda source: [broken] if source == text else [], unsafe_fixes=False)


# -- rule documentation -------------------------------------------------------------------
@pytest.mark.slow
def test_rule_command(tmp_path):
    one = run(["rule", "TML401"], tmp_path)
    assert one.returncode == 0
    assert "## Why is this bad?" in one.stdout and "checkpoint-without-use-reentrant" in one.stdout
    listing = run(["rule", "--all"], tmp_path)
    assert "TML401  checkpoint-without-use-reentrant" in listing.stdout
    assert run(["rule", "TML999"], tmp_path).returncode == 2


@pytest.mark.slow
def test_force_exclude_applies_excludes_to_named_files(tmp_path):
    write(tmp_path / "generated" / "bad.py", BAD)
    write(tmp_path / "pyproject.toml", '[tool.torchmemlint]\nextend-exclude = ["generated"]\n')
    assert run(["generated/bad.py"], tmp_path).returncode == 1
    forced = run(["--force-exclude", "generated/bad.py"], tmp_path)
    assert forced.returncode == 0 and forced.stdout == "All checks passed!\n"


def test_apply_edits_normalises_line_breaks_to_the_file():
    from torchmemlint.fixer import apply_edits

    text = "a = 1\r\nb = 2\r\n"
    edits = [
        Edit("x = 0\r\n", Location(1, 1), Location(1, 1)),
        Edit("y = 0\n", Location(2, 1), Location(2, 1)),
    ]
    assert apply_edits(text, edits) == "x = 0\r\na = 1\r\ny = 0\r\nb = 2\r\n"


@pytest.mark.slow
def test_noqa_on_another_statement_of_the_class_does_not_suppress(tmp_path):
    source = BAD.replace("def __init__(self):", "def __init__(self):  # noqa")
    source = source.replace("super().__init__()", "super().__init__()  # noqa: TML201")
    write(tmp_path / "bad.py", source)
    result = run(["bad.py"], tmp_path)
    assert result.returncode == 1 and "bad.py:9:20: TML201" in result.stdout
