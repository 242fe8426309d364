"""TML401-TML404 on the forms real checkpointing code takes, written as reduced files of the
kinds found in model code (a transformer stack in the x-transformers style, transformers'
encoder loop, a DenseNet-style TDNN layer, a module-level pass-through helper), with look-alikes
that must stay quiet.

Followed: a layer list checkpointed in a loop through ``layer.__call__``, ``layer.forward``, a
forwarding lambda or a closure factory (``create_custom_forward(layer)``, also one the method
defines), also ``enumerate``, ``zip`` and a loop that unpacks each element (``for norm, ff in
self.layers``), or read by index (``layer = self.resnets[i]``, ``self.projections[i]``); a layer
that is one op or else ``nn.Identity()``, or built by a ``norm_layer`` parameter's default; a builder that fills a local ``nn.Sequential()`` with
``add_module``; a local name bound to a layer class in either arm (``norm_layer = nn.BatchNorm2d
if norm == "bn" else nn.GroupNorm``); ``functools.partial(checkpoint, use_reentrant=False)`` bound at module level or
on ``self``; transformers' ``self._gradient_checkpointing_func``; fairscale's
``checkpoint_wrapper``. Quiet: a big block, a block with GroupNorm/LayerNorm, a checkpoint under
``torch.no_grad()`` or in a ``@torch.no_grad()`` method, ``nn.Identity()`` alone.

Each row that must be reported ends with ``# expect: CODE`` (several codes allowed); every other
row must stay quiet for the four codes.
"""

from __future__ import annotations

import re
import textwrap

import pytest

from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

CODES = ("TML401", "TML402", "TML403", "TML404")
EXPECT = re.compile(r"expect:((?:\s*TML\d{3})+)")

STACK = '''
import torch
from torch import nn


def checkpoint(function, *args, **kwargs):
    kwargs.setdefault("use_reentrant", False)
    return torch.utils.checkpoint.checkpoint(function, *args, **kwargs)


class FeedForward(nn.Module):
    def __init__(self, dim, mult=4, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(dim, dim * mult), nn.GELU(), nn.Dropout(dropout), nn.Linear(dim * mult, dim)
        )

    def forward(self, x):
        return self.net(x)


class Transformer(nn.Module):
    def __init__(self, dim, depth, dim_in=None, dim_out=None):
        super().__init__()
        self.project_in = nn.Linear(dim_in, dim) if dim_in is not None else nn.Identity()
        self.skip = nn.Identity()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(nn.ModuleList([nn.LayerNorm(dim), FeedForward(dim), nn.BatchNorm1d(dim)]))
        if dim_out is not None:
            self.project_out = nn.Linear(dim, dim_out)
        else:
            self.project_out = nn.Identity()

    def forward(self, x):
        x = checkpoint(self.project_in, x)  # expect: TML402
        x = checkpoint(self.skip, x)
        for norm, ff, bn in self.layers:
            x = checkpoint(norm, x)  # expect: TML402
            x = checkpoint(ff, x) + x
            x = torch.utils.checkpoint.checkpoint(ff, x, use_reentrant=False, preserve_rng_state=False)  # expect: TML404
            x = checkpoint(bn, x)  # expect: TML402 TML403
        return checkpoint(self.project_out.forward, x)  # expect: TML402
'''

ENCODER = '''
from functools import partial

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class ConvLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.BatchNorm2d(c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


class GroupLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = nn.GroupNorm(8, c)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.norm(self.conv(x)))


def create_custom_forward(module):
    def custom_forward(*inputs):
        return module(*inputs)

    return custom_forward


class Encoder(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.layer = nn.ModuleList([ConvLayer(c) for _ in range(n)])
        self.plain = nn.ModuleList([GroupLayer(c) for _ in range(n)])
        self.gradient_checkpointing = False

    def forward(self, x):
        for i, layer_module in enumerate(self.layer):
            if self.gradient_checkpointing and self.training:
                x = self._gradient_checkpointing_func(layer_module.__call__, x)  # expect: TML403
            else:
                x = layer_module(x)
        for layer_module in self.plain:
            x = self._gradient_checkpointing_func(layer_module.__call__, x)
        return x

    def forward_custom(self, x):
        for layer, plain in zip(self.layer, self.plain):
            x = checkpoint(create_custom_forward(layer), x, use_reentrant=False)  # expect: TML403
            x = checkpoint(create_custom_forward(plain), x, use_reentrant=False)
            x = checkpoint(lambda t: layer(t), x, use_reentrant=False)  # expect: TML403
            x = checkpoint(lambda t: plain(t), x, use_reentrant=False)
        return x

    @torch.no_grad()
    def features(self, x):
        for layer in self.layer:
            x = checkpoint(layer, x)
        return x

    def embed(self, x):
        with torch.no_grad():
            for layer in self.layer:
                x = checkpoint(layer, x)
        return x
'''

