"""TML601 leaves alone an eager attention that its function keeps as the other path of
``F.scaled_dot_product_attention`` on the same q, k and v (``analysis/fallback.py``): an early
``return`` of SDPA before the eager code, and a patch of SDPA that runs the original under
``torch.nn.attention.sdpa_kernel`` except where it takes the eager path. The look-alikes return
SDPA of other tensors, or another function's result outside a backend context: they report.
"""

from __future__ import annotations

import json
import textwrap

import libcst as cst
import pytest

from attention_cases import found_sites, run_cli
from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings

HEADER = """
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
"""

EARLY_RETURN = HEADER + """
class Attention(nn.Module):
    def __init__(self, dim, heads=8, fused_attn=True):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.fused_attn = fused_attn
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def attend(self, q, k, v):
        if self.fused_attn:
            return F.scaled_dot_product_attention(q, k, v)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = attn.softmax(dim=-1)
        return attn @ v

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        return self.proj(self.attend(q, k, v).transpose(1, 2).reshape(B, N, C))
"""

PATCHED_SDPA = HEADER + """
def patch_sdpa(original):
    def patch(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        needs_eager = query.device.type == "cuda" and attn_mask is not None and attn_mask.is_floating_point()
        if needs_eager:
            scale_factor = scale if scale is not None else math.sqrt(query.shape[-1]) ** -1
            if key.shape[1] != query.shape[1]:
                key = key.repeat_interleave(query.shape[1] // key.shape[1], dim=1)
                value = value.repeat_interleave(query.shape[1] // value.shape[1], dim=1)
            attn_weight = torch.matmul(query, key.transpose(-2, -1)) * scale_factor
            attn_weight = attn_weight + attn_mask
            attn_weight = torch.nn.functional.softmax(attn_weight, dim=-1)
            return torch.matmul(attn_weight, value)
        with sdpa_kernel(SDPBackend.MATH):
            return original(
                query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale, **kwargs
            ).clone(memory_format=torch.contiguous_format)

    return patch
"""

# the attention written in ``forward`` itself, q, k and v split from one projection
INLINE = HEADER + """
class Attention(nn.Module):
    def __init__(self, dim, heads=8, fused_attn=True):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.fused_attn = fused_attn
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4).unbind(0)
        if self.fused_attn:
            return self.proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, C))
        attn = (q * self.scale) @ k.transpose(-2, -1)
        return self.proj((attn.softmax(dim=-1) @ v).transpose(1, 2).reshape(B, N, C))
"""

# the ``if``/``else`` form: the output joins SDPA's after the ``if``
TWO_ARMS = EARLY_RETURN.replace(
    "        if self.fused_attn:\n            return F.scaled_dot_product_attention(q, k, v)\n"
    "        q = q * self.scale\n        attn = q @ k.transpose(-2, -1)\n        attn = attn.softmax(dim=-1)\n        return attn @ v\n",
    "        if self.fused_attn:\n            out = F.scaled_dot_product_attention(q, k, v)\n"
    "        else:\n            out = (q * self.scale @ k.transpose(-2, -1)).softmax(dim=-1) @ v\n        return out\n")

# the output handed back with a placeholder for the weights (``return out, None``) in both paths
WITH_PLACEHOLDER = EARLY_RETURN.replace(
    "            return F.scaled_dot_product_attention(q, k, v)", "            return F.scaled_dot_product_attention(q, k, v), None"
).replace("        return attn @ v\n", "        return attn @ v, None\n").replace("self.attend(q, k, v)", "self.attend(q, k, v)[0]")

KERNEL_THEN_EAGER = HEADER + """
def attention(q, k, v, run_sdpa):
    try:
        with torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False):
            return run_sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)).transpose(1, 2)
    except RuntimeError:
        pass
    weights = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(q.shape[-1])
    return torch.einsum("bhqk,bkhd->bqhd", weights.softmax(-1), v)
"""


def test_the_if_else_form_stays_quiet():
    assert TWO_ARMS != EARLY_RETURN
    assert quiet(TWO_ARMS) == ([], [("attend", "the eager arm of an `if` whose other arm calls F.scaled_dot_product_attention")])


