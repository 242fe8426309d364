"""TML601 through ``einops.rearrange`` and through a softmax written in place into slices of
the scores (the value graph: ``analysis/einsum.py``'s ``rearranged``, ``analysis/writes.py``),
through the CLI: channel-first attention whose keys and weights are rearranged (fixed, and the
fixed code computes what the eager code did), the softmax written into the two halves of the
scores in one arm of an ``if`` (reported without a fix), and look-alikes that stay quiet:
weights returned, stored or kept, a softmax over the queries, one half only, halves over the
sliced axis or crossed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from torchmemlint.analysis.einsum import rearranged

FORMS = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange


class SpatialSelfAttention(nn.Module):
    """latent-diffusion: channel-first, k and the weights rearranged between the einsums."""

    def __init__(self, channels):
        super().__init__()
        self.q = nn.Conv2d(channels, channels, 1)
        self.k = nn.Conv2d(channels, channels, 1)
        self.v = nn.Conv2d(channels, channels, 1)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        b, c, h, w = q.shape
        q = rearrange(q, "b c h w -> b (h w) c")
        k = rearrange(k, "b c h w -> b c (h w)")
        w_ = torch.einsum("bij,bjk->bik", q, k)
        w_ = w_ * (int(c) ** (-0.5))
        w_ = torch.nn.functional.softmax(w_, dim=2)
        v = rearrange(v, "b c h w -> b c (h w)")
        w_ = rearrange(w_, "b i j -> b j i")
        h_ = torch.einsum("bij,bjk->bik", v, w_)
        return rearrange(h_, "b c (h w) -> b c h w", h=h)


class HeadsRearranged(nn.Module):
    """heads split by rearrange, weights permuted by rearrange before the product with v."""

    def __init__(self, heads):
        super().__init__()
        self.heads = heads

    def forward(self, q, k, v):
        q, k, v = (rearrange(t, "b n (h d) -> b h n d", h=self.heads) for t in (q, k, v))
        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * 0.25
        attn = sim.softmax(dim=-1)
        attn = rearrange(attn, "b h i j -> b h j i")
        out = torch.einsum("b h j i, b h j d -> b h i d", attn, v)
        return rearrange(out, "b h n d -> b n (h d)")


class InPlaceHalves(nn.Module):
    """audioldm's CrossAttention.normal_attention: the softmax written into the two halves."""

    def __init__(self, inplace):
        super().__init__()
        self.is_inplace = inplace
        self.scale = 0.25

    def forward(self, q, k, v):
        attn = torch.einsum("bihd,bjhd->bhij", q, k) * self.scale
        if self.is_inplace:
            half = attn.shape[0] // 2
            attn[half:] = attn[half:].softmax(dim=-1)
            attn[:half] = attn[:half].softmax(dim=-1)
        else:
            attn = attn.softmax(dim=-1)
        return torch.einsum("bhij,bjhd->bihd", attn, v)


def halves_always(q, k, v):
    """the two halves written in place, unconditionally (the other order)."""
    attn = q @ k.transpose(-2, -1)
    n = attn.shape[0] // 2
    attn[:n] = attn[:n].softmax(-1)
    attn[n:] = attn[n:].softmax(-1)
    return attn @ v
'''

QUIET = '''\
import torch
import torch.nn as nn
from einops import rearrange


def weights_returned(q, k, v):
    w_ = torch.einsum("bij,bjk->bik", q, k)
    w_ = torch.nn.functional.softmax(w_, dim=2)
    w_ = rearrange(w_, "b i j -> b j i")
    return torch.einsum("bij,bjk->bik", v, w_), w_


class WeightsStored(nn.Module):
    def forward(self, q, k, v):
        w_ = torch.einsum("bij,bjk->bik", q, k).softmax(dim=2)
        w_ = rearrange(w_, "b i j -> b j i")
        self.attention_map = w_
        return torch.einsum("bij,bjk->bik", v, w_)


def softmax_over_queries(q, k, v):
    w_ = torch.einsum("bij,bjk->bik", q, k).softmax(dim=1)
    w_ = rearrange(w_, "b i j -> b j i")
    return torch.einsum("bij,bjk->bik", v, w_)


def one_half_only(q, k, v):
    attn = q @ k.transpose(-2, -1)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(-1)
    return attn @ v


def halves_over_the_sliced_axis(q, k, v):
    attn = q @ k.transpose(-2, -1)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(0)
    attn[:half] = attn[:half].softmax(0)
    return attn @ v


def halves_crossed(q, k, v):
    attn = q @ k.transpose(-2, -1)
    half = attn.shape[0] // 2
    attn[half:] = attn[:half].softmax(-1)
    attn[:half] = attn[half:].softmax(-1)
    return attn @ v


def halves_weights_kept(q, k, v, cache):
    attn = q @ k.transpose(-2, -1)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(-1)
    attn[:half] = attn[:half].softmax(-1)
    cache.append(attn)
    return attn @ v
