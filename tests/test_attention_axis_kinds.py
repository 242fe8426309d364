"""TML601 asks which axis the scores contract (``analysis/axis_kinds.py``): attention over the
positions contracts the features of q and k and keeps B·H·L·S weights; channel ("transposed")
attention and linear attention's ``kᵀ @ v`` contract the positions, and their weights (features
× features) do not grow with the sequence, so there is nothing for SDPA to save: quiet.

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
    assert len(reported) == len(expected) == 5
    for softmax_row in expected:
        assert any(0 <= row - softmax_row <= 2 for row in reported), (softmax_row, reported)
    for quiet_row in _rows("CHANNEL"):
        assert not any(0 <= row - quiet_row <= 2 for row in reported), (quiet_row, reported)


def _saved_weight_bytes(attention, x) -> int:
    """Bytes of the saved tensors that are 4-D and square in their last two axes: the weights
    (and the softmax output) autograd keeps for backward."""
    torch = pytest.importorskip("torch")
    saved: List[int] = []

    def pack(tensor):
        if tensor.dim() == 4 and tensor.shape[-1] == tensor.shape[-2]:
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
