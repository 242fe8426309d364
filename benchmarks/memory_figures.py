"""Reproduce the memory figures that torchmemlint's rule docs quote.

    python benchmarks/memory_figures.py            # full shapes, writes results JSON
    python benchmarks/memory_figures.py --quick    # small shapes, prints only

Every figure is measured with torchmemlint.dynamic's LiveTracker: exact
CPU-dispatch bytes (``round_to=1``) unless a row says "512-rounded",
mostly under FakeTensorMode (nothing allocated).  Sections follow
shared/memory-facts.md: (a) in-place activations, (b) stateless modules vs
functional, (c) stem max-pool removal in a ResNet-UNet, (d) checkpoint
placement, (e) checkpoint correctness, (f) training-loop leaks, plus the
CUDA caching-allocator model (g, a model, not a GPU measurement).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, List

import torch
import torch.nn.functional as F
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchmemlint.dynamic.measure import measure_training_step  # noqa: E402
from torchmemlint.dynamic.numerics import compare_numerics  # noqa: E402
from torchmemlint.dynamic.placements import checkpoint_placements  # noqa: E402
from torchmemlint.dynamic.target import load_module  # noqa: E402
from torchmemlint.dynamic.tracker import LiveTracker  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "memory_figures.json"
GIB = 2**30


def fixture(stem: str) -> Any:
    return load_module("%s:_" % (ROOT / "fixtures" / "models" / (stem + ".py")))


resnets = fixture("resnet_unet")
activation_nets = fixture("activations")
checkpoint_nets = fixture("checkpointing")
loop_nets = fixture("loops")
attention_nets = fixture("attention")
lm_nets = fixture("transformer_lm")


def pct(new: int, old: int) -> float:
    return round(100.0 * (new - old) / old, 2) if old else 0.0


def with_activation(depth: int, make_act: Callable[[], nn.Module]) -> Callable[[], nn.Module]:
    """A resnet factory with every ReLU module replaced by ``make_act()``."""

    def build() -> nn.Module:
        model = resnets.resnet(depth)
        for parent in list(model.modules()):
            for name, child in parent.named_children():
                if isinstance(child, nn.ReLU):
                    setattr(parent, name, make_act())
        return model

    return build


# -- (a) in-place activations ---------------------------------------------------

ACTIVATIONS = {
    "ReLU": (lambda: nn.ReLU(), lambda: nn.ReLU(inplace=True)),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.01), lambda: nn.LeakyReLU(0.01, inplace=True)),
    "ELU": (lambda: nn.ELU(), lambda: nn.ELU(inplace=True)),
    "SiLU": (lambda: nn.SiLU(), lambda: nn.SiLU(inplace=True)),
}


def section_inplace(quick: bool) -> List[Dict[str, Any]]:
    shape = (2, 3, 112, 112) if quick else (8, 3, 224, 224)
    rows = []
    for depth in (18, 50):
        for act, (out_of_place, inplace) in ACTIVATIONS.items():
            a = measure_training_step(with_activation(depth, out_of_place), shape, round_to=1)
            b = measure_training_step(with_activation(depth, inplace), shape, round_to=1)
            rows.append({
                "model": "resnet%d" % depth, "shape": list(shape), "activation": act,
                "peak_out_of_place": a.peak_bytes, "peak_inplace": b.peak_bytes,
                "peak_change_pct": pct(b.peak_bytes, a.peak_bytes),
                "saved_out_of_place": a.saved_bytes, "saved_inplace": b.saved_bytes,
                "saved_change_bytes": b.saved_bytes - a.saved_bytes,
                "forward_peak_change_bytes": b.forward_peak_bytes - a.forward_peak_bytes,
            })
    return rows


# -- (b) stateless modules vs functional ----------------------------------------

def section_stateless(quick: bool) -> Dict[str, Any]:
    shape = (1, 3, 128, 176) if quick else (1, 3, 512, 704)
    modules = measure_training_step(activation_nets.StatelessModulesNet, shape, round_to=1)
    functional = measure_training_step(activation_nets.FunctionalNet, shape, round_to=1)
    torch.manual_seed(0)
    small = torch.randn(1, 3, 64, 64)
    numerics = compare_numerics(
        activation_nets.StatelessModulesNet(), activation_nets.FunctionalNet(), small
    )
    return {
        "shape": list(shape),
        "peak_modules": modules.peak_bytes, "peak_functional": functional.peak_bytes,
        "saved_modules": modules.saved_bytes, "saved_functional": functional.saved_bytes,
        "peak_difference_bytes": modules.peak_bytes - functional.peak_bytes,
        "bitwise_equal_numerics": numerics.equal,
    }


# -- (c) stem max-pool removal ----------------------------------------------------

def section_stem_pool(quick: bool) -> Dict[str, Any]:
    small_shape = (2, 3, 64, 64) if quick else (4, 3, 128, 128)
    pooled = measure_training_step(lambda: resnets.unet_resnet34(pool=True), small_shape, round_to=1)
    unpooled = measure_training_step(lambda: resnets.unet_resnet34(pool=False), small_shape, round_to=1)
    result: Dict[str, Any] = {
        "resnet34_small": {
            "shape": list(small_shape),
            "saved_pool": pooled.saved_bytes, "saved_no_pool": unpooled.saved_bytes,
            "saved_ratio": round(unpooled.saved_bytes / pooled.saved_bytes, 3),
            "peak_pool": pooled.peak_bytes, "peak_no_pool": unpooled.peak_bytes,
            "peak_ratio": round(unpooled.peak_bytes / pooled.peak_bytes, 3),
            "layer3_first_conv_output_ratio": dict(unpooled.modules)["encoder.layer3.0.conv1"]
            / dict(pooled.modules)["encoder.layer3.0.conv1"],
        },
        "batch64_gib_512_rounded_with_adam": [],
    }
    big_shape = (8, 3, 128, 128) if quick else (64, 3, 128, 128)
    for depth in (34, 101, 152):
        row: Dict[str, Any] = {"encoder": "resnet%d" % depth, "shape": list(big_shape)}
        for pool in (True, False):
            report = measure_training_step(lambda: resnets.unet_resnet(depth, pool), big_shape)
            key = "pool" if pool else "no_pool"
            row["total_gib_" + key] = round(report.total_bytes(optimizer_slots=2) / GIB, 2)
            row["step_peak_gib_" + key] = round(report.peak_bytes / GIB, 2)
            row["saved_" + key] = report.saved_bytes
            row["seconds_" + key] = round(report.seconds, 2)
        row["param_bytes"] = report.param_bytes
        row["saved_ratio"] = round(row["saved_no_pool"] / row["saved_pool"], 3)
        result["batch64_gib_512_rounded_with_adam"].append(row)
    return result


# -- (d) checkpoint placement ------------------------------------------------------

PLACEMENTS = {
    "single conv (stem conv1)": ["conv1"],
    "layer3+layer4": ["layer3", "layer4"],
    "layer1": ["layer1"],
    "every block": ["layer1.*", "layer2.*", "layer3.*", "layer4.*"],
}


def every_conv_paths() -> List[str]:
    """The seed-004 pattern: each Conv2d of resnet18 wrapped on its own."""
    return [name for name, module in resnets.resnet18().named_modules() if isinstance(module, nn.Conv2d)]


def section_checkpoint_placement(quick: bool) -> List[Dict[str, Any]]:
    shape = (8, 3, 112, 112) if quick else (64, 3, 224, 224)
    rows = []
    for reentrant in (False, True):
        results = checkpoint_placements(
            resnets.resnet18,
            shape,
            {**PLACEMENTS, "every conv": every_conv_paths()},
            round_to=1,
            use_reentrant=reentrant,
        )
        for result in results:
            rows.append({
                "shape": list(shape), "use_reentrant": reentrant, "placement": result.name,
                "peak_bytes": result.peak_bytes, "peak_change_pct": round(100 * result.peak_change, 2),
                "kept_after_forward": result.kept_after_forward,
                "flops_ratio": round(result.flops_ratio, 3), "grad_bytes": result.grad_bytes,
            })
    return rows


# -- (e) checkpoint correctness ---------------------------------------------------

def section_checkpoint_correctness() -> Dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(8, 3, 16, 16) + 1.0  # non-zero mean so running_mean moves
    out: Dict[str, Any] = {}
    for label, reentrant in (("non_reentrant", False), ("reentrant", True)):
        torch.manual_seed(0)
        plain = checkpoint_nets.BatchNormInCheckpoint(use_checkpoint=False)
        wrapped = checkpoint_nets.BatchNormInCheckpoint(use_checkpoint=True, use_reentrant=reentrant)
        report = compare_numerics(plain, wrapped, x)
        bn_plain, bn_wrapped = plain.segment[1], wrapped.segment[1]
        mean_factor = float((bn_wrapped.running_mean / bn_plain.running_mean).mean())
        out["batchnorm_" + label] = {
            "num_batches_tracked": [int(bn_plain.num_batches_tracked), int(bn_wrapped.num_batches_tracked)],
            "running_mean_factor": round(mean_factor, 4),
            "param_grads_equal": not report.differing_params and not report.missing_params,
        }
    torch.manual_seed(0)
    inputs = torch.randn(16, 32)
    kept = compare_numerics(
        checkpoint_nets.DropoutInCheckpoint(use_checkpoint=False),
        checkpoint_nets.DropoutInCheckpoint(preserve_rng_state=True), inputs,
    )
    lost = compare_numerics(
        checkpoint_nets.DropoutInCheckpoint(use_checkpoint=False),
        checkpoint_nets.DropoutInCheckpoint(preserve_rng_state=False), inputs,
    )
    grad_diffs = [d for d in lost.param_grad_diffs.values() if d is not None]
    out["dropout_preserve_rng_state"] = {
        "true_bitwise_equal": kept.equal,
        "false_output_diff": lost.output_diff,
        "false_max_abs_param_grad_diff": max(grad_diffs) if grad_diffs else None,
        "false_differing_params": lost.differing_params,
    }
    return out


# -- (f) training-loop leaks ---------------------------------------------------------

def _loop(pattern: str, iterations: int, shape: tuple) -> Dict[str, Any]:
    """Run one loop pattern as user code would, tracking live bytes across iterations."""
    torch.manual_seed(0)
    store = {"feats_attr": "attr", "feats_list": "list", "feats_list_detached": "list_detached"}
    model = loop_nets.FeatureStoringNet(store[pattern]) if pattern in store else loop_nets.LoopNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batches = [(torch.randn(shape), torch.randint(0, 10, (shape[0],))) for _ in range(iterations)]
    peaks, live_after = [], []
    total: Any = 0.0
    evaluating = pattern.startswith("eval")
    model.train(not evaluating)
    with LiveTracker() as tracker:
        for x, y in batches:
            tracker.reset_peak()
            if pattern == "eval_no_grad":
                with torch.no_grad():
                    loss = F.cross_entropy(model(x), y)
                total += loss.item()
            elif evaluating:
                loss = F.cross_entropy(model(x), y)
                if pattern == "eval_total_loss":
                    total += loss
                else:
                    total += loss.item()
            else:
                optimizer.zero_grad(set_to_none=True)
                loss = F.cross_entropy(model(x), y)
                loss.backward(retain_graph=pattern == "train_retain_graph")
                optimizer.step()
                if pattern == "train_total_loss":
                    total += loss
                else:
                    total += loss.item()
            peaks.append(tracker.peak.bytes)
            live_after.append(tracker.live_bytes)
    return {
        "live_between_iterations": live_after,
        "growth_per_iteration": live_after[-1] - live_after[-2],
        "peak_last_iteration": peaks[-1],
    }


LOOP_PATTERNS = (
    "train_item", "train_total_loss", "train_retain_graph",
    "feats_attr", "feats_list", "feats_list_detached",
    "eval_no_grad", "eval_item", "eval_total_loss",
)


def section_loops(quick: bool) -> Dict[str, Any]:
    shape = (4, 3, 16, 16) if quick else (16, 3, 32, 32)
    rows = {pattern: _loop(pattern, 6, shape) for pattern in LOOP_PATTERNS}
    base_train = rows["train_item"]["peak_last_iteration"]
    base_eval = rows["eval_no_grad"]["peak_last_iteration"]
    return {
        "shape": list(shape),
        "one_activation_bytes": shape[0] * 32 * shape[2] * shape[3] * 4,
        "patterns": rows,
        "eval_without_no_grad_peak_ratio": round(rows["eval_item"]["peak_last_iteration"] / base_eval, 3),
        "eval_total_loss_growth_per_iteration": rows["eval_total_loss"]["growth_per_iteration"],
        "retain_graph_peak_change_pct": pct(rows["train_retain_graph"]["peak_last_iteration"], base_train),
        "feats_list_growth_per_iteration": rows["feats_list"]["growth_per_iteration"],
        "feats_list_detached_growth_per_iteration": rows["feats_list_detached"]["growth_per_iteration"],
        "train_total_loss_growth_per_iteration": rows["train_total_loss"]["growth_per_iteration"],
    }


# -- (g) allocator model --------------------------------------------------------------

def section_allocator_model(quick: bool) -> List[Dict[str, Any]]:
    cases = [("resnet18", resnets.resnet18, (8, 3, 128, 128)),
             ("unet_resnet34", resnets.unet_resnet34, (4, 3, 128, 128))]
    if not quick:
        cases += [("resnet18", resnets.resnet18, (64, 3, 224, 224)),
                  ("resnet50", resnets.resnet50, (32, 3, 224, 224)),
                  ("unet_resnet34", resnets.unet_resnet34, (64, 3, 128, 128))]
    rows = []
    for name, factory, shape in cases:
        exact = measure_training_step(factory, shape, round_to=1)
        rounded = measure_training_step(factory, shape, round_to=512)
        model = rounded.simulate_allocator()
        rows.append({
            "model": name, "shape": list(shape), "exact_peak": exact.peak_bytes,
            "rounded_peak_change_pct": pct(rounded.peak_bytes, exact.peak_bytes),
            "modelled_max_allocated": model.max_allocated,
            "modelled_allocated_change_pct": pct(model.max_allocated, exact.peak_bytes),
            "modelled_max_reserved": model.max_reserved,
            "modelled_reserved_change_pct": pct(model.max_reserved, exact.peak_bytes),
        })
    return rows


# -- (h) attention models: eager attention vs SDPA (TML601) -----------------------------------

ATTENTION_FIXTURE = ROOT / "fixtures" / "models" / "attention.py"


def _forced_math() -> Any:
    """While active, the emulation runs every SDPA call on CUDA's math backend (as
    ``torch.backends.cuda.sdp_kernel(enable_math=True)`` alone would)."""
    import contextlib

    from torchmemlint.dynamic import emulate

    @contextlib.contextmanager
    def forced():  # type: ignore[no-untyped-def]
        original = emulate.choose_attention_kernel
        emulate.choose_attention_kernel = lambda *args, **kwargs: emulate.MATH
        try:
            yield
        finally:
            emulate.choose_attention_kernel = original

    return forced()


def tml601_fixed_source(path: Path) -> str:
    """The fixture's text with TML601's (unsafe) fix applied, as `--fix --unsafe-fixes` would."""
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source
    from torchmemlint.fixer import apply_edits

    text = path.read_text()
    findings = [f for f in lint_source(text, str(path), Settings(select=("TML601",))) if f.fix is not None]
    if len(findings) != 1:
        raise SystemExit("expected one TML601 fix in %s, got %d" % (path, len(findings)))
    return apply_edits(text, findings[0].fix.edits)


def section_attention(quick: bool) -> Dict[str, Any]:
    """Fake tensors, CUDA kernels emulated (CPU estimate of CUDA), 512-rounded as `profile`."""
    from torchmemlint.dynamic.source import measure_source_variant

    width, layers, heads = (128, 2, 4) if quick else (768, 12, 12)
    shape = (2, 128, "int64") if quick else (4, 512, "int64")
    init = {"width": width, "layers": layers, "heads": heads, "feedforward": 4 * width}
    eager_lm = lambda: attention_nets.EagerLM(**init)  # noqa: E731
    spec = "%s:EagerLM" % ATTENTION_FIXTURE
    eager = measure_training_step(eager_lm, shape)
    fixed = measure_source_variant(spec, tml601_fixed_source(ATTENTION_FIXTURE), init, shape)
    encoder_lm = lambda: lm_nets.TransformerLM(**init)  # noqa: E731
    default = measure_training_step(encoder_lm, shape)
    with _forced_math():
        math_forced = measure_training_step(encoder_lm, shape)
    h200 = {"math": 3.22e9, "default": 1.78e9}  # issue 14, nn.TransformerEncoder LM on an H200
    result = {
        "what": "CPU estimate of CUDA (fake tensors, CUDA attention/dropout kernels emulated, 512-rounded)",
        "model": "fixtures/models/attention.py EagerLM(%s)" % init, "shape": list(shape),
        "eager_peak": eager.peak_bytes, "sdpa_fix_peak": fixed.peak_bytes,
        "fix_change_pct": pct(fixed.peak_bytes, eager.peak_bytes),
        "eager_kernels": eager.emulated, "sdpa_fix_kernels": fixed.emulated,
        "math_forced_kernels": math_forced.emulated,
        "transformer_lm_default_peak": default.peak_bytes,
        "transformer_lm_math_forced_peak": math_forced.peak_bytes,
    }
    if not quick:
        result["h200_issue14"] = h200
        result["eager_over_h200_math_pct"] = round(100.0 * (eager.peak_bytes / h200["math"] - 1), 1)
        result["math_forced_over_h200_math_pct"] = round(100.0 * (math_forced.peak_bytes / h200["math"] - 1), 1)
        result["fix_over_h200_default_pct"] = round(100.0 * (fixed.peak_bytes / h200["default"] - 1), 1)
    return result


def section_attn_implementation(quick: bool) -> Dict[str, Any]:
    """transformers models built with attn_implementation="eager" vs "sdpa" (TML602); needs
    transformers importable (e.g. PYTHONPATH=<dir with transformers>), else recorded as skipped."""
    try:
        import transformers
    except ImportError as exc:
        return {"skipped": "transformers is not installed: %s" % exc}
    shape = (2, 128, "int64") if quick else (4, 512, "int64")
    small = {"n_layer": 2, "n_embd": 128, "n_head": 4} if quick else {}
    bert_small = {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 4,
                  "intermediate_size": 512} if quick else {}
    builders = {
        "GPT2LMHeadModel": lambda impl: transformers.GPT2LMHeadModel(
            transformers.GPT2Config(attn_implementation=impl, **small)),
        "BertForMaskedLM": lambda impl: transformers.BertForMaskedLM(
            transformers.BertConfig(attn_implementation=impl, **bert_small)),
    }
    rows = []
    for name, build in builders.items():
        peaks = {}
        for impl in ("eager", "sdpa"):
            report = measure_training_step(lambda: build(impl), shape)
            peaks[impl] = (report.peak_bytes, report.emulated)
        rows.append({
            "model": name, "shape": list(shape), "eager_peak": peaks["eager"][0],
            "sdpa_peak": peaks["sdpa"][0], "change_pct": pct(peaks["sdpa"][0], peaks["eager"][0]),
            "eager_kernels": peaks["eager"][1], "sdpa_kernels": peaks["sdpa"][1],
        })
    return {"what": "CPU estimate of CUDA (fake tensors, CUDA attention/dropout kernels emulated, 512-rounded)",
            "transformers": transformers.__version__, "rows": rows}


def section_checkpoint_rng(quick: bool) -> Dict[str, Any]:
    """Real CPU: gradients of a Linear-Dropout-Linear segment run plainly, through torch's
    checkpoint and through the hand-written CheckpointFunction (TML603), same seed."""
    nets = fixture("recompute")
    shape = (64, 256)
    result: Dict[str, Any] = {"shape": list(shape)}
    for p in (0.5, 0.0):
        grads = {}
        for mode in ("plain", "torch", "handwritten"):
            torch.manual_seed(0)
            model = nets.DropoutSegment(256, p, mode)
            x = torch.randn(*shape, requires_grad=True)
            torch.manual_seed(1)
            model(x).square().mean().backward()
            grads[mode] = [t.grad.clone() for t in list(model.parameters()) + [x]]

        def max_diff(mode: str) -> float:
            return max((a - b).abs().max().item() for a, b in zip(grads[mode], grads["plain"]))

        result["p=%s" % p] = {
            "torch_checkpoint_max_grad_diff": max_diff("torch"),
            "handwritten_max_grad_diff": round(max_diff("handwritten"), 6),
        }
    return result


class Autocast(nn.Module):
    """Runs ``model`` under ``torch.autocast(device, bfloat16)``, as a training step would."""

    def __init__(self, model: nn.Module, device: str = "cpu") -> None:
        super().__init__()
        self.model = model
        self.device = device

    def forward(self, *args: Any) -> Any:
        with torch.autocast(self.device, dtype=torch.bfloat16):
            return self.model(*args)


def section_autocast(quick: bool) -> Dict[str, Any]:
    """fp32 vs bf16 autocast (TML605), fake tensors on the cpu device with CUDA's attention and
    dropout kernels emulated; autocast is the CPU's (its op lists: matmul, linear, conv, SDPA
    ... in bf16, as CUDA's), parameters and optimizer stay fp32."""
    width, layers, heads = (128, 2, 4) if quick else (768, 12, 12)
    shape = (2, 128, "int64") if quick else (4, 512, "int64")
    init = {"width": width, "layers": layers, "heads": heads, "feedforward": 4 * width}
    rows = []
    for name, build in (("TransformerLM", lambda: lm_nets.TransformerLM(**init)),
                        ("EagerLM", lambda: attention_nets.EagerLM(**init))):
        fp32 = measure_training_step(build, shape)
        bf16 = measure_training_step(lambda: Autocast(build()), shape)
        rows.append({
            "model": "%s(%s)" % (name, init), "shape": list(shape),
            "fp32_peak": fp32.peak_bytes, "autocast_bf16_peak": bf16.peak_bytes,
            "change_pct": pct(bf16.peak_bytes, fp32.peak_bytes),
            "fp32_kept_after_forward": fp32.kept_after_forward,
            "autocast_kept_after_forward": bf16.kept_after_forward,
            "kept_change_pct": pct(bf16.kept_after_forward, fp32.kept_after_forward),
            "autocast_kernels": bf16.emulated,
        })
    return {"what": "CPU estimate of CUDA (fake tensors, CUDA attention/dropout kernels emulated, CPU autocast)",
            "rows": rows}


