"""The result cache, driven through the real CLI in subprocesses."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SURFACE_LAUNCH = str(Path(__file__).parent / "data" / "surface_rules" / "launch.py")

LEAKY = textwrap.dedent(
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
DROPOUT = "import torch\nfrom torch import nn\n\nlayer = nn.Dropout(0.1, inplace=True)\n"
VARIABLE = "import torch\n\ny = torch.autograd.Variable(x)\n"


def run(args, cwd, launch=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    prefix = [sys.executable, launch, "torchmemlint"] if launch else [sys.executable, "-m", "torchmemlint"]
    result = subprocess.run(
        [*prefix, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=120
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


def entries(cache: Path):
    return sorted(cache.glob("*/*/*.json"))


def load_entry(entry: Path):
    """An entry's JSON (after its HMAC line)."""
    return json.loads(entry.read_bytes().partition(b"\n")[2])


def store_entry(entry: Path, data) -> None:
    """Write an entry as this user's torchmemlint would: signed with the user's secret."""
    import hashlib
    import hmac

    from torchmemlint.cache import secret_path

    secret = Path(secret_path()).read_bytes().strip()
    body = json.dumps(data).encode()
    mac = hmac.new(secret, entry.name.encode() + b"\0" + body, hashlib.sha256).hexdigest()
    entry.write_bytes(mac.encode() + b"\n" + body)


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchmemlint]\n")
    src = tmp_path / "src"
    src.mkdir()
    (src / "leaky.py").write_text(LEAKY)
    (src / "dropout.py").write_text(DROPOUT)
    for index in range(4):
        (src / f"clean_{index}.py").write_text(f"import torch\nx{index} = torch.ones(3)\n")
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_warm_run_reports_what_a_cold_run_does(project, jobs):
    cache = project / ".torchmemlint_cache"
    cold = run(["-j", jobs, "--output-format", "json", "src"], project)
    assert cold.returncode == 1
    assert len(entries(cache)) == 6  # one per file, next to the config file
    stamps = {path: path.stat().st_mtime_ns for path in entries(cache)}
    warm = run(["-j", jobs, "--output-format", "json", "src"], project)
    uncached = run(["-j", jobs, "--no-cache", "--output-format", "json", "src"], project)
    assert warm.stdout == cold.stdout == uncached.stdout
    assert warm.returncode == 1
    assert {path: path.stat().st_mtime_ns for path in entries(cache)} == stamps  # no rewrite
    codes = sorted(item["code"] for item in json.loads(warm.stdout))
    assert codes == ["TML201", "TML204"]
    # Fixes survive the round trip: the text report's [*] markers and summary match.
    assert run(["src"], project).stdout == run(["--no-cache", "src"], project).stdout


@pytest.mark.slow
def test_warm_run_reads_the_cache(project):
    """An entry's findings are what a warm run prints (so it did not lint again)."""
    run(["src/dropout.py"], project)
    [entry] = entries(project / ".torchmemlint_cache")
    data = load_entry(entry)
    data["findings"][0]["m"] = "FROM THE CACHE"
    store_entry(entry, data)  # an entry this user's secret signs is trusted
    assert "TML204 FROM THE CACHE" in run(["src/dropout.py"], project).stdout
    assert "FROM THE CACHE" not in run(["--no-cache", "src/dropout.py"], project).stdout
    entry.write_text("{not json")  # a corrupt entry is a miss, then rewritten
    assert "TML204 " in run(["src/dropout.py"], project).stdout
    assert load_entry(entry)["findings"][0]["m"] != "FROM THE CACHE"


@pytest.mark.slow
def test_no_cache_writes_nothing(project):
    run(["--no-cache", "src"], project)
    assert not (project / ".torchmemlint_cache").exists()


@pytest.mark.slow
def test_an_edited_file_is_linted_again(project):
    run(["src"], project)
    (project / "src" / "dropout.py").write_text(DROPOUT.replace(", inplace=True", ""))
    assert "TML204" not in run(["src"], project).stdout
    (project / "src" / "clean_0.py").write_text(DROPOUT)
    assert "clean_0.py:4:9: TML204" in run(["src"], project).stdout
    # Same size, same mtime, other content: the key is the content, not the stat.
    target = project / "src" / "clean_1.py"
    stat = target.stat()
    target.write_text(target.read_text().replace("ones", "rand"))
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert target.stat().st_size == stat.st_size
    result = run(["--output-format", "json", "src/clean_1.py"], project)
    assert result.stdout.strip() == "[]"


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        ["--select", "TML204"],
        ["--ignore", "TML201"],
        ["--ignore-noqa"],
    ],
)
def test_the_key_holds_the_options(project, change):
    (project / "src" / "dropout.py").write_text(DROPOUT.rstrip("\n") + "  # noqa\n")
    base = run(["--output-format", "json", "src"], project)
    changed = run([*change, "--output-format", "json", "src"], project)
    uncached = run([*change, "--no-cache", "--output-format", "json", "src"], project)
    assert changed.stdout == uncached.stdout
    assert changed.stdout != base.stdout
    assert run(["--output-format", "json", "src"], project).stdout == base.stdout


@pytest.mark.slow
def test_the_key_holds_the_config_file_and_rule_options(project):
    run(["src"], project)
    (project / "pyproject.toml").write_text(
        '[tool.torchmemlint]\nper-file-ignores = { "leaky.py" = ["TML201"] }\n'
    )
    assert "TML201" not in run(["src"], project).stdout
    (project / "pyproject.toml").write_text("[tool.torchmemlint]\nextend-select = ['TML101']\n")
    assert run(["src"], project).stdout == run(["--no-cache", "src"], project).stdout


