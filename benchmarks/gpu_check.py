"""Is the CPU estimate of `torchmemlint profile` what CUDA's allocator reports?

    python benchmarks/gpu_check.py           # on a machine with CUDA: writes results JSON
    python benchmarks/gpu_check.py --quick   # smaller shapes, prints only

For each model, in a fresh process (allocator state matters): one training step measured on
CUDA (`torch.cuda.max_memory_allocated` after `reset_peak_memory_stats` and a warm-up step,
and `max_memory_reserved`), and the same step estimated on the CPU under fake tensors
(512-byte blocks) with the modelled caching allocator.  Printed: estimate / allocated (target:
within 2 % on conv nets) and the reserved figures.  The models are this project's fixtures.
Without CUDA the script says so and exits 0: there is nothing to compare against.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "gpu_check.json"
FIXTURES = ROOT / "fixtures" / "models"
TOLERANCE = 0.02

# name -> (fixture file, how to build the model from it, full input shape, quick input shape)
MODELS: Dict[str, Tuple[str, Callable[[Any], Any], List[int], List[int]]] = {
    "resnet50 classifier": ("resnet_unet", lambda m: m.resnet50(), [32, 3, 224, 224], [4, 3, 128, 128]),
    "UNet resnet34, stem pool": (
        "resnet_unet", lambda m: m.unet_resnet34(pool=True), [16, 3, 256, 256], [4, 3, 128, 128],
    ),
    "UNet resnet34, no pool": (
        "resnet_unet", lambda m: m.unet_resnet34(pool=False), [16, 3, 256, 256], [4, 3, 128, 128],
    ),
    "LeakyConvNet": ("leaky_convnet", lambda m: m.LeakyConvNet(), [64, 3, 128, 128], [8, 3, 64, 64]),
    "LoopNet (conv-bn-relu)": ("loops", lambda m: m.LoopNet(), [64, 3, 128, 128], [8, 3, 64, 64]),
}


def measure_one(name: str, quick: bool) -> Dict[str, Any]:
    """Runs in its own process: CUDA step, then the CPU estimate of the same step."""
    import torch

    sys.path.insert(0, str(ROOT))
    from torchmemlint.dynamic.measure import measure_training_step
    from torchmemlint.dynamic.target import load_module

    stem, build, full_shape, quick_shape = MODELS[name]
    shape = quick_shape if quick else full_shape
    module = load_module("%s:_" % (FIXTURES / (stem + ".py")))

    def factory() -> torch.nn.Module:
        return build(module)

    torch.backends.cudnn.benchmark = False
    cuda = measure_training_step(factory, shape, device="cuda")
    estimate = measure_training_step(factory, shape, device="fake")
    modelled = estimate.simulate_allocator()
    assert cuda.cuda is not None
    return {
        "model": name,
        "input_shape": shape,
        "cuda_max_allocated": cuda.cuda.max_allocated,
        "cuda_max_reserved": cuda.cuda.max_reserved,
        "cuda_tracker_peak": cuda.peak_bytes,
        "cuda_untracked": cuda.cuda.untracked,
        "cpu_estimate_peak": estimate.peak_bytes,
        "estimate_over_allocated": estimate.peak_bytes / cuda.cuda.max_allocated,
        "modelled_allocated": modelled.max_allocated,
        "modelled_over_allocated": modelled.max_allocated / cuda.cuda.max_allocated,
        "modelled_reserved": modelled.max_reserved,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller shapes; print only")
    parser.add_argument("--one", metavar="MODEL", help=argparse.SUPPRESS)  # the per-model process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure_one(args.one, args.quick)))
        return
    import torch

    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device here; nothing to compare the CPU estimate against (skipped).")
        return
    rows = []
    for name in MODELS:
        command = [sys.executable, __file__, "--one", name] + (["--quick"] if args.quick else [])
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode != 0:
            print("%-28s failed: %s" % (name, completed.stderr.strip().splitlines()[-1:]))
            continue
        row = json.loads(completed.stdout.strip().splitlines()[-1])
        rows.append(row)
        within = abs(row["estimate_over_allocated"] - 1) <= TOLERANCE
        print(
            "%-28s %-16s allocated %8.1f MiB  estimate x%.4f%s  modelled x%.4f  "
            "reserved %8.1f MiB (modelled %8.1f)"
            % (
                name, "x".join(map(str, row["input_shape"])), row["cuda_max_allocated"] / 2**20,
                row["estimate_over_allocated"], "" if within else " (outside 2 %)",
                row["modelled_over_allocated"], row["cuda_max_reserved"] / 2**20, row["modelled_reserved"] / 2**20,
            )
        )
    if args.quick or not rows:
        return
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "tolerance": TOLERANCE,
        "rows": rows,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("wrote %s" % RESULTS.relative_to(ROOT))


if __name__ == "__main__":
    main()
