"""Is the CPU estimate of `torchmemlint profile` what CUDA's allocator reports?

    python benchmarks/gpu_check.py                  # on a machine with CUDA: writes results JSON
    python benchmarks/gpu_check.py --quick          # smaller shapes, prints only
    python benchmarks/gpu_check.py --budget 8GiB    # will-it-fit: predicted vs a real card
    python benchmarks/gpu_check.py --budget 8GiB --optimizer sgd --quick
    python benchmarks/gpu_check.py --cudnn          # the conv nets with cuDNN on and off

For each model, in a fresh process (allocator state matters): one training step measured on
CUDA (`torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` and a warm-up step,
the tracker's own figure on CUDA, and `max_memory_reserved`), and the same step estimated on
the CPU under fake tensors (512-byte blocks): with CUDA's attention and dropout kernels
emulated (the default estimate), with the CPU's own kernels, and through the modelled caching
allocator.  Printed: estimate / allocated (target: within 2 % on conv nets, 3 % on the
attention models), estimate / tracker on CUDA, the CPU-kernel figure / allocated, and the
reserved figures.  Models: this project's fixtures (conv nets, the DCGAN discriminator, the
12-layer TransformerLM of issue 11 in fp32 and bf16), and, when the packages are installed,
transformers' BERT-base MLM, GPT-2 small and ViT-B/16 from their default configs (no weights,
SDPA attention, fp32 and bf16) and timm's vit_small_patch16_224 and convnext_tiny
(pretrained=False); a row whose package is missing is skipped with the message.  Results
JSON records torch and the device.  Run on an H200 (`benchmarks/gpu_run.sh`; results in
benchmarks/results/gpu_check.json, discussed in docs/dynamic.md, "Measured on a GPU").

`--budget SIZE` checks `profile --budget` instead, on the UNets of
fixtures/models/resnet_unet.py (resnet101/152 encoders, with and without the stem pool,
3x128x128 inputs; `--quick`: resnet34 encoders).  Predicted, on the CPU with fake tensors:
the verdict at batch 64 (16 with `--quick`) and the largest batch that fits (torchmemlint's
`check_budget` and `largest_batch`).  Real: a card of SIZE emulated with
`torch.cuda.set_per_process_memory_fraction(SIZE / total memory)`; each trial, in a fresh
process, builds the model and runs two training steps (forward, loss, backward,
optimizer.step: the second one with the optimizer state allocated) and either completes or
raises `torch.cuda.OutOfMemoryError`.  The search for the largest batch that trains starts
at the prediction, moves 1, 2, 4, ... batches away from it until the answer flips, then
bisects; at most MAX_TRIALS trials per model, so a far-off prediction can leave a bracket
instead of an exact figure.  Any other error ends that model's search and is recorded.
On an H200 the budget path has run for all rows but resnet152 without the stem pool.
`--only TEXT` runs the models whose name contains TEXT (their budget rows are merged into the
results' budget section).

Without CUDA the script says so and exits 0: there is nothing to compare against.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchmemlint.dynamic.budget import OPTIMIZERS, format_bytes, parse_size  # noqa: E402
from torchmemlint.dynamic.errors import DynamicError  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.json"
FIXTURES = ROOT / "fixtures" / "models"
TOLERANCE = 0.02

# name -> (how to build the model, full input shape, quick input shape, dtype).  A builder
# runs in the per-model process; one that needs a missing package raises ImportError and the
# row is skipped with that message.  Token inputs end with "int64".


def _fixture(stem: str) -> Any:
    from torchmemlint.dynamic.target import load_module

    return load_module("%s:_" % (FIXTURES / (stem + ".py")))


def _transformers_model(kind: str) -> Any:
    """Built from a default config, no weights, attention through SDPA."""
    import transformers

    if kind == "bert":
        return transformers.BertForMaskedLM(transformers.BertConfig(attn_implementation="sdpa"))
    if kind == "gpt2":
        return transformers.GPT2LMHeadModel(transformers.GPT2Config(attn_implementation="sdpa"))
    return transformers.ViTForImageClassification(transformers.ViTConfig(attn_implementation="sdpa"))


def _timm_model(name: str) -> Any:
    import timm

    return timm.create_model(name, pretrained=False)


MODELS: Dict[str, Tuple[Callable[[], Any], List[Any], List[Any], str]] = {
    "resnet50 classifier": (
        lambda: _fixture("resnet_unet").resnet50(), [32, 3, 224, 224], [4, 3, 128, 128], "float32",
    ),
    "UNet resnet34, stem pool": (
        lambda: _fixture("resnet_unet").unet_resnet34(pool=True), [16, 3, 256, 256], [4, 3, 128, 128], "float32",
    ),
    "UNet resnet34, no pool": (
        lambda: _fixture("resnet_unet").unet_resnet34(pool=False), [16, 3, 256, 256], [4, 3, 128, 128], "float32",
    ),
    "LeakyConvNet": (
        lambda: _fixture("leaky_convnet").LeakyConvNet(), [64, 3, 128, 128], [8, 3, 64, 64], "float32",
    ),
    "LoopNet (conv-bn-relu)": (lambda: _fixture("loops").LoopNet(), [64, 3, 128, 128], [8, 3, 64, 64], "float32"),
    "DCGAN discriminator": (lambda: _fixture("dcgan").Discriminator(), [64, 3, 64, 64], [4, 3, 64, 64], "float32"),
    # issue 11's attention models: the tracker on CUDA measured 2,033,464,320 / 1,246,245,888 B for the LM
    "TransformerLM 12x768": (
        lambda: _fixture("transformer_lm").TransformerLM(), [4, 512, "int64"], [2, 128, "int64"], "float32",
    ),
    "TransformerLM 12x768 bf16": (
        lambda: _fixture("transformer_lm").TransformerLM(), [4, 512, "int64"], [2, 128, "int64"], "bfloat16",
    ),
    "BERT-base MLM (transformers)": (
        lambda: _transformers_model("bert"), [8, 512, "int64"], [2, 128, "int64"], "float32",
    ),
    "BERT-base MLM bf16": (lambda: _transformers_model("bert"), [8, 512, "int64"], [2, 128, "int64"], "bfloat16"),
    "GPT-2 small (transformers)": (
        lambda: _transformers_model("gpt2"), [8, 1024, "int64"], [2, 128, "int64"], "float32",
    ),
    "GPT-2 small bf16": (lambda: _transformers_model("gpt2"), [8, 1024, "int64"], [2, 128, "int64"], "bfloat16"),
    "ViT-B/16 (transformers)": (
        lambda: _transformers_model("vit"), [32, 3, 224, 224], [2, 3, 224, 224], "float32",
    ),
    "ViT-B/16 bf16": (lambda: _transformers_model("vit"), [32, 3, 224, 224], [2, 3, 224, 224], "bfloat16"),
    "timm vit_small_patch16_224": (
        lambda: _timm_model("vit_small_patch16_224"), [8, 3, 224, 224], [2, 3, 224, 224], "float32",
    ),
    "timm convnext_tiny": (lambda: _timm_model("convnext_tiny"), [8, 3, 224, 224], [2, 3, 224, 224], "float32"),
}

# --budget: name -> (encoder depth, stem pool) of fixtures/models/resnet_unet.py's unet_resnet.
BUDGET_MODELS = {
    "UNet resnet%d, %s" % (depth, "stem pool" if pool else "no pool"): (depth, pool)
    for depth in (34, 101, 152) for pool in (True, False)
}
FULL_DEPTHS = (101, 152)
QUICK_DEPTHS = (34,)
IMAGE = [3, 128, 128]
VERDICT_BATCH = 64
QUICK_VERDICT_BATCH = 16
MAX_TRIALS = 12  # real trials per model, the verdict batch's included
ONLY: Optional[str] = None  # --only: the models whose name contains it
ROW_TIMEOUT = 120  # seconds for one model's process; a row that runs longer is recorded as skipped


def measure_one(name: str, quick: bool) -> Dict[str, Any]:
    """Runs in its own process: CUDA step, then the CPU estimates of the same step."""
    import torch

    from torchmemlint.dynamic.measure import measure_training_step
    from torchmemlint.dynamic.source import cast_floating

    build, full_shape, quick_shape, dtype = MODELS[name]
    shape = quick_shape if quick else full_shape

    def factory() -> torch.nn.Module:
        return cast_floating(build(), getattr(torch, dtype))

    torch.backends.cudnn.benchmark = False
    cuda = measure_training_step(factory, shape, dtype=dtype, device="cuda")
    estimate = measure_training_step(factory, shape, dtype=dtype, device="fake")
    cpu_kernels = measure_training_step(factory, shape, dtype=dtype, device="fake", estimate_for="cpu")
    modelled = estimate.simulate_allocator()
    assert cuda.cuda is not None
    return {
        "model": name,
        "input_shape": shape,
        "dtype": dtype,
        "cuda_max_allocated": cuda.cuda.max_allocated,
        "cuda_max_reserved": cuda.cuda.max_reserved,
        "cuda_tracker_peak": cuda.peak_bytes,
        "cuda_untracked": cuda.cuda.untracked,
        "cpu_estimate_peak": estimate.peak_bytes,
        "emulated": estimate.emulated,
        "estimate_over_allocated": estimate.peak_bytes / cuda.cuda.max_allocated,
        "estimate_over_tracker": estimate.peak_bytes / cuda.peak_bytes,
        "cpu_kernels_peak": cpu_kernels.peak_bytes,
        "cpu_kernels_over_allocated": cpu_kernels.peak_bytes / cuda.cuda.max_allocated,
        "modelled_allocated": modelled.max_allocated,
        "modelled_over_allocated": modelled.max_allocated / cuda.cuda.max_allocated,
        "modelled_reserved": modelled.max_reserved,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }


def compare_estimates(quick: bool) -> None:
    import torch

    rows, skipped = [], {}
    print("%-30s %-15s %-8s %12s %10s %10s %10s  %s" % (
        "model", "input", "dtype", "allocated", "estimate", "vs tracker", "CPU kernels", "reserved (modelled)"))
    for name in MODELS:
        if ONLY is not None and ONLY not in name:
            continue
        command = [sys.executable, __file__, "--one", name] + (["--quick"] if quick else [])
        try:
            completed = subprocess.run(command, capture_output=True, text=True, timeout=ROW_TIMEOUT)
        except subprocess.TimeoutExpired:
            skipped[name] = "over %d s" % ROW_TIMEOUT
            print("%-30s skipped: %s" % (name, skipped[name]))
            continue
        if completed.returncode != 0:
            last = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
            skipped[name] = last
            print("%-30s skipped: %s" % (name, last))
            continue
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        rows.append(row)
        within = abs(row["estimate_over_allocated"] - 1) <= TOLERANCE
        print(
            "%-30s %-15s %-8s %8.1f MiB %9s %10s %10s  %8.1f MiB (%.1f)"
            % (
                name, "x".join(map(str, row["input_shape"])), row["dtype"],
                row["cuda_max_allocated"] / 2**20,
                "x%.4f%s" % (row["estimate_over_allocated"], "" if within else "*"),
                "x%.4f" % row["estimate_over_tracker"], "x%.4f" % row["cpu_kernels_over_allocated"],
                row["cuda_max_reserved"] / 2**20, row["modelled_reserved"] / 2**20,
            ), flush=True,
        )
        if not quick:  # after each row: a run stopped part-way keeps the rows it measured
            write_results({
                "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                "torch": torch.__version__,
                "device": torch.cuda.get_device_name(),
                "tolerance": TOLERANCE,
                "rows": _merged(rows, "rows"),
                "skipped": skipped,
            }, quiet=True)
    print("estimate = CPU estimate (CUDA kernels emulated) / max_memory_allocated; * outside %d %%"
          % round(100 * TOLERANCE))
    if rows and not quick:
        print("wrote %s" % RESULTS)


CUDNN_MODELS = ("LoopNet (conv-bn-relu)", "DCGAN discriminator", "LeakyConvNet")


def cudnn_one(enabled: bool) -> List[Dict[str, Any]]:
    """Runs in its own process: the step on CUDA with cuDNN on or off, for CUDNN_MODELS."""
    import torch

    from torchmemlint.dynamic.measure import measure_training_step

    torch.backends.cudnn.enabled = enabled
    rows = []
    for name in CUDNN_MODELS:
        build, shape, _, _ = MODELS[name]
        step = measure_training_step(build, shape, device="cuda")
        assert step.cuda is not None
        rows.append({"model": name, "cudnn_enabled": enabled, "cuda_max_allocated": step.cuda.max_allocated,
                     "cuda_tracker_peak": step.peak_bytes, "cuda_untracked": step.cuda.untracked})
    return rows


def compare_cudnn() -> None:
    """Where does the gap between the estimate and max_memory_allocated go with cuDNN off?"""
    rows: List[Dict[str, Any]] = []
    for enabled in (True, False):
        command = [sys.executable, __file__, "--cudnn-one", "1" if enabled else "0"]
        completed = subprocess.run(command, capture_output=True, text=True, timeout=ROW_TIMEOUT, check=True)
        rows.extend(json.loads(completed.stdout.strip().splitlines()[-1]))
    for row in rows:
        print("cudnn %-5s %-24s allocated %10d  tracker %10d  untracked %10d" % (
            row["cudnn_enabled"], row["model"], row["cuda_max_allocated"], row["cuda_tracker_peak"],
            row["cuda_untracked"]))
    write_results({"cudnn": {
        "what": "the same training step on CUDA with torch.backends.cudnn.enabled True and False: "
                "max_memory_allocated, the tracker's peak on CUDA and what the tracker did not see "
                "(`python benchmarks/gpu_check.py --cudnn`)",
        "rows": rows,
    }})


# -- --budget: predicted verdict and largest batch against a real card ---------------

def build_unet(name: str) -> Any:
    from torchmemlint.dynamic.target import load_module

    depth, pool = BUDGET_MODELS[name]
    return load_module("%s:_" % (FIXTURES / "resnet_unet.py")).unet_resnet(depth, pool)


def predict(name: str, budget_bytes: int, optimizer_name: str, batch: int) -> Dict[str, Any]:
    """torchmemlint's answer, from fake tensors on the CPU (no CUDA involved)."""
    from torchmemlint.dynamic.budget import Budget, check_budget, largest_batch, optimizer_model
    from torchmemlint.dynamic.measure import measure_training_step

    optimizer = optimizer_model(optimizer_name)

    def measure_at(at_batch: int) -> Any:
        return measure_training_step(lambda: build_unet(name), [at_batch] + IMAGE, device="fake")

    check = check_budget(measure_at(batch), Budget(budget_bytes, "--budget"), optimizer, batch=batch)
    search = largest_batch(measure_at, optimizer, check.usable_bytes, batch, {batch: check.estimate})
    return {
        "predicted_verdict": check.verdict,
        "predicted_allocated_bytes": check.estimate.allocated_bytes,
        "predicted_reserved_bytes": check.estimate.reserved_bytes,
        "predicted_max_batch": search.max_batch,
        "predicted_max_batch_method": search.method,
    }


