"""Run, under fake tensors on the cpu device, the kernels CUDA would run.

The CPU and CUDA dispatch two families of ops differently, and the
difference is large for transformers (with the CPU's own kernels a 12-layer LM
is estimated at 2.3x what CUDA allocates; benchmarks/gpu_check.py reports both
estimates against an H200):

* ``F.scaled_dot_product_attention``: in training with dropout the CPU runs
  the math path (matmul, softmax, float dropout noise: three B*H*L*S tensors
  kept per layer).  CUDA runs FlashAttention (fp16/bf16) or the
  memory-efficient kernel (fp32, or a mask), which keep q, k, v, the output
  and a float logsumexp of B*H*L (padded to 32 for the memory-efficient
  kernel).  ``cuda_kernels()`` routes each call to the aten op CUDA would
  pick (``_scaled_dot_product_flash_attention`` /
  ``_scaled_dot_product_efficient_attention``), whose fake-tensor (meta)
  implementations and autograd formulas are torch's own, so the saved
  tensors and backward outputs are those of the CUDA kernels.
* ``F.dropout`` (not in place): CUDA calls ``native_dropout``, which keeps a
  1-byte bool mask; the CPU keeps a 4-byte float noise tensor.  In-place
  dropout takes the noise path on both devices and is left alone.

The choice between flash, memory-efficient and math follows
``sdp_utils.cpp`` of torch 2.x for a recent GPU (compute capability 8.0 or
later, default backend priority flash > memory-efficient > math):

* flash: fp16/bf16, no explicit ``attn_mask``, equal head dims <= 256 (padded
  to a multiple of 8, as the CUDA front end does);
* memory-efficient: fp32/fp16/bf16, no grouped-query attention, head dims a
  multiple of 4 (fp32) or 8 (fp16/bf16); a boolean mask is first turned into
  an additive float mask and a mask whose last dim is not a multiple of 16
  is padded, as CUDA does;
* math otherwise: matmul, ``_safe_softmax`` and ``native_dropout``, with
  fp16/bf16 inputs upcast to fp32 (torch's default for the math path).

Not emulated: cuDNN attention (not the default choice), kernel workspaces and
temporaries that are not op outputs (they are in ``max_memory_allocated`` but
in no estimate), nested tensors, and calls made through a reference to these
functions bound before the step started (``from torch.nn.functional import
scaled_dot_product_attention`` at import time): ``EmulationLog`` counts the
math-path and noise-dropout ops that still ran, and the report says so.

The functions are swapped in ``torch.nn.functional`` for the duration of the
step (``nn.MultiheadAttention``, ``nn.Dropout``, timm and transformers look
them up there at call time) and restored afterwards.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional

import torch
import torch.nn.functional as F

FLASH = "flash attention"
EFFICIENT = "memory-efficient attention"
MATH = "math attention"
NATIVE_DROPOUT = "dropout with a bool mask"

ESTIMATE_FOR = ("cuda", "cpu")
_HALF = (torch.float16, torch.bfloat16)
FLASH_MAX_HEAD_DIM = 256
MASK_ALIGNMENT = 16  # mem-efficient attention pads the mask's last dim to this


@dataclass
class EmulationLog:
    """What ``cuda_kernels()`` replaced during one step, by kernel name."""

    calls: Counter = field(default_factory=Counter)
    # Bernoulli noise drawn from Python (``Tensor.bernoulli_``), not replaced: one value per
    # sample (shape B x 1 x ... x 1: stochastic depth, timm's DropPath, torchvision's
    # StochasticDepth), or any other shape; and in-place dropout calls (CPU noise on CUDA too).
    per_sample_noise: int = 0
    other_noise: int = 0
    inplace_dropout: int = 0

    def summary(self) -> List[str]:
        return ["%s x%d" % (name, count) for name, count in sorted(self.calls.items())]

    def to_dict(self) -> Dict[str, int]:
        return dict(sorted(self.calls.items()))


@contextlib.contextmanager
def cuda_kernels(log: Optional[EmulationLog] = None) -> Iterator[EmulationLog]:
    """While active, attention and dropout run as on CUDA (see the module doc)."""
    log = log if log is not None else EmulationLog()
    original_sdpa = F.scaled_dot_product_attention
    original_dropout = F.dropout

    def scaled_dot_product_attention(
        query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
        attn_mask: Optional[torch.Tensor] = None, dropout_p: float = 0.0,
        is_causal: bool = False, scale: Optional[float] = None, enable_gqa: bool = False,
    ) -> torch.Tensor:
        kernel = choose_attention_kernel(query, key, value, attn_mask, enable_gqa)
        log.calls[kernel] += 1
        if kernel == FLASH:
            return _flash(query, key, value, dropout_p, is_causal, scale)
        if kernel == EFFICIENT:
            return _efficient(query, key, value, attn_mask, dropout_p, is_causal, scale)
        return _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, log)

    def dropout(
        input: torch.Tensor, p: float = 0.5, training: bool = True, inplace: bool = False
    ) -> torch.Tensor:
        if training and not inplace and 0.0 < p < 1.0 and input.numel() > 0:
            log.calls[NATIVE_DROPOUT] += 1
            return torch.native_dropout(input, p, True)[0]
        if training and inplace and 0.0 < p < 1.0:
            log.inplace_dropout += 1
        return original_dropout(input, p, training, inplace)

    original_bernoulli_ = torch.Tensor.bernoulli_

    def bernoulli_(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        if self.dim() >= 2 and all(size == 1 for size in self.shape[1:]):
            log.per_sample_noise += 1
        else:
            log.other_noise += 1
        return original_bernoulli_(self, *args, **kwargs)

    F.scaled_dot_product_attention = scaled_dot_product_attention  # type: ignore[assignment]
    F.dropout = dropout  # type: ignore[assignment]
    torch.Tensor.bernoulli_ = bernoulli_  # type: ignore[method-assign]
    try:
        yield log
    finally:
        F.scaled_dot_product_attention = original_sdpa
        F.dropout = original_dropout
        torch.Tensor.bernoulli_ = original_bernoulli_  # type: ignore[method-assign]


def choose_attention_kernel(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
    attn_mask: Optional[torch.Tensor], enable_gqa: bool = False,
) -> str:
    """The kernel CUDA's ``scaled_dot_product_attention`` picks (see the module doc)."""
    if query.dim() != 4 or key.dim() != 4 or value.dim() != 4 or query.is_nested:
        return MATH
    head, head_v = query.size(-1), value.size(-1)
    same_heads = query.size(1) == key.size(1) == value.size(1)
    dtype = query.dtype
    if (
        dtype in _HALF and attn_mask is None and head == key.size(-1) == head_v
        and head <= FLASH_MAX_HEAD_DIM
    ):
        return FLASH
    alignment = 8 if dtype in _HALF else 4
    if (
        dtype in _HALF + (torch.float32,) and same_heads and not enable_gqa
        and head == key.size(-1) and head % alignment == 0 and head_v % alignment == 0
    ):
        return EFFICIENT
    return MATH


