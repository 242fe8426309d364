#!/usr/bin/env python3
"""Time torchmemlint against its peers on a real corpus and print ratios from the same run.

    python benchmarks/speed.py [--corpus S|M|L|TV|T|PATH] [--rounds N] [--peers a,b] [--json OUT]

Whole processes are timed (wall clock, CPU, peak RSS from ``os.wait4``), interleaved: every
round runs the candidate and then each peer once, the starting command rotating from round to
round.  Each ratio is candidate/peer *within* a round, and the median over rounds is reported:
machines here are shared and noisy, so only ratios from one run are comparable.

Commands (``{path}`` is the corpus root):
  torchmemlint     <repo>/.venv/bin/torchmemlint --no-cache --exit-zero -j 1 {path} (--candidate)
  torchmemlint-jN  the same with -j <all cores>                            (--jobs)
  torchmemlint-ALL      the same with --select ALL                         } --scenarios
  torchmemlint-cold     with the cache, its directory emptied before each run (the default rules)
  torchmemlint-warm     with the cache, filled by an untimed run first (an unchanged tree)
  torchmemlint-fix      --fix --unsafe-fixes --select ALL on a fresh copy of the corpus each run
  parse            libcst.parse_module on every file                         } floors, run by the
  positions        parse + MetadataWrapper.resolve(PositionProvider)         } candidate's python
  torchfix         TorchFix CLI, torchfix -j 1                               } from the peers venv
  tf-flake8        flake8 --isolated --select TOR -j 1 (TorchFix as plugin)  } (--peers-venv,
  fixit            fixit lint, default rules, one process                    }  default /tmp/peers)
  flake8           flake8 --isolated -j 1 from a plugin-free venv (context)
  ruff             ruff check --isolated --no-cache, one thread (context)
  ast              ast.parse on every file (opt-in floor)
  parse-gated      libcst.parse_module on the files the default rules cannot skip: those whose
                   text passes some default rule's gate (Rule.may_apply_at, as the engine tests it)
  parse-nogc       libcst.parse_module on every file, Python's cyclic garbage collector off during
                   each parse (with parse and parse-unchecked: what each of the two costs)
  parse-unchecked  every file parsed as torchmemlint parses it: libcst without its per-node
                   validation (torchmemlint.tree.parse_module), Python's cyclic garbage
                   collector off during each file (as torchmemlint's lint_source has it)

The floors run under the candidate's interpreter so that they use the very libcst that
torchmemlint calls.  Corpora are pinned PyPI wheels; only their .py files are extracted into a
cache outside the repository ($TML_CORPUS_DIR, else $XDG_CACHE_HOME/tml-corpus, else
/tmp/tml-corpus, reused when present).

Corpus D<LINES> (e.g. D20000) is generated: one model file of about LINES lines in which every
class has findings of most rules (dense_model below), for "files dense with findings" timings.

--lsp times the language server (``torchmemlint lsp`` over stdio, JSON-RPC written here): a
1,000-line generated model is opened, then changed --lsp-edits times; each didChange is timed
to the publishDiagnostics of that version (the server waits DEBOUNCE_SECONDS after a change
before it lints, so that wait is reported and subtracted: the re-lint the target is judged on),
and each didSave (no wait) likewise (its text is the one just linted: the server reuses that).
Beside it, in-process on the same texts: lint_source of the whole file, lint_source with an
incremental.Document kept across the edits (what the server runs), and the libcst parse.

Results: benchmarks/results/speed_<corpus>.json and .txt (git commit, rule list, versions,
every raw run, medians and ratios).  --profile also writes a cProfile summary of the candidate.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"

# name: (pinned requirement, wheel file prefix, member prefix extracted)
CORPORA = {
    "S": ("segmentation_models_pytorch==0.6.0", "segmentation_models_pytorch-0.6.0-",
          "segmentation_models_pytorch/"),
    "M": ("timm==1.0.31", "timm-1.0.31-", "timm/"),
    "L": ("transformers==5.24.0", "transformers-5.24.0-", "transformers/"),
    "TV": ("torchvision==0.29.1", "torchvision-0.29.1-", "torchvision/models/"),
    "T": ("torch==2.14.1", "torch-2.14.1-", "torch/"),
}
PLAIN_FLAKE8 = ["flake8==7.5.0", "pyflakes==4.1.0", "pycodestyle==2.15.0", "mccabe==0.7.0"]
ALL_PEERS = ["parse", "positions", "torchfix", "tf-flake8", "fixit", "flake8", "ruff", "parse-gated",
             "parse-nogc", "parse-unchecked", "ast"]
DEFAULT_PEERS = ALL_PEERS[:-4]
# Peers that take minutes a run on timm; --slow-rounds can time them in fewer rounds.
SLOW_PEERS = {"torchfix", "tf-flake8", "fixit"}
RATIO_COLUMNS = ["parse", "positions", "torchfix", "tf-flake8", "fixit", "flake8", "ruff", "ast",
                 "parse-gated", "parse-nogc", "parse-unchecked", "torchmemlint-cold"]
TARGET = ("positions", 1.5)  # the full default rule set within 1.5x of parse + positions
# issue 15 (row, column, limit): ratios of the same run, wall clock
TARGETS_15 = [
    ("torchmemlint-warm", "torchmemlint-cold", 0.10, "warm run of an unchanged tree / cold run"),
    ("torchmemlint-ALL", "parse", 1.5, "--select ALL cold / libcst parse"),
    ("torchmemlint", "parse", 1.0, "default rules / libcst parse"),
    # after the value graph and the project index: the budgets they were given
    ("torchmemlint", "parse", 1.1, "default rules / libcst parse, with the value graph"),
    ("torchmemlint-ALL", "parse", 1.3, "--select ALL (project index built) / libcst parse"),
]
DENSE_TARGET = ("torchmemlint-ALL", "parse", 2.0, "findings-dense file, --select ALL / parse")

# fixit lints through a process pool of os.cpu_count() workers and has no --jobs flag; this
# runs its own CLI with that pool replaced by a plain loop, so it is one process like the rest.
FIXIT_SERIAL = (
    "import sys, trailrunner, trailrunner.core as core\n"
    "def serial(paths, func):\n"
    "    for path in paths:\n"
    "        yield path, func(path)\n"
    "trailrunner.run_iter = core.run_iter = serial\n"
    "from fixit.cli import main\n"
    "sys.exit(main())\n"
)


# -- floors: run as `python speed.py --floor MODE PATH` under the candidate's interpreter --------
def run_floor(mode: str, root: str) -> int:
    files = sorted(p for p in Path(root).rglob("*.py") if p.is_file())
    if mode == "ast":
        import ast

        for path in files:
            try:
                ast.parse(path.read_bytes(), filename=str(path))
            except (SyntaxError, ValueError):
                pass  # a linter reports these; the floor only has to read the rest
        return 0
    import libcst
    from libcst.metadata import MetadataWrapper, PositionProvider

    parse = libcst.parse_module
    if mode == "parse-nogc":
        import gc

        def parse(data: bytes):
            gc.disable()
            try:
                return libcst.parse_module(data)
            finally:
                gc.enable()
    if mode == "parse-unchecked":
        import gc

        from torchmemlint.tree import parse_module

        def parse(data: bytes):  # torchmemlint decodes first (sourcefile.decode_source)
            gc.disable()
            try:
                return parse_module(data.decode("utf-8"))
            finally:
                gc.enable()
    if mode == "parse-gated":
        from torchmemlint.rules import all_rules

        default = [rule for rule in all_rules().values() if rule.default_enabled]
        files = [
            path for path in files
            if any(rule.may_apply_at(path.read_bytes().decode("utf-8", "replace"), str(path)) for rule in default)
        ]
    for path in files:
        try:
            module = parse(path.read_bytes())
        except (libcst.ParserSyntaxError, UnicodeDecodeError):
            continue
        if mode == "positions":
            # unsafe_skip_copy as torchmemlint and TorchFix do: no deep copy of the tree
            MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    return 0


# -- corpora ------------------------------------------------------------------------------------
def cache_dir() -> Path:
    if os.environ.get("TML_CORPUS_DIR"):
        return Path(os.environ["TML_CORPUS_DIR"])
    if os.environ.get("XDG_CACHE_HOME"):
        return Path(os.environ["XDG_CACHE_HOME"]) / "tml-corpus"
    return Path("/tmp/tml-corpus")


def pip_command(peers_venv: Path) -> list:
    """A pip to download with: this interpreter's, else the peers venv's."""
    probe = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip"]
    return [str(peers_venv / "bin" / "python"), "-m", "pip"]


def materialise(name: str, peers_venv: Path) -> Path:
    """The corpus root, downloading the pinned wheel and extracting its .py files if needed."""
    requirement, wheel_prefix, member_prefix = CORPORA[name]
    cache = cache_dir()
    root = cache / name / member_prefix.rstrip("/")
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    found = sorted(wheels.glob(wheel_prefix + "*.whl"))
    if not found:
        command = [*pip_command(peers_venv), "download", "--no-deps", "--only-binary=:all:",
                   "--python-version", "3.11", "-d", str(wheels), requirement]
        print("+", " ".join(command), file=sys.stderr)
        subprocess.run(command, check=True)
        found = sorted(wheels.glob(wheel_prefix + "*.whl"))
    if not found:
        raise SystemExit(f"no wheel for {requirement} after pip download")
    wheel = found[0]
    stamp = cache / name / ".complete"
    if not (stamp.exists() and stamp.read_text() == wheel.name):
        dest = cache / name
        if dest.exists():
            subprocess.run(["rm", "-rf", str(dest)], check=True)
        dest.mkdir(parents=True)
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                if info.filename.startswith(member_prefix) and info.filename.endswith(".py"):
                    archive.extract(info, dest)  # raw bytes: encodings, BOMs, CRLF kept
        stamp.write_text(wheel.name)
    return root


DENSE_CLASS = '''

class Block{i}(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.act = nn.LeakyReLU(0.1)
        self._relu = nn.ReLU()
        self.drop = nn.Dropout(0.1, inplace=True)
        self.features = []

    def forward(self, x):
        y = self.act(self.bn(self.conv(x)))
        y = self._relu(self.conv(self._relu(y)))
        y = checkpoint(self.conv, y)
        self.features.append(y)
        self.last = y
        return self.drop(y)


def train_{i}(model, loader, optimizer):
    total = 0
    for x, target in loader:
        loss = F.cross_entropy(model(x), target)
        loss.backward(retain_graph=True)
        total += loss
    return total
'''


def dense_model(lines: int) -> str:
    """A model file of about ``lines`` lines where every class and loop has findings."""
    head = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
            "from torch.utils.checkpoint import checkpoint\n")
    parts = [head]
    count = len(head.splitlines())
    index = 0
    while count < lines:
        block = DENSE_CLASS.format(i=index)
        parts.append(block)
        count += len(block.splitlines())
        index += 1
    return "".join(parts)


def materialise_dense(name: str) -> Path:
    lines = int(name[1:])
    root = cache_dir() / name
    root.mkdir(parents=True, exist_ok=True)
    target = root / "dense_model.py"
    text = dense_model(lines)
    if not target.exists() or target.read_text() != text:
        target.write_text(text)
    return root


def corpus_stats(root: Path) -> dict:
    files = lines = size = 0
    for path in root.rglob("*.py"):
        data = path.read_bytes()
        files += 1
        size += len(data)
        lines += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return {"files": files, "lines": lines, "bytes": size}


def plain_flake8() -> Path | None:
    """flake8 without plugins: a venv with TorchFix runs TorchFix whatever --select says."""
    env = cache_dir() / "venv-flake8"
    exe = env / "bin" / "flake8"
    if not exe.exists():
        print(f"+ creating {env} ({' '.join(PLAIN_FLAKE8)})", file=sys.stderr)
        try:
            venv.EnvBuilder(with_pip=True, clear=True).create(env)
            subprocess.run([str(env / "bin" / "python"), "-m", "pip", "install", "-q",
                            *PLAIN_FLAKE8], check=True)
        except (OSError, subprocess.CalledProcessError) as error:
            print(f"note: no plain flake8 ({error}); skipping it", file=sys.stderr)
            return None
    return exe


# -- commands -----------------------------------------------------------------------------------
def build_commands(args, root: Path) -> list:
    """(name, shell command) pairs: the candidate rows first, then the peers that exist."""
    path = shlex.quote(str(root))
    candidate = args.candidate
    commands = [("torchmemlint", candidate.format(path=path, jobs=1))]
    if args.jobs > 1:
        commands.append((f"torchmemlint-j{args.jobs}", candidate.format(path=path, jobs=args.jobs)))
    peers_bin = args.peers_venv / "bin"
    me = shlex.quote(str(Path(__file__).resolve()))
    floor = f"{shlex.quote(args.floor_python)} {me} --floor"
    if args.scenarios:
        exe = shlex.quote(str(Path(args.venv) / "bin" / "torchmemlint"))
        scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "tml-speed-scratch" / root.name
        cold, warm, copy = scratch / "cache-cold", scratch / "cache-warm", scratch / "copy"
        base = f"{exe} --exit-zero -j 1"
        commands += [
            ("torchmemlint-ALL", f"{base} --no-cache --select ALL {path}"),
            ("torchmemlint-cold", f"{base} --cache-dir {shlex.quote(str(cold))} {path}"),
            ("torchmemlint-warm", f"{base} --cache-dir {shlex.quote(str(warm))} {path}"),
            ("torchmemlint-fix", f"{base} --no-cache --fix --unsafe-fixes --select ALL "
                                 f"{shlex.quote(str(copy))}"),
        ]
        SETUP["torchmemlint-cold"] = lambda: shutil.rmtree(cold, ignore_errors=True)
        SETUP["torchmemlint-fix"] = lambda: (shutil.rmtree(copy, ignore_errors=True),
                                             shutil.copytree(root, copy))
        subprocess.run(f"{base} --cache-dir {shlex.quote(str(warm))} {path}", shell=True,
                       stdout=subprocess.DEVNULL, check=False)  # fill the warm cache, untimed
    available = {
        "parse": f"{floor} parse {path}",
        "positions": f"{floor} positions {path}",
        "ast": f"{floor} ast {path}",
        "parse-gated": f"{floor} parse-gated {path}",
        "parse-nogc": f"{floor} parse-nogc {path}",
        "parse-unchecked": f"{floor} parse-unchecked {path}",
        "torchfix": f"{peers_bin / 'torchfix'} -j 1 {path}",
        "tf-flake8": f"{peers_bin / 'flake8'} --isolated --select TOR -j 1 {path}",
        "fixit": f"{peers_bin / 'python'} -c {shlex.quote(FIXIT_SERIAL)} lint {path}",
        "ruff": f"RAYON_NUM_THREADS=1 {peers_bin / 'ruff'} check --isolated --no-cache {path}",
    }
    needs = {"torchfix": "torchfix", "tf-flake8": "flake8", "fixit": "fixit", "ruff": "ruff"}
    for name in args.peers:
        if name in needs and not (peers_bin / needs[name]).exists():
            print(f"note: {peers_bin / needs[name]} missing, skipping {name}; set up the peers "
                  f"venv once: python3 -m venv {args.peers_venv} && {peers_bin / 'pip'} install "
                  "torchfix fixit ruff flake8 libcst", file=sys.stderr)
            continue
        if name == "flake8":
            exe = plain_flake8()
            if exe is not None:
                commands.append((name, f"{exe} --isolated -j 1 {path}"))
            continue
        commands.append((name, available[name]))
    return commands


# -- timing -------------------------------------------------------------------------------------
SETUP: dict = {}  # name -> untimed callable run before each timed run of that command


def run_once(command: str, out_path: Path, timeout: float, name: str = "") -> dict:
    """One whole process under /bin/sh: wall clock, its CPU and peak RSS from the kernel."""
    if name in SETUP:
        SETUP[name]()
    with open(out_path, "wb") as out, open(os.devnull, "rb") as devnull:
        start = time.perf_counter()
        process = subprocess.Popen(["/bin/sh", "-c", command], stdin=devnull, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        timed_out = False
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - start > timeout:
                timed_out = True
                os.killpg(process.pid, signal.SIGKILL)
                pid, status, usage = os.wait4(process.pid, 0)
                break
            time.sleep(0.002)
        wall = time.perf_counter() - start
    try:  # leftovers of the command's process group are killed, not timed
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime,
            "peak_mb": usage.ru_maxrss / 1024, "rc": os.waitstatus_to_exitcode(status),
            "timed_out": timed_out}


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def time_commands(commands, args, outdir: Path) -> list:
    """Rounds of {name: run}; slow peers sit out the rounds after --slow-rounds."""
    for round_index in range(args.warmup):
        for name, command in commands:
            if name not in SLOW_PEERS:
                run = run_once(command, outdir / f"{name}.out", args.timeout, name)
                print(f"  [warm-up] {name:18s} {run['wall']:8.2f}s", file=sys.stderr, flush=True)
    rounds = []
    for round_index in range(args.rounds):
        shift = round_index % len(commands)
        this = {}
        for name, command in commands[shift:] + commands[:shift]:
            if name in SLOW_PEERS and round_index >= args.slow_rounds:
                continue
            run = run_once(command, outdir / f"{name}.out", args.timeout, name)
            this[name] = run
            print(f"  [round {round_index + 1}/{args.rounds}] {name:18s} wall {run['wall']:8.2f}s"
                  f" user {run['user']:8.2f}s peak {run['peak_mb']:6.0f}MB rc {run['rc']}"
                  f"{' TIMEOUT' if run['timed_out'] else ''}", file=sys.stderr, flush=True)
        rounds.append(this)
    return rounds


def summarise(commands, rounds, outdir: Path) -> dict:
    summary = {}
    for name, command in commands:
        runs = [r[name] for r in rounds if name in r]
        walls = [r["wall"] for r in runs]
        cpus = [r["user"] + r["sys"] for r in runs]
        with open(outdir / f"{name}.out", "rb") as output:
            out_lines = sum(1 for _ in output)
        summary[name] = {
            "command": command, "runs": len(runs), "wall_median": median(walls),
            "wall_min": min(walls), "wall_max": max(walls), "cpu_median": median(cpus),
            "peak_mb_median": median([r["peak_mb"] for r in runs]),
            "exit_codes": sorted({r["rc"] for r in runs}),
            "timed_out": any(r["timed_out"] for r in runs), "output_lines": out_lines,
        }
    return summary


def ratios(commands, rounds) -> dict:
    """candidate/peer per round (wall and CPU), median over the rounds both ran in."""
    names = [n for n, _ in commands]
    table = {}
    for candidate in (n for n in names if n.startswith("torchmemlint")):
        row = {}
        for peer in (n for n in RATIO_COLUMNS if n in names):
            pairs = [(r[candidate], r[peer]) for r in rounds if candidate in r and peer in r]
            row[peer] = {
                "wall": median([c["wall"] / p["wall"] for c, p in pairs if p["wall"] > 0]),
                "cpu": median([(c["user"] + c["sys"]) / (p["user"] + p["sys"])
                               for c, p in pairs if p["user"] + p["sys"] > 0]),
                "rounds": len(pairs),
            }
        table[candidate] = row
    return table


# -- language server ----------------------------------------------------------------------------
LSP_DRIVER = r'''
import json, os, statistics, subprocess, sys, time

exe, path, edits = sys.argv[1], sys.argv[2], int(sys.argv[3])
server = subprocess.Popen([exe, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL)

def send(message):
    body = json.dumps(message).encode()
    server.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    server.stdin.flush()

def receive():
    length = None
    while True:
        line = server.stdout.readline()
        if not line:
            raise SystemExit("the server exited")
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(server.stdout.read(length))

def wait_diagnostics(uri, version):
    while True:
        message = receive()
        if message.get("id") is not None and "method" in message:  # a request: answer it
            send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            continue
        if message.get("method") == "textDocument/publishDiagnostics":
            params = message["params"]
            if params["uri"] == uri and params.get("version") == version:
                return len(params["diagnostics"])

uri = "file://" + os.path.abspath(path)
text = open(path).read()
send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
      "params": {"processId": None, "rootUri": "file://" + os.path.dirname(os.path.abspath(path)),
                 "capabilities": {}}})
while receive().get("id") != 1:
    pass
send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
    "uri": uri, "languageId": "python", "version": 1, "text": text}}})
diagnostics = wait_diagnostics(uri, 1)
change, save = [], []
version = 1
for index in range(edits):
    version += 1
    edited = text + f"\nvalue_{index} = {index}\n"  # a keystroke's worth of change
    start = time.perf_counter()
    send({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
        "textDocument": {"uri": uri, "version": version},
        "contentChanges": [{"text": edited}]}})
    wait_diagnostics(uri, version)
    change.append(time.perf_counter() - start)
    start = time.perf_counter()
    send({"jsonrpc": "2.0", "method": "textDocument/didSave", "params": {
        "textDocument": {"uri": uri}}})
    wait_diagnostics(uri, version)
    save.append(time.perf_counter() - start)
send({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None})
send({"jsonrpc": "2.0", "method": "exit", "params": None})
server.wait(timeout=30)

# the same text in-process: lint_source and libcst's parse alone
import libcst
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source
from torchmemlint.incremental import Document
from torchmemlint.lsp import DEBOUNCE_SECONDS
lint, parse, relint = [], [], []
document = Document()
lint_source(text, path, Settings(), document=document)
for index in range(edits):
    edited = text + f"\nvalue_{index} = {index}\n"
    start = time.perf_counter(); libcst.parse_module(edited); parse.append(time.perf_counter() - start)
    start = time.perf_counter(); lint_source(edited, path, Settings()); lint.append(time.perf_counter() - start)
    start = time.perf_counter(); lint_source(edited, path, Settings(), document=document)
    relint.append(time.perf_counter() - start)
print(json.dumps({"diagnostics": diagnostics, "debounce_s": DEBOUNCE_SECONDS,
                  "did_change_s": change, "did_save_s": save, "lint_source_s": lint,
                  "relint_s": relint, "parse_s": parse}))
'''


def time_lsp(args) -> dict:
    """The server's didChange/didSave -> diagnostics on a 1,000-line model, parse beside it."""
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / "tml-speed-scratch" / "lsp"
    scratch.mkdir(parents=True, exist_ok=True)
    model = scratch / "model_1000.py"
    model.write_text(dense_model(1000))
    python = str(Path(args.venv) / "bin" / "python")
    exe = str(Path(args.venv) / "bin" / "torchmemlint")
    done = subprocess.run([python, "-c", LSP_DRIVER, exe, str(model), str(args.lsp_edits)],
                          capture_output=True, text=True, timeout=1800, cwd=scratch)
    if done.returncode != 0:
        raise SystemExit(f"LSP timing failed: {done.stderr[-2000:]}")
    raw = json.loads(done.stdout.strip().splitlines()[-1])
    lines = len(model.read_text().splitlines())
    change = median(raw["did_change_s"])
    return {
        "file_lines": lines, "edits": args.lsp_edits, "diagnostics": raw["diagnostics"],
        "debounce_s": raw["debounce_s"],
        "did_change_median_s": change,
        "did_change_minus_debounce_median_s": change - raw["debounce_s"],
        "did_save_median_s": median(raw["did_save_s"]),
        "lint_source_median_s": median(raw["lint_source_s"]),
        "relint_median_s": median(raw["relint_s"]),
        "parse_median_s": median(raw["parse_s"]),
        "raw": raw,
    }


