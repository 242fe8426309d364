"""TML601 on forms the seventeenth held-out set showed it missed, modelled as computations:

- a dead value is no escape (``analysis/unread.py``): torchscale's ``MultiheadAttention``
  reshapes its weights after the output is made, ``attn_weights = attn_weights.view(bsz, heads,
  tgt_len, src_len).transpose(1, 0)``, and returns only ``attn``; no value and no later statement
  reads the view, so the weights are not handed out (the fix, where offered, removes the dead
  statement with the others that bind the weights);
- weights added to before the product with v (``alpha * eye + beta * softmax(s) - gamma * C``,
  shaped attention): the T x T weights are kept all the same; eager attention without a fix.

Look-alikes stay quiet: the viewed weights returned, stored on ``self``, appended to a list the
caller passed, or returned under another name; the mixed weights returned or stored.
Left alone: ``V @ softmax(Q^T K)`` contracting the query axis (metnet's axis slip), the same
shape as a softmax over the queries contracted over the keys (slot-style attention), which the
earlier sets label as no attention.
"""

from __future__ import annotations

import pytest

from attention_cases import found_sites, run_cli

TORCHSCALE = '''
import torch
import torch.nn.functional as F
from torch import nn


class MultiheadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, dropout=0.0):
        super().__init__()
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.scaling = self.head_dim ** -0.5
        self.k_proj = nn.Linear(embed_dim, embed_dim)
        self.v_proj = nn.Linear(embed_dim, embed_dim)
        self.q_proj = nn.Linear(embed_dim, embed_dim)
        self.out_proj = nn.Linear(embed_dim, embed_dim)
        self.dropout_module = nn.Dropout(dropout)

    def forward(self, query, key, value, key_padding_mask=None, rel_pos=None):
        bsz, tgt_len, embed_dim = query.size()
        key_bsz, src_len, _ = key.size()
        q = self.q_proj(query)
        k = self.k_proj(key)
        v = self.v_proj(value)
        q *= self.scaling

        q = q.view(bsz, tgt_len, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(bsz, src_len, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(bsz, src_len, self.num_heads, self.head_dim).transpose(1, 2)
        q = q.reshape(bsz * self.num_heads, tgt_len, self.head_dim)
        k = k.reshape(bsz * self.num_heads, src_len, self.head_dim)
        v = v.reshape(bsz * self.num_heads, src_len, self.head_dim)

        attn_weights = torch.bmm(q, k.transpose(1, 2))

        if key_padding_mask is not None:
            attn_weights = attn_weights.view(bsz, self.num_heads, tgt_len, src_len)
            attn_weights = attn_weights.masked_fill(
                key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool),
                float("-inf"),
            )
            attn_weights = attn_weights.view(bsz * self.num_heads, tgt_len, src_len)

        if rel_pos is not None:
            rel_pos = rel_pos.view(attn_weights.size())
            attn_weights = attn_weights + rel_pos

        attn_weights = F.softmax(
            attn_weights, dim=-1, dtype=torch.float32
        ).type_as(attn_weights)
        attn_probs = self.dropout_module(attn_weights)

        attn = torch.bmm(attn_probs, v)
        attn = (
            attn.transpose(0, 1)
            .reshape(tgt_len, bsz, embed_dim)
            .transpose(0, 1)
        )

        attn = self.out_proj(attn)
        attn_weights = attn_weights.view(
            bsz, self.num_heads, tgt_len, src_len
        ).transpose(1, 0)

        return attn
'''

DEAD = '''        attn_weights = attn_weights.view(
            bsz, self.num_heads, tgt_len, src_len
        ).transpose(1, 0)
'''

# the weights' softmax without the cast, no mask or bias: a fix is offered
PLAIN = TORCHSCALE.replace(", dtype=torch.float32\n        ).type_as(attn_weights)", "\n        )")
PLAIN = PLAIN[:PLAIN.index("        if key_padding_mask is not None:")] + PLAIN[PLAIN.index("        attn_weights = F.softmax("):]
RENAMED = PLAIN.replace(DEAD, DEAD.replace("attn_weights = ", "maps = ", 1))

TORCHSCALE_QUIET = {
    "view-returned": TORCHSCALE.replace("        return attn\n", "        return attn, attn_weights\n"),
    "view-stored": TORCHSCALE.replace(DEAD, DEAD + "        self.last_weights = attn_weights\n"),
    "view-appended": TORCHSCALE.replace(
        "rel_pos=None):", "rel_pos=None, kept=None):").replace(DEAD, DEAD + "        kept.append(attn_weights)\n"),
    "view-returned-by-another-name": TORCHSCALE.replace(DEAD, DEAD.replace("attn_weights = ", "maps = ", 1)).replace(
        "        return attn\n", "        return attn, maps\n"),
}

