"""TML601 asks which axis the scores contract (``analysis/axis_kinds.py``): attention over the
positions contracts the features of q and k and keeps B·H·L·S weights; channel ("transposed")
attention and linear attention's ``kᵀ @ v`` contract the positions, and their weights (features
× features) do not grow with the sequence, so there is nothing for SDPA to save: quiet. So is
one learned query pooling the tokens (``nn.Parameter(torch.randn(1, 1, dim))``, or a size 1
written at the query axis, or an embedding's row with no axis of its own, ``einsum("hd,nhd->nh",
q_0, k)``): its B·H·1·S weights grow linearly and are smaller than the keys; so
is one key (a state vector viewed ``(B, 1, heads, d)``), also with the heads moved to the batch
(``torch.cat(q.split(d, dim=2), dim=0)``) and the number of queries a constructor default. A
learned query a tensor is added to (which may broadcast it to many rows), many
learned queries, latents whose number the code does not show, and a decoder step's
``q.unsqueeze(-1)`` (run once per output step, also ``dec[:, t]`` in a loop) stay reported; the
last hidden state taken by a constant index as the one query (``h[:, -1, :].unsqueeze(2)``) and
one query per sample over keys the batch shares (``einsum("bhd,thd->bht", q, k)``) are quiet.

The axes are followed to where q and k were made (an ``nn.Linear``: features last; an
``nn.Conv2d``: channels first), through ``reshape``/``view`` sizes the code names
(``B, N, C = x.shape``), ``einops.rearrange`` groups, ``flatten``, ``chunk``/``unbind``/``qkv[0]``
and transposes. Attention over positions in the same layouts stays reported, and an axis that
cannot be followed (q and k handed in as arguments) is reported as before. The bytes autograd
keeps are measured here (CPU) for both kinds, so the claim in the message is a measurement."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import List

import pytest

ROOT = Path(__file__).resolve().parent.parent

FORMS = '''
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange


class RestormerAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Conv2d(dim, dim * 3, kernel_size=1)
        self.qkv_dwconv = nn.Conv2d(dim * 3, dim * 3, kernel_size=3, padding=1, groups=dim * 3)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = self.qkv_dwconv(self.qkv(x)).chunk(3, dim=1)
        q = rearrange(q, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        k = rearrange(k, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        v = rearrange(v, "b (head c) h w -> b head c (h w)", head=self.num_heads)
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)  # CHANNEL
        out = attn @ v
        return rearrange(out, "b head c (h w) -> b (head c) h w", head=self.num_heads, h=h, w=w)


class PatchChannels(nn.Module):
    def __init__(self, dim, heads, window_size=8):
        super().__init__()
        self.heads, self.ps = heads, window_size
        self.temperature = nn.Parameter(torch.ones(heads, 1, 1))
        self.qkv = nn.Conv2d(dim, dim * 3, kernel_size=1)

    def forward(self, x):
        q, k, v = (
            rearrange(t, "b (head d) (h ph) (w pw) -> b (h w) head d (ph pw)", ph=self.ps, pw=self.ps, head=self.heads)
            for t in self.qkv(x).chunk(3, dim=1)
        )
        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)  # CHANNEL
        return attn @ v


class CrossCovariance(nn.Module):
    def __init__(self, dim, num_heads=8):
        super().__init__()
        self.num_heads = num_heads
        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))
        self.qkv = nn.Linear(dim, dim * 3)
        self.attn_drop = nn.Dropout(0.1)

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q, k, v = q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1)
        attn = (q @ k.transpose(-2, -1)) * self.temperature
        attn = attn.softmax(dim=-1)  # CHANNEL
        attn = self.attn_drop(attn)
        return (attn @ v).permute(0, 3, 1, 2).reshape(B, N, C)


class SharedChannelBranch(nn.Module):
    def __init__(self, hidden_size, num_heads=4):
        super().__init__()
        self.num_heads = num_heads
        self.qkvv = nn.Linear(hidden_size, hidden_size * 4)

    def forward(self, x):
        B, N, C = x.shape
        qkvv = self.qkvv(x).reshape(B, N, 4, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkvv[0].transpose(-2, -1), qkvv[1].transpose(-2, -1), qkvv[2].transpose(-2, -1)
        attn = F.softmax(q @ k.transpose(-2, -1), dim=-1)  # CHANNEL
        return (attn @ v).permute(0, 3, 1, 2).reshape(B, N, C)


class LinearCross(nn.Module):
    def __init__(self, dim, num_heads=8):
        super().__init__()
        self.num_heads = num_heads
        self.kv = nn.Linear(dim, dim * 2)

    def forward(self, x, y):
        B, N, C = x.shape
        q = x.reshape(B, -1, self.num_heads, C // self.num_heads).permute(0, 2, 1, 3)
        k, v = self.kv(y).reshape(B, -1, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).contiguous()
        ctx = (k.transpose(-2, -1) @ v).softmax(dim=-2)  # CHANNEL
        return (q @ ctx).permute(0, 2, 1, 3).reshape(B, N, C)


def linear_einsum(q, k, v):
    ctx = torch.einsum("bhnd,bhne->bhde", k, v).softmax(dim=-2)  # CHANNEL
    return torch.einsum("bhnd,bhde->bhne", q, ctx)


class FlattenedChannels(nn.Module):
    def forward(self, x):
        b, c, h, w = x.shape
        q = x.view(b, c, -1)
        k = x.view(b, c, -1).permute(0, 2, 1)
        attention = F.softmax(torch.bmm(q, k), dim=-1)  # CHANNEL
        return torch.bmm(attention, x.view(b, c, -1)).view(b, c, h, w)


class FlattenedMaps(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)

    def forward(self, x):
        q, k = self.q(x).flatten(2), self.k(x).flatten(2)
        attn = (q @ k.transpose(1, 2)).softmax(dim=-1)  # CHANNEL
        return attn @ x.flatten(2)


class Tokens(nn.Module):
    def __init__(self, dim, num_heads=8):
        super().__init__()
        self.num_heads = num_heads
        self.scale = (dim // num_heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)  # POSITIONS
        return (attn @ v).transpose(1, 2).reshape(B, N, C)


class NonLocal(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.q = nn.Conv2d(c, c // 8, 1)
        self.k = nn.Conv2d(c, c // 8, 1)
        self.v = nn.Conv2d(c, c, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q = self.q(x).view(b, -1, h * w).permute(0, 2, 1)
        k = self.k(x).view(b, -1, h * w)
        attention = F.softmax(torch.bmm(q, k), dim=-1)  # POSITIONS
        out = torch.bmm(self.v(x).view(b, -1, h * w), attention.permute(0, 2, 1))
        return out.view(b, c, h, w)


class PixelTokens(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.q = nn.Conv2d(c, c, 1)
        self.k = nn.Conv2d(c, c, 1)

    def forward(self, x):
        q = self.q(x).flatten(2).transpose(1, 2)
        k = self.k(x).flatten(2)
        attn = torch.bmm(q, k).softmax(dim=-1)  # POSITIONS
        return torch.bmm(attn, x.flatten(2).transpose(1, 2))


class SpatialRearranged(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.to_qkv = nn.Conv2d(c, c * 3, 1)

    def forward(self, x):
        q, k, v = (rearrange(t, "b c h w -> b (h w) c") for t in self.to_qkv(x).chunk(3, dim=1))
        sim = torch.einsum("b i c, b j c -> b i j", q, k)
        attn = sim.softmax(dim=-1)  # POSITIONS
        return torch.einsum("b i j, b j c -> b i c", attn, v)


class LearnedQueryPool(nn.Module):
    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.query = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.wq, self.wk, self.wv = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, tokens):
        b, t, c = tokens.shape
        q = self.wq(self.query).expand(b, 1, c)
        h, dh = self.heads, self.head_dim
        q = q.view(b, 1, h, dh).transpose(1, 2)
        k = self.wk(tokens).view(b, t, h, dh).transpose(1, 2)
        v = self.wv(tokens).view(b, t, h, dh).transpose(1, 2)
        attn = F.softmax(torch.matmul(q, k.transpose(-2, -1)) * dh ** -0.5, dim=-1)  # ONE_QUERY
        return torch.matmul(attn, v).transpose(1, 2).reshape(b, c)


class Seeds(nn.Module):
    def __init__(self, dim, num_heads=4, seeds=1):
        super().__init__()
        self.num_heads = num_heads
        self.seed = nn.Parameter(torch.zeros(1, 1, dim))
        self.many = nn.Parameter(torch.zeros(1, 16, dim))
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)

    def forward(self, x):
        B, N, C = x.shape
        k, v = self.kv(x).reshape(B, N, 2, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q = self.q(self.seed.expand(B, -1, -1)).reshape(B, -1, self.num_heads, C // self.num_heads).transpose(1, 2)
        pooled = (q @ k.transpose(-2, -1)).softmax(dim=-1)  # ONE_QUERY
        q16 = self.q(self.seed.expand(B, -1, -1) + x[:, :16]).reshape(B, -1, self.num_heads, C // self.num_heads).transpose(1, 2)
        sixteen = (q16 @ k.transpose(-2, -1)).softmax(dim=-1)  # POSITIONS
        return (pooled @ v).transpose(1, 2).reshape(B, C), (sixteen @ v).transpose(1, 2).reshape(B, 16, C)


class SeedPooling(nn.Module):
    def __init__(self, embed_dim, num_heads=4, num_seeds=1):
        super().__init__()
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.seeds = nn.Parameter(torch.empty(1, num_seeds, embed_dim))
        self.fc_q, self.fc_k, self.fc_v = nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim), nn.Linear(embed_dim, embed_dim)

    def forward(self, x):
        q = self.fc_q(self.seeds.expand(x.size(0), -1, -1))
        split = self.embed_dim // self.num_heads
        q_ = torch.cat(q.split(split, dim=2), dim=0)
        k_ = torch.cat(self.fc_k(x).split(split, dim=2), dim=0)
        v_ = torch.cat(self.fc_v(x).split(split, dim=2), dim=0)
        a = torch.softmax(q_.bmm(k_.transpose(1, 2)) / math.sqrt(self.embed_dim), dim=2)  # ONE_QUERY
        return torch.cat(a.bmm(v_).split(x.size(0), dim=0), dim=2)


class ManySeeds(SeedPooling):
    def __init__(self, embed_dim, num_heads=4, num_seeds=8):
        super().__init__(embed_dim, num_heads, num_seeds)
        self.more = nn.Parameter(torch.empty(1, num_seeds, embed_dim))

    def forward(self, x):
        q = self.fc_q(self.more.expand(x.size(0), -1, -1))
        split = self.embed_dim // self.num_heads
        q_ = torch.cat(q.split(split, dim=2), dim=0)
        k_ = torch.cat(self.fc_k(x).split(split, dim=2), dim=0)
        a = torch.softmax(q_.bmm(k_.transpose(1, 2)), dim=2)  # POSITIONS
        return a.bmm(torch.cat(self.fc_v(x).split(split, dim=2), dim=0))


class StateInjection(nn.Module):
    def __init__(self, hidden_size, state_dim, n_heads=4):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, hidden_size // n_heads
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(state_dim, hidden_size)
        self.v_proj = nn.Linear(state_dim, hidden_size)

    def forward(self, hidden, state):
        B, T, H = hidden.shape
        Q = self.q_proj(hidden).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        K = self.k_proj(state.unsqueeze(1)).view(B, 1, self.n_heads, self.head_dim).transpose(1, 2)
        V = self.v_proj(state.unsqueeze(1)).view(B, 1, self.n_heads, self.head_dim).transpose(1, 2)
        weights = F.softmax(torch.matmul(Q, K.transpose(-2, -1)) * self.head_dim ** -0.5, dim=-1)  # ONE_QUERY
        return torch.matmul(weights, V).transpose(1, 2).reshape(B, T, H)


class Latents(nn.Module):
    def __init__(self, dim, num_latents=1):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_latents, dim))

    def forward(self, k, v):
        q = self.latents.unsqueeze(0).expand(k.shape[0], -1, -1)
        attn = torch.einsum("b i d, b j d -> b i j", q, k).softmax(dim=-1)  # POSITIONS
        return torch.einsum("b i j, b j d -> b i d", attn, v)


def decoder_step(h_src, q):
    scores = torch.bmm(h_src, q.unsqueeze(-1)).squeeze(-1)
    w = scores.softmax(dim=-1)  # POSITIONS
    return torch.bmm(w.unsqueeze(1), h_src).squeeze(1)


class EmbeddedQuery(nn.Module):
    """EHNN's pooling: one learned query per head, an embedding's row, with no axis of its own."""

    def __init__(self, d, h):
        super().__init__()
        self.q = nn.Embedding(2, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.n_heads, self.dh = h, d // h

    def forward(self, x):
        q_0 = self.q(torch.zeros(1, dtype=torch.long, device=x.device)).view(self.n_heads, self.dh)
        k = torch.stack(self.k(x).split(self.dh, -1), 1)
        v = torch.stack(self.v(x).split(self.dh, -1), 1)
        logit0 = torch.einsum("hd,nhd->nh", q_0, k) / math.sqrt(self.dh)
        alpha0 = torch.softmax(logit0, dim=0)  # ONE_QUERY
        return torch.einsum("nh,nhd->hd", alpha0, v)


class ScaledQueries(nn.Module):
    """ETSformer's classification pooling: learned queries per head, scaled, with no axis of their own."""

    def __init__(self, d, h):
        super().__init__()
        self.queries = nn.Parameter(torch.randn(h, d))
        self.scale = d ** -0.5
        self.to_kv = nn.Linear(d, d * 2)

    def forward(self, x):
        q = self.queries * self.scale
        k, v = self.to_kv(x).chunk(2, dim=-1)
        sim = torch.einsum("h d, b h j d -> b h j", q, k)
        attn = sim.softmax(dim=-1)  # ONE_QUERY
        return torch.einsum("b h j, b h j d -> b h d", attn, v)