PARTIALS = '''
import functools

import torch.nn as nn
from fairscale.nn import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint

ckpt = functools.partial(checkpoint, use_reentrant=False)
reentrant_ckpt = functools.partial(checkpoint)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return self.bn(self.conv(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block(64)
        self.proj = nn.Linear(64, 64)
        self.mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
        self._ckpt = functools.partial(checkpoint, use_reentrant=False)
        self.wrapped = checkpoint_wrapper(Block(64))  # expect: TML403
        self.wrapped_proj = checkpoint_wrapper(nn.Linear(64, 64))  # expect: TML402
        self.wrapped_mlp = checkpoint_wrapper(nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)))

    def forward(self, x):
        x = ckpt(self.block, x)  # expect: TML403
        x = self._ckpt(self.block, x)  # expect: TML403
        x = ckpt(self.mlp, x)
        x = reentrant_ckpt(self.mlp, x)  # expect: TML401
        return ckpt(self.proj, x)  # expect: TML402
'''

TDNN = '''
import torch
import torch.utils.checkpoint as cp


def get_nonlinear(config_str, channels):
    nonlinear = torch.nn.Sequential()
    for name in config_str.split("-"):
        if name == "relu":
            nonlinear.add_module("relu", torch.nn.ReLU(inplace=True))
        elif name == "batchnorm":
            nonlinear.add_module("batchnorm", torch.nn.BatchNorm1d(channels))
        else:
            raise ValueError("Unexpected module ({}).".format(name))
    return nonlinear


def get_plain(config_str, channels):
    nonlinear = torch.nn.Sequential()
    for name in config_str.split("-"):
        if name == "relu":
            nonlinear.add_module("relu", torch.nn.ReLU(inplace=True))
        elif name == "prelu":
            nonlinear.add_module("prelu", torch.nn.PReLU(channels))
    return nonlinear


class DenseTDNNLayer(torch.nn.Module):
    def __init__(self, in_channels, bn_channels, config_str="batchnorm-relu", memory_efficient=False):
        super().__init__()
        self.memory_efficient = memory_efficient
        self.nonlinear1 = get_nonlinear(config_str, in_channels)
        self.linear1 = torch.nn.Conv1d(in_channels, bn_channels, 1, bias=False)
        self.nonlinear2 = get_plain(config_str, bn_channels)
        self.linear2 = torch.nn.Conv1d(bn_channels, bn_channels, 1, bias=False)

    def bn_function(self, x):
        return self.linear1(self.nonlinear1(x))

    def plain_function(self, x):
        return self.linear2(self.nonlinear2(x))

    def forward(self, x):
        if self.training and self.memory_efficient:
            x = cp.checkpoint(self.bn_function, x, use_reentrant=False)  # expect: TML403
            x = cp.checkpoint(self.plain_function, x, use_reentrant=False)
        else:
            x = self.plain_function(self.bn_function(x))
        return x
'''

UNET = '''
import torch
import torch.nn as nn


class ResnetBlock(nn.Module):
    def __init__(self, c, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1)
        self.norm1 = norm_layer(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)
        self.norm2 = norm_layer(c)

    def forward(self, x):
        return x + self.norm2(self.conv2(torch.relu(self.norm1(self.conv1(x)))))


class AttnBlock(nn.Module):
    def __init__(self, dim, norm_layer=nn.LayerNorm):
        super().__init__()
        self.norm = norm_layer(dim)
        self.qkv = nn.Linear(dim, dim * 3)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        x = torch.utils.checkpoint.checkpoint(self.norm, x, use_reentrant=False)  # expect: TML402
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(torch.softmax(q @ k.transpose(-1, -2), dim=-1) @ v)


class DownBlock(nn.Module):
    def __init__(self, c, n):
        super().__init__()
        self.resnets = nn.ModuleList([ResnetBlock(c) for _ in range(n)])
        self.attentions = nn.ModuleList([AttnBlock(c) for _ in range(n)])
        self.projections = nn.ModuleList([nn.Linear(c, c) for _ in range(n)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states):
        def create_custom_forward(module, return_dict=None):
            def custom_forward(*inputs):
                if return_dict is not None:
                    return module(*inputs, return_dict=return_dict)
                return module(*inputs)

            return custom_forward

        ckpt_kwargs = {"use_reentrant": False}
        for resnet, attn in zip(self.resnets, self.attentions):
            if self.training and self.gradient_checkpointing:
                hidden_states = torch.utils.checkpoint.checkpoint(
                    create_custom_forward(resnet), hidden_states, **ckpt_kwargs  # expect: TML403
                )
                hidden_states = torch.utils.checkpoint.checkpoint(
                    create_custom_forward(attn, return_dict=False), hidden_states, **ckpt_kwargs
                )
            else:
                hidden_states = attn(resnet(hidden_states))
        for i in range(len(self.resnets)):
            layer = self.resnets[i]
            hidden_states = torch.utils.checkpoint.checkpoint(layer, hidden_states, use_reentrant=False)  # expect: TML403
            hidden_states = torch.utils.checkpoint.checkpoint(self.projections[i], hidden_states, use_reentrant=False)  # expect: TML402
            hidden_states = torch.utils.checkpoint.checkpoint(self.attentions[i], hidden_states, use_reentrant=False)
        return hidden_states
'''

