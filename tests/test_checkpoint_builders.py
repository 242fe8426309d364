"""TML401/TML402 through a checkpoint function an attribute gets from a function of the file,
around layers that classmethod builders choose by configuration: the form of an LLM training
library's transformer block (reduced and rewritten), whose ``set_activation_checkpointing``
binds ``self._activation_checkpoint_fn = checkpoint_func or activation_checkpoint_function(cfg)``
(a module-level function returning ``partial(checkpoint, preserve_rng_state=...,
use_reentrant=False)``) and whose fine-grained strategy checkpoints ``self.attn_norm``
(``LayerNorm.build(config)``: its own ``LayerNorm`` or ``RMSLayerNorm``, leaf modules doing
elementwise work) and ``self.act`` (``Activation.build(config)``: ``cast(Activation,
GELU())``, ``ReLU()`` subclassing torch's, or a ``SwiGLU`` leaf).

Found: the single cheap layer behind the attribute, set in a method of a base class, the
layer set in the class or inherited; a checkpoint function factory without ``use_reentrant``
(TML401). Quiet look-alikes: a builder returning a block (holds modules), a leaf whose forward
contracts (``x @ self.weight``), runs a loop or calls an unknown kernel; a factory returning
something else than a checkpoint function; a whole block checkpointed; a plain call.

Each case marks the rows that must be reported with ``# expect: TML40x`` (``fix=...``: the
fix's applicability); every other row must stay quiet.
"""

from __future__ import annotations

import textwrap

import pytest

from marked_cases import marked, marked_fixes
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source

HEADER = '''
from functools import partial
from typing import cast

import torch
import torch.nn.functional as F
from torch import nn
'''

LAYERS = '''

def activation_checkpoint_function(cfg):
    preserve_rng_state = not (cfg.attention_dropout == 0.0 and cfg.residual_dropout == 0.0)
    from torch.utils.checkpoint import checkpoint

    return partial(checkpoint, preserve_rng_state=preserve_rng_state, use_reentrant=False)


class LayerNormBase(nn.Module):
    def __init__(self, config, *, size=None, elementwise_affine=True):
        super().__init__()
        self.config = config
        self.eps = config.layer_norm_eps
        self.normalized_shape = (size or config.d_model,)
        if elementwise_affine:
            self.weight = nn.Parameter(torch.ones(self.normalized_shape))
        else:
            self.register_parameter("weight", None)

    def forward(self, x):
        raise NotImplementedError

    @classmethod
    def build(cls, config, size=None, **kwargs):
        if config.layer_norm_type == "default":
            return LayerNorm(config, size=size, low_precision=False, **kwargs)
        elif config.layer_norm_type == "rms":
            return RMSLayerNorm(config, size=size, **kwargs)
        else:
            raise NotImplementedError(config.layer_norm_type)

    def _cast_if_autocast_enabled(self, tensor):
        if tensor.device.type == "cuda" and torch.is_autocast_enabled():
            return tensor.to(dtype=torch.get_autocast_gpu_dtype())
        return tensor


class LayerNorm(LayerNormBase):
    def __init__(self, config, size=None, low_precision=False, elementwise_affine=None):
        super().__init__(config, size=size, elementwise_affine=elementwise_affine)
        self.low_precision = low_precision

    def forward(self, x):
        if self.low_precision:
            downcast_x = self._cast_if_autocast_enabled(x)
            with torch.autocast(enabled=False, device_type=x.device.type):
                return F.layer_norm(downcast_x, self.normalized_shape, weight=self.weight, eps=self.eps)
        return F.layer_norm(x, self.normalized_shape, weight=self.weight, eps=self.eps)


class RMSLayerNorm(LayerNormBase):
    def forward(self, x):
        og_dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(og_dtype)


class Activation(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config

    def forward(self, x):
        raise NotImplementedError

    @classmethod
    def build(cls, config):
        if config.activation_type == "gelu":
            return cast(Activation, GELU(approximate="none"))
        elif config.activation_type == "relu":
            return cast(Activation, ReLU(inplace=False))
        elif config.activation_type == "swiglu":
            return SwiGLU(config)
        raise NotImplementedError(config.activation_type)


class GELU(nn.GELU):
    @property
    def output_multiplier(self):
        return 1.0


class ReLU(nn.ReLU):
    @property
    def output_multiplier(self):
        return 1.0


class SwiGLU(Activation):
    def forward(self, x):
        x, gate = x.chunk(2, dim=-1)
        return F.silu(gate) * x
'''

