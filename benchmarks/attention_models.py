"""Attention models in dynamic mode, on the CPU: CUDA-kernel estimate, CPU-kernel estimate, real CPU step.

    python benchmarks/attention_models.py            # writes results/attention_models.json
    python benchmarks/attention_models.py --quick    # smaller inputs, prints only

For each model (issue 11): the fake-tensor estimate with CUDA's attention and dropout kernels
emulated (`profile`'s default, `--estimate-for cuda`), the fake-tensor estimate with the CPU's
own kernels (`--estimate-for cpu`), and, at the batch in the "real" column, a real CPU step
measured by the same tracker on real tensors (`--real-tensors`), against which the CPU-kernel
estimate is compared (target: within 3 %).  The "built" column says how the model was built:
"fake" (under fake tensors) or "real, then fake copies" (the constructor cannot run on fake
tensors, e.g. timm's `.item()` on drop-path rates).

Models: the 12-layer TransformerLM of fixtures/models/transformer_lm.py (fp32 and bf16), and
when installed, transformers' BertForMaskedLM, GPT2LMHeadModel and ViTForImageClassification
from their default configs (SDPA attention, no weights) and timm's vit_small_patch16_224 and
convnext_tiny (pretrained=False).  A model whose package is missing is skipped with the
reason.  timm needs torchvision; where only a torchvision built for another torch is at hand,
two op schemas are declared so that it imports (see _torchvision_importable; these models run
no torchvision op).  transformers and timm are never needed by the tests.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "attention_models.json"
TOLERANCE = 0.03


def _fixture_lm() -> Any:
    from torchmemlint.dynamic.target import load_module

    return load_module("%s:_" % (ROOT / "fixtures" / "models" / "transformer_lm.py")).TransformerLM()


def _transformers(kind: str) -> Callable[[], Any]:
    def build() -> Any:
        _torchvision_importable()  # transformers imports torchvision when it is installed
        import transformers

        if kind == "bert":
            return transformers.BertForMaskedLM(transformers.BertConfig(attn_implementation="sdpa"))
        if kind == "gpt2":
            return transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="sdpa"))
        return transformers.ViTForImageClassification(transformers.ViTConfig(attn_implementation="sdpa"))

    return build


def _torchvision_importable() -> None:
    """timm imports torchvision; a torchvision wheel built for another torch cannot load
    its C++ ops, and its import then fails registering fake kernels for two of them.
    Declaring those two schemas (no kernel) lets it import; nothing here runs them."""
    import importlib.util

    import torch

    if importlib.util.find_spec("torchvision") is None or "torchvision" in sys.modules:
        return
    for op in ("nms", "qnms"):
        try:
            torch.library.define("torchvision::" + op, "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        except RuntimeError:  # already defined: torchvision's own ops loaded
            pass


def _timm(name: str) -> Callable[[], Any]:
    def build() -> Any:
        _torchvision_importable()
        import timm

        return timm.create_model(name, pretrained=False)

    return build


# name -> (builder, estimate shape, real-CPU shape, quick shape, dtype)
MODELS: Dict[str, Tuple[Callable[[], Any], List[Any], List[Any], List[Any], str]] = {
    "TransformerLM 12x768": (_fixture_lm, [4, 512, "int64"], [1, 128, "int64"], [1, 128, "int64"], "float32"),
    "TransformerLM 12x768 bf16": (_fixture_lm, [4, 512, "int64"], [1, 128, "int64"], [1, 128, "int64"], "bfloat16"),
    "BERT-base MLM": (_transformers("bert"), [8, 512, "int64"], [1, 128, "int64"], [1, 128, "int64"], "float32"),
    "GPT-2 small": (_transformers("gpt2"), [8, 1024, "int64"], [1, 128, "int64"], [1, 128, "int64"], "float32"),
    "ViT-B/16": (_transformers("vit"), [32, 3, 224, 224], [2, 3, 224, 224], [1, 3, 224, 224], "float32"),
    "timm vit_small_patch16_224": (_timm("vit_small_patch16_224"), [8, 3, 224, 224], [2, 3, 224, 224],
                                   [1, 3, 224, 224], "float32"),
    "timm convnext_tiny": (_timm("convnext_tiny"), [8, 3, 224, 224], [2, 3, 224, 224], [1, 3, 224, 224], "float32"),
}


def _versions(*names: str) -> Dict[str, str]:
    from importlib import metadata

    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def cast(model: Any, dtype: Any) -> Any:
    """As source.cast_floating (which needs libcst, not installed where this may run)."""
    from torch import nn

    for sub in model.modules():
        for name, param in list(sub._parameters.items()):
            if param is not None and param.is_floating_point() and param.dtype != dtype:
                sub._parameters[name] = nn.Parameter(param.detach().to(dtype), param.requires_grad)
        for name, buffer in list(sub._buffers.items()):
            if buffer is not None and buffer.is_floating_point() and buffer.dtype != dtype:
                sub._buffers[name] = buffer.to(dtype)
    return model


def measure(name: str, quick: bool) -> Dict[str, Any]:
    import torch

    from torchmemlint.dynamic.measure import measure_training_step

    build, shape, real_shape, quick_shape, dtype = MODELS[name]
    if quick:
        shape = real_shape = quick_shape
    resolved = getattr(torch, dtype)

    def factory() -> Any:
        return cast(build(), resolved)

    started = time.perf_counter()
    cuda = measure_training_step(factory, shape, dtype=dtype)
    cpu = measure_training_step(factory, shape, dtype=dtype, estimate_for="cpu")
    seconds = time.perf_counter() - started
    row: Dict[str, Any] = {
        "model": name, "dtype": dtype, "input_shape": shape,
        "estimate_cuda_kernels": cuda.peak_bytes, "emulated": cuda.emulated,
        "estimate_cpu_kernels": cpu.peak_bytes, "cpu_over_cuda": cpu.peak_bytes / cuda.peak_bytes,
        "built": "real, then fake copies" if cuda.built else "fake",
        "estimate_seconds": round(seconds, 2),
    }
    if dtype == "float32":  # a real step in bf16 on the CPU is slow and not what is checked
        small = measure_training_step(factory, real_shape, dtype=dtype, estimate_for="cpu")
        real = measure_training_step(factory, real_shape, dtype=dtype, device="cpu")
        row.update(real_shape=real_shape, estimate_cpu_kernels_at_real_shape=small.peak_bytes,
                   real_cpu_peak=real.peak_bytes, estimate_over_real=small.peak_bytes / real.peak_bytes)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs; print only")
    parser.add_argument("--only", metavar="NAME", help="one model (substring of its name)")
    args = parser.parse_args()
    import torch

    from torchmemlint.dynamic.errors import DynamicError

    rows, skipped = [], {}
    print("%-28s %-8s %-16s %14s %14s %8s %-22s %s" % (
        "model", "dtype", "input", "CUDA kernels", "CPU kernels", "ratio", "built", "CPU est. / real CPU"))
    for name in MODELS:
        if args.only and args.only not in name:
            continue
        try:
            row = measure(name, args.quick)
        except (ImportError, DynamicError) as exc:
            skipped[name] = "%s: %s" % (type(exc).__name__, exc)
            print("%-28s skipped: %s" % (name, skipped[name]))
            continue
        rows.append(row)
        check = ""
        if "estimate_over_real" in row:
            within = abs(row["estimate_over_real"] - 1) <= TOLERANCE
            check = "x%.4f at %s%s" % (
                row["estimate_over_real"], "x".join(map(str, row["real_shape"])), "" if within else " (outside 3 %)")
        print("%-28s %-8s %-16s %14d %14d %8s %-22s %s" % (
            name, row["dtype"], "x".join(map(str, row["input_shape"])), row["estimate_cuda_kernels"],
            row["estimate_cpu_kernels"], "x%.3f" % row["cpu_over_cuda"], row["built"], check), flush=True)
    if args.quick or args.only or not rows:
        return
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "device": "cpu (%s)" % (platform.processor() or platform.machine()),
        "python": platform.python_version(),
        "packages": _versions("transformers", "timm", "torchvision"),
        "rows": rows,
        "skipped": skipped,
    }, indent=2) + "\n")
    print("wrote %s" % RESULTS.relative_to(ROOT))


if __name__ == "__main__":
    main()
