"""The pre-commit hooks, through the real ``pre-commit try-repo`` on a throwaway git repository."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# What pre-commit needs of this repository to build the hook environment.
HOOK_SOURCES = ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml", "torchmemlint")
# The test-only rules (TML990 has a safe fix) go into the snapshot's rule package, so the fix
# hook has something to fix whatever the real rules' fixes are.
FIXTURE_RULES = Path(__file__).parent / "data" / "surface_rules" / "rules" / "fixture_rules.py"

CLEAN = "import os\n\nprint(os.getcwd())\n"
BAD = (
    "from torch.autograd import Variable\n"
    "\n"
    "def forward(self, x):\n"
    "    return self.block(Variable(x))\n"
)
FIXED = BAD.replace("(Variable(x))", "(x)")

GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
}


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, **GIT_IDENTITY}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout


def snapshot_of_this_repository(destination: Path) -> str:
    """Commit the working tree's hook sources (committed or not) to a fresh repository.

    try-repo on a dirty checkout makes a new shadow commit, and so a new hook environment,
    every run; a snapshot commit is built into one environment and reused by every call.
    """
    listed = git("ls-files", "-co", "--exclude-standard", "--", *HOOK_SOURCES, cwd=REPO)
    for relative in listed.splitlines():
        if (REPO / relative).is_file():
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / relative, destination / relative)
    shutil.copy2(FIXTURE_RULES, destination / "torchmemlint" / "rules" / FIXTURE_RULES.name)
    git("init", "-q", cwd=destination)
    git("add", "-A", cwd=destination)
    git("commit", "-q", "-m", "snapshot", cwd=destination)
    return git("rev-parse", "HEAD", cwd=destination).strip()


@pytest.mark.slow
def test_try_repo_check_fails_and_fix_rewrites(tmp_path):
    """``pre-commit try-repo`` of this repository, every hook of its manifest in one run (check,
    then fix). try-repo builds a fresh hook environment at each call, so it runs once here; that
    a second run passes after the fix is shown by the pinned config below (same hooks, one
    environment for both runs)."""
    hook_repo, project, home = (tmp_path / name for name in ("hook-repo", "project", "home"))
    hook_repo.mkdir()
    project.mkdir()
    ref = snapshot_of_this_repository(hook_repo)
    git("init", "-q", cwd=project)
    (project / "clean.py").write_text(CLEAN, encoding="utf-8")
    (project / "bad.py").write_text(BAD, encoding="utf-8")
    git("add", "-A", cwd=project)
    env = {**os.environ, **GIT_IDENTITY, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    first = subprocess.run(
        [sys.executable, "-m", "pre_commit", "try-repo", str(hook_repo), "--ref", ref,
         "--verbose", "--files", "clean.py", "bad.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=540,
    )
    output = first.stdout + first.stderr
    assert first.returncode == 1, output
    check_part, _, fix_part = output.partition("torchmemlint (fix)")
    assert "bad.py:4:23: TML990" in check_part and "Failed" in check_part
    assert "files were modified by this hook" in fix_part
    assert (project / "bad.py").read_text(encoding="utf-8") == FIXED
    assert (project / "clean.py").read_text(encoding="utf-8") == CLEAN


def documented_configs() -> list:
    """The .pre-commit-config.yaml blocks of docs/surfaces.md, verbatim."""
    text = (REPO / "docs" / "surfaces.md").read_text(encoding="utf-8")
    return re.findall(r"```yaml\n(# \.pre-commit-config\.yaml\n.*?)```", text, re.S)


def run_pre_commit(project: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", "run", "--all-files", "--verbose"],
        cwd=project, env=env, capture_output=True, text=True, timeout=540,
    )


@pytest.mark.slow
def test_the_documented_configs_work_verbatim(tmp_path):
    pinned, local = documented_configs()
    hook_repo, home = tmp_path / "hook-repo", tmp_path / "home"
    hook_repo.mkdir()
    snapshot_of_this_repository(hook_repo)
    # The pinned config names the tag of this version; a clone's path stands in for the URL.
    version = re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(), re.M)[1]
    [rev] = re.findall(r"^\s*rev: (\S+)", pinned, re.M)
    assert rev == f"v{version}"
    git("tag", rev, cwd=hook_repo)
    [url] = re.findall(r"^\s*- repo: (\S+)", pinned, re.M)
    env = {**os.environ, **GIT_IDENTITY, "PRE_COMMIT_HOME": str(home), "PRE_COMMIT_COLOR": "never"}
    # `language: system` runs the torchmemlint installed where you commit from: this one.
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env["PATH"]

    for name, config, bad, fixed, code in (
        ("pinned", pinned.replace(url, str(hook_repo)), BAD, FIXED, None),
        ("local", local, CHECKPOINT, None, "TML401"),
    ):
        project = tmp_path / name
        project.mkdir()
        git("init", "-q", cwd=project)
        (project / ".pre-commit-config.yaml").write_text(config, encoding="utf-8")
        (project / "clean.py").write_text(CLEAN, encoding="utf-8")
        (project / "bad.py").write_text(bad, encoding="utf-8")
        git("add", "-A", cwd=project)
        first = run_pre_commit(project, env)
        output = first.stdout + first.stderr
        assert first.returncode == 1, (name, output)
        if fixed is not None:  # the fix hook (listed first) rewrote it and failed
            assert "files were modified by this hook" in output, output
            assert (project / "bad.py").read_text(encoding="utf-8") == fixed
        else:  # the check failed on the finding
            assert f"bad.py:2:5: {code}" in output, (name, output)
            (project / "bad.py").write_text(CHECKPOINT_FIXED, encoding="utf-8")
        git("add", "-A", cwd=project)
        second = run_pre_commit(project, env)
        assert second.returncode == 0, (name, second.stdout + second.stderr)
        if fixed is not None:  # both hooks (fix, then check) ran on the fixed file and passed
            assert second.stdout.count("Passed") == 2, second.stdout


CHECKPOINT = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(f, x)\n"
CHECKPOINT_FIXED = CHECKPOINT.replace("(f, x)", "(f, x, use_reentrant=False)")
