"""TML601 where the attention module returns its weights (``return self.to_out(out), attn``) and
the callers that receive them drop them: a block of the same file hands them up (``x, attn =
self.attn(x, mask)``; ``return x, attn``), and the network, in another file of the package that
imports the block by name, builds the blocks in a module list, keeps the last block's weights
and returns them only behind a flag off by default (``if self.return_attn: return logits,
attn`` with ``return_attn=False``; measured miss on a held-out set, a protein classifier).
Reported, without a fix (the fix would change what the functions return). Also: scores whose
``masked_fill`` result the code discards (``logits.masked_fill(mask == 0, -1e9)`` alone on its
line: no mask applied) are read by nothing else.

Quiet: the network returning the weights unconditionally, keeping them on ``self``, or another
file importing the module whole (its calls of the block are not read)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from project_cli import lint_project

pytestmark = pytest.mark.slow  # starts the CLI

MODULE = '''
    from einops import rearrange
    from torch import einsum, nn


    class Attention(nn.Module):
        def __init__(self, dim, heads=8, dim_head=32, dropout=0.0):
            super().__init__()
            self.scale = dim_head ** -0.5
            self.heads = heads
            self.to_q = nn.Linear(dim, dim_head * heads, bias=False)
            self.to_k = nn.Linear(dim, dim_head * heads, bias=False)
            self.to_v = nn.Linear(dim, dim_head * heads, bias=False)
            self.to_out = nn.Linear(dim_head * heads, dim)
            self.attn_dropout = nn.Dropout(dropout)

        def forward(self, x, mask=None):
            q, k, v = self.to_q(x), self.to_k(x), self.to_v(x)
            q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), (q, k, v))
            q = q * self.scale
            logits = einsum("b h i d, b h j d -> b h i j", q, k)
            if mask is not None:
                logits.masked_fill(mask == 0, -1e9)
            attn = logits.softmax(dim=-1)
            attn = self.attn_dropout(attn)
            out = einsum("b h i j, b h j d -> b h i d", attn, v)
            out = rearrange(out, "b h n d -> b n (h d)")
            return self.to_out(out), attn


    class TransformerLayer(nn.Module):
        def __init__(self, dim, heads, dropout_rate, attn_dropout=0.05):
            super().__init__()
            self.attn = Attention(dim, heads, dim // heads, attn_dropout)
            self.ffn = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim * 2), nn.GELU(), nn.Linear(dim * 2, dim))
            self.layernorm = nn.LayerNorm(dim)
            self.dropout = nn.Dropout(dropout_rate)

        def forward(self, x, mask=None):
            residual = x
            x, attn = self.attn(self.layernorm(x), mask)
            x = residual + self.dropout(x)
            x = x + self.ffn(x)
            return x, attn
'''

ROW = 26  # ``out = einsum(... attn, v)`` in MODULE

MODEL = """import torch.nn as nn

from pkg.module import TransformerLayer


class Classifier(nn.Module):
    def __init__(self, dim, layers, heads, classes=6, return_attn=False):
        super().__init__()
        self.layers = nn.ModuleList([TransformerLayer(dim, heads, 0.4) for _ in range(layers)])
        self.clf = nn.Linear(dim, classes)
        self.return_attn = return_attn

    def forward(self, x, mask=None):
        for layer in self.layers:
            x, attn = layer(x, mask=mask)
        logits = self.clf(x.mean(1))
"""

FLAGGED = """        if self.return_attn:
            return logits, attn
        return logits
"""
ALWAYS = """        return logits, attn
"""
KEPT = """        self.maps = attn
        return logits
"""


def _project(tmp_path: Path, returned: str, extra: str = "") -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "module.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    (package / "model.py").write_text(MODEL + returned, encoding="utf-8")
    if extra:
        (package / "other.py").write_text(textwrap.dedent(extra), encoding="utf-8")
    return tmp_path


def test_the_row(tmp_path):
    assert textwrap.dedent(MODULE).splitlines()[ROW - 1].strip().startswith('out = einsum("b h i j')


def test_weights_dropped_across_files_are_reported(tmp_path):
    assert lint_project(_project(tmp_path, FLAGGED), "TML601", "--no-cache") == {("module.py", ROW)}


@pytest.mark.parametrize("returned", [ALWAYS, KEPT], ids=["returned", "kept_on_self"])
def test_weights_the_network_keeps_are_left_alone(tmp_path, returned):
    assert lint_project(_project(tmp_path, returned), "TML601", "--no-cache") == set()


def test_a_file_importing_the_module_whole_is_not_read(tmp_path):
    other = '''
        import pkg.module as blocks


        def build(dim):
            return blocks.TransformerLayer(dim, 4, 0.1)
    '''
    assert lint_project(_project(tmp_path, FLAGGED, other), "TML601", "--no-cache") == set()
