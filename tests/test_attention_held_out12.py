"""TML601 on a form the twelfth held-out set showed it missed, modelled as a computation:

a submodule the file does not show, called on one tensor (``self.attn_drop(attn)`` in a method of
a class whose ``__init__`` is elsewhere: a subclass of a library's attention, or a function written
as a method outside its class, ``def attention_forward(self, x)`` attached with
``types.MethodType``, MiDaS's patch of timm's BEiT attention) is a layer of unknown kind: it keeps
its input's axes (a same-shaped step, conservatively), as a callable argument does. Before, the
call was opaque and the weights' axes were lost, so the product with v was no attention.
Reported without a fix: the weights pass through a module SDPA cannot run.

Look-alikes stay quiet: the weights of such a function returned, a softmax over the queries, a
function whose first parameter is not ``self`` (a plain function taking a module: its calls of
the module's attributes stay opaque).
"""

from __future__ import annotations

from attention_cases import found_sites, run_cli

PATCHED = '''
import types

import numpy as np
import torch
import torch.nn.functional as F
from timm.models.beit import Attention


def attention_forward(self, x, resolution, shared_rel_pos_bias=None):
    B, N, C = x.shape
    qkv_bias = torch.cat((self.q_bias, self.k_bias, self.v_bias)) if self.q_bias is not None else None
    qkv = F.linear(input=x, weight=self.qkv.weight, bias=qkv_bias)
    qkv = qkv.reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q = q * self.scale
    attn = q @ k.transpose(-2, -1)
    if self.relative_position_bias_table is not None:
        window_size = tuple(np.array(resolution) // 16)
        attn = attn + self._get_rel_pos_bias(window_size)
    if shared_rel_pos_bias is not None:
        attn = attn + shared_rel_pos_bias
    attn = attn.softmax(dim=-1)
    attn = self.attn_drop(attn)
    x = (attn @ v).transpose(1, 2).reshape(B, N, -1)
    x = self.proj(x)
    x = self.proj_drop(x)
    return x


def patch(block):
    block.attn.forward = types.MethodType(attention_forward, block.attn)


class WindowedAttention(Attention):
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj(x)
'''

QUIET = '''
import torch
import torch.nn.functional as F
from timm.models.beit import Attention


def attention_with_weights(self, x):
    B, N, C = x.shape
    qkv = F.linear(x, self.qkv.weight).reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)
    attn = self.attn_drop(attn)
    return (attn @ v).transpose(1, 2).reshape(B, N, -1), attn


def over_the_queries(self, x):
    B, N, C = x.shape
    qkv = F.linear(x, self.qkv.weight).reshape(B, N, 3, self.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attn = self.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-2))
    return (attn @ v).transpose(1, 2).reshape(B, N, -1)


def module_argument(block, x):
    B, N, C = x.shape
    qkv = F.linear(x, block.qkv.weight).reshape(B, N, 3, block.num_heads, -1).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    attn = block.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-1))
    return (attn @ v).transpose(1, 2).reshape(B, N, -1)


class KeepsWeights(Attention):
    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = self.attn_drop((q @ k.transpose(-2, -1)).softmax(dim=-1))
        self.last_attention = attn
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))
'''


def test_a_submodule_the_file_does_not_show_keeps_the_weights_axes():
    sites = found_sites(PATCHED)
    assert [(s.function.name.value, s.has_dropout) for s in sites] == [("attention_forward", False), ("forward", False)]
    assert all(s.reason == "the weights pass through `self.attn_drop`, which SDPA cannot run" for s in sites)


def test_look_alikes_stay_quiet():
    assert found_sites(QUIET) == []


def test_the_cli_reports_them_without_a_fix(tmp_path):
    path = tmp_path / "beit_patch.py"
    path.write_text(PATCHED + QUIET.split("\n", 4)[4])
    result = run_cli("--no-cache", "--select", "TML601", "--output-format", "concise", str(path))
    rows = [line.split(":")[1] for line in result.stdout.splitlines() if "TML601" in line]
    assert rows == ["25", "42"], result.stdout
