"""TML601 and a ``forward`` flag that returns the attention weights (``if output_attn:
return out, att``, off by default): a call in another file of the project that turns it on
(through a ``ModuleList`` of the instances, ThreeDJCG's ``self.self_attn[i](f, f, f,
output_attn=True)``) keeps the weights, as a call in the class's own file does: quiet. Where
every call leaves it off, the eager attention is reported; a file of the project that does not
parse and never names the class changes nothing (the importers of a name read only the files
that spell it)."""

from __future__ import annotations

import subprocess
import sys

ATTENTION = """\
import torch
from torch import nn


class ScaledDotProductAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        self.h, self.d_k = h, d_model // h
        self.fc_q = nn.Linear(d_model, d_model)
        self.fc_k = nn.Linear(d_model, d_model)
        self.fc_v = nn.Linear(d_model, d_model)

    def forward(self, queries, keys, values):
        b, nq, nk = queries.shape[0], queries.shape[1], keys.shape[1]
        q = self.fc_q(queries).view(b, nq, self.h, self.d_k).permute(0, 2, 1, 3)
        k = self.fc_k(keys).view(b, nk, self.h, self.d_k).permute(0, 2, 3, 1)
        v = self.fc_v(values).view(b, nk, self.h, self.d_k).permute(0, 2, 1, 3)
        att = torch.softmax(torch.matmul(q, k) / self.d_k ** 0.5, -1)
        out = torch.matmul(att, v).permute(0, 2, 1, 3).reshape(b, nq, self.h * self.d_k)
        return out, att


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, h):
        super().__init__()
        self.attention = ScaledDotProductAttention(d_model, h)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, queries, keys, values, output_attn=False):
        out, att = self.attention(queries, keys, values)
        out = self.norm(queries + out)
        if output_attn:
            return out, att
        return out
"""

RELATION = """\
from torch import nn

from pkg.attention import MultiHeadAttention


class Relation(nn.Module):
    def __init__(self, d, depth=2):
        super().__init__()
        self.self_attn = nn.ModuleList(MultiHeadAttention(d, 4) for _ in range(depth))

    def forward(self, features, store):
        for i in range(len(self.self_attn)):
            features, relation = self.self_attn[i](features, features, features, output_attn=True)
            store.append(relation.detach().cpu())
        return features
"""

PLAIN = """\
from torch import nn

from pkg.attention import MultiHeadAttention


class Plain(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.attn = MultiHeadAttention(d, 4)

    def forward(self, x):
        return self.attn(x, x, x)
"""


def _findings(root, files):
    (root / "pkg").mkdir()
    for name, text in {"__init__.py": "", "broken.py": "def broken(:\n", **files}.items():
        (root / "pkg" / name).write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601", "pkg"],
        cwd=root, capture_output=True, text=True,
    )
    assert "Traceback" not in result.stderr, result.stderr
    return [line.split(": ")[0] for line in result.stdout.splitlines() if ": TML601" in line]


def test_a_caller_in_another_file_turning_the_flag_on_keeps_the_weights(tmp_path):
    assert _findings(tmp_path, {"attention.py": ATTENTION, "relation.py": RELATION, "plain.py": PLAIN}) == []


def test_callers_that_leave_the_flag_off(tmp_path):
    off = RELATION.replace("output_attn=True", "output_attn=False")
    assert _findings(tmp_path, {"attention.py": ATTENTION, "relation.py": off, "plain.py": PLAIN}) == ["pkg/attention.py:19:15"]


def test_an_unparsable_file_that_never_names_the_class(tmp_path):
    assert _findings(tmp_path, {"attention.py": ATTENTION, "plain.py": PLAIN}) == ["pkg/attention.py:19:15"]
