"""TML601 where the weights are also kept, but only behind a flag off by default: BLIP's BERT
``if is_cross_attention and self.save_attention: self.save_attention_map(attention_probs)``
(the store made in the method it calls) with ``self.save_attention = False`` in ``__init__``, or
``if self.keep: self.attn_map = attn``. While the flag is off the weights are not kept, so the
attention is reported, without a fix (SDPA does not make the weights the flag asks for;
``flag_returns.kept_behind_flag``; a sink's statement is the call's when a helper made it).

Look-alikes stay quiet: the flag on by default, a call of the file that turns it on, the weights
kept with no flag.
"""

from __future__ import annotations

from attention_cases import found_sites

BLIP = '''
import math

import torch
import torch.nn as nn


class BertSelfAttention(nn.Module):
    def __init__(self, hidden, heads, save_attention=False):
        super().__init__()
        self.heads, self.head_size = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout = nn.Dropout(0.1)
        self.save_attention = save_attention

    def save_attention_map(self, attention_map):
        self.attention_map = attention_map

    def split(self, x):
        return x.view(x.size(0), x.size(1), self.heads, self.head_size).permute(0, 2, 1, 3)

    def forward(self, hidden_states, encoder_hidden_states=None):
        is_cross_attention = encoder_hidden_states is not None
        source = encoder_hidden_states if is_cross_attention else hidden_states
        query_layer = self.split(self.query(hidden_states))
        key_layer = self.split(self.key(source))
        value_layer = self.split(self.value(source))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.head_size)
        attention_probs = nn.Softmax(dim=-1)(attention_scores)
        if is_cross_attention and self.save_attention:
            self.save_attention_map(attention_probs)
        attention_probs_dropped = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs_dropped, value_layer)
        return context_layer.permute(0, 2, 1, 3).flatten(2)
'''

PLAIN = '''
import torch.nn as nn


class Attention(nn.Module):
    def __init__(self, dim, heads, keep=False):
        super().__init__()
        self.heads = heads
        self.keep = keep
        self.qkv = nn.Linear(dim, 3 * dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
        if self.keep:
            self.attn_map = attn
        return (attn @ v).transpose(1, 2).reshape(B, N, C)
'''


def test_weights_kept_only_behind_a_flag_off_by_default():
    for source, flag in ((BLIP, "is_cross_attention and self.save_attention"), (PLAIN, "self.keep")):
        (site,) = found_sites(source)
        assert site.reason == f"the scores or weights are also returned or kept when `{flag}` is set; SDPA does not make them"


def test_look_alikes_stay_quiet():
    on = PLAIN.replace("keep=False", "keep=True")
    turned_on = PLAIN + "\n\ndef build(dim):\n    return Attention(dim, 4, keep=True)\n"
    always = PLAIN.replace("        if self.keep:\n            self.attn_map = attn\n", "        self.attn_map = attn\n")
    for source in (on, turned_on, always):
        assert source != PLAIN
        assert found_sites(source) == [], source