'''


def _lint(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "check", "--isolated", "--no-cache", "--select", "TML601",
         *extra, str(path)],
        capture_output=True, text=True, timeout=300,
    )


@pytest.mark.parametrize("pattern, meaning", [
    ("b i j -> b j i", ([0, 2, 1], False)),
    ("b h i j -> b h j i", ([0, 1, 3, 2], False)),
    ("b c h w -> b (h w) c", (None, True)),  # the features after the positions: a transpose
    ("b c h w -> b c (h w)", (None, False)),
    ("b n (h d) -> b h n d", (None, False)),
    ("b c (h w) -> b c h w", (None, False)),
    ("b ... -> ... b", None),  # not followed
    ("b 1 n -> b n", None),
    ("b i j -> b i k", None),  # not the same axes
    ("b (i j -> b i j", None),
])
def test_rearrange_patterns_as_axis_relabellings(pattern, meaning):
    assert rearranged(pattern) == meaning


@pytest.mark.slow
def test_rearranged_and_in_place_forms_are_reported_and_the_fixable_ones_compute_the_same(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("einops")
    from torchmemlint.dynamic.target import load_module

    eager_path = tmp_path / "eager_forms.py"
    eager_path.write_text(FORMS)
    copy = tmp_path / "rearranged_forms.py"
    copy.write_text(FORMS)
    found = json.loads(_lint(copy, "--output-format", "json").stdout)
    rows = {item["location"]["row"]: item for item in found}
    assert sorted(rows) == [26, 42, 62, 71], sorted(rows)
    assert rows[26]["fix"] is not None and rows[42]["fix"] is not None
    for row in (62, 71):  # written in place into the halves: reported, no fix
        assert rows[row]["fix"] is None
        assert "written in place into slices of the scores" in rows[row]["message"]
    result = _lint(copy, "--fix", "--unsafe-fixes")
    assert "(2 fixed, 2 remaining)" in result.stdout, result.stdout + result.stderr
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 2
    assert '"b i j -> b j i"' not in fixed_source  # the weights' rearrange went with them
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    close = dict(atol=1e-5, rtol=1e-4)
    spatial = eager.SpatialSelfAttention(6)
    again = fixed.SpatialSelfAttention(6)
    again.load_state_dict(spatial.state_dict())
    x = torch.randn(2, 6, 4, 5)
    torch.testing.assert_close(spatial(x), again(x), **close)
    q, k, v = (torch.randn(2, 10, 12) for _ in range(3))
    torch.testing.assert_close(eager.HeadsRearranged(3)(q, k, v), fixed.HeadsRearranged(3)(q, k, v), **close)
    # the in-place halves compute the plain softmax (what the report says they are)
    q, k, v = (torch.randn(4, 10, 3, 8) for _ in range(3))
    torch.testing.assert_close(eager.InPlaceHalves(True)(q, k, v), eager.InPlaceHalves(False)(q, k, v), **close)
    q, k, v = (torch.randn(4, 10, 8) for _ in range(3))
    plain = torch.softmax(q @ k.transpose(-2, -1), -1) @ v
    torch.testing.assert_close(eager.halves_always(q, k, v), plain, **close)


@pytest.mark.slow
def test_weights_that_escape_and_look_alikes_stay_quiet(tmp_path):
    path = tmp_path / "quiet.py"
    path.write_text(QUIET)
    result = _lint(path, "--output-format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(result.stdout) == []


def _returned(source: str, name: str):
    """The value ``name`` returns, in the value graph of that function of ``source``."""
    import textwrap

    import libcst as cst

    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings

    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings, text=module.code)
    function = next(f for f, _ in analysis.value_graphs.functions() if f.name.value == name)
    (value,) = analysis.values(function).returns
    return value


WRITES = """
import torch


def halves(q, k, dim):
    attn = torch.einsum("bij,bkj->bik", q, k)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(DIM)
    attn[:half] = attn[:half].softmax(DIM)
    return attn


def other_limit(q, k, n):
    attn = torch.einsum("bij,bkj->bik", q, k)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(-1)
    attn[:n] = attn[:n].softmax(-1)
    return attn


def limit_rebound(q, k):
    attn = torch.einsum("bij,bkj->bik", q, k)
    half = attn.shape[0] // 2
    attn[half:] = attn[half:].softmax(-1)
    half = 1
    attn[:half] = attn[:half].softmax(-1)
    return attn
"""


@pytest.mark.parametrize("dim, softmax", [("-1", True), ("2", True), ("1", True), ("0", False), ("-3", False)])
def test_a_softmax_written_into_complementary_halves_is_the_softmax_of_the_whole(dim, softmax):
    """Over an axis other than the sliced first one, the two writes are ``attn.softmax(dim)``
    (its input: the scores); over the sliced axis they are not."""
    value = _returned(WRITES.replace("DIM", dim), "halves")
    assert (value.op == "softmax") is softmax, value.op
    if softmax:
        assert value.inputs[0].op == "contract" and value.info["in_place"]


@pytest.mark.parametrize("name", ["other_limit", "limit_rebound"])
def test_halves_with_different_limits_are_not_one_softmax(name):
    assert _returned(WRITES, name).op != "softmax"