def render_lsp(lsp: dict) -> str:
    ms = lambda seconds: f"{1000 * seconds:.0f} ms"  # noqa: E731
    return "\n".join([
        f"LSP on a generated {lsp['file_lines']}-line model ({lsp['diagnostics']} diagnostics), "
        f"median of {lsp['edits']} edits:",
        f"  didChange -> diagnostics  {ms(lsp['did_change_median_s'])} "
        f"(= {ms(lsp['debounce_s'])} debounce + {ms(lsp['did_change_minus_debounce_median_s'])})",
        f"  didSave -> diagnostics    {ms(lsp['did_save_median_s'])} (no debounce; the text is "
        "the one the didChange linted, so the server reuses those findings)",
        f"  lint_source in-process    {ms(lsp['lint_source_median_s'])} (the whole file; "
        f"{ms(lsp['relint_median_s'])} with the buffer's kept parse, as the server re-lints)",
        f"  libcst parse of the file  {ms(lsp['parse_median_s'])}",
        # The re-lint of an edited text: didChange less the debounce (a didSave of text already
        # linted is a lookup, not a re-lint).
        f"  target: re-lint < 100 ms: didChange - debounce "
        f"{ms(lsp['did_change_minus_debounce_median_s'])} -> "
        f"{'met' if lsp['did_change_minus_debounce_median_s'] < 0.1 else 'MISSED'}",
    ])


