"""How long does `torchmemlint profile` take on the seed's resnet152 UNet at batch 64?

    python benchmarks/profile_unet.py           # resnet152 UNets, 64x3x128x128; writes results
    python benchmarks/profile_unet.py --quick   # resnet34 UNets, 4x3x128x128; prints only

Each case is the command a user types, run as a subprocess (torch import included) on
fixtures/models/resnet_unet.py: the estimate alone (`--no-verify`, target under 30 s on the
project's 2-core machine) for the UNet without and with the stem pool, and the full profile of
the pool-less UNet, whose TML301 finding is verified by measuring the variant that keeps the
pool and comparing one real training step at batch 2.  Figures are CPU estimates under fake
tensors (nothing allocated); wall-clock times depend on the machine's load, so the CPU time of
each command and the load average before it are recorded too.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "fixtures" / "models" / "resnet_unet.py"
RESULTS = ROOT / "benchmarks" / "results" / "profile_unet.json"
GIB = 2**30
TARGET_SECONDS = 30.0


def profile(name: str, depth: int, shape: str, verify: bool) -> Dict[str, Any]:
    command = [
        sys.executable, "-m", "torchmemlint", "profile", "%s:%s" % (MODELS, name),
        "--init-args", json.dumps({"encoder_depth": depth}), "--input-shape", shape,
        "--device", "cpu", "--output-format", "json", "--isolated",
    ]
    if not verify:
        command.append("--no-verify")
    load = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    if completed.returncode != 0:
        raise SystemExit("%s failed: %s" % (" ".join(command), completed.stderr.strip()))
    report = json.loads(completed.stdout)
    return {
        "model": "%s(encoder_depth=%d)" % (name, depth),
        "input_shape": shape,
        "verify": verify,
        "wall_seconds": round(wall, 1),
        # wall time depends on what else runs; CPU time of the process much less
        "cpu_seconds": round(cpu, 1),
        "load_average_before": round(load, 2),
        "profile_seconds": report["seconds"],
        "peak_bytes": report["peak_bytes"],
        "kept_after_forward": report["kept_after_forward"],
        "param_bytes": report["param_bytes"],
        "total_with_adam_gib": round((report["total_bytes"] + 2 * report["param_bytes"]) / GIB, 2),
        "simulated_reserved_gib": round(report["simulated_allocator"]["max_reserved"] / GIB, 2),
        "findings": [
            {key: finding[key] for key in ("code", "row", "verdict", "peak_before", "peak_after", "numerics")}
            for finding in report["findings"]
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="resnet34 at 4x3x128x128; print only")
    args = parser.parse_args()
    depth, shape = (34, "4,3,128,128") if args.quick else (152, "64,3,128,128")
    cases: List[Dict[str, Any]] = [
        profile("UNetResNetNoPool", depth, shape, verify=False),
        profile("UNetResNet", depth, shape, verify=False),
        profile("UNetResNetNoPool", depth, shape, verify=True),
    ]
    for case in cases:
        print(
            "%-36s %-13s verify=%-5s %6.1f s (CPU %5.1f s)  peak %6.2f GiB  with Adam %6.2f GiB  %s"
            % (
                case["model"], case["input_shape"], case["verify"], case["wall_seconds"], case["cpu_seconds"],
                case["peak_bytes"] / GIB, case["total_with_adam_gib"],
                ", ".join("%s %s" % (f["code"], f["verdict"]) for f in case["findings"]),
            )
        )
    if args.quick:
        return
    import torch

    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "target_seconds_estimate": TARGET_SECONDS,
        "cases": cases,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    print("wrote %s" % RESULTS.relative_to(ROOT))


if __name__ == "__main__":
    main()
