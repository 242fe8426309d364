"""TML6xx: where memory goes in attention models and mixed precision.

TML601 asks the value graph a question (``analysis/attention.py`` over ``analysis/values.py``);
TML602 and TML605 ask how the file sets up training (``analysis/training_setup.py``), TML603
the hand-written checkpoint functions (``analysis/recompute.py``), TML604 the calls of the
checkpoint module (``analysis/segments.py``).
"""

from __future__ import annotations

from typing import Dict, Optional

import libcst as cst

from torchmemlint.analysis.attention import AttentionSite, AttentionSites, may_hold_softmax
from torchmemlint.analysis.recompute import recomputing_functions
from torchmemlint.analysis.segments import checkpoint_module_calls
from torchmemlint.analysis.training_setup import eager_attention_settings, float32_training_steps
from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule


def attention_sites(context) -> AttentionSites:  # type: ignore[no-untyped-def]
    return context.shared("attention", lambda: AttentionSites(context.analysis))


class EagerAttention(Rule):
    """
    ## What it does
    Flags hand-written ("eager") attention, found as a computation rather than a spelling
    (the value graph of `torchmemlint/analysis/values.py`): a softmax over the key axis of a
    q·k contraction, through any scale, mask fill, additive mask, cast, dropout or helper (one
    of the file run with its arguments; one defined elsewhere assumed to keep the shape of the
    tensor it takes, and so a submodule the file does not show, `self.attn_drop(attn)` of an
    inherited attribute or in a function written as a method outside its class, `def
    attention_forward(self, x)`: reported without a fix, tests/test_attention_held_out12.py;
    also a layer of the file given flags, `self.dropout(w, force_mc=mc)` whose `forward` takes
    `force_mc: bool = False`, tests/test_attention_flag_keywords.py),
    contracted with a third value over that same axis. A scale may also be applied to q and k
    before their product (`((q * s) @ (k.transpose(2, 3) * s)).softmax(3)`: each keeps its
    layout; the fix hands the scaled operands to SDPA with `scale=1.0`,
    tests/test_attention_scaled_operands.py).

    - the contractions: `@`, `torch.matmul`, `torch.bmm`, `x.matmul(y)`, `torch.einsum` or
      `einops.einsum` in any layout (`"b h i d, b h j d -> b h i j"`, channel-first
      `"bct,bcs->bts"`, an f-string whose parts are constants, the operands in one list:
      `torch.einsum("bqd,bkd->bqk", [q, k])`), a module-level string constant as the spec
      (`_QK = "bhld,bhmd->bhlm"`), `torch.mm` (two matrices: reported without a
      fix; so are `q @ k.transpose(0, 1)` and `k.t()`, a matrix's transpose,
      tests/test_attention_matrix_transpose.py); a spec an `if` chooses (`kv = "b j d" if k.ndim == 3 else "b h j d"`, then
      `f"b h i d, {kv} -> b h i j"`, or the whole spec) whose texts all contract the same labels
      into the same output (reported without a fix: the layouts differ,
      tests/test_attention_held_out14.py); `k` transposed in the product
      or earlier (`transpose`, `permute`, `.mT`, an `einops.rearrange` that reorders axes:
      `rearrange(w, "b i j -> b j i")`), `v` on either side (`bmm(v, w.permute(0, 2, 1))`),
      q and k rearranged from a channel-first map (`"b c h w -> b (h w) c"`), the scores split
      and merged back by two rearranges (Swin's window mask, `"(b nw) h i j -> b nw h i j"`
      then `"b nw h i j -> (b nw) h i j"`: reported without a fix,
      tests/test_attention_split_axes.py); the feature axis
      followed through `reshape`/`permute`/`.contiguous()` to where each operand was made, so
      `k` projected straight to (b, h, d, s) (`.reshape(b, s, h, -1).permute(0, 2, 3, 1)`) and
      a channel-first key (B, C, N) used as it is count, and so do q and k both made by layers
      of the module in any layout (`k = self.WK(y).view(B, N, h, L)`, then `torch.matmul(q, k)`);
      the axes `unsqueeze(d)`/`squeeze(d)` keep (a decoder step's
      `bmm(h_src, q.unsqueeze(-1)).squeeze(-1)`, then `bmm(w.unsqueeze(1), h_src)`: reported
      without a fix, the weights are reshaped);
      xformers' `masked_matmul(q, kᵀ, mask)`
      (the product, then the mask added); `torch.baddbmm(input, q, kᵀ, beta=0, alpha=scale)`
      (the product scaled by `alpha`; `beta=0` ignores the input, `beta=1` adds it as a mask);
      an `einsum` over `...` (`"... i d, ... j d -> ... i j"` on 5-D tensors);
    - the softmax: `F.softmax`, `torch.softmax`, `s.softmax(...)`, an `nn.Softmax` attribute
      (alone or inside `nn.Sequential(nn.Softmax(-1), nn.Dropout(p))`), one built and run at
      once (`nn.Softmax(dim=-1)(s)`), a local alias
      (`softmax = torch.softmax if c else F.softmax`), a function held in an attribute or a
      local (`self.attn_fn = partial(F.softmax, dim=-1)`, `self.fn = F.softmax`, `p =
      partial(torch.softmax, dim=-1)`: the partial's preset arguments first), or one of two an
      attribute holds by a constructor flag (Mega's `partial(F.softmax, dim=-1) if not
      laplacian_attn_fn else LaplacianAttnFn()`: reported without a fix; quiet when the softmax
      arm runs only behind a flag off by default, tests/test_attention_held_out16.py), over `dim=-1` or the same axis by its
      index (`dim=2` of 3-D scores; of `matmul(q.permute(0, 2, 1), k)` too, the rank taken
      from the operand that shows it), or with no `dim` at all (torch 0.3 code: the axis torch
      picks from the rank, 1 for 2-D scores `torch.mm(q, k.t())`; 3-D and 4-D scores are then
      softmaxed over the batch or the heads, no attention,
      tests/test_attention_implicit_softmax_dim.py); the scores' maximum subtracted first
      (`s - s.amax(-1, keepdim=True).detach()`, `s.max(-1, keepdim=True).values` or `[0]`,
      `torch.logsumexp(s, -1, keepdim=True)`: the softmax is the same, the fix drops it);
      written in place into two complementary slices of the
      first axis (`s[h:] = s[h:].softmax(-1)`; `s[:h] = s[:h].softmax(-1)`), also in one arm
      of an `if` whose other arm is the plain softmax (reported without a fix); written out,
      an exponential divided by its own sum over the keys (`e = torch.exp(s - s.amax(-1,
      keepdim=True))`, `e / e.sum(-1, keepdim=True)`; in a same-file `softmax` helper it is
      reported without a fix; with a small constant added to the sum, `e / (e.sum(-1,
      keepdim=True) + 1e-6)`, also without a fix: SDPA adds nothing,
      tests/test_attention_stable_softmax.py); the `exp` of a `log_softmax` over the keys
      (`F.log_softmax(s, dim=-1).exp()`, tests/test_attention_log_softmax.py); through elementwise steps that keep the axes,
      `torch.nan_to_num(softmax(s))`, `.clamp(min=...)`, `torch.clip` (reported without a fix:
      SDPA does not run them, tests/test_attention_elementwise_steps.py); a `softmax(x, dim)` helper imported from another file of the
      project (`from .utils import softmax`, also by absolute name from the file's own package,
      stribor's `st.util.safe_softmax`), run there with the caller's scores (reported
      without a fix; the result cache keys the finding by that file); a method a base class
      of another project file defines (`self._softmax_dropout_pattern(scores)` of
      `from .attention import AttentionBridge`, through re-exports and a chain of bases), run
      there (reported without a fix: the fix edits only this file); a module of the file
      held by an attribute and called with the scores and more (`self.make_causal(attn, q,
      k)`, `Causal(...)` or `NonCausal()` by an `if` in `__init__`), its `forward` run with
      them (reported without a fix, tests/test_attention_held_modules.py); held modules that
      make the contractions themselves, also with one argument, a list the `forward` unpacks,
      flags and literals their constructor sets (torch-dag's `TfMatmulModule(transpose=True)`
      called as `self.attention_matmul([q, k])`, `PermuteModule(perm=(0, 2, 1))`), also a class of
      another project file (`smodules.TfMatmulModule(...)`) (reported without a fix,
      tests/test_attention_held_matmul_modules.py);
    - the mask: `.masked_fill(cond, value)` / `masked_fill_` with a large negative value
      (`-inf`, `-1e9`, `float("-1e20")`, `-torch.finfo(x.dtype).max`, also held in a local, a
      module constant or returned by a helper), or `+ mask` / `+= mask`, or `- t` / `-= t`
      (the additive mask `-t`; a number added or subtracted leaves the softmax as it is),
      possibly under an `if` without an `else` (so can the scale be); the arithmetic may be
      written as a call (`torch.add(s, mask)`, `s.sub(t)`, `s.sub_(t)`, `torch.div(s, d)`,
      `s.mul(c)`, `torch.true_divide`; not with `alpha=` or `rounding_mode=`: same finding and
      fix, tests/test_attention_arithmetic_calls.py); the value may be a
      buffer registered once as such a number (GPT-2's `self.masked_bias`,
      tests/test_attention_buffered_fill.py); a fill with a moderate negative number
      (`masked_fill_(eye, -100)`) is reported without a fix, as SDPA's mask would give those
      places no weight at all, and a fill with 0 or more masks nothing (quiet); a mask built
      to the scores' size (`torch.ones_like(scores[0])`) reads only their size
      (tests/test_attention_fills.py); weights zeroed where no key is valid
      (`torch.where(valid.any(-1, keepdim=True), w, torch.zeros_like(w))`) are reported without
      a fix; `torch.where(keep, s, fill)` whose `fill` is a tensor of one large negative
      number (`torch.full_like(s, -inf)`, `s.new_full(s.shape, -inf)`, `torch.full(shape,
      -1e9)`, `torch.tensor(-1e9, device=d)`, `s.new_tensor(-1e4)`, `torch.ones_like(s) * -1e9`)
      is a mask (tests/test_attention_filled_tensors.py);
    - the dropout: an `nn.Dropout` attribute (or element of an `nn.Sequential`) or
      `F.dropout(p, training=...)`.

    The rule stays quiet when the weights are read by anything else in the function
    (returned, stored on `self`, appended, logged), or the scores are computed with
    (`table[s.argmax(-1)]`, `log.append(s.amax(-1))`): `F.scaled_dot_product_attention`
    never materialises them, so it cannot replace that code; a read of their size (`if
    s.size() != shape: raise ValueError(f"... {s.size()}")`) is no read of them (reported
    without a fix: the check stays), nor is a call of a function of another project file that
    only reads their shape, type or device and returns nothing (`check_mask(scores, mask)`,
    tests/test_attention_inspecting_helpers.py), nor is a computation in another arm of an `if` than the
    softmax and the product with v (`if self.use_global: torch.cat((s, s_global), -1)` ...
    `else: softmax(s) @ v`: reported without a fix, tests/test_attention_other_arm_reads.py).
    Weights returned only under an `if` whose flag is off
    unless a caller turns it on (`if return_attn: return out, attn` with `return_attn=False`
    that no call of the module in the file passes, also calls of the instances a loop over the
    `ModuleList` holding them makes; or chosen by such a flag and returned,
    `outputs = (ctx, probs) if output_attentions else (ctx,)`, also with more outputs added,
    tests/test_attention_chosen_outputs.py), or returned by a helper of the file every call of
    which drops them (`x, _ = attention(q, k, v)`, `attention(...)[0]`; no other file imports it;
    also a module's `forward`, through the attributes holding its instances, and weights handed
    up by callers that return them to callers that drop them or keep them only under `if not
    self.training:`, HTSAT-style Swin layers, tests/test_attention_dropped_by_callers.py; callers
    in the package's files that import the class by name count, and a caller returning them
    only behind a flag off by default drops them, tests/test_attention_dropped_across_files.py), or stored only behind such a flag (BLIP's `if
    is_cross_attention and self.save_attention: self.save_attention_map(attention_probs)`,
    tests/test_attention_kept_behind_flag.py), or set to `None` unless the flag is set (`if not
    output_attentions: attn_weights = None`), are not kept by default: reported without a fix
    (not where every call of the function turns the flag on, maybe behind the caller's own flag:
    whenever it runs, it returns them; tests/test_attention_flag_guarded_calls.py; nor where a
    call of a module's `forward` in another file of the project that imports the class turns it
    on, ThreeDJCG's `self.self_attn[i](f, f, f, output_attn=True)`,
    tests/test_attention_flag_across_files.py).
    transformers-style models thread `output_attentions` down: `output_attentions if
    output_attentions is not None else self.config.output_attentions` (transformers'
    `PretrainedConfig` defaults it to `False`, as does a configuration class of the file with
    `output_attentions: bool = False`; also `self.output_attentions =
    config.output_attentions`), to layers built into a `ModuleList` by a comprehension and run
    as `self.layer[i]`, directly or through a checkpointed closure (`create_custom_forward`) or
    `self._gradient_checkpointing_func(layer.__call__, ...)`: off unless a caller passes it
    (tests/test_attention_config_flags.py; also an `nn.Sequential(*[Layer(...) for ...])` the
    file runs layer by layer, not whole: tests/test_attention_sequential_of_layers.py; a
    `ModuleList()` filled by `append`, blocks of several classes told apart by `isinstance`:
    tests/test_attention_flag_appended_layers.py; a model a factory of the file builds and
    returns, `model = Model(config); return model`, runs as the file's calls of what the factory
    returns say: `analysis/handed_instances.py`). Two
    softmaxes of one score tensor, each contracted with its own values over its own axis
    (bidirectional cross-attention: `sim.softmax(dim=-1)` with the context's values,
    `sim.softmax(dim=-2)` with the sequence's), are two attentions, each reported without a
    fix (tests/test_attention_held_out16.py). A product of the weights with the values in
    each arm of an `if` (a precision switch: `einsum(attn, v.float())` when `use_bf16`,
    `einsum(attn, v)` otherwise) is one attention, reported once at the first arm without a
    fix (tests/test_attention_two_arms.py); so is a product in a `try` and again in its
    `except` (`attn.half() @ v`, tests/test_attention_try_twins.py). When the scores before the
    softmax are only handed out as they are (`return out, state, scores`, `self.scores =
    s.detach()`; an `assert` of their shape reads no value), it reports without a fix: the
    weights are not kept, SDPA can replace the softmax and the product with v, but the fix
    would delete the scores that reader takes. It is quiet too when the function computes
    the same attention with SDPA on another path that may run with autograd on (a deliberate
    fallback, `analysis/fallback.py`): the output joins, after an `if`/`else`, a value that
    `scaled_dot_product_attention` computed (timm's `if self.fused_attn:` fallback), or it is
    returned where another `return` hands back SDPA of the same q, k and v (`if fused: return
    F.scaled_dot_product_attention(q, k, v)` before the eager code, also given q, k and v as
    `**kwargs` of a local `dict(query=q, key=k, value=v)`; a patch of SDPA that runs
    the original under `torch.nn.attention.sdpa_kernel(...)` except where it takes the eager
    path; an eager attention written as a method of its own, every call of which in the file
    is such an `else` arm, likewise; not where a construction of the file turns the switch off
    for some instances, `TransformerBlock(config, use_sdpa=False)` passed down to the attention,
    tests/test_attention_fallback_methods.py). An SDPA path that runs only with autograd off (`if not torch.is_grad_enabled():`,
    `with torch.no_grad():`) leaves the eager one reported: training runs it. So does an SDPA
    path that runs only while a flag is set that is off unless a caller turns it on (`if
    self.flash: return self.flash_attn(q, k, v, mask)` with `self.flash = flash` and
    `flash=False` the constructor's default, or `False` itself; a function's own
    `use_sdpa=False`, or `backend="eager"` tested by `if backend == "sdpa":` (also as an `if`
    that returns first), also read through a helper that gives the caller's value or a fallback,
    `flash = default(flash, self.flash)` with `flash=None` a `forward` parameter that no call
    of the module's instances in the file passes; a constructor parameter passed down,
    `Attend(flash=flash)` in a constructor whose own `flash=False` no caller sets; a flag of a
    module-level instance of a class of the file whose `__init__`
    sets it `False` and that nothing else sets, `config = Config()` ... `if config.SDPA_enabled:`,
    tests/test_attention_module_flag.py; no call in the file passing anything but `False`,
    `analysis/flags.py`): training runs the eager path by default. A flag from a call (timm's
    `self.fused_attn = use_fused_attn()`), defaulting to `True` or `None`, or set elsewhere
    keeps the fallback quiet (`tests/test_attention_fallback.py`). An attention class that its
    file builds only behind such a flag (guided diffusion's `QKVAttention` under
    `use_new_attention_order=False`), names nowhere else and no other file of the project may
    name, never runs by default: not reported (tests/test_attention_built_behind_flag.py). It is quiet
    for look-alikes too: a softmax over the queries,
    linear attention (a softmax of q or k themselves), a classification head times a matrix
    (`F.softmax(x @ w, -1) @ v`: x and w are not laid out alike). It is quiet where the weights
    do not grow with the square of the sequence (`analysis/axis_kinds.py`, which follows the
    contracted axis to the `nn.Linear` (features last) or `nn.Conv2d` (channels first) that made
    q and k, through `view`/`reshape` sizes the code names, `rearrange` groups, `flatten`,
    `chunk`/`unbind` and transposes): scores that contract the positions, not the features —
    channel ("transposed") attention (Restormer's `"b (head c) h w -> b head c (h w)"`, XCiT's
    `q.transpose(-2, -1)` first: (B, H, C/H, C/H) weights whatever the length) and linear
    attention's `softmax(kᵀ @ v)` — and one learned query pooling the tokens
    (`nn.Parameter(torch.randn(1, 1, dim))`, or a size 1 written at the query axis, or a
    learned query with no axis of its own, `einsum("hd,nhd->nh", q_0, k)`:
    B·H·1·S weights, smaller than the keys; the last hidden state taken by a constant index as
    the one query, `h[:, -1, :].unsqueeze(2)`; one query per sample over keys the batch shares,
    `einsum("bhd,thd->bht", q, k)`) or one key (a state vector viewed `(B, 1, h, d)`);
    measured in
    tests/test_attention_axis_kinds.py; and q and k left (B, L, H, D), multiplied with no
    transpose of the heads (`query.view(b, n, self.num_heads, self.head_dim)`): a softmax over
    the heads, B·L·H·H weights, tests/test_attention_heads_layout.py. Keys or queries made by
    pointwise steps (`-F.logsigmoid(-k)`, `torch.sigmoid(k)`, `k.abs()`) are still q and k,
    tests/test_attention_pointwise_keys.py. Where the axis cannot be followed (q and k handed in
    as arguments) it reports as before. It reports without a fix
    when SDPA cannot compute the same thing: the dropout is not a known `nn.Dropout`, the
    softmax takes a `dtype` or the weights or scores are cast, the scores pass through a helper
    or a module, the weights pass through a module or activation that keeps their shape or are
    scaled (a learned per-head gate, `gate * F.softmax(s, -1)`, a head mask), a `del` names the
    scores or weights (no read, but the fix removes the statements that bind them), two masks
    are applied, the scale is a tensor (a learned temperature: SDPA's
    `scale` is a number), the weights come from different computations in the arms of an `if`,
    an `einsum` says the tensors are neither 3-D nor 4-D or the batch axes of q, k and v
    differ, a name the scores use is reassigned before the product with v, or the softmax is
    written in place into slices of the scores (the fix does not rewrite that form; nor a
    helper that writes a bias into a slice of the scores, `attn[:, :, 1:, 1:] = ...`), a tensor
    is added to the scores before the scale (SDPA adds its mask after scaling), or the softmax
    is computed in another function (a helper that returns the weights to the function that
    applies the dropout and the product with v, or a same-file method the caller passes its
    scores to, `self.forward_attention(v, scores, mask)`, that applies the softmax and the
    product, also one a base class of the file defines: reported at each call that passes
    scores, as each keeps its own weights; or a same-file method `self._attn(q, k, v)` whose
    keys its caller lays out, `self.split_heads(key, k=True)`, reported at the product; the fix
    rewrites one function, `tests/test_attention_held_out13.py`), or q has an
    axis k has not (multi-query attention, one k and v for every head: CUDA's memory-efficient
    kernel needs as many heads in k and v as in q, and `enable_gqa=True` runs only in the flash
    kernel, fp16/bf16 without a mask, as `torchmemlint/dynamic/emulate.py` models torch's
    kernel choice), or q has a batch axis k and v have not (`einsum("blhe,she->bhls", q, k)`:
    keys shared by the batch; SDPA takes them expanded, which the fix does not write)
    (`tests/test_attention_rearrange.py`, `tests/test_attention_layouts.py`,
    `tests/test_attention_held_out.py` and `tests/test_attention_held_out5.py`: the rearranged,
    permuted and held-out forms fixed compute what the eager code did, outputs and gradients,
    CPU; a number may scale the scores from either side, `1.0 / math.sqrt(E) * scores`).

    ## Why is this bad?
    For backward, eager attention keeps per layer the B·H·L·S tensors of the softmax output,
    the dropout mask and the dropped weights (plus the scores when the mask or scale is not
    fused). `F.scaled_dot_product_attention` runs the memory-efficient or flash kernel on CUDA,
    which keeps q, k, v, the output and a B·H·L logsumexp and recomputes the weights in
    backward: the saved memory of attention no longer grows with the square of the sequence.

    ## Example
    ```python
    import math

    import torch.nn as nn
    import torch.nn.functional as F


    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head, block_size, pdrop):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.attn_drop = nn.Dropout(pdrop)
            self.n_head = n_head

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_drop(att)
            y = att @ v
            return y
    ```

    ## Use instead
    ```python
    import math

    import torch.nn as nn
    import torch.nn.functional as F


    class CausalSelfAttention(nn.Module):
        def __init__(self, n_embd, n_head, block_size, pdrop):
            super().__init__()
            self.c_attn = nn.Linear(n_embd, 3 * n_embd)
            self.attn_drop = nn.Dropout(pdrop)
            self.n_head = n_head

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(C, dim=2)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=self.bias[:, :, :T, :T] != 0,
                dropout_p=self.attn_drop.p if self.training else 0.0,
                scale=1.0 / math.sqrt(k.size(-1)),
            )
            return y
    ```

    ## Fix safety
    Unsafe: the fix deletes the statements that computed the scores and weights (and those that
    only fed them, such as a local fill value) and calls `F.scaled_dot_product_attention` with
    the same query, key, value (each transposed to (…, L, E) when the code holds it
    channel-first, the output transposed back when the code's is (…, E, L)), scale (always
    explicit: `scale=1.0` when the code applied none), mask (a `masked_fill(cond, -inf)` becomes the
    boolean mask `not cond`, `torch.where(cond, s, -inf)` the mask `cond`, an added mask stays additive, a mask under `if c:` becomes
    `mask if c else None`) and dropout probability (`nn.Dropout`'s `p` while
    `self.training`). Results differ at rounding level (a different summation order), the
    dropout draws a different mask from the same seed, and a row whose every key is masked
    gives zeros under SDPA where a `-1e9` fill gives uniform weights. Offered only where the
    file imports `torch` or `torch.nn.functional`. CUDA's fused kernels take 4-D (batch,
    heads, L, E) tensors: the rank comes from the code (an `einsum` spec, `bmm`) or, for
    `@`/`matmul`, from the value graph where it shows q, k and v's rank (`B, C, H, W =
    x.shape`, `view`/`reshape` sizes, `flatten`, `unsqueeze`, a conv layer, `rearrange`'s
    output pattern). A 3-D form gets `.unsqueeze(1)` (one head) and `.squeeze(1)`; another
    rank but 4 gets no fix. Where the rank is not shown, 3-D tensors would run SDPA's math
    path, which keeps the weights as eager code does (torch's kernel choice, as
    `torchmemlint/dynamic/emulate.py` models it). `tests/test_attention_rules.py` and
    `tests/test_attention_rank.py` run the fixed forms (channel-first, `v` on the left,
    module softmax, aliases, a conv feature map flattened to 3-D) against the eager code on
    CPU: equal within float32 rounding in eval mode; `tests/test_attention_forms.py` the
    maximum subtracted, 5-D `...` einsums, `baddbmm` (also per batch slice in a loop) and
    channel-first `matmul(q.permute(0, 2, 1), k)` forms, outputs and gradients (CPU).

    ## Measured
    CPU estimate of CUDA (`benchmarks/memory_figures.py`, `h_attention`: fake tensors with
    CUDA's attention and dropout kernels emulated, 512-rounded, torch 2.13.0), the GPT-style
    LM of `fixtures/models/attention.py` (12 layers, 768 wide, 12 heads, dropout 0.1), fp32,
    4x512 tokens, one training step: eager attention peaks at 3,315,729,408 B, the rule's fix
    (`F.scaled_dot_product_attention`, memory-efficient kernel) at 1,957,966,848 B (-41.0 %).
    The same benchmark estimates the `nn.TransformerEncoder` LM of
    `fixtures/models/transformer_lm.py` (same shape) at 3,466,724,352 B with SDPA's math backend
    forced (what eager attention keeps) and 2,033,464,320 B with the default backend (CPU
    estimates of CUDA; this repository has no GPU measurement of either model yet).
    `torchmemlint profile` confirms the fix on the fixture's `small_lm`
    (`tests/dynamic/test_attention_verdict.py`).
    """

    code = "TML601"
    needs = ()  # every site has a softmax, by name or written out: ``may_apply``
    needs_project = True  # a softmax helper imported from another file of the project is run there
    project_facts = frozenset({"imports", "importer_texts"})  # a flag the importers' constructions turn on (flag_importers.py)

    @classmethod
    def may_apply(cls, text: str) -> bool:
        return super().may_apply(text) and may_hold_softmax(text)
    name = "eager-attention"
    summary = "Hand-written softmax(q @ kᵀ) @ v attention keeps the B·H·L·S weights for backward"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        found = attention_sites(self.context)
        pending: Dict[int, AttentionSite] = {id(site.at): site for site in found.sites()}
        for site in pending.values():
            self._report(site, found.functional_prefix(site))

    def _report(self, site: AttentionSite, prefix: Optional[str]) -> None:
        kept = "softmax output"
        if site.has_dropout:
            kept += ", dropout mask and dropped weights"
        message = (
            "Eager attention keeps the B·H·L·S attention weights for backward. Its "
            "softmax(q @ kᵀ) @ v keeps the B·H·L·S %s per call; "
            "F.scaled_dot_product_attention keeps q, k, v, the output and a B·H·L logsumexp"
            % kept
        )
        fix = self._fix(site, prefix)
        if fix is None:
            reason = site.reason or "this file does not import torch or torch.nn.functional"
            message += " (no automatic fix: %s)" % reason
        self.report(site.at, message, fix)

    def _fix(self, site: AttentionSite, prefix: Optional[str]) -> Optional[FixSpec]:
        if not site.fixable or site.query is None or site.key is None or site.value is None:
            return None
        if prefix is None:
            return None
        arguments = [site.query, site.key, site.value]
        if site.mask is not None:
            arguments.append("attn_mask=%s" % site.mask)
        if site.dropout is not None:
            arguments.append("dropout_p=%s" % site.dropout)
        arguments.append("scale=%s" % (site.scale if site.scale is not None else "1.0"))
        if site.rank == 3:  # (batch*heads, L, E): as 4-D with one head, for the fused kernels
            for position in range(3):
                arguments[position] = "%s.unsqueeze(1)" % _operand(arguments[position])
        call = "%s.scaled_dot_product_attention(%s)" % (prefix, ", ".join(arguments))
        if site.rank == 3:
            call += ".squeeze(1)"
        if site.transposed:  # the code's output is (…, Ev, L): SDPA's (…, L, Ev) transposed
            call += ".transpose(-2, -1)"
        edits = [NodeEdit(statement, "") for statement in site.removable]
        edits.append(NodeEdit(site.product, call))
        return FixSpec(Applicability.UNSAFE, "Use F.scaled_dot_product_attention", tuple(edits))