def decode_step(q, k, v):
    s = torch.einsum("bhd,bhnd->bhn", q, k)
    return torch.einsum("bhn,bhnd->bhd", s.softmax(-1), v)  # POSITIONS


class LastStatePool(nn.Module):
    """The last hidden state as the one query over the sequence (a sign-language decoder's pooling)."""

    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states):
        h_t = hidden_states[:, -1, :]
        score = torch.bmm(self.fc1(hidden_states), h_t.unsqueeze(2)).squeeze(2)
        weights = F.softmax(score, dim=1)  # ONE_QUERY
        return torch.bmm(hidden_states.permute(0, 2, 1), weights.unsqueeze(2)).squeeze(2)


def decode_steps(h_src, dec):
    out = []
    for t in range(dec.shape[1]):
        scores = torch.bmm(h_src, dec[:, t].unsqueeze(-1)).squeeze(-1)
        w = scores.softmax(dim=-1)  # POSITIONS
        out.append(torch.bmm(w.unsqueeze(1), h_src).squeeze(1))
    return torch.stack(out, 1)


def shared_keys(query, keys, values):
    """One query per sample over keys the whole batch shares (a dilated temporal memory)."""
    scores = torch.einsum("bhd,thd->bht", query, keys)
    weights = F.softmax(scores, dim=-1)  # ONE_QUERY
    return torch.einsum("bht,thd->bhd", weights, values)


