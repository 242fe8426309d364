"""TML601 where the weights are handed out only by a conditional expression behind a flag off by
default: ``outputs = (context, probs) if output_attentions else (context,)`` (the form of BERT's
self-attention and its many copies), returned as it is, returned after more outputs are added
(``outputs + (past,)``), or returned directly. With the flag a parameter defaulting to ``False``
that no call of the file sets, the weights are not kept by default: reported, without a fix
(SDPA does not make the weights a caller may ask for); ``analysis/flag_returns.py``.

Look-alikes stay quiet: the flag on by default, a caller that turns it on, the weights in the
arm that runs by default, the chosen tuple stored as well as returned.

And names bound by a call that imports by name (``torch = importlib.import_module("torch")``,
sktime's ``F = _safe_import("torch.nn.functional")``) are those modules (``analysis/names.py``):
the same attention is found as with ``import`` statements, reported without a fix (the fix does
not write through such names); a call that does not say it imports binds nothing.
"""

from __future__ import annotations

import json

from attention_cases import found_sites, run_cli

CHOSEN = '''
import math
import torch
from torch import nn


class SelfAttention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split(self, x):
        b, n, _ = x.shape
        return x.view(b, n, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask=None, past=None, output_attentions=False):
        q = self.split(self.query(hidden_states))
        k = self.split(self.key(hidden_states))
        v = self.split(self.value(hidden_states))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            scores = scores + attention_mask
        probs = nn.functional.softmax(scores, dim=-1)
        context = torch.matmul(probs, v)
        context = context.permute(0, 2, 1, 3).flatten(2)
        outputs = (context, probs) if output_attentions else (context,)
        return outputs


class Layer(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.output = nn.Linear(hidden, hidden)

    def forward(self, x, mask=None):
        return self.output(self.attention(x, mask)[0])
'''

BOUND = "        outputs = (context, probs) if output_attentions else (context,)\n        return outputs\n"


def _variant(old: str, new: str) -> str:
    assert old in CHOSEN
    return CHOSEN.replace(old, new)


def test_bound_and_returned():
    (site,) = found_sites(CHOSEN)
    assert "output_attentions" in site.reason


def test_more_outputs_added():
    source = _variant(BOUND, BOUND.replace("        return outputs", "        if past is not None:\n            outputs = outputs + (past,)\n        return outputs"))
    (site,) = found_sites(source)
    assert "output_attentions" in site.reason


def test_returned_directly():
    source = _variant(BOUND, "        return (context, probs) if output_attentions else (context,)\n")
    (site,) = found_sites(source)
    assert "output_attentions" in site.reason


def test_look_alikes_stay_quiet():
    variants = {
        "on by default": _variant("output_attentions=False", "output_attentions=True"),
        "a caller turns it on": _variant("self.attention(x, mask)[0]", "self.attention(x, mask, output_attentions=True)[0]"),
        "weights in the default arm": _variant(
            "(context, probs) if output_attentions else (context,)", "(context,) if output_attentions else (context, probs)"
        ),
        "also stored": _variant("        return outputs\n", "        self.kept = outputs\n        return outputs\n"),
        "the weights computed with": _variant("(context, probs) if output_attentions", "(context, probs * 2) if output_attentions"),
    }
    for why, source in variants.items():
        sites = found_sites(source)
        assert all("output_attentions" not in site.reason for site in sites) and len(sites) <= (1 if why == "the weights computed with" else 0), why


IMPORTED = '''
import importlib
import math

torch = importlib.import_module("torch")
nn = importlib.import_module("torch.nn")
F = importlib.import_module("torch.nn.functional")


class Attention(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        weights = F.softmax(scores, dim=-1)
        out = torch.matmul(weights, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))
'''


def test_modules_imported_by_a_call(tmp_path):
    safe = IMPORTED.replace("import importlib\n", "from project.utils import _safe_import\n").replace("importlib.import_module(", "_safe_import(")
    for source in (IMPORTED, safe):
        path = tmp_path / "model.py"
        path.write_text(source)
        result = run_cli("--no-cache", "--select", "TML601", "--output-format", "json", str(path))
        assert result.returncode == 1, result.stdout + result.stderr
        (finding,) = json.loads(result.stdout)
        assert (finding["code"], finding["location"]["row"], finding["fix"]) == ("TML601", 22, None)  # ``torch.matmul(weights, v)``


def test_a_call_that_does_not_import_binds_nothing(tmp_path):
    source = IMPORTED.replace('F = importlib.import_module("torch.nn.functional")', 'F = configure("torch.nn.functional")')
    path = tmp_path / "model.py"
    path.write_text(source)
    result = run_cli("--no-cache", "--select", "TML601", str(path))
    assert result.returncode == 0, result.stdout + result.stderr
