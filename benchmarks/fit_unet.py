"""Will the seed's UNet fit an 8 GiB card?  `torchmemlint profile --budget` at full size.

    python benchmarks/fit_unet.py            # resnet101/152 UNets, with and without the stem
                                             # pool, 64x3x128x128, Adam, 8GiB; writes results
    python benchmarks/fit_unet.py --quick    # resnet34 UNets at 16x3x128x128 against 1GiB; prints

Each case is one run of the command a user types (a subprocess, torch import included), on
the UNets of fixtures/models/resnet_unet.py (written for this project after seed post 002):
the verdict, the allocated..reserved band, the fixes that make it fit (the pool-less UNet's
TML301 finding) and the largest batch that fits unchanged.  `--no-verify` skips the numerics
comparison of the findings (a real training step at batch 2, about a minute for resnet152,
see benchmarks/profile_unet.py); the budget check still measures each finding's variant.
Target: under 30 s per case on the project's 2-core machine.  Everything is measured on the
CPU with fake tensors; the reserved figure is a model of CUDA's caching allocator, not a GPU
measurement.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "fixtures" / "models" / "resnet_unet.py"
RESULTS = ROOT / "benchmarks" / "results" / "fit_unet.json"
GIB = 2**30
FULL = {"depths": (101, 152), "shape": "64,3,128,128", "budget": "8GiB"}
QUICK = {"depths": (34,), "shape": "16,3,128,128", "budget": "1GiB"}


def profile(model: str, depth: int, shape: str, budget: str) -> Dict[str, Any]:
    command = [
        sys.executable, "-m", "torchmemlint", "profile", "%s:%s" % (MODELS, model),
        "--init-args", json.dumps({"encoder_depth": depth}), "--input-shape", shape,
        "--budget", budget, "--optimizer", "adam", "--device", "cpu", "--no-verify",
        "--isolated", "--output-format", "json",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit("%s failed (%d): %s" % (" ".join(command), done.returncode, done.stderr))
    data = json.loads(done.stdout)
    estimate = data["budget"]["estimate"]
    return {
        "model": model,
        "encoder": "resnet%d" % depth,
        "input_shape": shape,
        "budget": budget,
        "budget_bytes": data["budget_bytes"],
        "fits": data["fits"],
        "allocated_bytes": estimate["allocated_bytes"],
        "reserved_bytes": estimate["reserved_bytes"],
        "allocated_gib": round(estimate["allocated_bytes"] / GIB, 2),
        "reserved_gib": round(estimate["reserved_bytes"] / GIB, 2),
        "optimizer_state_bytes": estimate["optimizer_state_bytes"],
        "step_peak_bytes": estimate["step_peak_bytes"],
        "fixes_that_fit": data["fixes_that_fit"],
        "max_batch": data.get("max_batch"),
        "max_batch_method": data["budget"].get("max_batch_search", {}).get("method"),
        "seconds": round(seconds, 1),
    }


def describe(row: Dict[str, Any]) -> str:
    text = "%-16s %-9s %s: %s (%.2f .. %.2f GiB) in %.1f s" % (
        row["model"], row["encoder"], row["budget"], row["fits"],
        row["allocated_gib"], row["reserved_gib"], row["seconds"],
    )
    for fix in row["fixes_that_fit"]:
        text += "\n    fix that fits: %s %d:%d -> %.2f GiB" % (
            fix["code"], fix["row"], fix["column"], fix["peak_after"] / GIB)
    if row["max_batch"] is not None:
        text += "\n    largest batch that fits unchanged: %d (%s)" % (
            row["max_batch"], row["max_batch_method"])
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small shapes; print, do not write")
    args = parser.parse_args()
    setting = QUICK if args.quick else FULL
    rows: List[Dict[str, Any]] = []
    load = os.getloadavg()[0]
    started = time.perf_counter()
    for depth in setting["depths"]:
        for model in ("UNetResNet", "UNetResNetNoPool"):
            rows.append(profile(model, depth, setting["shape"], setting["budget"]))
            print(describe(rows[-1]), flush=True)
    total = time.perf_counter() - started
    print("total %.1f s" % total)
    if args.quick:
        return
    import torch

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "torch": torch.__version__,
        "date": datetime.date.today().isoformat(),
        "machine": "%s, %s, %d CPUs, load average %.1f before the run" % (
            platform.platform(), platform.machine(), os.cpu_count() or 0, load),
        "command": "torchmemlint profile fixtures/models/resnet_unet.py:<model> --init-args "
                   "'{\"encoder_depth\": N}' --input-shape %s --budget %s --optimizer adam "
                   "--device cpu --no-verify --isolated --output-format json"
                   % (setting["shape"], setting["budget"]),
        "seconds": round(total, 1),
        "cases": rows,
    }, indent=2) + "\n")
    print("wrote %s" % RESULTS.relative_to(ROOT))


if __name__ == "__main__":
    main()
