"""The result cache trusts only what this user's torchmemlint wrote, and only in its schema.

Driven through the real CLI; each run gets its own user cache directory (XDG_CACHE_HOME), where
the per-user secret that signs the entries lives.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DROPOUT = "import torch\nfrom torch import nn\n\nlayer = nn.Dropout(0.1, inplace=True)\n"


def run(args, cwd, home: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))}
    env["PYTHONPATH"] = str(REPO)
    env["XDG_CACHE_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return result


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[tool.torchmemlint]\n")
    (root / "src" / "dropout.py").write_text(DROPOUT)
    return root


def entries(project: Path):
    return sorted((project / ".torchmemlint_cache").glob("*/*/*.json"))


def secret_of(home: Path) -> bytes:
    return (home / "torchmemlint" / "secret").read_bytes().strip()


def rewrite(entry: Path, body: bytes, home: Path = None) -> None:
    """Replace an entry's JSON; signed with ``home``'s secret as torchmemlint signs entries,
    or, for a cache with no signatures, as plain JSON."""
    if home is None:
        entry.write_bytes(body)
        return
    mac = hmac.new(secret_of(home), entry.name.encode() + b"\0" + body, hashlib.sha256)
    entry.write_bytes(mac.hexdigest().encode() + b"\n" + body)


def read_json(entry: Path):
    raw = entry.read_bytes()
    head, _, rest = raw.partition(b"\n")
    return json.loads(rest if rest and len(head) == 64 else raw)


def test_a_shipped_cache_with_forged_entries_is_not_trusted(project, tmp_path):
    author, user = tmp_path / "author-home", tmp_path / "user-home"
    expected = run(["--no-cache", "src"], project, user).stdout
    assert "TML204" in expected
    run(["src"], project, author)  # the repository's author fills the cache, then forges it
    [entry] = entries(project)
    data = read_json(entry)
    data["findings"] = []
    signed = len(entry.read_bytes().partition(b"\n")[0]) == 64
    rewrite(entry, json.dumps(data).encode(), author if signed else None)
    assert run(["src"], project, author).stdout == "All checks passed!\n"  # the author's own
    result = run(["src"], project, user)  # anyone else: a miss, the file is linted
    assert result.stdout == expected and result.returncode == 1


def test_forged_control_characters_never_reach_the_terminal(project, tmp_path):
    author, user = tmp_path / "author-home", tmp_path / "user-home"
    run(["src"], project, author)
    [entry] = entries(project)
    data = read_json(entry)
    data["findings"][0]["m"] = "\x1b[2J\x1b]0;owned\x07 forged"
    signed = len(entry.read_bytes().partition(b"\n")[0]) == 64
    rewrite(entry, json.dumps(data).encode(), author if signed else None)
    # escaped for the author who signed it (so the text report escapes every message) ...
    out = run(["src"], project, author).stdout
    assert "\x1b" not in out and "\x07" not in out
    assert "src/dropout.py:4:9: TML204 \\x1b[2J\\x1b]0;owned\\x07 forged" in out
    # ... and a miss for anyone else
    out = run(["src"], project, user).stdout
    assert "forged" not in out and "src/dropout.py:4:9: TML204" in out


def test_control_characters_in_file_names_are_escaped(tmp_path):
    (tmp_path / "evil\x1b[31m.py").write_text(DROPOUT)
    out = run(["--no-cache", "."], tmp_path, tmp_path / "home").stdout
    assert "\x1b" not in out and "evil\\x1b[31m.py:4:9: TML204" in out


@pytest.mark.parametrize(
    "body",
    [
        b"null",
        b"[]",
        b"[" * 100_000 + b"]" * 100_000,
        b'{"content": 1, "filename": "src/dropout.py", "findings": []}',
        "findings-not-a-list",
        "message-not-a-string",
        "row-beyond-the-file",
        "unknown-code",
        "location-of-three",
    ],
    ids=lambda body: body if isinstance(body, str) else body[:8].decode(),
)
def test_an_entry_of_another_shape_is_a_miss_even_when_signed(project, tmp_path, body):
    """Entries signed with the user's own secret, so that they reach the schema checks."""
    home = tmp_path / "home"
    expected = run(["--no-cache", "src"], project, home).stdout
    run(["src"], project, home)
    [entry] = entries(project)
    if isinstance(body, str):
        data = read_json(entry)
        finding = data["findings"][0]
        if body == "findings-not-a-list":
            data["findings"] = {"0": finding}
        elif body == "message-not-a-string":
            finding["m"] = ["forged"]
        elif body == "row-beyond-the-file":
            finding["s"] = [999, 1]
        elif body == "unknown-code":
            finding["c"] = "XYZ999"
        else:
            finding["e"] = [4, 9, 1]
        body = json.dumps(data).encode()
    signed = len(entry.read_bytes().partition(b"\n")[0]) == 64
    rewrite(entry, body, home if signed else None)
    result = run(["src"], project, home)
    assert result.stdout == expected and result.returncode == 1


def test_the_secret_is_private_and_without_it_nothing_is_cached(project, tmp_path):
    home = tmp_path / "home"
    run(["src"], project, home)
    secret = home / "torchmemlint" / "secret"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret.parent.stat().st_mode) == 0o700
    assert len(secret_of(home)) >= 32
    # a user cache directory that cannot hold the secret: no cache at all, same findings
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    other = tmp_path / "other"
    (other / "src").mkdir(parents=True)
    (other / "src" / "dropout.py").write_text(DROPOUT)
    result = run(["src"], other, blocked)
    assert "src/dropout.py:4:9: TML204" in result.stdout
    assert not (other / ".torchmemlint_cache").exists()
    # a secret others can read proves nothing: no cache either
    os.chmod(secret, 0o644)
    (project / ".torchmemlint_cache").rename(project / "old-cache")
    assert "TML204" in run(["src"], project, home).stdout
    assert not entries(project)