def train_trial(name: str, batch: int, budget_bytes: int, optimizer_name: str) -> Dict[str, Any]:
    """Runs in its own process: two real training steps on a card cut down to the budget."""
    import torch

    from torchmemlint.dynamic.measure import scalar_loss

    total = torch.cuda.get_device_properties(0).total_memory
    if budget_bytes > total:
        raise SystemExit("--budget %s exceeds the card (%s)" % (format_bytes(budget_bytes), format_bytes(total)))
    # Caps what the caching allocator may reserve; the CUDA context is outside it, as in the estimate.
    torch.cuda.set_per_process_memory_fraction(budget_bytes / total)
    torch.backends.cudnn.benchmark = False
    torch.manual_seed(0)
    try:
        model = build_unet(name).cuda().train()
        optimizers = {
            "adam": torch.optim.Adam, "adamw": torch.optim.AdamW,
            "sgd": lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
        }
        optimizer = optimizers[optimizer_name](model.parameters()) if optimizer_name in optimizers else None
        inputs = torch.randn([batch] + IMAGE, device="cuda")
        for _ in range(2):  # the second step runs with the optimizer state allocated
            model.zero_grad(set_to_none=True)
            scalar_loss(model(inputs)).backward()
            if optimizer is not None:
                optimizer.step()
        torch.cuda.synchronize()
        fits = True
    except torch.cuda.OutOfMemoryError:
        fits = False
    return {
        "batch": batch,
        "fits": fits,
        "max_allocated": torch.cuda.max_memory_allocated(),
        "max_reserved": torch.cuda.max_memory_reserved(),
        "device": torch.cuda.get_device_name(),
        "total_memory": total,
        "torch": torch.__version__,
    }