def section_profile_tml602(quick: bool) -> Dict[str, Any]:
    """`torchmemlint profile` on fixtures/models/hf_eager.py:small_gpt2 (needs transformers):
    TML602's fix measured (CPU estimate of CUDA) and numerics-checked (real CPU step)."""
    try:
        import transformers
    except ImportError as exc:
        return {"skipped": "transformers is not installed: %s" % exc}
    from torchmemlint.config import Settings
    from torchmemlint.dynamic.verify import run_profile

    spec = "%s:small_gpt2" % (ROOT / "fixtures" / "models" / "hf_eager.py")
    shape = [4, 256, "int64"]
    result = run_profile(spec, [shape], settings=Settings(select=("TML602",)), device="cpu")
    return {"target": "fixtures/models/hf_eager.py:small_gpt2", "shape": shape,
            "transformers": transformers.__version__,
            "findings": [verdict.to_dict() for verdict in result.findings]}


# -- driver -------------------------------------------------------------------------------

SECTIONS = {
    "a_inplace_activations": section_inplace,
    "b_stateless_vs_functional": section_stateless,
    "c_stem_pool": section_stem_pool,
    "d_checkpoint_placement": section_checkpoint_placement,
    "e_checkpoint_correctness": lambda quick: section_checkpoint_correctness(),
    "f_training_loop_leaks": section_loops,
    "g_allocator_model": section_allocator_model,
    "h_attention": section_attention,
    "i_attn_implementation": section_attn_implementation,
    "j_checkpoint_rng": section_checkpoint_rng,
    "k_autocast": section_autocast,
    "l_profile_tml602": section_profile_tml602,
}