SHAPED = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class ShapedAttention(nn.Module):
    def __init__(self, dim, heads, dropout=0.1):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.query = nn.Linear(dim, dim)
        self.key = nn.Linear(dim, dim)
        self.value = nn.Linear(dim, dim)
        self.alpha = nn.Parameter(torch.ones(1, heads, 1, 1))
        self.beta = nn.Parameter(torch.zeros(1, heads, 1, 1))
        self.gamma = nn.Parameter(torch.zeros(1, heads, 1, 1))
        self.register_buffer("C", torch.zeros(heads, 1, 1))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.query(x).view(B, T, self.heads, -1).transpose(1, 2)
        k = self.key(x).view(B, T, self.heads, -1).transpose(1, 2)
        v = self.value(x).view(B, T, self.heads, -1).transpose(1, 2)

        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = F.softmax(attn, dim=-1)

        attn = (
            self.alpha * torch.eye(T).to(attn.device)
            + self.beta * attn
            - self.gamma * self.C
        )

        x = (attn @ v).transpose(1, 2).contiguous().view(B, T, -1)

        return self.dropout(x)
'''

SHAPED_QUIET = {
    "mix-returned": SHAPED.replace("        return self.dropout(x)\n", "        return self.dropout(x), attn\n"),
    "mix-stored": SHAPED.replace("        x = (attn @ v)", "        self.shaped = attn\n        x = (attn @ v)"),
    "mix-only": SHAPED.replace("        x = (attn @ v).transpose(1, 2).contiguous().view(B, T, -1)\n", "        x = attn\n"),
}

METNET = '''
import torch
from torch import nn


class MultiheadSelfAttention2D(nn.Module):
    def __init__(self, in_channels, attention_channels=64, num_heads=16):
        super().__init__()
        self.num_heads = num_heads
        self.attention_head_size = attention_channels // num_heads
        self.query = nn.Conv2d(in_channels, attention_channels, kernel_size=1)
        self.key = nn.Conv2d(in_channels, attention_channels, kernel_size=1)
        self.value = nn.Conv2d(in_channels, attention_channels, kernel_size=1)
        self.out_proj = nn.Conv2d(attention_channels, in_channels, kernel_size=1)

    def forward(self, X):
        N, C, H, W = X.size()
        Q = self.query(X).view(N, self.num_heads, self.attention_head_size, H * W)
        K = self.key(X).view(N, self.num_heads, self.attention_head_size, H * W)
        V = self.value(X).view(N, self.num_heads, self.attention_head_size, H * W)
        Q = Q.transpose(-1, -2)
        attention_weights = Q @ K
        attention_weights = attention_weights.softmax(dim=-1)
        out = V @ attention_weights
        out = out.view(N, -1, H, W)
        return self.out_proj(out)
'''


def test_weights_viewed_after_the_output_and_never_read_are_no_escape():
    (site,) = found_sites(TORCHSCALE)
    assert not site.fixable and "cast" in site.reason, site.reason


def test_without_the_cast_the_dead_view_form_is_fixable():
    for source in (PLAIN, RENAMED):
        assert source != TORCHSCALE
        (site,) = found_sites(source)
        assert site.fixable, site.reason


@pytest.mark.parametrize("name", sorted(TORCHSCALE_QUIET))
def test_viewed_weights_that_are_read_afterwards_stay_quiet(name):
    source = TORCHSCALE_QUIET[name]
    assert source != TORCHSCALE
    assert found_sites(source) == []


def test_weights_mixed_with_an_identity_before_the_product_are_attention_without_a_fix():
    (site,) = found_sites(SHAPED)
    assert not site.fixable and "added to" in site.reason, site.reason


@pytest.mark.parametrize("name", sorted(SHAPED_QUIET))
def test_a_mix_returned_stored_or_not_weighing_v_stays_quiet(name):
    source = SHAPED_QUIET[name]
    assert source != SHAPED
    assert found_sites(source) == []


def test_a_softmax_contracted_over_the_other_axis_is_left_alone():
    assert found_sites(METNET) == []


@pytest.mark.slow
def test_the_fixed_dead_view_forms_compute_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    sources = {"plain": PLAIN, "renamed": RENAMED}
    for name, source in sources.items():
        eager_path, copy = tmp_path / ("eager_%s.py" % name), tmp_path / ("%s.py" % name)
        eager_path.write_text(source)
        copy.write_text(source)
        result = run_cli("--no-cache", "--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
        assert result.returncode == 0, result.stdout + result.stderr
        fixed_text = copy.read_text()
        assert "scaled_dot_product_attention" in fixed_text and "torch.bmm(attn" not in fixed_text and ".transpose(1, 0)" not in fixed_text, fixed_text
        eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
        cls = "MultiheadAttention"
        torch.manual_seed(0)
        a, b = getattr(eager, cls)(16, 4).eval(), getattr(fixed, cls)(16, 4).eval()
        b.load_state_dict(a.state_dict())
        outputs = []
        for module in (a, b):
            x = torch.arange(2 * 6 * 16, dtype=torch.float32).reshape(2, 6, 16).sin().requires_grad_()
            out = module(x, x, x)
            out.sum().backward()
            outputs.append((out.detach(), x.grad))
        torch.testing.assert_close(outputs[0][0], outputs[1][0])
        torch.testing.assert_close(outputs[0][1], outputs[1][1])