def run_trial(name: str, batch: int, budget: str, optimizer_name: str) -> Dict[str, Any]:
    command = [sys.executable, __file__, "--trial", name, "--batch", str(batch),
               "--budget", budget, "--optimizer", optimizer_name]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=ROW_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise RuntimeError("batch %d: over %d s" % (batch, ROW_TIMEOUT))
    if completed.returncode != 0:
        last = (completed.stderr.strip().splitlines() or ["exit status %d" % completed.returncode])[-1]
        raise RuntimeError("batch %d: %s" % (batch, last))
    return json.loads(completed.stdout.strip().splitlines()[-1])


def largest_real_batch(fits: Callable[[int], bool], start: int, tried: Dict[int, bool]) -> Tuple[int, Optional[int]]:
    """(largest batch that trained, smallest batch above it that ran out of memory or None).

    Starts at ``start`` (the prediction), moves 1, 2, 4, ... batches away from it until
    the answer flips or an earlier trial decides, then bisects.  ``tried`` holds the trials (known ones included); the
    search stops at MAX_TRIALS of them, so the two batches are one apart only when found.
    """
    def trial(batch: int) -> bool:
        if batch not in tried:
            tried[batch] = fits(batch)
        return tried[batch]

    def bounds() -> Tuple[int, Optional[int]]:
        lower = max((b for b, ok in tried.items() if ok), default=0)
        return lower, min((b for b, ok in tried.items() if not ok and b > lower), default=None)

    probe, step = max(start, 1), 1
    going_up = trial(probe)
    while len(tried) < MAX_TRIALS:
        lower, upper = bounds()
        probe = probe + step if going_up else probe - step
        if not lower < probe < (upper or probe + 1):  # already decided by an earlier trial
            break
        if trial(probe) != going_up:
            break
        step *= 2
    lower, upper = bounds()
    while len(tried) < MAX_TRIALS and (upper is None or upper - lower > 1):
        trial(2 * lower if upper is None else (lower + upper) // 2)
        lower, upper = bounds()
    return lower, upper


def check_budget_model(name: str, budget: str, optimizer_name: str, batch: int) -> Dict[str, Any]:
    row: Dict[str, Any] = {"model": name, "input_shape": [batch] + IMAGE}
    row.update(predict(name, parse_size(budget), optimizer_name, batch))
    trials: List[Dict[str, Any]] = []
    tried: Dict[int, bool] = {}

    def fits(at_batch: int) -> bool:
        trials.append(run_trial(name, at_batch, budget, optimizer_name))
        return trials[-1]["fits"]

    try:
        tried[batch] = fits(batch)
        row["real_fits"] = tried[batch]
        lower, upper = largest_real_batch(fits, row["predicted_max_batch"], tried)
        row["real_max_batch"] = lower if upper == lower + 1 else None
        row["real_max_batch_bracket"] = [lower, upper]
    except RuntimeError as exc:
        row["error"] = str(exc)
    row["trials"] = [{k: t[k] for k in ("batch", "fits", "max_allocated", "max_reserved")} for t in trials]
    if trials:
        row.update(device=trials[0]["device"], total_memory=trials[0]["total_memory"], torch=trials[0]["torch"])
    return row


def compare_budget(budget: str, optimizer_name: str, quick: bool) -> None:
    batch = QUICK_VERDICT_BATCH if quick else VERDICT_BATCH
    depths = QUICK_DEPTHS if quick else FULL_DEPTHS
    names = [name for name, (depth, _) in BUDGET_MODELS.items() if depth in depths and (ONLY is None or ONLY in name)]
    print("budget %s, %s, batch %d: predicted (CPU, fake tensors) vs real (emulated card, %d trials at most)"
          % (format_bytes(parse_size(budget)), optimizer_name, batch, MAX_TRIALS))
    print("%-26s %-30s %s" % ("", "verdict at %d:" % batch, "largest batch:"))
    print("%-26s %-19s %-10s %-10s %-12s %s" % ("model", "predicted", "real", "predicted", "real", "trials"))
    rows: List[Dict[str, Any]] = []
    for name in names:
        row = check_budget_model(name, budget, optimizer_name, batch)
        rows.append(row)
        if not quick:  # after each model: a run stopped part-way keeps the models it checked
            write_budget(rows, budget, optimizer_name, batch)
        if "error" in row:
            real_fits = real_largest = "error"
        else:
            real_fits = "fits" if row["real_fits"] else "OOM"
            lower, upper = row["real_max_batch_bracket"]
            real_largest = str(lower) if row["real_max_batch"] is not None else "%d..%s" % (lower, upper or "?")
        print("%-26s %-19s %-10s %-10d %-12s %s" % (
            name, row["predicted_verdict"], real_fits, row["predicted_max_batch"], real_largest,
            ", ".join("%d%s" % (t["batch"], "" if t["fits"] else " OOM") for t in row["trials"])), flush=True)
        if "error" in row:
            print("    error (search stopped): %s" % row["error"])
    if rows and not quick:
        print("wrote %s" % RESULTS)


def _merged(rows: List[Dict[str, Any]], section: str) -> List[Dict[str, Any]]:
    """``rows``, and with --only the earlier results' rows of the other models (in MODELS' order)."""
    if ONLY is None or not RESULTS.exists():
        return rows
    names = {row["model"] for row in rows}
    kept = [row for row in json.loads(RESULTS.read_text()).get(section, []) if row["model"] not in names]
    order = list(MODELS)
    return sorted(kept + rows, key=lambda row: order.index(row["model"]) if row["model"] in order else len(order))


def write_budget(rows: List[Dict[str, Any]], budget: str, optimizer_name: str, batch: int) -> None:
    """The budget section with ``rows``; rows of other models already there for the same budget,
    optimizer and batch are kept (a run with --only adds to an earlier run)."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    earlier = results.get("budget", {})
    if (earlier.get("budget"), earlier.get("optimizer"), earlier.get("verdict_batch")) == (budget, optimizer_name, batch):
        names = {row["model"] for row in rows}
        kept = [row for row in earlier.get("rows", []) if row["model"] not in names]
        order = list(BUDGET_MODELS)
        rows = sorted(kept + rows, key=lambda row: order.index(row["model"]) if row["model"] in order else len(order))
    write_results({"budget": {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "budget": budget,
        "budget_bytes": parse_size(budget),
        "optimizer": optimizer_name,
        "verdict_batch": batch,
        "max_trials": MAX_TRIALS,
        "emulation": "torch.cuda.set_per_process_memory_fraction(budget / total_memory); "
                     "two training steps per trial, each trial in a fresh process",
        "rows": rows,
    }}, quiet=True)


def write_results(sections: Dict[str, Any], quiet: bool = False) -> None:
    """Update ``sections`` of the results JSON, keeping the others."""
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results.update(sections)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if not quiet:
        print("wrote %s" % RESULTS)


def main() -> None:
    global ONLY, RESULTS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller models or shapes; print only")
    parser.add_argument("--budget", metavar="SIZE",
                        help="compare the predicted verdict and largest batch with a card of SIZE (e.g. 8GiB)")
    parser.add_argument("--optimizer", choices=sorted(OPTIMIZERS),
                        help="optimizer of the --budget training steps (default: adam)")
    parser.add_argument("--results", metavar="PATH", type=Path, default=RESULTS,
                        help="results JSON to update (default: benchmarks/results/gpu_check.json)")
    parser.add_argument("--cudnn", action="store_true",
                        help="the conv nets' step on CUDA with cuDNN on and off (where the estimate's gap goes)")
    parser.add_argument("--only", metavar="TEXT", help="only the models whose name contains TEXT")
    parser.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)
    parser.add_argument("--cudnn-one", choices=("0", "1"), help=argparse.SUPPRESS)  # the per-model process
    parser.add_argument("--trial", metavar="MODEL", help=argparse.SUPPRESS)  # one --budget trial
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.budget is None and args.optimizer:
        parser.error("--optimizer needs --budget")
    if args.budget is not None:
        try:
            parse_size(args.budget, "--budget")
        except DynamicError as exc:
            parser.error(str(exc))
    optimizer_name = args.optimizer or "adam"
    RESULTS = args.results
    ONLY = args.only
    if args.one:
        print(json.dumps(measure_one(args.one, args.quick)))
        return
    if args.cudnn_one:
        print(json.dumps(cudnn_one(args.cudnn_one == "1")))
        return
    if args.trial:
        print(json.dumps(train_trial(args.trial, args.batch, parse_size(args.budget), optimizer_name)))
        return
    import torch

    if not torch.cuda.is_available():
        what = "the CPU estimate" if args.budget is None else (
            "the predicted verdict and largest batch for --budget %s" % args.budget)
        print("gpu_check: no CUDA device here; nothing to compare %s against (skipped)." % what)
        return
    if args.cudnn:
        compare_cudnn()
    elif args.budget:
        compare_budget(args.budget, optimizer_name, args.quick)
    else:
        compare_estimates(args.quick)


if __name__ == "__main__":
    main()