def _operand(text: str) -> str:
    try:
        node = cst.parse_expression(text)
    except cst.ParserSyntaxError:
        return "(%s)" % text
    simple = type(node) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript) or bool(node.lpar)
    return text if simple else "(%s)" % text


class EagerAttnImplementation(Rule):
    """
    ## What it does
    Flags `attn_implementation="eager"` (Hugging Face transformers) in a file that trains: as
    a keyword of any call (`from_pretrained`, `from_config`, a config class, `dict(...)`),
    a key of a dict literal, or an assignment `config._attn_implementation = "eager"` /
    `config.attn_implementation = "eager"`. A file trains when it calls `.backward()`, an
    optimizer's `.step()`, a `*Trainer(...)` / `Accelerator(...)`, `trainer.train()` /
    `trainer.fit(...)`, or defines Lightning's `training_step`. A call that also passes
    `output_attentions=True` is left alone (SDPA cannot return the weights), and so are other
    values (`"sdpa"`, `"flash_attention_2"`, a variable).

    ## Why is this bad?
    `"eager"` makes every attention layer of the model compute `softmax(q @ kᵀ) @ v` with
    matmuls, as TML601 describes: each layer keeps the B·H·L·S softmax output, the dropout
    mask and the dropped weights for backward. `"sdpa"` (transformers' default where the
    model supports it) runs `F.scaled_dot_product_attention`, whose CUDA kernels keep a B·H·L
    logsumexp instead. Eager is often copied from an inference or interpretability snippet
    (which needs `output_attentions=True`) into a training script.

    ## Example
    ```python
    from transformers import AutoModelForCausalLM, Trainer


    def main(name, args, train):
        model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="eager")
        trainer = Trainer(model=model, args=args, train_dataset=train)
        trainer.train()
    ```

    ## Use instead
    ```python
    from transformers import AutoModelForCausalLM, Trainer


    def main(name, args, train):
        model = AutoModelForCausalLM.from_pretrained(name, attn_implementation="sdpa")
        trainer = Trainer(model=model, args=args, train_dataset=train)
        trainer.train()
    ```

    ## Fix safety
    Unsafe: the fix writes `"sdpa"`. Results differ at rounding level and dropout draws
    different masks; a model class without SDPA support raises when it is built, and
    `output_attentions=True` passed elsewhere (to `forward`) then falls back or warns,
    depending on the transformers version.

    ## Measured
    CPU estimate of CUDA (`benchmarks/memory_figures.py`, `i_attn_implementation`, run with
    transformers 5.24.0 importable: fake tensors, CUDA's attention and dropout kernels
    emulated, 512-rounded, torch 2.13.0; default configs, no weights), one training step at
    4x512 tokens, fp32: GPT2LMHeadModel peaks at 4,509,294,592 B with `"eager"` and
    3,302,526,976 B with `"sdpa"` (-26.8 %); BertForMaskedLM at 3,238,373,888 B and
    1,880,611,328 B (-41.9 %). `torchmemlint profile fixtures/models/hf_eager.py:small_gpt2
    --input-shape 4,256,int64 --select TML602` (`l_profile_tml602` of the same script)
    confirms the fix: 59,210,752 B -> 42,468,352 B, numerics within atol=1e-06, rtol=1e-05.

    ## Limits
    Like every rule, it only reads files that mention `torch` somewhere (the engine skips the
    others): a training script that only imports transformers is not read.
    """

    code = "TML602"
    needs = (("eager",), ("attn_implementation",))
    needs_torch = False  # `from transformers import Trainer` scripts need not name torch
    name = "eager-attn-implementation"
    summary = '`attn_implementation="eager"` in a training script keeps every layer\'s attention weights'
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        # the gate (`needs`) already kept this rule to files that say "eager"
        found = eager_attention_settings(self.context)
        for setting in found.settings:
            value = setting.value
            fix = FixSpec(
                Applicability.UNSAFE, 'Use attn_implementation="sdpa"',
                (NodeEdit(value, "%s%ssdpa%s" % (value.prefix, value.quote, value.quote)),),
            )
            self.report(
                value,
                'attn_implementation="eager" keeps every layer\'s attention weights for backward. '
                'This file trains (%s): every attention layer keeps '
                "its B·H·L·S softmax output, dropout mask and dropped weights for backward; "
                '"sdpa" runs F.scaled_dot_product_attention, which keeps a B·H·L logsumexp' % found.evidence,
                fix,
            )