def _flash(query, key, value, dropout_p, is_causal, scale):  # type: ignore[no-untyped-def]
    head = query.size(-1)
    scale = 1.0 / math.sqrt(head) if scale is None else scale
    padding = -head % 8
    if padding:  # pad_last_dim<8> of the CUDA front end: padded copies of q, k, v
        query, key, value = (F.pad(t, [0, padding]) for t in (query, key, value))
    out = torch.ops.aten._scaled_dot_product_flash_attention(
        query, key, value, dropout_p, is_causal, False, scale=scale
    )[0]
    return out[..., :head] if padding else out


def _efficient(query, key, value, attn_mask, dropout_p, is_causal, scale):  # type: ignore[no-untyped-def]
    if attn_mask is not None:
        attn_mask = _additive_mask(attn_mask, query.dtype)
        last = attn_mask.size(-1)
        if last % MASK_ALIGNMENT:
            attn_mask = F.pad(attn_mask, [0, -last % MASK_ALIGNMENT])[..., :last]
        shape = (query.size(0), query.size(1), query.size(2), key.size(2))
        attn_mask = attn_mask.expand(shape)
    compute_lse = torch.is_grad_enabled() and any(
        t.requires_grad for t in (query, key, value)
    )
    return torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, attn_mask, compute_lse, dropout_p, is_causal, scale=scale
    )[0]


def _additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if mask.dtype == torch.bool:  # convert_boolean_attn_mask: where(mask, 0, -inf)
        zero = torch.zeros((), dtype=dtype, device=mask.device)
        return torch.where(mask, zero, torch.tensor(float("-inf"), dtype=dtype, device=mask.device))
    return mask


def _math(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, log):  # type: ignore[no-untyped-def]
    """``_scaled_dot_product_attention_math`` with CUDA's dropout (native_dropout)."""
    dtype = query.dtype
    if dtype in _HALF:  # the math path computes in fp32 by default
        query, key, value = query.float(), key.float(), value.float()
        if attn_mask is not None and attn_mask.dtype in _HALF:
            attn_mask = attn_mask.float()
    if enable_gqa and query.dim() >= 3 and key.size(-3) != query.size(-3):
        repeat = query.size(-3) // key.size(-3)
        key = key.repeat_interleave(repeat, dim=-3)
        value = value.repeat_interleave(repeat, dim=-3)
    factor = math.sqrt(1.0 / math.sqrt(query.size(-1)) if scale is None else abs(scale))
    query = query * (-factor if scale is not None and scale < 0 else factor)
    if is_causal:
        length, source = query.size(-2), key.size(-2)
        attn_mask = torch.ones(length, source, dtype=torch.bool, device=query.device).tril()
    attn = torch.matmul(query, key.transpose(-2, -1) * factor)
    if attn_mask is not None:
        attn = attn + _additive_mask(attn_mask, attn.dtype)
    attn = torch.ops.aten._safe_softmax(attn, -1)
    if dropout_p > 0.0:
        log.calls[NATIVE_DROPOUT] += 1
        attn = torch.native_dropout(attn, dropout_p, True)[0]
    out = torch.matmul(attn, value)
    return out.to(dtype) if out.dtype != dtype else out


def emulation_gaps(ops_seen: Any, log: Optional[EmulationLog] = None) -> List[str]:
    """Ops of the step that show CPU kernels ran where CUDA's were wanted."""
    gaps = []
    if "_safe_softmax" in ops_seen and not (log is not None and log.calls.get(MATH)):
        gaps.append(
            "attention ran the CPU's math path, keeping its softmax (a scaled_dot_product_attention "
            "bound before the step, e.g. imported by name): not emulated"
        )
    # Stochastic depth draws one value per sample from Python: no dropout, nothing to emulate.
    only_stochastic_depth = log is not None and log.per_sample_noise and not (log.other_noise or log.inplace_dropout)
    if ("bernoulli_" in ops_seen or "bernoulli" in ops_seen) and not only_stochastic_depth:
        gaps.append(
            "dropout with a 4-byte noise tensor still ran (in-place dropout, which CUDA runs "
            "the same way, or a dropout bound before the step)"
        )
    if "_scaled_dot_product_flash_attention_for_cpu" in ops_seen:
        gaps.append("attention ran as the CPU flash kernel (a reference bound before the step)")
    return gaps