def quiet(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    attention = AttentionSites(FileAnalysis(module, bindings, text=module.code))
    return attention.sites(), [(function.name.value, why) for function, _, why in attention.quiet]


@pytest.mark.parametrize("source, function", [
    (EARLY_RETURN, "attend"), (WITH_PLACEHOLDER, "attend"), (INLINE, "forward"), (PATCHED_SDPA, "patch"),
    (KERNEL_THEN_EAGER, "attention"),
    (EARLY_RETURN.replace("if self.fused_attn:", "if self.fused_attn and not torch.jit.is_scripting():"), "attend"),
], ids=["early-return", "with-placeholder", "inline-then-projected", "patched-sdpa", "sdp-kernel-then-eager", "not-scripting"])
def test_an_eager_path_kept_beside_sdpa_of_the_same_tensors_is_left_alone(source, function):
    found, why = quiet(source)
    assert found == []
    assert why == [(function, "the eager path of a function that returns the same attention "
                              "from F.scaled_dot_product_attention on another path")]


# Each look-alike changes one thing; every one is an eager attention SDPA could replace.
LOOK_ALIKES = {
    # SDPA of the cross-attention's keys and values returned first: the eager self-attention is no fallback of it
    "other-tensors": EARLY_RETURN.replace(
        "    def attend(self, q, k, v):\n        if self.fused_attn:\n            return F.scaled_dot_product_attention(q, k, v)",
        "    def attend(self, q, k, v, memory=None):\n        if memory is not None:\n"
        "            return F.scaled_dot_product_attention(q, memory, memory)"),
    # the placeholder form, SDPA of the cross-attention's tensors in the other path
    "placeholder-other-tensors": WITH_PLACEHOLDER.replace(
        "F.scaled_dot_product_attention(q, k, v), None", "F.scaled_dot_product_attention(q, v, v), None"),
    # split from the same projection, but SDPA of q, v, v (another element of the split as the keys)
    "other-element-of-the-split": WITH_PLACEHOLDER.replace(
        "F.scaled_dot_product_attention(q, k, v), None", "F.scaled_dot_product_attention(q, v, v), None"
    ).replace("    def attend(self, q, k, v):\n", "    def attend(self, x, q, k, v):\n        q, k, v = x.unbind(0)\n"),
    # the projected form, SDPA of q, k, k in the other path
    "inline-other-element": INLINE.replace("F.scaled_dot_product_attention(q, k, v)", "F.scaled_dot_product_attention(q, k, k)"),
    # SDPA only with autograd off (Swin UNETR's inference path): training runs the eager path
    "sdpa-only-without-grad": EARLY_RETURN.replace(
        "if self.fused_attn:", "if self.fused_attn and not torch.jit.is_scripting() and not torch.is_grad_enabled():"),
    "sdpa-only-in-inference-mode": INLINE.replace("if self.fused_attn:", "if torch.is_inference_mode_enabled():"),
    # the ``if``/``else`` form, SDPA in the arm autograd is off in
    "joined-sdpa-without-grad": TWO_ARMS.replace("if self.fused_attn:", "if not torch.is_grad_enabled():"),
    "joined-sdpa-in-no-grad": TWO_ARMS.replace(
        "            out = F.scaled_dot_product_attention(q, k, v)",
        "            with torch.no_grad():\n                out = F.scaled_dot_product_attention(q, k, v)"),
    # no other path at all: the plain form of the same attention
    "no-other-path": EARLY_RETURN.replace(
        "        if self.fused_attn:\n            return F.scaled_dot_product_attention(q, k, v)\n", ""),
    # the original run outside any backend context: nothing says it is SDPA
    "no-backend-context": PATCHED_SDPA.replace(
        "        with sdpa_kernel(SDPBackend.MATH):\n            return original(",
        "        if True:\n            return original("),
    # a context that is no backend selection
    "autocast-context": PATCHED_SDPA.replace("with sdpa_kernel(SDPBackend.MATH):", "with torch.autocast(\"cuda\"):"),
    # under the backend context, but on other tensors (the queries of another projection)
    "context-other-tensors": PATCHED_SDPA.replace(
        "            return original(\n                query, key, value,",
        "            return original(\n                kwargs[\"memory\"], kwargs[\"memory\"], kwargs[\"memory\"],"),
    # the eager result is stored, not returned: the early return is of a different function's path
    "eager-not-returned": KERNEL_THEN_EAGER.replace(
        "    return torch.einsum(\"bhqk,bkhd->bqhd\", weights.softmax(-1), v)",
        "    out = torch.einsum(\"bhqk,bkhd->bqhd\", weights.softmax(-1), v)\n    attention.last = out"),
}


@pytest.mark.parametrize("name", sorted(LOOK_ALIKES))
def test_look_alikes_still_report(name):
    source = LOOK_ALIKES[name]
    assert source not in (EARLY_RETURN, WITH_PLACEHOLDER, INLINE, TWO_ARMS, PATCHED_SDPA, KERNEL_THEN_EAGER)  # the replacement took
    assert len(found_sites(source)) == 1


def test_cli(tmp_path):
    for name, source in (("early.py", EARLY_RETURN), ("patched.py", PATCHED_SDPA),
                         ("other.py", LOOK_ALIKES["other-tensors"]), ("plain.py", LOOK_ALIKES["no-backend-context"])):
        (tmp_path / name).write_text(textwrap.dedent(source))
    result = run_cli("--select", "TML601", "--output-format", "json", "--exit-zero", "--no-cache", str(tmp_path))
    found = sorted((f["filename"].rsplit("/", 1)[-1], f["code"]) for f in json.loads(result.stdout))
    assert found == [("other.py", "TML601"), ("plain.py", "TML601")]


# voicebox's ``Attend``: SDPA behind ``if self.flash:`` in a method of the class, ``flash=False``
# the constructor's default: training runs the eager path unless a caller opts in
OPT_IN_FLASH = HEADER + """
class Attend(nn.Module):
    def __init__(self, dropout=0.0, flash=False, scale=None):
        super().__init__()
        self.dropout = dropout
        self.attn_dropout = nn.Dropout(dropout)
        self.scale = scale
        self.flash = flash
        assert not (flash and not torch.cuda.is_available())

    def flash_attn(self, q, k, v, mask=None):
        if mask is not None:
            mask = mask.expand(-1, q.shape[1], q.shape[2], -1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)

    def forward(self, q, k, v, mask=None):
        scale = q.shape[-1] ** -0.5 if self.scale is None else self.scale
        if self.flash:
            return self.flash_attn(q, k, v, mask=mask)
        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * scale
        if mask is not None:
            sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)
        attn = sim.softmax(dim=-1)
        attn = self.attn_dropout(attn)
        return torch.einsum("b h i j, b h j d -> b h i d", attn, v)
"""

# a function's own switch, ``use_sdpa=False``
OPT_IN_PARAMETER = HEADER + """
def attention(q, k, v, use_sdpa=False):
    if use_sdpa:
        return F.scaled_dot_product_attention(q, k, v)
    weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)
    return weights @ v
"""

OFF_BY_DEFAULT = {
    "opt-in-flash": OPT_IN_FLASH,
    "opt-in-flash-literal": OPT_IN_FLASH.replace("self.flash = flash\n", "self.flash = False\n"),
    "opt-in-flash-negated": OPT_IN_FLASH.replace("if self.flash:", "if not (not self.flash):"),
    "opt-in-flash-conjunction": OPT_IN_FLASH.replace("if self.flash:", "if self.flash and q.is_cuda:"),
    "opt-in-two-arms": TWO_ARMS.replace("fused_attn=True", "fused_attn=False"),
    "opt-in-parameter": OPT_IN_PARAMETER,
    "opt-in-built-with-default": OPT_IN_FLASH + "\n\nlayer = Attend(0.1, flash=False)\n",
}

# the SDPA path is the default, or nothing in the file says it is off: a deliberate fallback
ON_OR_UNKNOWN = {
    "flash-default-true": OPT_IN_FLASH.replace("flash=False, scale", "flash=True, scale"),
    "flash-default-none": OPT_IN_FLASH.replace("flash=False, scale", "flash=None, scale"),
    "timm-config": OPT_IN_FLASH.replace("self.flash = flash\n", "self.flash = use_fused_attn()\n"),
    "built-with-flash": OPT_IN_FLASH + "\n\nlayer = Attend(0.1, flash=True)\n",
    "built-positionally": OPT_IN_FLASH + "\n\nlayer = Attend(0.1, config.flash)\n",
    "rebound-in-init": OPT_IN_FLASH.replace("        self.flash = flash\n", "        flash = flash or torch.cuda.is_available()\n        self.flash = flash\n"),
    "set-elsewhere": OPT_IN_FLASH.replace("    def flash_attn(", "    def enable_flash(self):\n        self.flash = True\n\n    def flash_attn("),
    "negated-test": OPT_IN_FLASH.replace("if self.flash:", "if not self.flash:"),
    "parameter-passed-on": OPT_IN_PARAMETER + "\n\ndef block(q, k, v):\n    return attention(q, k, v, use_sdpa=True)\n",
}


@pytest.mark.parametrize("name", sorted(OFF_BY_DEFAULT))
def test_an_sdpa_path_off_by_default_is_no_fallback(name):
    source = OFF_BY_DEFAULT[name]
    assert source != OPT_IN_FLASH or name == "opt-in-flash"
    found, why = quiet(source)
    assert len(found) == 1 and why == []


@pytest.mark.parametrize("name", sorted(ON_OR_UNKNOWN))
def test_an_sdpa_path_on_by_default_or_unknown_stays_a_fallback(name):
    source = ON_OR_UNKNOWN[name]
    assert source not in (OPT_IN_FLASH, OPT_IN_PARAMETER)  # the replacement took
    found, why = quiet(source)
    assert found == [] and len(why) == 1


# kappamodules' functional helper: SDPA takes its q, k, v through ``**sdpa_kwargs``, a ``dict(...)``
# of them (with the caller's ``**kwargs``); the default ``backend="auto"`` runs SDPA, and the eager
# arm only runs for ``"vanilla"``
SPLATTED = HEADER + """
def attention(query, key, value, attn_mask=None, dropout_p=0.0, backend="auto", **kwargs):
    sdpa_kwargs = dict(query=query, key=key, value=value, attn_mask=attn_mask, dropout_p=dropout_p, **kwargs)
    if backend == "auto":
        return F.scaled_dot_product_attention(**sdpa_kwargs)
    if backend == "vanilla":
        attn = (query * query.shape[-1] ** -0.5) @ key.transpose(-2, -1)
        if attn_mask is not None:
            attn = attn + attn_mask
        attn = F.dropout(attn.softmax(dim=-1), p=dropout_p)
        return attn @ value
    raise NotImplementedError(backend)
"""

SPLATTED_LOOK_ALIKES = {
    # the dict holds the keys as values too: SDPA of other tensors, no fallback of this attention
    "other-tensors": SPLATTED.replace("value=value, attn_mask", "value=key, attn_mask"),
    # SDPA given the caller's own keywords: nothing says they hold q, k and v
    "star-of-a-parameter": SPLATTED.replace("F.scaled_dot_product_attention(**sdpa_kwargs)",
                                             "F.scaled_dot_product_attention(**kwargs)"),
    # the SDPA arm is off by default: the eager arm is what training runs
    "sdpa-off-by-default": SPLATTED.replace('backend="auto", **kwargs', 'backend="vanilla", **kwargs'),
}


def test_an_sdpa_call_given_its_tensors_through_a_splatted_dict_is_the_same_attention():
    found, why = quiet(SPLATTED)
    assert found == [] and why == [("attention", "the eager path of a function that returns the same attention "
                                                 "from F.scaled_dot_product_attention on another path")]


@pytest.mark.parametrize("name", sorted(SPLATTED_LOOK_ALIKES))
def test_a_splatted_dict_of_other_tensors_or_an_sdpa_arm_off_by_default_still_reports(name):
    source = SPLATTED_LOOK_ALIKES[name]
    assert source != SPLATTED
    assert len(found_sites(source)) == 1


# a backend chosen by a string parameter: the arm the default takes is what training runs
CHOSEN = HEADER + """
def attend(q, k, v, backend="sdpa"):
    if backend == "eager":
        weights = (q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(dim=-1)
        return weights @ v
    return F.scaled_dot_product_attention(q, k, v)
"""

CHOSEN_QUIET = {
    "eager-arm-chosen-by-name": CHOSEN,
    "eager-unless-the-default": CHOSEN.replace('if backend == "eager":', 'if backend != "sdpa":'),
    "a-call-keeps-the-default": CHOSEN + '\n\ndef block(q, k, v):\n    return attend(q, k, v, backend="sdpa")\n',
}

CHOSEN_REPORTED = {
    # the default takes the eager arm; SDPA runs past it only when a caller asks for it
    "eager-by-default": CHOSEN.replace('backend="sdpa"', 'backend="eager"'),
    "sdpa-arm-by-name-off": CHOSEN.replace('if backend == "eager":', 'if backend != "flash":'),
    # the SDPA arm taken only when no caller of the file passes the default
    "every-call-picks-eager": CHOSEN.replace('backend="sdpa"', 'backend="eager"')
    + '\n\ndef block(q, k, v):\n    return attend(q, k, v, backend="eager")\n',
}


@pytest.mark.parametrize("name", sorted(CHOSEN_QUIET))
def test_an_eager_arm_a_string_default_does_not_choose_is_left_alone(name):
    assert found_sites(CHOSEN_QUIET[name]) == []


@pytest.mark.parametrize("name", sorted(CHOSEN_REPORTED))
def test_an_eager_arm_the_default_or_a_caller_chooses_reports(name):
    source = CHOSEN_REPORTED[name]
    assert source != CHOSEN
    assert len(found_sites(source)) == 1
