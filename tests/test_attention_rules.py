"""TML6xx: the CLI on fixtures/lint/attention, the eager-attention fact of the shared analysis,
the training evidence, hand-written checkpoint functions, and what the flagged code does when
run with torch."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest
import torch

from torchmemlint.analysis.attention import AttentionSites
from torchmemlint.analysis.scripts import training_evidence
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.recompute import recomputing_functions
from torchmemlint.dynamic.target import load_module

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "lint" / "attention"
EXPECT = re.compile(r"#\s*expect:\s*(TML\d{3}(?:\s*,\s*TML\d{3})*)")


def run_cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchmemlint", "--isolated", *args],
        cwd=cwd, capture_output=True, text=True, timeout=120,
    )


def expected_rows():
    rows = set()
    for path in sorted(FIXTURES.glob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = EXPECT.search(line)
            if match:
                for code in match.group(1).split(","):
                    rows.add((path.name, number, code.strip()))
    return rows


@pytest.mark.slow
def test_cli_reports_exactly_the_marked_rows():
    expected = expected_rows()
    assert {code for _, _, code in expected} == {"TML601", "TML602", "TML603", "TML604"}
    result = run_cli("--select", "TML6", "--output-format", "json", str(FIXTURES))
    assert result.returncode == 1, result.stderr
    reported = {(Path(f["filename"]).name, f["location"]["row"], f["code"]) for f in json.loads(result.stdout)}
    assert reported == expected


def sites(source: str):
    module = cst.parse_module(textwrap.dedent(source))
    bindings = Bindings()
    bindings.bind_statements(module.body)
    analysis = FileAnalysis(module, bindings)
    found = AttentionSites(analysis).sites()
    return [
        {
            "q": s.query, "k": s.key, "v": s.value, "scale": s.scale, "mask": s.mask,
            "dropout": s.dropout, "removed": len(s.removable), "reason": s.reason,
        }
        for s in found
    ]


def test_the_site_names_what_sdpa_needs():
    (site,) = sites(
        """
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        class A(nn.Module):
            def __init__(self):
                super().__init__()
                self.drop = nn.Dropout(0.2)

            def forward(self, q, k, v, pad):
                s = torch.matmul(q, k.transpose(-1, -2))
                s = s / self.temperature
                if pad is not None:
                    s = s.masked_fill(~pad, float("-inf"))
                w = self.drop(F.softmax(s, dim=-1))
                return torch.matmul(w, v)
        """
    )
    assert site["q"] == "q" and site["k"] == "k" and site["v"] == "v"
    assert site["mask"] == "pad"  # `if pad is not None`: None already means no mask
    assert site["dropout"] == "self.drop.p if self.training else 0.0"
    assert site["scale"] == "1.0 / self.temperature"
    assert site["removed"] == 4 and site["reason"] == ""


def test_a_name_reassigned_between_the_scores_and_the_product_blocks_the_fix():
    (site,) = sites(
        """
        import torch

        def f(q, k, v):
            scores = q @ k.transpose(-2, -1)
            q = q + 1
            return torch.softmax(scores, dim=-1) @ v
        """
    )
    assert site["reason"].startswith("a name the scores are computed from is assigned again")


def test_weights_read_after_the_product_are_not_a_site():
    assert sites(
        """
        import torch

        def f(q, k, v, log):
            a = torch.softmax(q @ k.transpose(-2, -1), -1)
            out = a @ v
            log(a.max())
            return out
        """
    ) == []


@pytest.mark.parametrize(
    "source, evidence",
    [
        ("loss.backward()\n", "`.backward()`"),
        ("optimizer.step()\n", "`optimizer.step()`"),
        ("self.opt.step()\n", "`self.opt.step()`"),
        ("t = SFTTrainer(model)\n", "`SFTTrainer(...)`"),
        ("trainer.fit(model, dm)\n", "`trainer.fit(...)`"),
        ("class M:\n    def training_step(self, b, i):\n        pass\n", "`training_step`"),
        ("scheduler.step()\nmodel.train()\nmodel(x)\n", None),
    ],
)
def test_training_evidence(source, evidence):
    assert training_evidence(cst.parse_module(source)) == evidence


def test_recomputing_functions_find_the_function_rerun_in_backward():
    module = cst.parse_module((FIXTURES / "recompute.py").read_text())
    bindings = Bindings()
    bindings.bind_statements(module.body)
    found = {f.classdef.name.value: f for f in recomputing_functions(module, bindings.qualify)}
    assert set(found) == {"CheckpointFunction", "RngSafeCheckpoint"}
    assert found["CheckpointFunction"].attribute == "run_function"
    assert not found["CheckpointFunction"].restores_rng
    assert found["RngSafeCheckpoint"].restores_rng


@pytest.mark.slow
def test_the_flagged_checkpoint_module_calls_raise_type_error():
    """TML604's claim: each flagged form raises TypeError when it runs."""
    fixture = load_module("%s:_" % (FIXTURES / "recompute.py"))
    net = fixture.UNet()
    net(torch.randn(1, 3, 8, 8))  # the correct form runs
    with pytest.raises(TypeError, match="'module' object is not callable"):
        net.use_checkpointing()
    import torch.utils.checkpoint as cp

    with pytest.raises(TypeError, match="'module' object is not callable"):
        cp(torch.nn.Identity(), torch.ones(1))


