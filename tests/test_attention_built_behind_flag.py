"""TML601 in an attention class that its file builds only behind a flag off by default
(guided diffusion's ``QKVAttention``, built by ``AttentionBlock`` only ``if
use_new_attention_order:``, ``use_new_attention_order=False`` in every constructor up to the
model; Uformer's cross-modulator): its forward never runs unless a caller turns the flag on,
so nothing is reported there (``analysis/built_behind_flags.py``). Look-alikes stay reported:
the other arm's class, a construction that turns the flag on, a construction outside the arm,
the class also handed on by name (``block=QKVAttention``), a subclass built unconditionally.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

SOURCE = '''
import torch
import torch.nn as nn


class QKVAttention(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, qkv):
        bs, width, length = qkv.shape
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)
        weight = torch.einsum("bct,bcs->bts", q, k)
        weight = torch.softmax(weight, dim=-1)
        a = torch.einsum("bts,bcs->bct", weight, v){new_mark}
        return a.reshape(bs, -1, length)


class QKVAttentionLegacy(nn.Module):
    def __init__(self, n_heads):
        super().__init__()
        self.n_heads = n_heads

    def forward(self, qkv):
        bs, width, length = qkv.shape
        ch = width // (3 * self.n_heads)
        q, k, v = qkv.reshape(bs * self.n_heads, ch * 3, length).split(ch, dim=1)
        weight = torch.einsum("bct,bcs->bts", q, k)
        weight = torch.softmax(weight, dim=-1)
        a = torch.einsum("bts,bcs->bct", weight, v)  # expect: TML601
        return a.reshape(bs, -1, length)


class AttentionBlock(nn.Module):
    def __init__(self, channels, num_heads=1, use_new_attention_order=False):
        super().__init__()
        self.qkv = nn.Conv1d(channels, channels * 3, 1)
        if use_new_attention_order:
            self.attention = QKVAttention(num_heads)
        else:
            self.attention = QKVAttentionLegacy(num_heads)

    def forward(self, x):
        b, c, t = x.shape
        return self.attention(self.qkv(x))


class UNet(nn.Module):
    def __init__(self, channels, use_new_attention_order=False):
        super().__init__()
        self.middle = AttentionBlock(channels, use_new_attention_order=use_new_attention_order)

    def forward(self, x):
        return self.middle(x)
{extra}
'''
MARK = "  # expect: TML601"

CASES = {
    "behind_the_flag": dict(extra="", new_mark=""),
    "a_construction_turns_it_on": dict(extra="\n\ndef build():\n    return UNet(8, use_new_attention_order=True)\n", new_mark=MARK),
    "built_outside_the_arm": dict(extra="\n\ndef build():\n    return QKVAttention(4)\n", new_mark=MARK),
    "handed_on_by_name": dict(extra="\n\nBLOCKS = {'new': QKVAttention}\n", new_mark=MARK),
    "subclassed": dict(extra="\n\nclass Wide(QKVAttention):\n    pass\n\n\ndef build():\n    return Wide(4)\n", new_mark=MARK),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_built_only_behind_a_flag(name):
    source = textwrap.dedent(SOURCE.format(**CASES[name]))
    found = {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=("TML601",)))}
    assert found == marked(source)


BUILT_IN_ITS_FILE = dict(extra="\n\ndef unet_small():\n    return UNet(8)\n", new_mark="")


def _project(tmp_path, init: str, case: dict = CASES["behind_the_flag"]):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text(init, encoding="utf-8")
    (package / "unet.py").write_text(textwrap.dedent(SOURCE.format(**case)), encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML601", "--output-format", "json",
         "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return sorted(item["location"]["row"] for item in json.loads(proc.stdout))


@pytest.mark.slow
def test_a_package_importing_the_module_does_not_build_the_class(tmp_path):
    # `from . import unet` names nothing of it, and the model is built in its own file with the
    # flag at its default: still built only behind the flag
    legacy = marked(textwrap.dedent(SOURCE.format(**BUILT_IN_ITS_FILE)))
    assert _project(tmp_path, "from . import unet\n\nMODEL = unet.unet_small\n", BUILT_IN_ITS_FILE) == sorted(row for row, _ in legacy)


@pytest.mark.slow
def test_a_file_importing_the_class_may_build_it(tmp_path):
    rows = _project(tmp_path, "from .unet import QKVAttention\n")
    assert len(rows) == 2, rows


@pytest.mark.slow
def test_a_construction_elsewhere_that_may_turn_the_flag_on_builds_the_class(tmp_path):
    # spandrel's loaders: the flag read from the checkpoint, `Uformer(cross_modulator=...)`
    rows = _project(tmp_path, "from .unet import UNet\n\n\ndef load(state):\n    return UNet(8, use_new_attention_order='qkv' in state)\n")
    assert len(rows) == 2, rows


@pytest.mark.slow
def test_a_package_that_only_star_imports_the_module_re_exports_it(tmp_path):
    legacy = sorted(row for row, _ in marked(textwrap.dedent(SOURCE.format(**BUILT_IN_ITS_FILE))))
    assert _project(tmp_path, "from .unet import *\n", BUILT_IN_ITS_FILE) == legacy
    other = tmp_path / "other"
    other.mkdir()
    (other / "__init__.py").write_text("")
    (other / "train.py").write_text("from pkg import QKVAttention\n\nATTN = QKVAttention(4)\n")
    proc = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--select", "TML601", "--output-format", "json",
         "--no-cache", "--isolated", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    rows = sorted(item["location"]["row"] for item in json.loads(proc.stdout) if item["filename"].endswith("unet.py"))
    assert len(rows) == 2, rows
