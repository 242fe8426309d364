"""TML601 where the scale is applied to q and k before their product, not to the scores
(``((q * scale) @ (k.transpose(2, 3) * scale)).softmax(3)``, v-diffusion's and guided
diffusion's ``SelfAttention2d``, the softmax on the product in one expression): a scale keeps
each operand's layout, so q and k are still laid out alike, their features at the same place
(``analysis/similarity.py``: ``_origin`` passes through ``scale``). The fix hands the scaled
operands to F.scaled_dot_product_attention with ``scale=1.0``.

Look-alikes stay quiet: a scaled tensor times a weight matrix (``(x * s) @ self.w``), which is a
projection, not scores; the same attention whose weights are returned; and timm MViTv2's
pool-first form, ``(q * s) @ k`` with ``k`` left (B, N, heads, d), whose product contracts the
features of q with the heads of k (a scaled operand is not taken as "a projection of the
module in any layout", ``_projected``).
"""

from __future__ import annotations

import pytest

from attention_cases import fixed_modules, found_sites

V_DIFFUSION = '''
from torch import nn


class SelfAttention2d(nn.Module):
    def __init__(self, c_in, n_head=1):
        super().__init__()
        self.n_head = n_head
        self.qkv_proj = nn.Conv2d(c_in, c_in * 3, 1)
        self.out_proj = nn.Conv2d(c_in, c_in, 1)

    def forward(self, input):
        n, c, h, w = input.shape
        qkv = self.qkv_proj(input)
        qkv = qkv.view([n, self.n_head * 3, c // self.n_head, h * w]).transpose(2, 3)
        q, k, v = qkv.chunk(3, dim=1)
        scale = k.shape[3]**-0.25
        att = ((q * scale) @ (k.transpose(2, 3) * scale)).softmax(3)
        y = (att @ v).transpose(2, 3).contiguous().view([n, c, h, w])
        return input + self.out_proj(y)


class LastAxis(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        s = (d // self.heads) ** -0.5
        weights = ((s * q) @ (k * s).transpose(-2, -1)).softmax(dim=-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, d))
'''

LOOK_ALIKES = '''
import torch
from torch import nn


class Projection(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w = nn.Parameter(torch.randn(dim, dim))
        self.v = nn.Linear(dim, dim)

    def forward(self, x):
        s = x.shape[-1] ** -0.5
        gate = ((x * s) @ self.w).softmax(-1)  # a tensor times a weight matrix
        return gate @ self.v(x).transpose(-2, -1)


class Returned(nn.Module):
    def __init__(self, c_in):
        super().__init__()
        self.qkv_proj = nn.Conv2d(c_in, c_in * 3, 1)

    def forward(self, input):
        n, c, h, w = input.shape
        q, k, v = self.qkv_proj(input).view([n, 3, c, h * w]).transpose(2, 3).chunk(3, dim=1)
        scale = c ** -0.25
        att = ((q * scale) @ (k.transpose(2, 3) * scale)).softmax(3)
        return att @ v, att


class PoolFirst(nn.Module):
    def __init__(self, dim, heads=2):
        super().__init__()
        self.heads, self.scale = heads, (dim // heads) ** -0.5
        self.q, self.k, self.v = nn.Linear(dim, dim), nn.Linear(dim, dim), nn.Linear(dim, dim)

    def forward(self, x):
        B, N, _ = x.shape
        q = self.q(x).reshape(B, N, self.heads, -1).transpose(1, 2)
        k = self.k(x).reshape(B, N, self.heads, -1)
        v = self.v(x).reshape(B, N, self.heads, -1).transpose(1, 2)
        attn = (q * self.scale) @ k
        return attn.softmax(dim=-1) @ v
'''


def test_scaled_operands_are_sites():
    assert len(found_sites(V_DIFFUSION)) == 2


def test_look_alikes_stay_quiet():
    assert found_sites(LOOK_ALIKES) == []


@pytest.mark.slow
def test_the_fix_computes_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    eager, fixed = fixed_modules(tmp_path, V_DIFFUSION, "scaled", 2)
    torch.manual_seed(0)
    for name, args, x in (
        ("SelfAttention2d", (8, 2), torch.randn(2, 8, 4, 5)),
        ("LastAxis", (8, 2), torch.randn(2, 6, 8)),
    ):
        a, b = getattr(eager, name)(*args), getattr(fixed, name)(*args)
        b.load_state_dict(a.state_dict())
        results = []
        for module in (a, b):
            leaf = x.clone().requires_grad_()
            out = module(leaf)
            out.backward(torch.ones_like(out))
            results.append((out.detach(), leaf.grad))
        torch.testing.assert_close(results[0][0], results[1][0], atol=1e-5, rtol=1e-4, msg=name)
        torch.testing.assert_close(results[0][1], results[1][1], atol=1e-5, rtol=1e-4, msg=name)