# -- provenance ---------------------------------------------------------------------------------
def capture(command: list, cwd: Path = REPO) -> str:
    try:
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"<{error}>"
    return (done.stdout + done.stderr).strip()


def byte_compile(args) -> "str | None":
    """Byte-compile the torchmemlint package the candidate imports (``compileall``, as pip
    does when it installs a wheel); its directory, or None when it cannot be found. A user's
    installed torchmemlint starts from bytecode; a checkout run where PYTHONDONTWRITEBYTECODE
    is set would compile every module at every start (about 0.1 s of CPU here)."""
    python = str(Path(args.venv) / "bin" / "python")
    found = subprocess.run([python, "-c", "import os, torchmemlint; print(os.path.dirname(torchmemlint.__file__))"],
                           capture_output=True, text=True, cwd=REPO)
    package = found.stdout.strip()
    if found.returncode or not package:
        return None
    done = subprocess.run([python, "-m", "compileall", "-q", package], capture_output=True)
    return package if done.returncode == 0 else None


def provenance(args, commands) -> dict:
    venv_bin = Path(args.venv) / "bin"
    rule_listing = capture([str(venv_bin / "torchmemlint"), "rule", "--all"])
    rules = []
    for line in rule_listing.splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 4 and re.fullmatch(r"[A-Z]+\d+", fields[0]):
            rules.append({"code": fields[0], "name": fields[1], "default": fields[2],
                          "fix": fields[3]})
    dirty = capture(["git", "status", "--porcelain", "--", "torchmemlint"]).splitlines()
    peers_python = str(args.peers_venv / "bin" / "python")
    version_probe = ("import importlib.metadata as m\n"
                     "for d in ('libcst','torchfix','fixit','ruff','flake8'):\n"
                     "    try: print(d, m.version(d))\n"
                     "    except m.PackageNotFoundError: pass\n")
    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "git_commit": capture(["git", "rev-parse", "HEAD"]),
        "git_describe": capture(["git", "describe", "--always", "--dirty"]),
        "uncommitted_torchmemlint_files": dirty,
        "source_digest": source_digest(),
        "torchmemlint_version": capture([str(venv_bin / "torchmemlint"), "--version"]),
        "rules": rules,
        "default_rules": [r["code"] for r in rules if r["default"] == "on"],
        "rule_listing": rule_listing,
        "floor_python": args.floor_python,
        "floor_versions": capture([args.floor_python, "-c", version_probe]).splitlines(),
        "peers_versions": capture([peers_python, "-c", version_probe]).splitlines()
        if Path(peers_python).exists() else [],
        "machine": {"cpus": os.cpu_count(), "cpu": _cpu_model(),
                    "python": platform.python_version(), "platform": platform.platform()},
    }