class CheckpointFunctionWithoutRng(Rule):
    """
    ## What it does
    Flags a hand-written checkpoint: a `torch.autograd.Function` subclass whose `forward`
    stores the function it was given on `ctx` (`ctx.run_function = run_function`) and whose
    `backward` calls it again (latent-diffusion's and guided-diffusion's `CheckpointFunction`),
    when nothing in the class saves and restores the RNG state (`torch.get_rng_state` /
    `set_rng_state`, `torch.random.fork_rng`, torch's `get_device_states`).

    ## Why is this bad?
    The recomputation in `backward` runs the function again with the RNG where it is then,
    not where it was in `forward`: a dropout (or any random op) inside the checkpointed
    segment draws a different mask, so the gradients are those of a different network than
    the one whose loss was computed. `torch.utils.checkpoint.checkpoint` saves the CPU and
    CUDA RNG states before the forward and restores them for the recomputation
    (`preserve_rng_state=True`, the default).

    ## Example
    ```python
    import torch


    class CheckpointFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, run_function, length, *args):
            ctx.run_function = run_function
            ctx.input_tensors = list(args[:length])
            with torch.no_grad():
                return ctx.run_function(*ctx.input_tensors)

        @staticmethod
        def backward(ctx, *output_grads):
            with torch.enable_grad():
                outputs = ctx.run_function(*ctx.input_tensors)
            return (None, None) + torch.autograd.grad(outputs, ctx.input_tensors, output_grads)
    ```

    ## Use instead
    ```python
    import torch.utils.checkpoint


    def run_segment(run_function, *args):
        return torch.utils.checkpoint.checkpoint(run_function, *args, use_reentrant=False)
    ```

    ## Fix safety
    No fix: the class is called from elsewhere, with its own argument convention.
    `torchmemlint profile` verifies the suggestion: it replaces the class by one of the same
    name whose `apply(run_function, length, *args)` (or `apply(run_function, *args)`) calls
    `torch.utils.checkpoint.checkpoint(run_function, *args[:length], use_reentrant=False)`,
    and compares one seeded training step (dropout on) of the original and of that variant
    with the segment run without checkpointing.

    ## Measured
    `benchmarks/memory_figures.py`, `j_checkpoint_rng` (real CPU, torch 2.13.0): the
    Linear-Dropout(0.5)-Linear segment of `fixtures/models/recompute.py` at batch 64x256, run
    through latent-diffusion's `CheckpointFunction`, gets gradients that differ from the
    plain segment's by up to 0.002623 (max abs); through
    `torch.utils.checkpoint.checkpoint(..., use_reentrant=False)` they are bitwise equal.
    With p=0 both are bitwise equal.

    `torchmemlint profile fixtures/models/recompute.py:DropoutSegment --input-shape 64,256
    --device cpu --select TML603` (torch 2.13.0, `tests/dynamic/test_rule_verdicts.py`):
    *confirmed*; against the segment without checkpointing, the hand-written function's input
    and parameter gradients differ (max abs 0.0285 at batch 2), torch's checkpoint gives
    identical ones. Bytes (CPU estimate of CUDA): the hand-written step peaks at 855,040 B,
    the variant at 658,432 B (-23.0 %): the hand-written backward rebuilds the segment's
    graph and calls `autograd.grad` in backward, holding more at once; at 4096x256 the same
    measure gives 22,284,288 B and 18,088,960 B. A correctness rule first: the bytes are not
    the reason to fix it, and a function whose backward is written otherwise may peak the same.
    """

    code = "TML603"
    needs = (("Function",), ("backward",))
    name = "checkpoint-function-without-rng-state"
    summary = "A hand-written checkpoint autograd.Function reruns its segment without restoring the RNG"

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        found = self.context.shared(
            "recomputing-functions",
            lambda: {id(f.classdef): f for f in recomputing_functions(self.context.module, self.qualify)},
        )
        function = found.get(id(node))
        if function is None or function.restores_rng:
            return
        self.report(
            node.name,
            "`%s` reruns `ctx.%s` without restoring the RNG state. In backward, dropout in the "
            "segment draws a different mask in the recomputation, and the gradients are not the "
            "forward's; use torch.utils.checkpoint.checkpoint(..., use_reentrant=False)"
            % (node.name.value, function.attribute),
        )


