"""TML601 where the weights are the ``exp`` of a ``log_softmax`` over the keys
(``F.log_softmax(attn, dim=-1).exp()``, ``torch.exp(torch.log_softmax(s, -1))``): the value graph
reads that as the softmax it computes (``compound._exp``). The fix is numerically equal (checked
with torch: outputs and gradients). Quiet: the ``log_softmax`` over the queries, and the
``exp`` of a ``log_softmax`` whose log-probabilities are also read (a loss on them)."""

from __future__ import annotations

import torch

from attention_cases import fixed_modules, found_sites

SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Neck(nn.Module):
    def __init__(self, dim, heads=4):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5
        attn = F.log_softmax(attn, dim=-1).exp()
        out = (attn @ v).transpose(1, 2).reshape(b, n, c)
        return self.proj(out)


class FunctionForm(Neck):
    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.exp(torch.log_softmax(q @ k.transpose(-2, -1), -1))
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))
'''

LOOK_ALIKES = '''
import torch
import torch.nn as nn


class OverTheQueries(nn.Module):
    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        attn = torch.exp(torch.log_softmax(q @ k.transpose(-2, -1), -2))
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))


class LogProbabilitiesKept(nn.Module):
    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        logp = torch.log_softmax(q @ k.transpose(-2, -1), -1)
        self.entropy = -(logp.exp() * logp).sum(-1).mean()
        return self.proj((logp.exp() @ v).transpose(1, 2).reshape(b, n, c))
'''


def test_exp_of_log_softmax_is_the_softmax(tmp_path):
    sites = found_sites(SOURCE)
    assert sorted(site.function.name.value for site in sites) == ["forward", "forward"]
    eager, fixed = fixed_modules(tmp_path, SOURCE, "log_softmax", 2)
    for name in ("Neck", "FunctionForm"):
        torch.manual_seed(0)
        a, b = getattr(eager, name)(16), getattr(fixed, name)(16)
        b.load_state_dict(a.state_dict())
        x = torch.randn(2, 5, 16, requires_grad=True)
        y = x.detach().clone().requires_grad_(True)
        out_a, out_b = a(x), b(y)
        torch.testing.assert_close(out_b, out_a, atol=1e-5, rtol=1e-4)
        out_a.sum().backward()
        out_b.sum().backward()
        torch.testing.assert_close(y.grad, x.grad, atol=1e-5, rtol=1e-4)


def test_look_alikes_stay_quiet():
    assert found_sites(LOOK_ALIKES) == []