CHOSEN_NORM = '''
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class ConvBlock(nn.Module):
    def __init__(self, c, norm="bn"):
        super().__init__()
        norm_layer = nn.BatchNorm2d if norm == "bn" else nn.GroupNorm
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = norm_layer(c)

    def forward(self, x):
        return self.norm(self.conv(x))


class PlainBlock(nn.Module):
    def __init__(self, c, group=True):
        super().__init__()
        norm_layer = nn.LayerNorm if group else nn.Identity
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.norm = norm_layer(c)

    def forward(self, x):
        return self.norm(self.conv(x))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = ConvBlock(64)
        self.plain = PlainBlock(64)

    def forward(self, x):
        x = checkpoint(self.block, x, use_reentrant=False)  # expect: TML403
        return checkpoint(self.plain, x, use_reentrant=False)
'''

CASES = {
    "stack": STACK, "encoder": ENCODER, "partials": PARTIALS, "tdnn": TDNN, "unet": UNET, "chosen_norm": CHOSEN_NORM,
}


def _expected(source: str):
    lines = textwrap.dedent(source).splitlines()
    return {
        (row, code)
        for row, line in enumerate(lines, start=1)
        for match in [EXPECT.search(line)] if match
        for code in match.group(1).split()
    }


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    source = textwrap.dedent(CASES[name])
    found = {(finding.location.row, finding.code) for finding in lint_source(source, "case.py", Settings(select=CODES))}
    assert found == _expected(CASES[name])


def test_single_layer_fix_calls_the_layer():
    """The loop's element unwrapped: ``checkpoint(norm, x)`` becomes ``norm(x)``."""
    from torchmemlint.fixer import fix_text

    source = textwrap.dedent(STACK)
    fixed = fix_text(source, lambda text: lint_source(text, "case.py", Settings(select=("TML402",))), False).text
    assert "x = norm(x)" in fixed and "x = self.project_in(x)" in fixed
    assert "x = checkpoint(ff, x) + x" in fixed  # a block: kept


# timm's form (reduced from its RepViT-like models): `forward_intermediates` loops over a local
# `stages = self.stages[:max_index + 1]` before `forward_features` checkpoints `self.stages`. The
# first path reaches `ConvNorm` deeper than the analysis follows; what was found there must not
# be kept as the class's contents (it lost `checkpoint_seq(self.stages, x)`'s BatchNorm).
DEEP_FIRST = '''
import torch.nn as nn
from timm.models import checkpoint, checkpoint_seq


class ConvNorm(nn.Sequential):
    def __init__(self, a, b):
        super().__init__()
        self.add_module("c", nn.Conv2d(a, b, 1, bias=False))
        self.add_module("bn", nn.BatchNorm2d(b))


class Mixer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = ConvNorm(c, c)

    def forward(self, x):
        return self.conv(x)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.token_mixer = nn.Sequential(ConvNorm(c, c), nn.GELU())

    def forward(self, x):
        return x + self.token_mixer(x)


class Stage(nn.Module):
    def __init__(self, c, depth):
        super().__init__()
        blocks = []
        for _ in range(depth):
            blocks.append(Block(c))
        self.blocks = nn.Sequential(*blocks)

    def forward(self, x):
        return self.blocks(x)


class Net(nn.Module):
    def __init__(self, c=32, depths=(2, 2, 6, 2)):
        super().__init__()
        stages = []
        for depth in depths:
            stages.append(Stage(c, depth))
        self.stages = nn.Sequential(*stages)
        self.grad_checkpointing = False

    def forward_intermediates(self, x, max_index=None):
        if max_index is None:
            stages = self.stages
        else:
            stages = self.stages[:max_index + 1]
        for stage in stages:
            x = checkpoint(stage, x)
        return x

    def forward_features(self, x):
        return checkpoint_seq(self.stages, x)  # expect: TML403
'''


def test_a_class_met_first_through_a_deep_path_is_read_whole_later():
    source = textwrap.dedent(DEEP_FIRST)
    found = {(finding.location.row, finding.code) for finding in lint_source(source, "case.py", Settings(select=CODES))}
    assert _expected(DEEP_FIRST) <= found
