"""Reproduce the figures the TML7xx rule docs quote (CPU estimates of CUDA, no GPU needed).

    python benchmarks/distributed_figures.py            # the 12x768 LM at 4x512, writes the JSON
    python benchmarks/distributed_figures.py --quick    # the 2-layer LM, prints only

The model is the 12-layer 768-wide ``nn.TransformerEncoder`` LM of
``fixtures/models/transformer_lm.py`` (``small_lm`` with --quick), one training step on
fake tensors with CUDA's attention and dropout kernels emulated, every storage in 512-byte
blocks (torchmemlint.dynamic's tracker):

* ``ddp``: one rank of 8 under ``profile --parallel ddp`` (DDP's buckets modelled as its
  reducer allocates them), with and without ``gradient_as_bucket_view=True`` (TML701);
* ``checkpoint``: the bytes of the model's state dict, which ``torch.load`` without
  ``map_location`` restores onto the saving device in every rank (TML702);
* ``empty_cache``: the step's alloc/free stream replayed twice through the modelled CUDA
  caching allocator, with the cache kept and emptied between the steps (TML703; a model of
  the allocator, not a GPU measurement);
* ``zero_grad``: the second step's peak after ``zero_grad(set_to_none=False)`` (the gradients
  kept as zeros) and after ``zero_grad()`` (TML704).

Results: benchmarks/results/distributed_figures.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any, Dict

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchmemlint.dynamic.emulate import EmulationLog, cuda_kernels  # noqa: E402
from torchmemlint.dynamic.measure import _device_context, measure_training_step, scalar_loss  # noqa: E402
from torchmemlint.dynamic.budget import Budget, check_budget, optimizer_model  # noqa: E402
from torchmemlint.dynamic.parallel import ParallelOptions, _gradients_in_buckets, measure_parallel  # noqa: E402
from torchmemlint.dynamic.target import load_module  # noqa: E402
from torchmemlint.dynamic.tracker import LiveTracker, simulate_cuda_caching_allocator, storage_bytes  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "distributed_figures.json"
WORLD = 8


def ddp_figures(build: Any, shape: Any) -> Dict[str, Any]:
    """One rank of 8: the step, and the steady state with Adam (the --budget estimate)."""
    rows: Dict[str, Any] = {}
    budget = Budget(1 << 50, "unbounded")
    for view in (False, True):
        report = measure_parallel(build, [shape], ParallelOptions("ddp", WORLD, gradient_as_bucket_view=view))
        step = report.step
        check = check_budget(step, budget, optimizer_model("adam"), 0, shape[0])
        if view:
            _gradients_in_buckets(check, report)
        rows["gradient_as_bucket_view=%s" % view] = {
            "param_bytes": step.param_bytes, "grad_bytes": step.grad_bytes,
            "bucket_bytes": report.bucket_bytes, "buckets": len(report.buckets),
            "step_peak_bytes": step.peak_bytes, "peak_phase": step.peak_phase, "peak_op": step.peak_op,
            "held_after_backward_bytes": step.param_bytes + report.bucket_bytes + (0 if view else step.grad_bytes),
            "adam_update_peak_bytes": check.estimate.update_peak_bytes,
            "adam_allocated_peak_bytes": check.estimate.allocated_bytes,
        }
    before, after = rows["gradient_as_bucket_view=False"], rows["gradient_as_bucket_view=True"]
    for key in ("step_peak_bytes", "held_after_backward_bytes", "adam_allocated_peak_bytes"):
        rows["change_" + key] = after[key] - before[key]
    return rows


def checkpoint_figures(build: Any, shape: Any) -> Dict[str, Any]:
    step = measure_training_step(build, [shape])
    nbytes = step.param_bytes + step.buffer_bytes  # what the state dict holds
    return {"state_dict_bytes": nbytes, "ranks": WORLD, "on_the_saving_gpu_bytes": WORLD * nbytes}


def empty_cache_figures(build: Any, shape: Any) -> Dict[str, Any]:
    step = measure_training_step(build, [shape])
    events = list(step.events)
    offset = 1 + max(event.storage_id for event in events)
    second = [dataclasses.replace(event, storage_id=event.storage_id + offset) for event in events]
    one = simulate_cuda_caching_allocator(events)
    kept = simulate_cuda_caching_allocator(events + second)
    return {
        "step_peak_bytes": step.peak_bytes,
        "max_reserved_one_step": one.max_reserved,
        "max_reserved_two_steps_cache_kept": kept.max_reserved,
        "max_reserved_cache_emptied_between": one.max_reserved,
        "segments_first_step": one.segments,
        "segments_second_step_cache_kept": kept.segments - one.segments,
        "segments_second_step_cache_emptied": one.segments,
    }


def zero_grad_figures(build: Any, shape: Any) -> Dict[str, Any]:
    rows = {}
    for set_to_none in (False, True):
        with _device_context("fake") as prepare:
            torch.manual_seed(0)
            model = prepare(build).module
            model.train()
            ids = torch.zeros(shape[:-1], dtype=torch.int64)
            log = EmulationLog()
            with cuda_kernels(log):
                scalar_loss(model(ids)).backward()  # the first step makes the gradients
            params = list(model.parameters())
            for param in params:
                if set_to_none:
                    param.grad = None
                else:
                    param.grad.zero_()
            kept = storage_bytes([p.grad for p in params], 512)
            tracker = LiveTracker(512)
            with tracker, cuda_kernels(log):
                output = model(ids)  # kept through backward, as a training loop keeps it
                loss = scalar_loss(output)
                loss.backward()
                del output, loss
            rows["set_to_none=%s" % set_to_none] = {
                "grads_kept_before_step": kept, "step_allocations_peak": tracker.peak.bytes,
                "peak_above_parameters": kept + tracker.peak.bytes,
            }
    before = rows["set_to_none=False"]["peak_above_parameters"]
    after = rows["set_to_none=True"]["peak_above_parameters"]
    rows["saved_bytes"] = before - after
    rows["saved_fraction"] = round((before - after) / before, 4)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the 2-layer LM; print only")
    args = parser.parse_args()
    lm = load_module(str(ROOT / "fixtures" / "models" / "transformer_lm.py") + ":_")
    if args.quick:
        build, shape, name = lm.small_lm, [4, 128, "int64"], "small_lm (2x64), 4x128 tokens"
    else:
        build, shape, name = lm.TransformerLM, [4, 512, "int64"], "TransformerLM (12x768), 4x512 tokens"
    started = time.perf_counter()
    results: Dict[str, Any] = {
        "model": name,
        "method": "fake tensors on the cpu device, CUDA's attention and dropout kernels emulated, "
                  "512-byte blocks: a CPU estimate of CUDA",
        "ddp_rank_of_8": ddp_figures(build, shape),
        "ddp_rank_of_8_batch_1x128": ddp_figures(build, [1, 128, "int64"]),
        "checkpoint": checkpoint_figures(build, shape),
        "empty_cache": empty_cache_figures(build, shape),
        "zero_grad": zero_grad_figures(build, shape),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "date": datetime.date.today().isoformat(),
    }
    results["seconds"] = round(time.perf_counter() - started, 1)
    text = json.dumps(results, indent=2)
    print(text)
    if not args.quick:
        RESULTS.write_text(text + "\n")


if __name__ == "__main__":
    main()
