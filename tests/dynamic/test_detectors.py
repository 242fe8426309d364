"""Findings from measurement: `torchmemlint profile` reads the ops the step ran.

The models are written in spellings a reading of the source may miss (a softmax module, a
channel-first einsum, ``bmm(v, w.permute(0, 2, 1))``, scores from a helper, activations from a
helper list); the profile must report them at the right lines with their bytes. Whether the
linter found each one is computed here by running `torchmemlint check --select ALL` on the
file (the rules learn new spellings; the flag must follow them, not a fixed answer).
"""

from __future__ import annotations

import ast
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from in_process import cli

pytest.importorskip("torch")

MODELS = Path(__file__).resolve().parents[2] / "fixtures" / "models"
SPELLINGS = MODELS / "measured_spellings.py"
F32 = 4


def run(*args):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    return subprocess.run([sys.executable, "-m", "torchmemlint", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def profile(target, shape, *extra, runner=cli):
    """The CLI in this process (tests/dynamic/in_process.py); test_look_alikes_stay_quiet runs
    it as a subprocess (``runner=run``)."""
    result = runner("profile", target, "--no-verify", "--input-shape", shape, *extra)
    assert result.returncode == 0, result.stderr
    return result.stdout


def row_of(path: Path, text: str) -> int:
    rows = [number for number, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(rows) == 1, (text, rows)
    return rows[0]


def class_span(path: Path, row: int):
    tree = ast.parse(path.read_text())
    for node in tree.body:
        if node.lineno <= row <= node.end_lineno:
            return node.lineno, node.end_lineno
    raise AssertionError(row)


def linter_reports(path: Path, code: str, rows) -> bool:
    """Whether `torchmemlint check --select ALL` reports ``code`` in the top-level definition
    (class or function) holding any of ``rows``."""
    spans = [class_span(path, row) for row in rows]
    return any(
        item["code"] == code and any(first <= item["location"]["row"] <= last for first, last in spans)
        for item in check_all(path)
    )


@functools.lru_cache(maxsize=None)
def check_all(path: Path):
    """The findings of `torchmemlint check --select ALL` on ``path`` (a subprocess), once per file."""
    result = run("check", "--isolated", "--select", "ALL", "--output-format", "json", str(path))
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def measured(target, shape, *extra):
    data = json.loads(profile(target, shape, "--output-format", "json", *extra))
    for item in data["measured"]:
        assert {"code", "filename", "row", "bytes", "static"} <= set(item)
        assert isinstance(item["static"], bool)
    return data["measured"]


# (class, input shape, code, the line it must be reported at, bytes at that shape)
UNKNOWN_SPELLINGS = [
    # softmax module: 2 x 4 heads x 16 x 16 attention weights kept by `attn @ v`
    ("ModuleSoftmaxAttention", "2,16,32", "TML601", "attn = self.attend(dots)", 2 * 4 * 16 * 16 * F32),
    # channel-first einsum, then bmm(v, w.permute(0, 2, 1)): 2 x 16 x 16 weights
    ("ChannelFirstAttention", "2,16,32", "TML601", "w = w.softmax(dim=2)", 2 * 16 * 16 * F32),
    ("HelperScoresAttention", "2,16,32", "TML601", "weights = F.softmax(scores, dim=-1)", 2 * 4 * 16 * 16 * F32),
    # three LeakyReLUs from a helper list; each keeps its 2 x 8 x 16 x 16 input next to its
    # output (kept by the next conv): reported where the helper builds them
    ("HelperActivationsNet", "2,8,16,16", "TML201", "return [nn.LeakyReLU(slope)", 3 * 2 * 8 * 16 * 16 * F32),
    # sigmoid's output, saved for its backward, scaled in place: 2 x 8 x 16 x 16
    ("OverwrittenGate", "2,8,16,16", "TML203", "gate.mul_(2.0)", 2 * 8 * 16 * 16 * F32),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, shape, code, line, nbytes", UNKNOWN_SPELLINGS,
                         ids=[case[0] for case in UNKNOWN_SPELLINGS])
def test_unknown_spellings_are_measured_at_their_line_with_their_bytes(name, shape, code, line, nbytes):
    target = "%s:%s" % (SPELLINGS, name)
    found = measured(target, shape)
    row = row_of(SPELLINGS, line)
    assert [(f["code"], f["row"], f["bytes"]) for f in found] == [(code, row, nbytes)], found
    assert os.path.samefile(found[0]["filename"], SPELLINGS)
    ran_at = [found[0]["ran_at"]] if found[0].get("ran_at") else []
    assert found[0]["static"] == linter_reports(SPELLINGS, code, [row] + ran_at)
    text = profile(target, shape)
    section = text[text.index("Found by measurement"):]
    report_line = next(text for text in section.splitlines() if "measured_spellings.py:%d" % row in text)
    assert code in report_line
    assert ("MISSED" in report_line) == (not found[0]["static"])


@pytest.mark.slow
def test_dropout_masks_and_batchnorm_twice():
    found = measured("%s:DropoutMasks" % SPELLINGS, "4,64")
    # A float32 mask of 4 x 64 (1 KiB) where CUDA's dropout keeps 256 one-byte flags.
    expected = {
        (row_of(SPELLINGS, "self.drop = nn.Dropout(p, inplace=True)"), 1024 - 256),
        (row_of(SPELLINGS, "mask = torch.empty_like(x).bernoulli_("), 1024 - 256),
    }
    assert {(f["row"], f["bytes"]) for f in found if f["code"] == "TML204"} == expected
    # nn.Dropout(inplace=True) is a spelling the rule knows.
    inplace = next(f for f in found if f["row"] == min(expected)[0])
    assert inplace["static"] is True
    # The CPU's own dropout keeps float noise too: not a finding there.
    assert measured("%s:DropoutMasks" % SPELLINGS, "4,64", "--estimate-for", "cpu") == []

    checkpointing = MODELS / "checkpointing.py"
    found = measured("%s:BatchNormInCheckpoint" % checkpointing, "2,3,16,16")
    call = row_of(checkpointing, "x = checkpoint.checkpoint(self.segment, x, use_reentrant=self.use_reentrant)")
    assert [(f["code"], f["row"], f["bytes"], f["static"]) for f in found] == [("TML403", call, 2 * 8 * F32, True)]
    plain = measured("%s:BatchNormInCheckpoint" % checkpointing, "2,3,16,16",
                     "--init-args", '{"use_checkpoint": false}')
    assert plain == []


@pytest.mark.slow
def test_known_spellings_are_marked_found():
    attention = MODELS / "attention.py"
    found = measured("%s:small_lm" % attention, "2,16,int64")
    assert [(f["code"], f["row"], f["static"]) for f in found] == [
        ("TML601", row_of(attention, "att = F.softmax(att, dim=-1)"), True)
    ]
    leaky = MODELS / "leaky_convnet.py"
    found = measured("%s:LeakyConvNet" % leaky, "2,3,32,32")
    assert found and all(f["code"] == "TML201" and f["static"] is True for f in found)


@pytest.mark.slow
@pytest.mark.parametrize("name, shape", [("QuietAttention", "2,16,32"), ("QuietConv", "2,8,16,16")])
def test_look_alikes_stay_quiet(name, shape):
    assert measured("%s:%s" % (SPELLINGS, name), shape) == []
    text = profile("%s:%s" % (SPELLINGS, name), shape, runner=run)
    assert "Found by measurement" in text and "MISSED" not in text
