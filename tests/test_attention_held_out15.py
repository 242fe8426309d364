"""TML601 on forms the fifteenth held-out set showed it missed or misread, modelled as computations:

- a causal mask built from the scores' sizes, ``torch.ones(*shape(sim, "b h [i j]"))`` (an
  imported size helper) or ``torch.ones(*sim.shape[-2:])``: torch's factories read only sizes
  from their positional arguments, so the scores are not read elsewhere (``sizes.py``);
- ``q, k, v = map(lambda t: t.contiguous(), (q, k, v))`` in the SDPA path: one value per element,
  the lambda run on it (``mapped.py``), so that SDPA takes the same q, k and v as the eager path
  and that path is a fallback (lucidrains' ``Attend`` with ``flash=flash_attn`` passed down from a
  constructor defaulting to ``True``);
- scores concatenated along the key axis (``torch.cat((global_sim, local_sim), dim=-1)``, a
  ``CatAxis``), or split along the heads, changed per part by a module (a learned ALiBi bias) and
  concatenated again (a comprehension over a split is ``parts``): eager attention without a fix;
- ``Attend(flash=False)`` that its own file never builds, built in every other file of the
  package with the flag turned on (``Attend(flash=flash)`` in ``Attention.__init__(self,
  flash=True)``): SDPA by default (``flag_importers.py``).

Look-alikes stay reported or quiet: the scores' slices handed to a function; a cat along
another axis; kept weights; a sink column; parts rejoined along another axis; a top-k mask; a ``map`` over other
tensors than the eager path's; an importer that leaves the flag at its default or passes a value
off by default, or imports the module and not the class; the class with no importer.
"""

from __future__ import annotations

import json

import pytest

from attention_cases import found_sites, run_cli

SIZES = '''
import torch
import torch.nn as nn
from einops import einsum, rearrange
from einops_utils import shape


def max_neg_value(t):
    return -torch.finfo(t.dtype).max


class PrefixAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.to_out = nn.Linear(dim, dim)

    def forward(self, x, prefix=0):
        q, k, v = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        q = q * self.scale
        sim = einsum(q, k, "b h i d, b h j d -> b h i j")
        causal_mask = torch.ones(*shape(sim, "b h [i j]"), dtype=torch.bool, device=x.device).triu(1)
        if prefix > 0:
            causal_mask[:prefix, :prefix] = False
        sim = sim.masked_fill(causal_mask, max_neg_value(sim))
        attn = sim.softmax(dim=-1, dtype=torch.float32).to(sim.dtype)
        out = einsum(attn, v, "b h i j, b h j d -> b h i d")
        return self.to_out(rearrange(out, "b h n d -> b n (h d)"))


class CausalAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

    def forward(self, x):
        b, n, c = x.shape
        q, k, v = self.to_qkv(x).view(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        sim = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        causal = torch.ones(*sim.shape[-2:], dtype=torch.bool, device=x.device).triu(1)
        sim = sim.masked_fill(causal, float("-inf"))
        return (sim.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, n, c)
'''

SIZES_QUIET = '''
import torch
from scores_log import log_rows


def attend(q, k, v):
    sim = q @ k.transpose(-2, -1)
    causal = torch.ones(*sim.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
    log_rows(*sim.unbind(1))
    attn = sim.masked_fill(causal, float("-inf")).softmax(dim=-1)
    return attn @ v
'''

FLASH = '''
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange
from torch import einsum


class Attend(nn.Module):
    def __init__(self, dropout=0.0, flash=False):
        super().__init__()
        self.dropout = dropout
        self.attn_dropout = nn.Dropout(dropout)
        self.flash = flash

    def flash_attn(self, q, k, v):
        q, k, v = map(lambda t: t.contiguous(), (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)

    def forward(self, q, k, v):
        if self.flash:
            return self.flash_attn(q, k, v)
        scale = q.shape[-1] ** -0.5
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * scale
        attn = self.attn_dropout(sim.softmax(dim=-1))
        return einsum("b h i j, b h j d -> b h i d", attn, v)


class Attention(nn.Module):
    def __init__(self, dim, heads=4, dim_head=32, flash=False):
        super().__init__()
        self.heads = heads
        self.attend = Attend(flash=flash)
        self.to_qkv = nn.Conv2d(dim, dim_head * heads * 3, 1, bias=False)
        self.to_out = nn.Conv2d(dim_head * heads, dim, 1)

    def forward(self, x):
        b, c, h, w = x.shape
        q, k, v = map(lambda t: rearrange(t, "b (h c) x y -> b h (x y) c", h=self.heads), self.to_qkv(x).chunk(3, dim=1))
        out = self.attend(q, k, v)
        return self.to_out(rearrange(out, "b h (x y) d -> b (h d) x y", x=h, y=w))


class Transformer(nn.Module):
    def __init__(self, dim, depth=1, flash_attn=True):
        super().__init__()
        self.layers = nn.ModuleList([])
        for _ in range(depth):
            self.layers.append(Attention(dim=dim, flash=flash_attn))

    def forward(self, x):
        for attn in self.layers:
            x = attn(x) + x
        return x
'''

