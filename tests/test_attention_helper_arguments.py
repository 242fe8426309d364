"""TML601 where the scores pass through a function the file imports (so not read) that takes
them after another argument: frankenstein-transformer's
``attn_scores = apply_pe_to_scores(pe, self.pe_type, attn_scores, q, self.use_pe)`` (ALiBi-style
biases), its first argument a positional-encoding module that may be None. Such a call is
assumed to keep the shape of the first argument whose axes are known (the scores), as a call
whose first argument is the scores always was; the site is reported without a fix (SDPA cannot
run that function). Look-alikes stay quiet: the helper's result not the scores (it is given the
keys only), and the weights returned beside the output."""

from __future__ import annotations

from attention_cases import found_sites

SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from positional import apply_pe_to_scores


class StandardAttention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.v_proj = nn.Linear(d, d)
        self.num_heads, self.head_dim, self.scale = h, d // h, (d // h) ** -0.5
        self.dropout = nn.Dropout(0.1)
        self.pe_type = "alibi"

    def forward(self, x, pe=None):
        bsz, seq_len, hidden = x.shape
        q = self.q_proj(x).view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = (q @ k.transpose(-2, -1)) * self.scale
        attn_scores = apply_pe_to_scores(pe, self.pe_type, attn_scores, q)
        attn_weights = F.softmax(attn_scores, dim=-1)
        attn_weights = self.dropout(attn_weights)
        return (attn_weights @ v).transpose(1, 2).reshape(bsz, seq_len, hidden)
'''


def test_scores_through_an_imported_helper_after_another_argument_are_reported_without_a_fix():
    (site,) = found_sites(SOURCE)
    assert "apply_pe_to_scores" in site.reason, site.reason


def test_look_alikes_stay_quiet():
    keys_only = SOURCE.replace(
        "attn_scores = apply_pe_to_scores(pe, self.pe_type, attn_scores, q)",
        "attn_scores = apply_pe_to_scores(pe, self.pe_type, k)",
    )
    weights_returned = SOURCE.replace(
        "return (attn_weights @ v).transpose(1, 2).reshape(bsz, seq_len, hidden)",
        "return (attn_weights @ v).transpose(1, 2).reshape(bsz, seq_len, hidden), attn_weights",
    )
    for source in (keys_only, weights_returned):
        assert source != SOURCE and found_sites(source) == [], source