BLOCK = HEADER + LAYERS + '''

class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self._activation_checkpoint_fn = None
        self.act = Activation.build(config)
        self.ff_proj = nn.Linear(config.d_model, config.d_model)

    def set_activation_checkpointing(self, strategy, checkpoint_func=None):
        if strategy == "fine_grained":
            self._activation_checkpoint_fn = checkpoint_func or activation_checkpoint_function(self.config)
        else:
            self._activation_checkpoint_fn = None


class SequentialBlock(Block):
    def __init__(self, config):
        super().__init__(config)
        self.attn_norm = LayerNorm.build(config, size=config.d_model)
        self.ff_norm = LayerNorm.build(config)

    def attention(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v)

    def forward(self, x):
        if self._activation_checkpoint_fn is not None:
            h = self._activation_checkpoint_fn(self.attn_norm, x)  # expect: TML402 fix=unsafe
        else:
            h = self.attn_norm(x)
        if self._activation_checkpoint_fn is not None:
            att = self._activation_checkpoint_fn(self.attention, h, h, h)
        else:
            att = self.attention(h, h, h)
        x = x + att
        if self._activation_checkpoint_fn is not None:
            x = self._activation_checkpoint_fn(self.ff_norm, x)  # expect: TML402 fix=unsafe
        x = self.ff_proj(x)
        if self._activation_checkpoint_fn is not None:
            x = self._activation_checkpoint_fn(self.act, x)  # expect: TML402 fix=unsafe
        else:
            x = self.act(x)
        return x


class Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.blocks = nn.ModuleList([SequentialBlock(config) for _ in range(config.n_layers)])
        self._activation_checkpoint_fn = activation_checkpoint_function(config)

    def forward(self, x):
        for block in self.blocks:
            x = self._activation_checkpoint_fn(block, x)
        return x
'''

# builders and factories that must stay quiet: a builder of blocks, leaves that contract, loop
# or call a kernel, a factory returning another function
LOOKALIKES = HEADER + '''
from flash_attn import flash_attn_func
from torch.utils.checkpoint import checkpoint


def make_runner(cfg):
    return partial(run_block, scale=cfg.scale)


def run_block(fn, x, scale=1.0):
    return fn(x) * scale


def checkpoint_function(cfg):
    return partial(checkpoint, use_reentrant=False)


class MLPBlock(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.fc = nn.Linear(config.d_model, config.d_model)

    def forward(self, x):
        return self.fc(self.norm(x))

    @classmethod
    def build(cls, config):
        return MLPBlock(config)


class Projection(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        return x @ self.weight


class Repeat(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def forward(self, x):
        for _ in range(self.n):
            x = torch.tanh(x)
        return x


class FlashCore(nn.Module):
    def forward(self, q, k, v):
        return flash_attn_func(q, k, v)


class Mixer(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gate = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return torch.matmul(x, self.gate.diag())

    @classmethod
    def build(cls, config):
        if config.kind == "mix":
            return Mixer(config.d_model)
        return Projection(config.d_model)


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.mlp = MLPBlock.build(config)
        self.mixer = Mixer.build(config)
        self.proj = Projection(config.d_model)
        self.repeat = Repeat(3)
        self.core = FlashCore()
        self._run = make_runner(config)
        self._ckpt = checkpoint_function(config)

    def forward(self, x):
        x = self._ckpt(self.mlp, x)
        x = self._ckpt(self.mixer, x)
        x = self._ckpt(self.proj, x)
        x = self._ckpt(self.repeat, x)
        x = self._ckpt(self.core, x, x, x)
        x = self._run(self.mlp, x)
        return x
'''