ATTEND = '''
import torch.nn as nn
import torch.nn.functional as F
from torch import einsum


class Attend(nn.Module):
    def __init__(self, *, dropout=0.0, flash=False, causal=False):
        super().__init__()
        self.dropout = dropout
        self.causal = causal
        self.attn_dropout = nn.Dropout(dropout)
        self.flash = flash

    def flash_attn(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal, dropout_p=self.dropout if self.training else 0.0)

    def forward(self, q, k, v):
        if self.flash:
            return self.flash_attn(q, k, v)
        sim = einsum("b h i d, b h j d -> b h i j", q, k) * q.shape[-1] ** -0.5
        attn = self.attn_dropout(sim.softmax(dim=-1))
        return einsum("b h i j, b h j d -> b h i d", attn, v)
'''

MODEL = '''
import torch.nn as nn
from einops import rearrange

from .attend import Attend


class Attention(nn.Module):
    def __init__(self, dim, heads=4, flash=True):
        super().__init__()
        self.heads = heads
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.attend = Attend(flash=flash, dropout=0.1)

    def forward(self, x):
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        return rearrange(self.attend(q, k, v), "b h n d -> b n (h d)")


class Model(nn.Module):
    def __init__(self, dim, depth, flash_attn=True):
        super().__init__()
        self.layers = nn.ModuleList([Attention(dim, flash=flash_attn) for _ in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = layer(x) + x
        return x
'''

TWO_D = '''
import torch.nn as nn

from .attend import Attend


class Attention2D(nn.Module):
    def __init__(self, dim, flash=True, causal=False):
        super().__init__()
        self.attend = Attend(flash=flash, causal=causal)
'''


CAT = '''
import torch
import torch.nn as nn
from einops import rearrange, repeat
from torch import einsum


class LongShortAttention(nn.Module):
    def __init__(self, dim, heads, window, segments, dropout=0.0):
        super().__init__()
        self.heads, self.window = heads, window
        self.scale = (dim // heads) ** -0.5
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_kv = nn.Linear(dim, dim, bias=False)
        self.to_dynamic_proj = nn.Linear(dim // heads, segments, bias=False)
        self.attn_dropout = nn.Dropout(dropout)

    def forward(self, x):
        b, n, _ = x.shape
        h, w = self.heads, self.window
        q, kv = map(lambda t: rearrange(t, "b n (h d) -> (b h) n d", h=h), (self.to_q(x), self.to_kv(x)))
        q = q * self.scale
        lq, lkv = map(lambda t: rearrange(t, "b (w n) d -> b w n d", n=w), (q, kv))
        lsim = einsum("b w i d, b w j d -> b w i j", lq, lkv)
        pkv = self.to_dynamic_proj(kv).softmax(dim=-2)
        gkv = einsum("b n d, b n r -> b r d", kv, pkv)
        gsim = einsum("b n d, b r d -> b n r", q, gkv)
        gsim = rearrange(gsim, "b (w n) r -> b w n r", n=w)
        gkv = repeat(gkv, "b r d -> b w r d", w=n // w)
        v = torch.cat((gkv, lkv), dim=-2)
        sim = torch.cat((gsim, lsim), dim=-1)
        attn = self.attn_dropout(sim.softmax(dim=-1))
        out = einsum("b w i j, b w j d -> b w i d", attn, v)
        return rearrange(out, "(b h) w n d -> b (w n) (h d)", h=h)


class NullKeyAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.null_kv = nn.Parameter(torch.randn(2, heads, 1, dim // heads))
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)

    def forward(self, x):
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        nk, nv = (repeat(t, "h n d -> b h n d", b=x.shape[0]) for t in self.null_kv.unbind(0))
        sim = torch.cat((q @ nk.transpose(-2, -1), q @ k.transpose(-2, -1)), dim=-1) * q.shape[-1] ** -0.5
        attn = sim.softmax(dim=-1)
        return rearrange(attn @ torch.cat((nv, v), dim=-2), "b h n d -> b n (h d)")
'''