def print_table(results: Dict[str, Any]) -> None:
    a = results["a_inplace_activations"]
    print("\n(a) in-place activations, training peak (exact bytes)")
    for row in a:
        print("  %-9s %-9s %14d -> %14d  %+7.2f %%   saved %+d B" % (
            row["model"], row["activation"], row["peak_out_of_place"], row["peak_inplace"],
            row["peak_change_pct"], row["saved_change_bytes"]))
    b = results["b_stateless_vs_functional"]
    print("\n(b) stateless modules vs functional %s: peak %d vs %d (diff %d B), numerics equal: %s" % (
        b["shape"], b["peak_modules"], b["peak_functional"], b["peak_difference_bytes"],
        b["bitwise_equal_numerics"]))
    c = results["c_stem_pool"]
    small = c["resnet34_small"]
    print("\n(c) UNet-resnet34 %s without stem pool: saved %d -> %d (x%.2f), peak %d -> %d (x%.2f)" % (
        small["shape"], small["saved_pool"], small["saved_no_pool"], small["saved_ratio"],
        small["peak_pool"], small["peak_no_pool"], small["peak_ratio"]))
    for row in c["batch64_gib_512_rounded_with_adam"]:
        print("    %-9s %s  %.2f GiB -> %.2f GiB (params+Adam+step peak; saved x%.2f; %.1f s / %.1f s)" % (
            row["encoder"], row["shape"], row["total_gib_pool"], row["total_gib_no_pool"],
            row["saved_ratio"], row["seconds_pool"], row["seconds_no_pool"]))
    print("\n(d) resnet18 checkpoint placement: peak change, FLOPs ratio")
    for row in results["d_checkpoint_placement"]:
        print("  reentrant=%-5s %-26s %+7.2f %%  x%.3f FLOPs  kept %d  grads %d" % (
            row["use_reentrant"], row["placement"], row["peak_change_pct"], row["flops_ratio"],
            row["kept_after_forward"], row["grad_bytes"]))
    print("\n(e) checkpoint correctness:", json.dumps(results["e_checkpoint_correctness"]))
    f = results["f_training_loop_leaks"]
    print("\n(f) loop leaks %s: eval w/o no_grad peak x%.3f; eval total+=loss +%d B/iter; "
          "retain_graph peak %+.1f %%; feats.append +%d B/iter (detached +%d); train total+=loss +%d B/iter" % (
              f["shape"], f["eval_without_no_grad_peak_ratio"], f["eval_total_loss_growth_per_iteration"],
              f["retain_graph_peak_change_pct"], f["feats_list_growth_per_iteration"],
              f["feats_list_detached_growth_per_iteration"], f["train_total_loss_growth_per_iteration"]))
    print("\n(g) CUDA caching-allocator MODEL (not a GPU measurement)")
    for row in results["g_allocator_model"]:
        print("  %-14s %-18s exact %14d  rounded %+.2f %%  allocated %+.2f %%  reserved %+.2f %%" % (
            row["model"], row["shape"], row["exact_peak"], row["rounded_peak_change_pct"],
            row["modelled_allocated_change_pct"], row["modelled_reserved_change_pct"]))
    print("\nseconds per section:", results["seconds"])


