"""TML601 where a helper returns the output with the scores detached and its caller unpacks the
pair and hands the scores on (OpenAI Whisper's ``qkv_attention``, copied into many speech
packages: ``return (w @ v)..., qk.detach()``; ``wv, qk = self.qkv_attention(q, k, v, mask)``;
``return self.out(wv), qk``): the weights are not kept, the scores only handed out, so the site
is reported without a fix (SDPA never makes the scores); so are the weights themselves handed up
to a caller that drops them. Look-alikes stay quiet: a caller that computes with the handed-up
scores, or that keeps the weights themselves."""

from __future__ import annotations

from attention_cases import found_sites

WHISPER = '''
import torch
import torch.nn.functional as F
from torch import nn


class MultiHeadAttention(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.n_head = n_head
        self.query = nn.Linear(n_state, n_state)
        self.key = nn.Linear(n_state, n_state, bias=False)
        self.value = nn.Linear(n_state, n_state)
        self.out = nn.Linear(n_state, n_state)

    def forward(self, x, xa=None, mask=None):
        q = self.query(x)
        k = self.key(x if xa is None else xa)
        v = self.value(x if xa is None else xa)
        wv, qk = self.qkv_attention(q, k, v, mask)
        return self.out(wv), qk

    def qkv_attention(self, q, k, v, mask=None):
        n_batch, n_ctx, n_state = q.shape
        scale = (n_state // self.n_head) ** -0.25
        q = q.view(*q.shape[:2], self.n_head, -1).permute(0, 2, 1, 3) * scale
        k = k.view(*k.shape[:2], self.n_head, -1).permute(0, 2, 3, 1) * scale
        v = v.view(*v.shape[:2], self.n_head, -1).permute(0, 2, 1, 3)
        qk = q @ k
        if mask is not None:
            qk = qk + mask[:n_ctx, :n_ctx]
        qk = qk.float()
        w = F.softmax(qk, dim=-1).to(q.dtype)
        return (w @ v).permute(0, 2, 1, 3).flatten(start_dim=2), qk.detach()


class ResidualAttentionBlock(nn.Module):
    def __init__(self, n_state, n_head):
        super().__init__()
        self.attn = MultiHeadAttention(n_state, n_head)
        self.attn_ln = nn.LayerNorm(n_state)

    def forward(self, x, mask=None):
        return x + self.attn(self.attn_ln(x), mask=mask)[0]
'''


def test_scores_detached_and_handed_up_are_reported_without_a_fix():
    (site,) = found_sites(WHISPER)
    assert site.function.name.value == "qkv_attention"
    assert site.reason.startswith("the scores before the softmax are also returned or kept"), site.reason


def test_look_alikes_stay_quiet():
    computed_with = WHISPER.replace("return self.out(wv), qk\n", "return self.out(wv) + qk.mean()\n")
    weights_kept = WHISPER.replace("qk.detach()\n", "w\n").replace(
        "return x + self.attn(self.attn_ln(x), mask=mask)[0]",
        "out, self.weights = self.attn(self.attn_ln(x), mask=mask)\n        return x + out",
    )
    for source in (computed_with, weights_kept):
        assert source != WHISPER and found_sites(source) == [], source


def test_weights_handed_up_to_a_caller_that_drops_them_are_reported():
    # the weights themselves handed up by `forward`, whose only caller takes `[0]`: nothing keeps them
    (site,) = found_sites(WHISPER.replace("qk.detach()\n", "w\n"))
    assert site.function.name.value == "qkv_attention"
    assert site.reason  # (reported without a fix: the weights are cast, and returned)