@pytest.mark.slow
def test_hand_written_checkpoint_changes_dropout_gradients():
    """TML603's claim: the rerun draws another dropout mask; torch's checkpoint does not."""
    nets = load_module("%s:_" % (ROOT / "fixtures" / "models" / "recompute.py"))
    grads = {}
    for mode in ("plain", "torch", "handwritten"):
        torch.manual_seed(0)
        model = nets.DropoutSegment(64, 0.5, mode)
        x = torch.randn(16, 64)
        torch.manual_seed(1)
        model(x).square().mean().backward()
        grads[mode] = [p.grad for p in model.parameters()]
    assert all(torch.equal(a, b) for a, b in zip(grads["torch"], grads["plain"]))
    assert not all(torch.equal(a, b) for a, b in zip(grads["handwritten"], grads["plain"]))


@pytest.mark.slow
def test_unsafe_fixes_of_the_fixture_run_and_match_eager_attention(tmp_path):
    """`--fix --unsafe-fixes` on the research-code fixture: the fixed minGPT block computes
    what the eager one did (eval mode, float32 rounding)."""
    copy = tmp_path / "eager_attention.py"
    shutil.copy(FIXTURES / "eager_attention.py", copy)
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 1, result.stderr  # the finding without a fix remains
    fixed = copy.read_text()
    assert fixed.count("scaled_dot_product_attention(") == 3  # two fixes + the timm branch
    assert run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy)).returncode == 1
    assert copy.read_text() == fixed  # converged