def print_attention(h: Dict[str, Any]) -> None:
    print("\n(h) attention %s %s (%s)" % (h["model"], h["shape"], h["what"]))
    print("  eager %d B -> SDPA fix %d B (%+.1f %%); nn.TransformerEncoder LM: default %d B, math forced %d B" % (
        h["eager_peak"], h["sdpa_fix_peak"], h["fix_change_pct"], h["transformer_lm_default_peak"],
        h["transformer_lm_math_forced_peak"]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes; no JSON unless --out")
    parser.add_argument("--only", choices=sorted(SECTIONS), action="append",
                        help="run only these sections; the others are kept from the results file")
    parser.add_argument("--out", type=Path, help="where to write the JSON (default: results file, full runs only)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", message=".*use_reentrant.*")
    warnings.filterwarnings("ignore", message=".*requires_grad=True.*")

    results: Dict[str, Any] = {
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": "%s, %s, %d CPUs, %d torch threads, Python %s" % (
            platform.platform(), platform.machine(), os.cpu_count() or 0,
            torch.get_num_threads(), platform.python_version()),
        "quick": args.quick,
        "seconds": {},
    }
    if args.only:
        previous = json.loads(RESULTS.read_text()) if RESULTS.exists() and not args.quick else {}
        kept = {key: value for key, value in previous.items() if key in SECTIONS and key not in args.only}
        results.update(kept)
        results["seconds"] = {k: v for k, v in previous.get("seconds", {}).items() if k in kept}
        results["dates"] = dict(previous.get("dates", {}))
        for name in kept:  # sections of a full run carry that run's date
            results["dates"].setdefault(name, previous.get("date"))
    for name, section in SECTIONS.items():
        if args.only and name not in args.only:
            continue
        results.setdefault("dates", {})[name] = results["date"]
        started = time.perf_counter()
        results[name] = section(args.quick)
        results["seconds"][name] = round(time.perf_counter() - started, 1)
        print("done %s in %.1f s" % (name, results["seconds"][name]), flush=True)
    if all(name in results for name in SECTIONS if name < "h"):
        print_table(results)
    if "h_attention" in results:
        print_attention(results["h_attention"])
    for row in results.get("k_autocast", {}).get("rows", []):
        print("  (k) %s %s fp32 %d B -> autocast bf16 %d B (%+.1f %%), kept after forward %+.1f %%" % (
            row["model"], row["shape"], row["fp32_peak"], row["autocast_bf16_peak"], row["change_pct"],
            row["kept_change_pct"]))
    if "j_checkpoint_rng" in results:
        print("  (j) checkpoint RNG:", json.dumps(results["j_checkpoint_rng"]))
    for row in results.get("i_attn_implementation", {}).get("rows", []):
        print("  (i) %-16s %s eager %d B -> sdpa %d B (%+.1f %%)" % (
            row["model"], row["shape"], row["eager_peak"], row["sdpa_peak"], row["change_pct"]))
    out = args.out or (None if args.quick else RESULTS)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=1) + "\n")
        print("wrote", out)


if __name__ == "__main__":
    main()