@pytest.mark.slow
def test_the_key_holds_the_rule_set(project):
    """A rule added to the rule path (here a test-only one) invalidates the entries."""
    (project / "src" / "variable.py").write_text(VARIABLE)
    assert "TML990" not in run(["src"], project).stdout
    with_rule = run(["src"], project, launch=SURFACE_LAUNCH)
    assert "variable.py:3:5: TML990" in with_rule.stdout
    assert "TML990" not in run(["src"], project).stdout


@pytest.mark.slow
def test_fix_and_diff_bypass_the_cache(project):
    run(["src"], project)
    before = entries(project / ".torchmemlint_cache")
    diff = run(["--diff", "src"], project)
    assert "+        self.act = nn.LeakyReLU(0.1, inplace=True)" in diff.stdout
    fixed = run(["--fix", "src"], project)
    assert "Fixed" in fixed.stdout or "fixed" in fixed.stdout
    assert "inplace=True" in (project / "src" / "leaky.py").read_text()
    assert entries(project / ".torchmemlint_cache") == before  # nothing written by --fix
    after = run(["--output-format", "json", "src"], project)
    assert [item["code"] for item in json.loads(after.stdout)] == ["TML204"]


@pytest.mark.slow
def test_stdin_bypasses_the_cache(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--stdin-filename", "x.py", "-"],
        cwd=tmp_path, input=DROPOUT, capture_output=True, text=True, env=env, timeout=120,
    )
    assert "x.py:4:9: TML204" in result.stdout
    assert not (tmp_path / ".torchmemlint_cache").exists()


@pytest.mark.slow
def test_where_the_cache_lives(project, tmp_path_factory):
    # Run from a subdirectory: the cache goes next to the config file.
    run(["leaky.py"], project / "src")
    assert entries(project / ".torchmemlint_cache")
    assert not (project / "src" / ".torchmemlint_cache").exists()
    # --cache-dir, and the environment variable.
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "c"
    run(["--cache-dir", str(elsewhere), "src"], project)
    assert len(entries(elsewhere)) == 6
    assert (elsewhere / ".gitignore").read_text().splitlines()[-1] == "*"
    assert (elsewhere / "CACHEDIR.TAG").read_text().startswith("Signature: 8a477f597d28d172")
    # Without a config file: the working directory.
    bare = tmp_path_factory.mktemp("bare")
    (bare / "dropout.py").write_text(DROPOUT)
    run(["--isolated", "dropout.py"], bare)
    assert entries(bare / ".torchmemlint_cache")


@pytest.mark.slow
def test_git_ignores_the_cache(project):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    run(["src"], project)
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=project, capture_output=True, text=True, check=True,
    ).stdout
    assert ".torchmemlint_cache" not in status
    assert "src/leaky.py" in status


@pytest.mark.slow
def test_concurrent_runs_share_the_cache_safely(project):
    src = project / "src"
    for index in range(30):
        (src / f"more_{index}.py").write_text(DROPOUT if index % 2 else LEAKY)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    command = [sys.executable, "-m", "torchmemlint", "-j", "2", "--output-format", "json", "src"]
    processes = [
        subprocess.Popen(command, cwd=project, stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(3)
    ]
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    expected = run(["--no-cache", "--output-format", "json", "src"], project).stdout
    assert outputs == [expected] * 3
    cache = project / ".torchmemlint_cache"
    for entry in entries(cache):
        load_entry(entry)  # whole entries only
    assert not list(cache.rglob(".tmp-*"))
    assert run(["--output-format", "json", "src"], project).stdout == expected


@pytest.mark.slow
def test_clean_removes_the_caches_torchmemlint_made_and_nothing_else(project):
    cache = project / ".torchmemlint_cache"
    elsewhere = project / "elsewhere-cache"
    run(["src"], project)
    run(["--cache-dir", str(elsewhere), "src"], project)
    assert entries(cache) and entries(elsewhere)
    nested = project / "sub" / "pkg"
    nested.mkdir(parents=True)
    (nested / "pyproject.toml").write_text("[tool.torchmemlint]\n")
    (nested / "m.py").write_text(DROPOUT)
    run(["sub/pkg"], project)  # its own cache, next to its config
    assert entries(nested / ".torchmemlint_cache")
    # a look-alike: a user's directory of the same name that torchmemlint did not make
    lookalike = project / "data" / ".torchmemlint_cache"
    lookalike.mkdir(parents=True)
    (lookalike / "keep.txt").write_text("mine\n")

    result = run(["clean"], project)
    assert result.returncode == 0, result.stderr
    assert not cache.exists() and not (nested / ".torchmemlint_cache").exists()
    assert (lookalike / "keep.txt").exists()
    assert elsewhere.exists()  # not under the default name: only by --cache-dir
    assert result.stdout.count("Removed ") == 2

    result = run(["clean", "--cache-dir", str(elsewhere)], project)
    assert result.returncode == 0 and not elsewhere.exists()
    assert run(["clean"], project).stdout.strip() == "No torchmemlint cache found"
    # a directory that is not ours is refused in one line, and kept
    refused = run(["clean", "--cache-dir", str(project / "data")], project)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert (lookalike / "keep.txt").exists()
    missing = run(["clean", "nowhere"], project)
    assert missing.returncode == 2 and "nowhere: no such directory" in missing.stderr
