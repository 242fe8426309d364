"""Nothing lost, nothing hung: crafted and everyday edge cases, driven through the real CLI.

Files too deep for Python, a worker killed mid-file, FIFOs, undecodable standard input with
--fix, --fix against symlinks, hard links, other owners, read-only files and concurrent writers,
unreadable paths, and Ctrl-C.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# One TML401 finding (checkpoint without use_reentrant) with a fix: a file that must be reported.
GOOD = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n"
FIX = ["--fix", "--unsafe-fixes"]
BLOCK = """
class Block{i}(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = nn.ReLU(inplace=True)
        self.drop = nn.Dropout(0.1, inplace=True)

    def forward(self, x):
        y = checkpoint(self.layer, x)
        return self.act(self.drop(y))
"""


def big_model(blocks: int) -> str:
    head = "import torch\nimport torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
    return head + "".join(BLOCK.format(i=i) for i in range(blocks))


def env():
    environment = {
        k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "TORCHMEMLINT"))
    }
    environment["PYTHONPATH"] = str(REPO)
    return environment


def run(args, cwd, timeout=120, **kwargs):
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd, capture_output=True, env=env(), timeout=timeout, **kwargs,
    )
    assert b"Traceback" not in result.stderr + result.stdout, result.stderr.decode()
    return result


def good_files(directory: Path, count: int = 8):
    directory.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (directory / f"good_{index}.py").write_text(GOOD)


# -- 1. files too deep for Python; a worker that dies -----------------------------------------
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_too_deep_or_too_long_is_cpythons_e999_and_the_others_are_still_reported(tmp_path, jobs):
    good_files(tmp_path / "src")
    (tmp_path / "src" / "deep.py").write_text("x = " + "(" * 1500 + "1" + ")" * 1500 + "\n")
    (tmp_path / "src" / "long.py").write_text("x = " + "1+" * 20000 + "1\n")
    # CPython refuses 201 nested brackets; libcst would parse it
    (tmp_path / "src" / "p201.py").write_text("x = " + "(" * 201 + "1" + ")" * 201 + "\n")
    # a look-alike Python accepts: linted as usual, no error
    (tmp_path / "src" / "p150.py").write_text(GOOD + "z = " + "(" * 150 + "1" + ")" * 150 + "\n")
    result = run(["--no-cache", "-j", jobs, "src"], tmp_path)
    out = result.stdout.decode()
    assert result.returncode == 1
    assert "src/deep.py:1:205: E999 SyntaxError: too many nested parentheses" in out
    assert "src/p201.py:1:205: E999 SyntaxError: too many nested parentheses" in out
    assert "src/long.py:1:1: E999 RecursionError" in out
    assert "TML900" not in out
    assert sum(f"src/good_{i}.py:2:5: TML401" in out for i in range(8)) == 8
    assert "src/p150.py:2:5: TML401" in out and "p150.py:3" not in out


def _children(pid: int):
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in text.split()]


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_worker_killed_mid_file_costs_only_that_file(tmp_path, jobs):
    """A native crash (here: SIGSEGV sent to the process linting the big file) is one E902
    naming the signal; every other file is still reported and the run exits non-zero."""
    src = tmp_path / "src"
    good_files(src)
    (src / "a_big.py").write_text(big_model(3000))  # first in order, ~7 s of CPU to lint
    process = subprocess.Popen(
        [sys.executable, "-m", "torchmemlint", "--no-cache", "-j", jobs, "src"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
    )
    deadline = time.monotonic() + 60
    children = []
    while time.monotonic() < deadline and not children:
        children = _children(process.pid)
        time.sleep(0.05)
    assert children, "no worker process: the files are linted in the main process"
    time.sleep(3.0)  # the small files are done by now; the big one is still being linted
    for child in _children(process.pid):
        os.kill(child, signal.SIGSEGV)
    out, err = process.communicate(timeout=120)
    text = out.decode()
    assert b"Traceback" not in err, err.decode()
    assert process.returncode == 1
    assert "src/a_big.py:1:1: E902" in text and "killed by SIGSEGV" in text
    assert sum(f"src/good_{i}.py:2:5: TML401" in text for i in range(8)) == 8


# -- 2. FIFOs -----------------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_not_a_regular_file_and_does_not_hang(tmp_path):
    good_files(tmp_path / "src", 2)
    os.mkfifo(tmp_path / "src" / "pipe.py")  # inside a directory
    os.mkfifo(tmp_path / "named.py")  # named on the command line
    result = run(["--no-cache", "named.py", "src"], tmp_path, timeout=60)
    out = result.stdout.decode()
    assert "named.py:1:1: E902 cannot read named.py: not a regular file" in out
    assert "src/pipe.py:1:1: E902 cannot read src/pipe.py: not a regular file" in out
    assert "src/good_0.py:2:5: TML401" in out and "src/good_1.py:2:5: TML401" in out
    assert result.returncode == 1
    fixed = run(["--no-cache", *FIX, "named.py"], tmp_path, timeout=60)  # --fix reads too
    assert "E902 cannot read named.py: not a regular file" in fixed.stdout.decode()


# -- 3. standard input with --fix: a buffer the editor can keep ---------------------------------
@pytest.mark.parametrize(
    "data",
    [
        b"# -*- coding: utf-8 -*-\ny = '\xff\xfe'\n",  # cannot be decoded
        b"x = " + b"(" * 300 + b"1" + b")" * 300 + b"\n",  # too deep for Python
        b"from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x\n",  # E999
    ],
    ids=["undecodable", "too-deep", "syntax-error"],
)
def test_stdin_fix_prints_the_input_unchanged_when_it_cannot_be_fixed(tmp_path, data):
    result = run(
        [*FIX, "--exit-zero", "--stdin-filename", "src/model.py", "-"], tmp_path, input=data
    )
    assert result.stdout == data  # the editor's buffer, byte for byte
    assert b"src/model.py:" in result.stderr and (b"E902" in result.stderr or b"E999" in result.stderr)
    assert result.returncode == 0


def test_stdin_fix_prints_the_fixed_source(tmp_path):
    result = run([*FIX, "--stdin-filename", "src/model.py", "-"], tmp_path, input=GOOD.encode())
    assert result.stdout.decode().startswith("from torch.utils.checkpoint import checkpoint\n")
    assert "use_reentrant=False" in result.stdout.decode()
    assert b"Fixed 1 finding" in result.stderr


# -- 4. --fix and the file system ---------------------------------------------------------------
def test_fix_writes_through_a_symlink_to_its_target(tmp_path):
    target = tmp_path / "real" / "model.py"
    target.parent.mkdir()
    target.write_text(GOOD)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    run(["--no-cache", *FIX, "link.py"], tmp_path)
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "use_reentrant=False" in target.read_text()


def test_fix_keeps_hard_links(tmp_path):
    first = tmp_path / "a.py"
    first.write_text(GOOD)
    second = tmp_path / "b.py"
    os.link(first, second)
    inode = first.stat().st_ino
    run(["--no-cache", *FIX, "a.py"], tmp_path)
    assert first.stat().st_ino == inode == second.stat().st_ino
    assert first.stat().st_nlink == 2
    assert "use_reentrant=False" in second.read_text()


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_fix_keeps_owner_group_and_mode(tmp_path):
    path = tmp_path / "theirs.py"
    path.write_text(GOOD)
    os.chown(path, 65534, 65534)
    os.chmod(path, 0o640)
    run(["--no-cache", *FIX, "theirs.py"], tmp_path)
    status = path.stat()
    assert "use_reentrant=False" in path.read_text()
    assert (status.st_uid, status.st_gid) == (65534, 65534)
    assert stat.S_IMODE(status.st_mode) == 0o640


def test_fix_does_not_rewrite_a_read_only_file(tmp_path):
    path = tmp_path / "frozen.py"
    path.write_text(GOOD)
    os.chmod(path, 0o444)
    result = run(["--no-cache", *FIX, "frozen.py"], tmp_path)
    assert path.read_text() == GOOD
    assert "frozen.py:1:1: E902 cannot write frozen.py: the file is read-only" in result.stdout.decode()
    assert result.returncode == 1


@pytest.mark.slow
def test_fix_never_overwrites_a_change_it_did_not_read(tmp_path):
    """Another program appends while --fix works on the file: every append survives (the
    fix is refused as "changed while fixing", or made before the first append)."""
    path = tmp_path / "model.py"
    path.write_text(big_model(300))
    stop = threading.Event()
    appended = []

    def append():
        index = 0
        while not stop.is_set():
            line = f"# appended {index}\n"
            with open(path, "a") as handle:
                handle.write(line)
            appended.append(line)
            index += 1
            time.sleep(0.02)

    process = subprocess.Popen(
        [sys.executable, "-m", "torchmemlint", "--no-cache", *FIX, "model.py"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env(),
    )
    time.sleep(0.5)
    writer = threading.Thread(target=append)
    writer.start()
    try:
        out, err = process.communicate(timeout=300)
    finally:
        stop.set()
        writer.join()
    text = path.read_text()
    assert appended and all(line in text for line in appended)
    assert b"Traceback" not in err
    assert "model.py:1:1: E902 model.py: changed while fixing" in out.decode()


# -- 5. unreadable paths -----------------------------------------------------------------------
SETPRIV = shutil.which("setpriv")


def run_without_root_powers(args, cwd):
    """The CLI as root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH: permission bits stop
    it as they stop any user (the tests run as root here, which they otherwise do not)."""
    prefix = []
    if os.geteuid() == 0:
        drop = "-dac_override,-dac_read_search"
        prefix = [SETPRIV, f"--inh-caps={drop}", f"--bounding-set={drop}"]
    result = subprocess.run(
        [*prefix, sys.executable, "-m", "torchmemlint", *args],
        cwd=cwd, capture_output=True, env=env(), timeout=120,
    )
    assert b"Traceback" not in result.stderr, result.stderr.decode()
    return result


@pytest.mark.skipif(os.geteuid() == 0 and SETPRIV is None, reason="needs setpriv as root")
def test_unreadable_files_and_directories_are_e902_and_the_rest_is_linted(tmp_path):
    good_files(tmp_path / "src", 2)
    hidden = tmp_path / "src" / "locked"
    good_files(hidden, 1)
    secret = tmp_path / "secret.py"
    secret.write_text(GOOD)
    os.chmod(secret, 0)
    os.chmod(hidden, 0)
    try:
        result = run_without_root_powers(["--no-cache", "secret.py", "src"], tmp_path)
    finally:
        os.chmod(hidden, 0o755)
    out = result.stdout.decode()
    assert "secret.py:1:1: E902 cannot read secret.py: Permission denied" in out
    assert "src/locked:1:1: E902 cannot read directory src/locked: Permission denied" in out
    assert "src/good_0.py:2:5: TML401" in out and "src/good_1.py:2:5: TML401" in out
    assert result.returncode == 1 and not result.stderr


# -- 6. Ctrl-C ---------------------------------------------------------------------------------
def _ctrl_c_as_in_a_terminal() -> None:
    # pytest-xdist's workers ignore SIGINT and a child inherits that (a program started with
    # SIGINT ignored must keep ignoring it, as POSIX shells start background jobs): the CLI is
    # started here as a terminal starts it, with SIGINT's default action.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize("where", ["stdin", "workers"])
def test_ctrl_c_stops_at_once_with_130(tmp_path, where):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "big.py").write_text(big_model(3000))  # ~7 s of CPU to lint
    args = ["--no-cache", "--stdin-filename", "big.py", "-"] if where == "stdin" else ["--no-cache", "-j", "1", "src"]
    process = subprocess.Popen(
        [sys.executable, "-m", "torchmemlint", *args],
        cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env(), preexec_fn=_ctrl_c_as_in_a_terminal,
    )
    if where == "stdin":
        process.stdin.write((tmp_path / "src" / "big.py").read_bytes())
    process.stdin.close()
    time.sleep(3.0)  # started, reading and linting (several seconds of work)
    assert process.poll() is None
    started = time.monotonic()
    process.send_signal(signal.SIGINT)
    out, err = process.stdout.read(), process.stderr.read()
    process.wait(timeout=30)
    assert time.monotonic() - started < 5
    assert process.returncode == 130
    assert err.decode().strip() == "torchmemlint: interrupted"
    assert b"TML900" not in out and b"Found" not in out


# A Ctrl-C that lands while the CLI is still importing its modules, or parsing the command line
# (on a loaded machine that is seconds): raised there on purpose, so the moment is not left to
# the scheduler.
INTERRUPT_AT = """
import sys
import click

if sys.argv[1] == "import":
    class Interrupt:
        def find_spec(self, name, path=None, target=None):
            if name == "torchmemlint.engine":
                raise KeyboardInterrupt
    sys.meta_path.insert(0, Interrupt())
else:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    click.Context.__init__ = interrupted
sys.argv = ["torchmemlint", "--no-cache", "src"]
from torchmemlint.__main__ import run
run()
"""


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["import", "parse"])
def test_ctrl_c_while_starting_is_the_same_one_line_and_130(tmp_path, moment):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text("import torch\n")
    result = subprocess.run(
        [sys.executable, "-c", INTERRUPT_AT, moment], cwd=tmp_path, capture_output=True,
        text=True, env=env(), timeout=60,
    )
    assert (result.returncode, result.stderr.strip(), result.stdout) == (
        130, "torchmemlint: interrupted", ""
    )