# a factory of the reentrant default (no `use_reentrant`): the call is torch's checkpoint
REENTRANT = HEADER + '''
import torch.utils.checkpoint


def checkpoint_fn():
    return partial(torch.utils.checkpoint.checkpoint, preserve_rng_state=True)


class Net(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = nn.Linear(d, d)
        self.fc2 = nn.Linear(d, d)
        self.ckpt = checkpoint_fn()

    def body(self, x):
        return self.fc2(torch.relu(self.fc1(x)))

    def forward(self, x):
        return self.ckpt(self.body, x)  # expect: TML401
'''

# The attribute may hold the caller's `checkpoint_func` (BLOCK): the fix that calls the layer
# directly is unsafe there. Bound only to the file's checkpoint function (or None, which
# cannot be called), it is what checkpoint computes: safe.
FACTORY_ONLY = BLOCK.replace("checkpoint_func or activation_checkpoint_function", "activation_checkpoint_function")
FACTORY_ONLY = FACTORY_ONLY.replace("# expect: TML402 fix=unsafe", "# expect: TML402 fix=safe")
assert FACTORY_ONLY.count("fix=safe") == 3

CASES = {"block": BLOCK, "factory_only": FACTORY_ONLY, "lookalikes": LOOKALIKES, "reentrant": REENTRANT}
SELECT = ("TML401", "TML402", "TML403", "TML404")


def _lint(source: str):
    return lint_source(textwrap.dedent(source), "case.py", Settings(select=SELECT))


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(name):
    found = {(finding.location.row, finding.code) for finding in _lint(CASES[name])}
    assert found == marked(CASES[name])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fix_applicability(name):
    expected = marked_fixes(CASES[name])
    found = {finding.location.row: (finding.fix.applicability.value if finding.fix else None) for finding in _lint(CASES[name])}
    assert {row: found.get(row) for row in expected} == expected


def test_the_builders_choice_is_named():
    messages = {finding.location.row: finding.message for finding in _lint(BLOCK)}
    texts = " ".join(messages.values())
    assert "`LayerNorm or RMSLayerNorm`" in texts
    assert "`GELU or ReLU or SwiGLU`" in texts


def test_a_builder_with_one_heavy_choice_is_no_single_op():
    """The same builder, once one of its choices holds a module, is no single layer."""
    heavy = BLOCK.replace("return SwiGLU(config)", "return MLPStack(config)") + '''

class MLPStack(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.fc = nn.Linear(config.d_model, config.d_model)

    def forward(self, x):
        return F.gelu(self.fc(x))
'''
    rows = {finding.location.row for finding in _lint(heavy)}
    act_row = next(row for row, line in enumerate(textwrap.dedent(heavy).splitlines(), 1) if "_activation_checkpoint_fn(self.act, x)" in line)
    assert act_row not in rows
    assert len(rows) == 2  # the two norms still


def test_a_leaf_that_runs_its_base_forward_is_not_read_as_one():
    """``super().forward(x)`` runs the base class's forward (here a contraction): not one cheap op."""
    source = HEADER + '''
from torch.utils.checkpoint import checkpoint


class Projection(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d, d))

    def forward(self, x):
        return x @ self.weight


class ScaledProjection(Projection):
    def forward(self, x):
        return super().forward(x) * 2.0


class Scale(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * self.gamma


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.proj = ScaledProjection(d)
        self.scale = Scale(d)

    def forward(self, x):
        x = checkpoint(self.proj, x, use_reentrant=False)
        return checkpoint(self.scale, x, use_reentrant=False)  # expect: TML402
'''
    found = {(finding.location.row, finding.code) for finding in _lint(source)}
    assert found == marked(source)