CAT_QUIET = '''
import torch


def head_groups(q1, k1, v1, q2, k2, v2):
    sim = torch.cat((q1 @ k1.transpose(-2, -1), q2 @ k2.transpose(-2, -1)), dim=1)
    return sim.softmax(dim=-1) @ torch.cat((v1, v2), dim=1)


def kept(q, k, nk, v, nv):
    sim = torch.cat((q @ nk.transpose(-2, -1), q @ k.transpose(-2, -1)), dim=-1)
    attn = sim.softmax(dim=-1)
    return attn @ torch.cat((nv, v), dim=-2), attn


def with_a_sink(q, k, v, sink):
    sim = torch.cat((q @ k.transpose(-2, -1), sink.expand(*q.shape[:-1], 1)), dim=-1)
    attn = sim.softmax(dim=-1)
    return attn[..., :-1] @ v
'''


GROUPED = '''
import torch
import torch.nn as nn
from einops import rearrange
from torch import einsum


class LearnedAlibi(nn.Module):
    def __init__(self, heads):
        super().__init__()
        self.slopes = nn.Parameter(torch.rand(heads, 1, 1))

    def forward(self, sim):
        i, j = sim.shape[-2:]
        distance = (torch.arange(j, device=sim.device)[None, :] - torch.arange(i, device=sim.device)[:, None]).abs()
        return -distance * self.slopes


class GroupedAlibiAttention(nn.Module):
    def __init__(self, dim, heads, groups):
        super().__init__()
        self.heads, self.groups = heads, groups
        self.scale = (dim // heads) ** -0.5
        self.to_qkv = nn.Linear(dim, dim * 3, bias=False)
        self.alibis = nn.ModuleList([LearnedAlibi(heads // groups) for _ in range(groups)])

    def forward(self, x):
        q, k, v = tuple(rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in self.to_qkv(x).chunk(3, dim=-1))
        sim = einsum("b h i d, b h j d -> b h i j", q * self.scale, k)
        grouped = sim.split(self.heads // self.groups, dim=1)
        grouped = [alibi(part) + part for alibi, part in zip(self.alibis, grouped)]
        sim = torch.cat(grouped, dim=1)
        attn = sim.softmax(dim=-1)
        return rearrange(einsum("b h i j, b h j d -> b h i d", attn, v), "b h n d -> b n (h d)")
'''

GROUPED_QUIET = '''
import torch


def other_axis(q, k, v, biases):
    sim = q @ k.transpose(-2, -1)
    parts = [bias(s) + s for bias, s in zip(biases, sim.split(4, dim=1))]
    return torch.cat(parts, dim=-1).softmax(dim=-1) @ v


def top_k(q, k, v):
    sim = q @ k.transpose(-2, -1)
    top = sim.topk(8, dim=-1).values[..., -1:]
    attn = sim.masked_fill(sim < top, float("-inf")).softmax(dim=-1)
    return attn @ v
'''


# the same attention, its mask sized by ``n``: a fix can be written
SIZED = "import torch\nimport torch.nn as nn\n\n\nclass CausalAttention" + SIZES.split("class CausalAttention", 1)[1].replace(
    "torch.ones(*sim.shape[-2:]", "torch.ones(n, n")


def test_a_mask_built_from_the_scores_sizes_does_not_read_them():
    sites = found_sites(SIZES)
    assert [s.function.name.value for s in sites] == ["forward", "forward"], [s.reason for s in sites]
    prefix, causal = sites
    assert not prefix.fixable and "cast" in prefix.reason, prefix.reason
    assert not causal.fixable and "scores' sizes" in causal.reason, causal.reason  # the fix would remove ``sim``
    (sized,) = found_sites(SIZED)
    assert sized.fixable and sized.has_mask, sized.reason


def test_the_scores_slices_handed_to_a_function_are_read():
    assert found_sites(SIZES_QUIET) == []


def test_an_sdpa_path_that_maps_a_lambda_over_q_k_v_is_the_fallback_of_the_default():
    assert found_sites(FLASH) == []


@pytest.mark.parametrize("change", [
    ("def __init__(self, dim, depth=1, flash_attn=True):", "def __init__(self, dim, depth=1, flash_attn=False):"),
    ("q, k, v = map(lambda t: t.contiguous(), (q, k, v))", "q, k, v = map(lambda t: t.contiguous(), (q, q, v))"),
])
def test_an_eager_default_or_a_map_over_other_tensors_stays_reported(change):
    old, new = change
    assert old in FLASH
    sites = found_sites(FLASH.replace(old, new, 1))
    assert [s.function.name.value for s in sites] == ["forward"], [s.reason for s in sites]


