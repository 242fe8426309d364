"""TML601 on eager attention behind a flag of a module-level config object (BiRefNet, in
iopaint: ``config = Config()`` at module level, ``Config.__init__`` sets ``self.SDPA_enabled =
False``, and ``Attention.forward`` runs ``scaled_dot_product_attention`` only ``if
config.SDPA_enabled:``): the SDPA path is off unless something turns it on, so training runs
the eager path, which is reported (``analysis/flags.py``). Look-alikes keep the fallback quiet:
the flag set ``True``, set again elsewhere in the file (``config.SDPA_enabled = True``), set
by a parameter of ``Config``, the config bound twice, a local ``config`` of the function.

Each case marks the rows that must be reported with ``# expect: CODE``."""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

SOURCE = '''
import torch
import torch.nn as nn


class Config:
    def __init__(self{params}):
        self.batch_size = 4
        self.SDPA_enabled = {value}  # Bugs. Slower and errors occur in multi-GPUs


class Attention(nn.Module):
    def __init__(self, dim, num_heads=8, attn_drop=0.0):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, dim * 2)
        self.attn_drop_prob = attn_drop
        self.attn_drop = nn.Dropout(attn_drop)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, H, W):
        B, N, C = x.shape
        q = self.q(x).reshape(B, N, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)
        kv = self.kv(x).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        k, v = kv[0], kv[1]
{local}
        if config.SDPA_enabled:
            x = torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop_prob).transpose(1, 2).reshape(B, N, C)
        else:
            attn = (q @ k.transpose(-2, -1)) * self.scale
            attn = attn.softmax(dim=-1)
            attn = self.attn_drop(attn)
            x = (attn @ v).transpose(1, 2).reshape(B, N, C){mark}
        return self.proj(x)


config = Config()
{extra}
'''
MARK = "  # expect: TML601"

CASES = {
    "off": dict(params="", value="False", local="", extra="", mark=MARK),
    "on": dict(params="", value="True", local="", extra="", mark=""),
    "set_elsewhere": dict(params="", value="False", local="", extra="config.SDPA_enabled = True", mark=""),
    "parameter": dict(params=", sdpa=False", value="sdpa", local="", extra="", mark=""),
    "bound_twice": dict(params="", value="False", local="", extra="config = load_config()", mark=""),
    "local": dict(params="", value="False", local="        config = self.config", extra="", mark=""),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_eager_attention_behind_a_module_config_flag(name):
    source = textwrap.dedent(SOURCE.format(**CASES[name]))
    found = {(f.location.row, f.code) for f in lint_source(source, "case.py", Settings(select=("TML601",)))}
    assert found == marked(source)
