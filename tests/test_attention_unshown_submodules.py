"""TML601 where q and k pass through a submodule the file does not show the kind of
(``self.q_norm = RMSNorm(...)`` in one arm of ``__init__``, ``None`` in the other, then
``queries = self.q_norm(queries)``) before RoPE and ``repeat_interleave`` (Qwen3's grouped-query
attention as LLMs-from-scratch writes it). The value graph takes such a submodule to keep its
input's axes; the rank of what it makes is then its input's too (``analysis/ranks.py``), so
``keys.transpose(2, 3)`` of the 4-D keys swaps their last two axes and the scores are q·k.
Reported with an exact fix (numerically checked, with and without the norms).

Look-alike that stays quiet: the same block whose ``self.k_proj`` submodule (not shown) makes
the keys from a weight: ``x @ self.k_proj(w)`` is a tensor times a matrix whose layout nothing
shows.
"""

from __future__ import annotations

import torch

from attention_cases import fixed_modules, found_sites

GQA = '''
import torch
import torch.nn as nn


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.scale = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.scale


def apply_rope(x, cos, sin):
    head_dim = x.shape[-1]
    x1 = x[..., : head_dim // 2]
    x2 = x[..., head_dim // 2:]
    rotated = torch.cat((-x2, x1), dim=-1)
    return ((x * cos) + (rotated * sin)).to(dtype=x.dtype)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_in, num_heads, num_kv_groups, head_dim, qk_norm=False):
        super().__init__()
        self.num_heads, self.num_kv_groups, self.head_dim = num_heads, num_kv_groups, head_dim
        self.group_size = num_heads // num_kv_groups
        self.d_out = num_heads * head_dim
        self.W_query = nn.Linear(d_in, self.d_out, bias=False)
        self.W_key = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
        self.W_value = nn.Linear(d_in, num_kv_groups * head_dim, bias=False)
        self.out_proj = nn.Linear(self.d_out, d_in, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(head_dim)
            self.k_norm = RMSNorm(head_dim)
        else:
            self.q_norm = self.k_norm = None

    def forward(self, x, mask, cos, sin):
        b, num_tokens, _ = x.shape
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        keys = keys.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        values = values.view(b, num_tokens, self.num_kv_groups, self.head_dim).transpose(1, 2)
        if self.q_norm:
            queries = self.q_norm(queries)
        if self.k_norm:
            keys = self.k_norm(keys)
        queries = apply_rope(queries, cos, sin)
        keys = apply_rope(keys, cos, sin)
        keys = keys.repeat_interleave(self.group_size, dim=1)
        values = values.repeat_interleave(self.group_size, dim=1)
        attn_scores = queries @ keys.transpose(2, 3)
        attn_scores = attn_scores.masked_fill(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / self.head_dim**0.5, dim=-1)
        context = (attn_weights @ values).transpose(1, 2).reshape(b, num_tokens, self.d_out)
        return self.out_proj(context)
'''

# the norms always built (two assignments no longer: the ``if`` alone decides)
UNCONDITIONAL = GQA.replace(
    "        if self.q_norm:\n            queries = self.q_norm(queries)\n        if self.k_norm:\n            keys = self.k_norm(keys)\n",
    "        queries = self.q_norm(queries)\n        keys = self.k_norm(keys)\n",
)

WEIGHT = '''
import torch
import torch.nn as nn


class Mixer(nn.Module):
    def __init__(self, dim, make_proj):
        super().__init__()
        self.k_proj = make_proj(dim)
        self.weight = nn.Parameter(torch.randn(dim, dim))

    def forward(self, x):
        scores = x @ self.k_proj(self.weight)
        return torch.softmax(scores, dim=-1) @ x
'''


def test_reported_through_a_submodule_not_shown():
    assert UNCONDITIONAL != GQA
    for source in (GQA, UNCONDITIONAL):
        (site,) = found_sites(source)
        assert site.reason == ""


def test_the_fix_is_exact_with_and_without_the_norms(tmp_path):
    eager, fixed = fixed_modules(tmp_path, GQA, "gqa", 1)
    n, heads, groups, head_dim = 6, 4, 2, 8
    positions = torch.arange(n, dtype=torch.float32)[:, None]
    angles = positions * (1.0 / 10000 ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))[None, :]
    angles = torch.cat([angles, angles], dim=-1)
    cos, sin = angles.cos(), angles.sin()
    mask = torch.triu(torch.ones(n, n, dtype=torch.bool), diagonal=1)
    for qk_norm in (False, True):
        torch.manual_seed(0)
        a = eager.GroupedQueryAttention(16, heads, groups, head_dim, qk_norm=qk_norm)
        b = fixed.GroupedQueryAttention(16, heads, groups, head_dim, qk_norm=qk_norm)
        b.load_state_dict(a.state_dict())
        x = torch.randn(2, n, 16, requires_grad=True)
        y = x.detach().clone().requires_grad_(True)
        out_a, out_b = a(x, mask, cos, sin), b(y, mask, cos, sin)
        torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-4)
        out_a.sum().backward()
        out_b.sum().backward()
        torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-4)


def test_a_weight_through_a_submodule_stays_quiet():
    assert found_sites(WEIGHT) == []