def test_scores_concatenated_along_the_key_axis_are_reported_without_a_fix():
    sites = found_sites(CAT)
    assert [s.function.name.value for s in sites] == ["forward", "forward"], [s.reason for s in sites]
    assert all("concatenated along the key axis" in s.reason and not s.fixable for s in sites), [s.reason for s in sites]


def test_a_cat_along_another_axis_kept_weights_or_a_sink_column_stay_quiet():
    assert found_sites(CAT_QUIET) == []


def test_scores_split_changed_per_part_and_rejoined_are_reported_without_a_fix():
    (site,) = found_sites(GROUPED)
    assert not site.fixable and "split, changed part by part" in site.reason, site.reason


def test_a_rejoin_along_another_axis_and_a_top_k_mask_stay_quiet():
    assert found_sites(GROUPED_QUIET) == []


def _package(root, **files):
    package = root / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in files.items():
        (package / f"{name}.py").write_text(text)
    return package


def _rows(package, *extra):
    result = run_cli(*extra, "--select", "TML601", "--output-format", "json", "--exit-zero", str(package))
    assert result.returncode == 0, result.stderr
    return sorted((f["filename"].rsplit("/", 1)[-1], f["location"]["row"]) for f in json.loads(result.stdout))


EAGER_ROW = ("attend.py", ATTEND.splitlines().index('        return einsum("b h i j, b h j d -> b h i d", attn, v)') + 1)


@pytest.mark.slow
def test_a_flag_every_importer_turns_on_makes_sdpa_the_default(tmp_path):
    assert _rows(_package(tmp_path, attend=ATTEND, model=MODEL, two_d=TWO_D), "--no-cache") == []


@pytest.mark.slow
@pytest.mark.parametrize("importer", [
    MODEL + "\n\ndef plain():\n    return Attend()\n",  # left at the eager default
    MODEL.replace("def __init__(self, dim, depth, flash_attn=True):", "def __init__(self, dim, depth, flash_attn=False):"),
    MODEL.replace("from .attend import Attend", "from . import attend").replace("Attend(flash=flash", "attend.Attend(flash=flash"),
    MODEL.replace("class Model(nn.Module):", "class Model(nn.Module):\n    flash = None\n").replace("flash=flash_attn)", "flash=self.flash)"),
], ids=["default", "off-by-default", "module-import", "unknown"])
def test_an_importer_that_may_leave_the_flag_off_keeps_the_report(tmp_path, importer):
    assert _rows(_package(tmp_path, attend=ATTEND, model=importer, two_d=TWO_D), "--no-cache") == [EAGER_ROW]


@pytest.mark.slow
def test_the_class_alone_and_a_changed_importer_are_reported_through_the_cache(tmp_path):
    package = _package(tmp_path, attend=ATTEND)
    assert _rows(package, "--no-cache") == [EAGER_ROW]
    cache = ("--cache-dir", str(tmp_path / "cache"))
    (package / "model.py").write_text(MODEL)
    assert _rows(package, *cache) == []
    (package / "model.py").write_text(MODEL + "\n\ndef plain():\n    return Attend()\n")
    assert _rows(package, *cache) == [EAGER_ROW]  # warm: the finding is keyed by its importers' texts


@pytest.mark.slow
def test_the_fixed_mask_form_computes_what_the_eager_code_did(tmp_path):
    torch = pytest.importorskip("torch")
    from torchmemlint.dynamic.target import load_module

    source = SIZED
    eager_path, copy = tmp_path / "eager_held_out15.py", tmp_path / "held_out15.py"
    eager_path.write_text(source)
    copy.write_text(source)
    result = run_cli("--no-cache", "--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "softmax(" not in copy.read_text()
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    a, b = eager.CausalAttention(16, 4).eval(), fixed.CausalAttention(16, 4).eval()
    b.load_state_dict(a.state_dict())
    results = []
    for module in (a, b):
        x = torch.randn(2, 6, 16, requires_grad=True)
        with torch.no_grad():
            x.copy_(torch.arange(2 * 6 * 16, dtype=torch.float32).reshape(2, 6, 16).sin())
        out = module(x)
        out.backward(torch.ones_like(out))
        results.append((out.detach(), [x.grad] + [p.grad for p in module.parameters()]))
    close = dict(atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(results[0][0], results[1][0], **close)
    for before, after in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(before, after, **close)