@pytest.mark.slow
def test_fixed_mingpt_block_matches_the_eager_one(tmp_path):
    copy = tmp_path / "eager_attention.py"
    source = (FIXTURES / "eager_attention.py").read_text().replace("from einops import rearrange\n", "")
    copy.write_text(source)
    assert run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy)).returncode == 1
    eager = load_module("%s:_" % _write(tmp_path / "eager.py", source))
    fixed = load_module("%s:_" % copy)
    torch.manual_seed(0)
    a = eager.CausalSelfAttention(32, 4, 16, 0.1).eval()
    b = fixed.CausalSelfAttention(32, 4, 16, 0.1).eval()
    b.load_state_dict(a.state_dict())
    x = torch.randn(2, 16, 32)
    torch.testing.assert_close(a(x), b(x), atol=1e-5, rtol=1e-4)
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    mask = torch.rand(2, 1, 16, 16) > 0.3
    mask[..., 0] = True
    torch.testing.assert_close(eager.attention(q, k, v, mask), fixed.attention(q, k, v, mask), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(eager.attention(q, k, v), fixed.attention(q, k, v), atol=1e-5, rtol=1e-4)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.slow
def test_bf16_autocast_shrinks_the_kept_activations_of_the_small_lm():
    """TML605's figure, small: the autocast wrapper of benchmarks/memory_figures.py."""
    from torchmemlint.dynamic.measure import measure_training_step

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from memory_figures import Autocast
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    lm = load_module("%s:_" % (ROOT / "fixtures" / "models" / "attention.py"))
    fp32 = measure_training_step(lambda: lm.small_lm(), (4, 128, "int64"))
    bf16 = measure_training_step(lambda: Autocast(lm.small_lm()), (4, 128, "int64"))
    assert bf16.kept_after_forward < 0.8 * fp32.kept_after_forward
    assert bf16.peak_bytes < fp32.peak_bytes


GRAPH_FORMS = '''\
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import einsum


class ChannelFirst(nn.Module):
    """denoising-diffusion's full attention: q, k, v channel-first, einsum both ways."""

    def __init__(self, heads, dim_head):
        super().__init__()
        self.heads = heads
        self.scale = dim_head ** -0.5

    def forward(self, q, k, v):
        q = q * self.scale
        sim = einsum("b h d i, b h d j -> b h i j", q, k)
        attn = sim.softmax(dim=-1)
        return einsum("b h i j, b h d j -> b h i d", attn, v)


class AttnBlock(nn.Module):
    """taming-transformers: bmm with q permuted, softmax over dim=2, v on the left."""

    def forward(self, q, k, v):
        b, c, n = q.shape
        q = q.permute(0, 2, 1)
        w_ = torch.bmm(q, k)
        w_ = w_ * (int(c) ** (-0.5))
        w_ = F.softmax(w_, dim=2)
        w_ = w_.permute(0, 2, 1)
        return torch.bmm(v, w_)


class ModuleSoftmax(nn.Module):
    """vit-pytorch: an nn.Softmax attribute and an nn.Dropout attribute."""

    def __init__(self, dim_head, dropout):
        super().__init__()
        self.scale = dim_head ** -0.5
        self.attend = nn.Softmax(dim=-1)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v):
        dots = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        attn = self.attend(dots)
        attn = self.dropout(attn)
        return torch.matmul(attn, v)


class SequentialSoftmax(nn.Module):
    """max-vit: softmax and dropout in one nn.Sequential, a local holding the mask value."""

    def __init__(self, dropout):
        super().__init__()
        self.attend = nn.Sequential(nn.Softmax(dim=-1), nn.Dropout(dropout))

    def forward(self, q, k, v, mask):
        sim = einsum("b h i d, b h j d -> b h i j", q, k)
        max_neg = -torch.finfo(sim.dtype).max
        sim = sim.masked_fill(~mask, max_neg)
        attn = self.attend(sim)
        return einsum("b h i j, b h j d -> b h i d", attn, v)


class AliasSoftmax(nn.Module):
    """dalle-style: the softmax function is chosen by a flag."""

    def __init__(self, stable):
        super().__init__()
        self.stable = stable

    def forward(self, q, k, v):
        softmax = torch.softmax if self.stable else F.softmax
        dots = torch.einsum("b i d, b j d -> b i j", q, k) * q.shape[-1] ** -0.5
        attn = softmax(dots, dim=2)
        return torch.einsum("b i j, b j d -> b i d", attn, v)


def branches(q, k, v, mask=None):
    """Two eager attentions in one if/else: both are fixed by one --fix."""
    if mask is None:
        attn = (q @ k.transpose(-2, -1)) * 0.125
        attn = attn.softmax(dim=-1)
        out = attn @ v
    else:
        attn = (q @ k.transpose(-2, -1)) * 0.125
        attn = attn.masked_fill(mask == 0, float("-inf"))
        attn = attn.softmax(dim=-1)
        out = attn @ v
    return out
'''


@pytest.mark.slow
def test_forms_the_value_graph_sees_are_fixed_in_one_pass_and_compute_what_eager_code_did(tmp_path):
    """Channel-first einsum, bmm with v on the left and softmax over dim=2, nn.Softmax and
    nn.Dropout attributes (alone and in an nn.Sequential), a fill value held in a local, a
    softmax alias, and two attentions in one if/else: `--fix --unsafe-fixes` fixes all seven
    in one pass, and the fixed code computes what the eager code did (eval mode)."""
    eager_path = _write(tmp_path / "eager_forms.py", GRAPH_FORMS)
    copy = _write(tmp_path / "graph_forms.py", GRAPH_FORMS)
    listed = run_cli("--select", "TML601", "--output-format", "json", str(copy))
    assert len(json.loads(listed.stdout)) == 7, listed.stdout
    result = run_cli("--select", "TML601", "--fix", "--unsafe-fixes", str(copy))
    assert result.returncode == 0, result.stdout + result.stderr  # none left
    fixed_source = copy.read_text()
    assert fixed_source.count("scaled_dot_product_attention(") == 7
    assert "softmax(" not in fixed_source.split("class AliasSoftmax")[0]
    eager, fixed = load_module("%s:_" % eager_path), load_module("%s:_" % copy)
    torch.manual_seed(0)
    close = dict(atol=1e-5, rtol=1e-4)
    q, k, v = (torch.randn(2, 3, 8, 10) for _ in range(3))  # (b, h, d, n) channel-first
    torch.testing.assert_close(eager.ChannelFirst(3, 8)(q, k, v), fixed.ChannelFirst(3, 8)(q, k, v), **close)
    q, k, v = (torch.randn(2, 6, 10) for _ in range(3))  # (b, c, n)
    torch.testing.assert_close(eager.AttnBlock()(q, k, v), fixed.AttnBlock()(q, k, v), **close)
    q, k, v = (torch.randn(2, 3, 10, 8) for _ in range(3))  # (b, h, n, d)
    torch.testing.assert_close(eager.ModuleSoftmax(8, 0.1).eval()(q, k, v), fixed.ModuleSoftmax(8, 0.1).eval()(q, k, v), **close)
    mask = torch.rand(2, 1, 10, 10) > 0.3
    mask[..., 0] = True
    torch.testing.assert_close(
        eager.SequentialSoftmax(0.1).eval()(q, k, v, mask), fixed.SequentialSoftmax(0.1).eval()(q, k, v, mask), **close
    )
    for stable in (True, False):
        a, b, c = (torch.randn(4, 10, 8) for _ in range(3))
        torch.testing.assert_close(eager.AliasSoftmax(stable)(a, b, c), fixed.AliasSoftmax(stable)(a, b, c), **close)
    for branch_mask in (None, mask):
        torch.testing.assert_close(eager.branches(q, k, v, branch_mask), fixed.branches(q, k, v, branch_mask), **close)
    # with dropout on, the fixed modules drop with the attribute's probability while training
    module = fixed.SequentialSoftmax(1.0).train()
    assert torch.count_nonzero(module(q, k, v, mask)) == 0


SCOPED_FORMS = '''\
import torch
from torch.utils import checkpoint


def shadowed(checkpoint, x):
    return checkpoint(x)


def called(block, x):
    return checkpoint(block, x)


def imported_inside(block, x):
    import torch.utils.checkpoint as cp
    return cp(block, x)


def function_call(block, x):
    return checkpoint.checkpoint(block, x, use_reentrant=False)


rerun = lambda checkpoint, x: checkpoint(x)
direct = lambda block, x: torch.utils.checkpoint(block, x)


class Net(torch.nn.Module):
    def forward(self, x):
        def inner(checkpoint):
            return checkpoint(x)
        return inner(self.block) + torch.utils.checkpoint(self.block, x)


def train(model, loader, optimizer):
    for x in loader:
        model(x).sum().backward()
        optimizer.step()
    while True:
        loss = model(x).mean()
        loss.backward()
        break
    model(x).sum().backward()


def finetune(model_name, data):
    from transformers import AutoModelForCausalLM, Trainer
    model = AutoModelForCausalLM.from_pretrained(model_name, attn_implementation="eager")
    probe = AutoModelForCausalLM.from_pretrained(model_name, attn_implementation="eager", output_attentions=True)
    kwargs = {"attn_implementation": 'eager', "torch_dtype": "auto"}
    other = {"attn_implementation": "sdpa"}
    model.config._attn_implementation = "eager"
    model.config.attn_implementation = other["attn_implementation"]
    Trainer(model=model, train_dataset=data).train()
'''


@pytest.mark.slow
def test_tml602_604_605_answer_from_the_shared_analysis_in_each_scope(tmp_path):
    """TML604: a name resolved where the call is (a parameter, a lambda's or an inner
    function's, shadowing the import is not the module; an import inside a function is);
    TML605: `.backward()` in a loop of a file with no mixed precision, once each; TML602: the
    keyword, the dict item and the config attribute, not a call that asks for the weights or
    another implementation."""
    path = tmp_path / "scopes.py"
    path.write_text(SCOPED_FORMS)
    result = run_cli("--isolated", "--no-cache", "--select", "TML602,TML604,TML605",
                     "--output-format", "json", str(path))
    found = [(f["code"], f["location"]["row"]) for f in json.loads(result.stdout)]
    assert found == [
        ("TML604", 10), ("TML604", 15), ("TML604", 23), ("TML604", 30),
        ("TML605", 35), ("TML605", 39),
        ("TML602", 46), ("TML602", 48), ("TML602", 50),
    ], result.stderr