class CheckpointModuleCalled(Rule):
    """
    ## What it does
    Flags a call of the module `torch.utils.checkpoint` itself: `torch.utils.checkpoint(f, x)`,
    or `checkpoint(f, x)` after `from torch.utils import checkpoint` or
    `import torch.utils.checkpoint as checkpoint`.

    ## Why is this bad?
    A module is not callable: the call raises `TypeError: 'module' object is not callable`.
    It is typically in a path that rarely runs (an out-of-memory fallback such as
    `model.use_checkpointing()`), so the code meant to save memory fails exactly when memory
    runs out, and nothing is checkpointed.

    ## Example
    ```python
    import torch
    import torch.nn as nn


    class UNet(nn.Module):
        def use_checkpointing(self):
            self.inc = torch.utils.checkpoint(self.inc)
    ```

    ## Use instead
    ```python
    import torch
    import torch.nn as nn
    import torch.utils.checkpoint


    class UNet(nn.Module):
        def forward(self, x):
            return torch.utils.checkpoint.checkpoint(self.inc, x, use_reentrant=False)
    ```

    ## Fix safety
    No fix: the intent (wrap a module, checkpoint one call) is not in the code.
    `torchmemlint profile` verifies the suggestion when the target's step raises this
    TypeError: `torch.utils.checkpoint(f, *args)` becomes
    `torch.utils.checkpoint.checkpoint(f, *args, use_reentrant=False)`, and
    `torch.utils.checkpoint(module)` (meant to wrap it) the module with its `forward` run
    under non-reentrant checkpoint; the reference is the model with the call run without
    checkpointing (`f(*args)`, the module itself), which the profile measures in place of the
    step that raises.

    ## Measured
    `tests/test_attention_rules.py` runs the flagged forms: each raises
    `TypeError: 'module' object is not callable` (torch 2.13.0).
    `torchmemlint profile fixtures/models/checkpoint_module.py:MLPStack --input-shape 1024,256
    --device cpu --select TML604` (`tests/dynamic/test_rule_verdicts.py`): *confirmed*, the
    target's step raises the TypeError; fixed, each of the 4 residual MLP blocks is
    checkpointed and the step peaks at 23,099,392 B beside 48,269,312 B without
    checkpointing (-52.1 %, CPU estimate of CUDA), with identical outputs and gradients.
    `FallbackNet`, which wraps `self.inc` in `__init__`, builds only once fixed, and then peaks
    as without checkpointing (27,544,576 B at 1024x256): the wrapped part is all of the
    network but its head, so the recomputation in backward holds what the forward held.
    """

    code = "TML604"
    needs = (("checkpoint",),)
    name = "checkpoint-module-called"
    summary = "`torch.utils.checkpoint` (the module) is called, which raises TypeError"

    def visit_Module(self, node: cst.Module) -> None:
        for call in checkpoint_module_calls(self.context):
            self.report(
                call.func,
                "`torch.utils.checkpoint` is a module, so calling it raises TypeError. Python says "
                "'module' object is not callable; call torch.utils.checkpoint.checkpoint(function, *inputs, "
                "use_reentrant=False)",
            )


