"""TML601 and a flag that returns the weights, passed on through layers an ``nn.Sequential``
of a comprehension holds (BPfold's transformer): ``MultiHeadSelfAttention.forward(...,
return_attn_weights=False)`` returns ``out, attention`` only when the flag is set; its layer
passes ``return_attn_weights=True`` only under its own flag of that name, off by default; the
encoder builds the layers as ``nn.Sequential(*[TransformerEncoderLayer(...) for i in
range(n)])`` and runs them itself, ``for ind, mod in enumerate(self.layers): x = mod(x,
adj=adj)``, never setting it. By default nothing keeps the weights: the attention is reported
(without a fix: SDPA cannot return them when a caller sets the flag).

Quiet where the encoder's loop sets the flag (every call keeps the weights), and where the
Sequential is also called whole (``self.layers(x)``: it calls the layers itself, which the file's
reads do not show, so what they pass is not known).
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

ATTENTION = '''
import torch
import torch.nn as nn


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.qkv = nn.Linear(hidden_dim, 3 * hidden_dim)

    def forward(self, x, adj=None, return_attn_weights=False):
        b, l, h = x.shape
        q, k, v = self.qkv(x).view(b, l, self.num_heads, -1).permute(0, 2, 1, 3).chunk(3, dim=3)
        attention = q @ k.transpose(2, 3) / 8.0
        if adj is not None:
            attention = attention + adj
        attention = attention.softmax(dim=-1)
        out = attention @ v{MARK}
        if return_attn_weights:
            return out, attention
        return out


class TransformerEncoderLayer(nn.Module):
    def __init__(self, hidden_dim, num_heads):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_dim)
        self.mhsa = MultiHeadSelfAttention(hidden_dim, num_heads)

    def forward(self, x, adj=None, return_attn_weights=False):
        if return_attn_weights:
            y, weights = self.mhsa(self.norm(x), adj=adj, return_attn_weights=True)
            return x + y, weights
        return x + self.mhsa(self.norm(x), adj=adj, return_attn_weights=False)
'''

CASES: Dict[str, str] = {
    "loop_leaves_the_flag": ATTENTION.replace("{MARK}", "  # expect: TML601 fix=none") + '''

class AdjTransformerEncoder(nn.Module):
    def __init__(self, dim, heads, num_layers):
        super().__init__()
        self.layers = nn.Sequential(*[TransformerEncoderLayer(dim, heads) for i in range(num_layers)])

    def forward(self, x, adj):
        for ind, mod in enumerate(self.layers):
            x = mod(x, adj=adj)
        return x
''',
    "loop_sets_the_flag": ATTENTION.replace("{MARK}", "") + '''

class AdjTransformerEncoder(nn.Module):
    def __init__(self, dim, heads, num_layers):
        super().__init__()
        self.layers = nn.Sequential(*[TransformerEncoderLayer(dim, heads) for i in range(num_layers)])

    def forward(self, x, adj):
        maps = []
        for ind, mod in enumerate(self.layers):
            x, weights = mod(x, adj=adj, return_attn_weights=True)
            maps.append(weights)
        return x, maps
''',
    "sequential_called_whole": ATTENTION.replace("{MARK}", "") + '''

class AdjTransformerEncoder(nn.Module):
    def __init__(self, dim, heads, num_layers):
        super().__init__()
        self.layers = nn.Sequential(*[TransformerEncoderLayer(dim, heads) for i in range(num_layers)])

    def forward(self, x, adj=None, each=False):
        if not each:
            return self.layers(x)
        for mod in self.layers:
            x = mod(x, adj=adj)
        return x
''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory):
    return lint_cases(tmp_path_factory.mktemp("sequential_of_layers"), CASES, "TML601")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])
    assert findings[name] == {key: None for key in findings[name]}  # (no fix)