def handed_in(q, k, v, temperature):
    attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * temperature
    attn = attn.softmax(dim=-1)  # UNKNOWN
    return attn @ v
'''


def _rows(marker: str) -> List[int]:
    return [number for number, line in enumerate(FORMS.splitlines(), 1) if line.rstrip().endswith("# " + marker)]


def test_scores_over_positions_are_reported_and_over_channels_quiet(tmp_path: Path) -> None:
    path = tmp_path / "attention_kinds.py"
    path.write_text(FORMS, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--no-cache", "--select", "TML601", "--output-format", "concise", str(path)],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert result.returncode in (0, 1), result.stderr
    reported = sorted({int(line.split(":")[1]) for line in result.stdout.splitlines() if ": TML601 " in line})
    # a finding sits on the softmax's row or on the product's row just after it
    expected = _rows("POSITIONS") + _rows("UNKNOWN")
    assert len(reported) == len(expected) == 11
    for softmax_row in expected:
        assert any(0 <= row - softmax_row <= 2 for row in reported), (softmax_row, reported)
    for quiet_row in _rows("CHANNEL") + _rows("ONE_QUERY"):
        assert not any(0 <= row - quiet_row <= 2 for row in reported), (quiet_row, reported)


def _saved_weight_bytes(attention, x, square: bool = True) -> int:
    """Bytes of the saved 4-D tensors that are square in their last two axes (``square``; else
    those with one row): the weights (and the softmax output) autograd keeps for backward."""
    torch = pytest.importorskip("torch")
    saved: List[int] = []

    def pack(tensor):
        if tensor.dim() == 4 and (tensor.shape[-1] == tensor.shape[-2] if square else tensor.shape[-2] == 1):
            saved.append(tensor.numel() * tensor.element_size())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        attention(x).sum()
    return sum(saved)


def test_channel_attention_keeps_weights_that_do_not_grow_with_the_sequence() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    namespace: dict = {}
    exec(compile(FORMS, "attention_kinds.py", "exec"), namespace)  # noqa: S102 - the forms above
    torch.manual_seed(0)
    channel, tokens = namespace["CrossCovariance"](32, num_heads=4), namespace["Tokens"](32, num_heads=4)
    short, long = torch.randn(2, 64, 32), torch.randn(2, 256, 32)
    # channel attention: (B, h, C/h, C/h) weights whatever the length; over the positions:
    # (B, h, N, N), sixteen times as many for four times the tokens
    assert _saved_weight_bytes(channel, short) == _saved_weight_bytes(channel, long) > 0
    assert _saved_weight_bytes(tokens, long) == 16 * _saved_weight_bytes(tokens, short)


def test_one_learned_query_keeps_weights_that_grow_linearly_and_are_smaller_than_the_keys() -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    namespace: dict = {}
    exec(compile(FORMS, "attention_kinds.py", "exec"), namespace)  # noqa: S102 - the forms above
    torch.manual_seed(0)
    pool = namespace["LearnedQueryPool"](64, heads=4)
    short, long = torch.randn(2, 64, 64), torch.randn(2, 256, 64)
    weights_short, weights_long = (_saved_weight_bytes(pool, x, square=False) for x in (short, long))
    assert weights_long == 4 * weights_short > 0
    keys_long = 2 * 256 * 64 * 4  # B·S·C float32: the keys of the long input
    assert weights_long * 8 <= keys_long  # (B·H·1·S weights: a sixteenth of the keys here, d = 16)