def source_digest() -> str:
    """A hash of torchmemlint's sources: the tree is shared, so it may change mid-run."""
    digest = hashlib.sha256()
    for path in sorted((REPO / "torchmemlint").rglob("*.py")):
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


# -- report -------------------------------------------------------------------------------------
def fmt(value, spec: str = ".2f") -> str:
    return "-" if value is None else format(value, spec)


def render(result: dict) -> str:
    corpus, meta, summary, table = (result["corpus"], result["provenance"], result["summary"],
                                    result["ratios"])
    lines = [
        f"torchmemlint speed: corpus {corpus['name']} "
        f"({corpus.get('requirement', corpus['root'])}: "
        f"{corpus['files']} files, {corpus['lines']} lines, {corpus['bytes'] / 1e6:.2f} MB)",
        f"commit {meta['git_describe']} ({meta['git_commit'][:12]}), {meta['date']}, "
        f"{meta['machine']['cpus']} CPUs ({meta['machine']['cpu']})",
        f"default rules ({len(meta['default_rules'])}): {' '.join(meta['default_rules']) or '-'}",
        f"floors: {'; '.join(meta['floor_versions'])} | peers: {'; '.join(meta['peers_versions'])}",
        "torchmemlint's modules: " + (
            f"byte-compiled before timing, as pip install does ({meta['byte_compiled']})"
            if meta.get("byte_compiled") else "as found (a checkout under PYTHONDONTWRITEBYTECODE: "
            "compiled at every start)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "as found"),
        f"{result['rounds']} interleaved rounds after {result['warmup']} warm-up" + (
            f"; slow peers ({', '.join(sorted(SLOW_PEERS))}) timed in {result['slow_rounds']}"
            " round(s)" if result["slow_rounds"] < result["rounds"] else ""),
        "",
        f"{'command':18s} {'wall med':>9s} {'(min-max)':>17s} {'cpu':>8s} {'peak MB':>8s} "
        f"{'rc':>4s} {'out lines':>9s}",
    ]
    for name, row in summary.items():
        span = f"({row['wall_min']:.2f}-{row['wall_max']:.2f})"
        lines.append(
            f"{name:18s} {fmt(row['wall_median']):>9s} {span:>17s} {fmt(row['cpu_median']):>8s} "
            f"{fmt(row['peak_mb_median'], '.0f'):>8s} {','.join(map(str, row['exit_codes'])):>4s} "
            f"{row['output_lines']:9d}{'  TIMEOUT' if row['timed_out'] else ''}")
    columns = [c for c in RATIO_COLUMNS if c in summary]
    lines += ["", "ratios: median over rounds of per-round wall ratios [CPU-time ratios]",
              f"{'':18s}" + "".join(f" {'/' + c:>16s}" for c in columns)]
    for candidate, row in table.items():
        cells = "".join(
            f" {fmt(row[c]['wall'], '.3f') + ' [' + fmt(row[c]['cpu'], '.2f') + ']':>16s}"
            for c in columns)
        lines.append(f"{candidate:18s}{cells}")
    for item in result.get("targets", []):
        lines.append(f"target: {item['what']} ({item['row']} / {item['column']}) <= "
                     f"{item['limit']}: {fmt(item['ratio'], '.3f')} -> "
                     f"{'met' if item['met'] else 'MISSED'}")
    lsp = result.get("lsp")
    if lsp:
        lines += ["", render_lsp(lsp)]
    verdict = result.get("target")
    if verdict:
        lines += ["", f"target: torchmemlint -j 1 / {TARGET[0]} <= {TARGET[1]}: "
                      f"{fmt(verdict['ratio'], '.3f')} -> {'met' if verdict['met'] else 'MISSED'}"]
    lines += ["", "peak MB = largest single process (ru_maxrss), not a sum over workers"]
    if result["source_changed_during_run"]:
        lines.append("WARNING: torchmemlint's source changed during the run; rounds timed "
                     "different code (rule list above is from the start): rerun")
    return "\n".join(lines) + "\n"


# -- profile ------------------------------------------------------------------------------------
def profile_candidate(args, root: Path, out_txt: Path, stats_file: Path) -> str:
    """cProfile one -j 1 run in-process; time per torchmemlint module and the top functions."""
    import pstats

    python = str(Path(args.venv) / "bin" / "python")
    # The CLI lints in a child process (``pool.run_isolated``, even with -j 1), which cProfile of
    # the parent would not see: the files are linted in this process instead, as the child would.
    script = (
        "import cProfile, sys; import torchmemlint.engine as e; "
        "e.run_isolated = lambda f, items, extra, jobs, on_death: [f(i, *extra) for i in items]; "
        "from torchmemlint.cli import main; out = sys.argv[1]; sys.argv = ['torchmemlint'] + sys.argv[2:]; "
        "cProfile.run('try:\\n main()\\nexcept SystemExit:\\n pass', out)"
    )
    subprocess.run([python, "-c", script, str(stats_file), "--no-cache", "--exit-zero", "-j", "1", str(root)],
                   stdout=subprocess.DEVNULL, check=True)
    stats = pstats.Stats(str(stats_file))
    per_module: dict = {}
    rows = []
    for (filename, line, function), (_, calls, tottime, cumtime, _) in stats.stats.items():
        module = filename
        if "torchmemlint" in filename:
            module = "torchmemlint/" + filename.split("torchmemlint/", 1)[-1]
        elif "libcst" in filename:
            module = "libcst/" + filename.split("libcst/", 1)[-1].split("/")[0]
        elif filename == "~":
            module = "builtins (" + function.split(" of ")[0].strip("<>{}") + ")"
        else:
            module = "other"
        per_module[module] = per_module.get(module, 0.0) + tottime
        rows.append((tottime, cumtime, calls, f"{Path(filename).name}:{line}({function})", module))
    total = sum(per_module.values())
    lines = [f"cProfile of torchmemlint --no-cache --exit-zero -j 1 {root} ({total:.1f} s own time in total,"
             f" after the timed rounds; raw stats for pstats: {stats_file})",
             "", "own time per module:"]
    for module, seconds in sorted(per_module.items(), key=lambda kv: -kv[1])[:20]:
        lines.append(f"  {seconds:8.2f} s {100 * seconds / total:5.1f}%  {module}")
    # what each rule module's visit_/leave_ methods cost, everything they call included
    per_rule: dict = {}
    for (filename, _, function), (_, _, _, cumtime, _) in stats.stats.items():
        if "torchmemlint/rules/" in filename and function.startswith(("visit_", "leave_")):
            key = "torchmemlint/rules/" + filename.split("torchmemlint/rules/", 1)[1]
            per_rule[key] = per_rule.get(key, 0.0) + cumtime
    lines += ["", "rule hooks (visit_*/leave_*, cumulative) per rules module:"]
    for module, seconds in sorted(per_rule.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {seconds:8.2f} s {100 * seconds / total:5.1f}%  {module}")
    lines += ["", "top functions by own time:", f"  {'own s':>8s} {'cum s':>8s} {'calls':>10s}"]
    for tottime, cumtime, calls, label, _ in sorted(rows, reverse=True)[:25]:
        lines.append(f"  {tottime:8.2f} {cumtime:8.2f} {calls:10d}  {label}")
    lines += ["", "torchmemlint functions by cumulative time:", f"  {'cum s':>8s} {'own s':>8s}"]
    ours = [row for row in rows if row[4].startswith("torchmemlint/")]
    for tottime, cumtime, calls, label, module in sorted(ours, key=lambda r: -r[1])[:25]:
        where = f"{module}:{label.split(':', 1)[1]}"
        lines.append(f"  {cumtime:8.2f} {tottime:8.2f} {calls:10d}  {where}")
    text = "\n".join(lines) + "\n"
    out_txt.write_text(text)
    return text


# -- main ---------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--floor", choices=["ast", "parse", "positions", "parse-gated", "parse-nogc", "parse-unchecked"],
                        help=argparse.SUPPRESS)
    parser.add_argument("floor_path", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--corpus", default="M", help="S, M, L, TV, T or a directory (default M)")
    parser.add_argument("--rounds", type=int, default=3, help="timed interleaved rounds (3)")
    parser.add_argument("--slow-rounds", type=int,
                        help="rounds that also time torchfix, tf-flake8, fixit (default: all)")
    parser.add_argument("--warmup", type=int, default=1,
                        help="untimed rounds of the fast commands first (1)")
    parser.add_argument("--peers", default=",".join(DEFAULT_PEERS),
                        help=f"comma list out of {','.join(ALL_PEERS)} (default: all but parse-gated, parse-nogc, parse-unchecked, ast)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="second candidate row with -j JOBS (default: all cores; 1: none)")
    parser.add_argument("--venv", default=str(REPO / ".venv"), help="torchmemlint's venv")
    parser.add_argument("--candidate", help="command template with {path} and {jobs} "
                        "(default: <venv>/bin/torchmemlint --exit-zero -j {jobs} {path})")
    parser.add_argument("--floor-python", help="python with libcst for the floors "
                        "(default: <venv>/bin/python, the libcst torchmemlint uses)")
    parser.add_argument("--peers-venv", type=Path,
                        default=Path(os.environ.get("TML_PEERS_VENV", "/tmp/peers")))
    parser.add_argument("--timeout", type=float, default=1800, help="per run, seconds")
    parser.add_argument("--json", type=Path, help="default: benchmarks/results/speed_<corpus>.json")
    parser.add_argument("--txt", type=Path, help="default: next to --json, .txt")
    parser.add_argument("--scenarios", action=argparse.BooleanOptionalAction, default=True,
                        help="also time --select ALL, cold and warm cache runs and --fix (on)")
    parser.add_argument("--byte-compile", action=argparse.BooleanOptionalAction, default=True,
                        help="byte-compile the candidate's torchmemlint package before timing, as pip "
                             "install does (on): where PYTHONDONTWRITEBYTECODE is set and the package is "
                             "a checkout, every start would otherwise compile its modules again")
    parser.add_argument("--lsp", action="store_true",
                        help="also time the language server on a 1,000-line generated model")
    parser.add_argument("--lsp-only", action="store_true", help="only the --lsp timing")
    parser.add_argument("--lsp-edits", type=int, default=21, help="didChange/didSave timed (21)")
    parser.add_argument("--profile", action="store_true",
                        help="also cProfile the candidate (-j 1) into speed_<corpus>_profile.txt")
    parser.add_argument("--profile-only", action="store_true",
                        help="only the cProfile of --profile, no timed rounds")
    args = parser.parse_args()
    if args.floor:
        return run_floor(args.floor, args.floor_path)

    args.peers = [p for p in args.peers.split(",") if p]
    unknown = set(args.peers) - set(ALL_PEERS)
    if unknown:
        parser.error(f"unknown peers {sorted(unknown)}; choose from {ALL_PEERS}")
    if args.slow_rounds is None:
        args.slow_rounds = args.rounds
    torchmemlint = shlex.quote(str(Path(args.venv) / "bin" / "torchmemlint"))
    args.candidate = args.candidate or f"{torchmemlint} --no-cache --exit-zero -j {{jobs}} {{path}}"
    args.floor_python = args.floor_python or str(Path(args.venv) / "bin" / "python")
    if args.lsp_only:
        lsp = time_lsp(args)
        text = render_lsp(lsp)
        json_path = args.json or RESULTS / "speed_lsp.json"
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps({"lsp": lsp, "provenance": provenance(args, [])},
                                        indent=1) + "\n")
        (args.txt or json_path.with_suffix(".txt")).write_text(text + "\n")
        print(text)
        return 0

    if re.fullmatch(r"D\d+", args.corpus):
        root = materialise_dense(args.corpus)
        corpus = {"name": args.corpus, "requirement": f"generated: dense_model({args.corpus[1:]})"}
    elif args.corpus in CORPORA:
        root = materialise(args.corpus, args.peers_venv)
        corpus = {"name": args.corpus, "requirement": CORPORA[args.corpus][0]}
    elif Path(args.corpus).is_dir():
        root = Path(args.corpus).resolve()
        corpus = {"name": root.name}
    else:
        parser.error(f"--corpus {args.corpus!r}: neither {sorted(CORPORA)} nor a directory")
    corpus.update(root=str(root), **corpus_stats(root))
    json_path = args.json or RESULTS / f"speed_{corpus['name']}.json"
    txt_path = args.txt or json_path.with_suffix(".txt")
    json_path.parent.mkdir(parents=True, exist_ok=True)
    txt_path.parent.mkdir(parents=True, exist_ok=True)
    outdir = Path(os.environ.get("TMPDIR", "/tmp")) / "tml-speed-out" / corpus["name"]
    outdir.mkdir(parents=True, exist_ok=True)

    if args.profile_only:
        profile_path = txt_path.with_name(txt_path.stem + "_profile.txt")
        print(profile_candidate(args, root, profile_path, outdir / "torchmemlint.prof"))
        print(f"(written {profile_path})", file=sys.stderr)
        return 0

    compiled = byte_compile(args) if args.byte_compile else None
    commands = build_commands(args, root)
    print(f"corpus {corpus['name']}: {root} ({corpus['files']} files, "
          f"{corpus['bytes'] / 1e6:.2f} MB); outputs of the last run in {outdir}", file=sys.stderr)
    for name, command in commands:
        shown = command.replace(shlex.quote(FIXIT_SERIAL), "'<fixit CLI, one process>'")
        print(f"  {name:18s} {shown}", file=sys.stderr)
    meta = provenance(args, commands)
    meta["byte_compiled"] = compiled
    rounds = time_commands(commands, args, outdir)
    summary = summarise(commands, rounds, outdir)
    table = ratios(commands, rounds)
    result = {"corpus": corpus, "rounds": args.rounds, "warmup": args.warmup,
              "slow_rounds": min(args.slow_rounds, args.rounds), "provenance": meta,
              "source_changed_during_run": source_digest() != meta["source_digest"],
              "summary": summary, "ratios": table, "raw_rounds": rounds}
    targets = [DENSE_TARGET] if corpus["name"].startswith("D") else TARGETS_15
    result["targets"] = []
    for row, column, limit, what in targets:
        ratio = table.get(row, {}).get(column, {}).get("wall")
        if ratio is not None:
            result["targets"].append({"row": row, "column": column, "limit": limit,
                                      "what": what, "ratio": ratio, "met": ratio <= limit})
    if args.lsp:
        result["lsp"] = time_lsp(args)
    target_ratio = table.get("torchmemlint", {}).get(TARGET[0], {}).get("wall")
    if target_ratio is not None:
        result["target"] = {"versus": TARGET[0], "limit": TARGET[1], "ratio": target_ratio,
                            "met": target_ratio <= TARGET[1]}
    text = render(result)
    json_path.write_text(json.dumps(result, indent=1) + "\n")
    txt_path.write_text(text)
    print(text)
    print(f"(written {json_path} and {txt_path})", file=sys.stderr)
    if args.profile:
        profile_path = txt_path.with_name(txt_path.stem + "_profile.txt")
        print(profile_candidate(args, root, profile_path, outdir / "torchmemlint.prof"))
        print(f"(written {profile_path})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