class TrainingWithoutAutocast(Rule):
    """
    ## What it does
    Flags `.backward()` in a training loop of a file that never mentions mixed precision
    (`autocast`, `GradScaler`, `bfloat16`/`float16`, `.half()`, `fp16`/`bf16`, `precision`,
    `torch.amp`, `apex`): the model trains in float32. Off by default: a suggestion, not a
    defect.

    ## Why is this bad?
    Under `torch.autocast(device_type="cuda", dtype=torch.bfloat16)` matmuls, linear layers,
    convolutions and attention run in bfloat16 and the activations they keep for backward take
    half the bytes; parameters, gradients and optimizer state stay float32, so only the
    activation part of the peak shrinks. bf16 attention also lets SDPA pick the flash kernel.

    ## Example
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Use instead
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    ```

    ## Fix safety
    No fix. Numerics change: bfloat16 keeps 8 bits of mantissa, so outputs and gradients differ
    from float32 at about 1e-2 relative; autocast keeps reductions, softmax and losses in
    float32, but a model that is sensitive (small learning rates against large weights,
    custom ops) must be validated. float16 needs a `GradScaler`; bfloat16 does not, but needs
    a GPU that supports it (compute capability 8.0 or later).
    `torchmemlint profile` verifies the suggestion on the profiled model (it runs its own step,
    not the file's loop, so the variant is *the step under autocast*: the model's `forward`
    runs under `torch.autocast(<the inputs' device type>, dtype=torch.bfloat16)`, the loss
    and backward outside, as in the example); outputs and gradients are compared with
    float32's element by element within atol=0.05, rtol=0.05, which the report states
    (beyond it the verdict is *unsafe*). The finding is in the file's loop, outside the
    target: it is verified on whichever model is profiled.

    ## Measured
    CPU estimate of CUDA (`benchmarks/memory_figures.py`, `k_autocast`: fake tensors with
    CUDA's attention and dropout kernels emulated, the CPU's autocast, torch 2.13.0), one
    training step at 4x512 tokens: the 12x768 `nn.TransformerEncoder` LM of
    `fixtures/models/transformer_lm.py` peaks at 2,033,464,320 B in float32 and 1,540,764,672 B
    under bf16 autocast (-24.2 %; the bytes kept after forward -31.1 %, not -50 %: LayerNorm
    outputs stay float32 and autocast keeps bf16 copies of the weights for backward); the
    eager-attention LM of `fixtures/models/attention.py` at 3,315,729,408 B and
    2,294,547,456 B (-30.8 %; kept -35.5 %). `tests/test_attention_rules.py` checks the
    direction on the small LM with the same wrapper.
    `torchmemlint profile fixtures/models/fp32_training.py:TinyLM --input-shape 4,128,int64
    --device cpu --select TML605` (`tests/dynamic/test_rule_verdicts.py`, CPU estimate of
    CUDA): *confirmed*, 12,033,536 B in float32 and 8,975,360 B under bf16 autocast (-25.4 %;
    saves 3,058,176 B at batch 4 and 6,547,456 B at batch 8); numerics within atol=0.05,
    rtol=0.05 (max abs diff 0.0091, real CPU step at batch 2, dropout 0).
    """

    code = "TML605"
    needs = (("backward",),)
    name = "training-without-autocast"
    summary = "A training loop runs in float32 without autocast (bf16 would shrink the kept activations)"
    default_enabled = False

    def visit_Module(self, node: cst.Module) -> None:
        for call in float32_training_steps(self.context):
            self.report(
                call,
                "Training step in float32 without autocast. Under torch.autocast(\"cuda\", "
                "dtype=torch.bfloat16) matmuls, convolutions and attention keep bf16 activations "
                "(about half the bytes); validate the numerics",
            )
