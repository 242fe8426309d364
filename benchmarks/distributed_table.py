"""Will a 1B-parameter decoder train on N GPUs? One rank under DDP and FSDP2 at world sizes
1, 8 and 64, against the model-state figures of ``accelerate estimate-memory`` and DeepSpeed's
``estimate_zero2/3_model_states_mem_needs``.

    python benchmarks/distributed_table.py             # writes benchmarks/results/distributed_table.json
    python benchmarks/distributed_table.py --quick     # a 2-layer config, prints only

The model is transformers' ``LlamaForCausalLM`` built from a config (TinyLlama-1.1B's shape:
22 layers, hidden 2048, MLP 5632, 32 heads, 4 key/value heads, vocabulary 32000; nothing is
downloaded), float32 parameters, Adam, each rank's own batch of 1 x 2048 tokens. Every
figure of ours is one rank's training step on fake tensors (nothing allocated: 1.1B float32
parameters would be 4.4 GB) with CUDA's attention and dropout kernels emulated, the
parallel wrapping as ``torchmemlint profile --parallel`` does it (FSDP2: torch's own
``fully_shard`` of every decoder layer and the root on a fake process group; DDP: its
buckets modelled), and Adam's state added as ``--budget`` adds it.

accelerate's figure is its ``estimate-memory`` computation (``calculate_maximum_sizes`` of
the model built empty, then ``estimate_training_usage``), called on the same config because
the command itself reads the config from the Hub. DeepSpeed's are its
``estimate_zero2_model_states_mem_needs`` / ``estimate_zero3_model_states_mem_needs`` with no
offload, 8 GPUs per node.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torchmemlint.dynamic.budget import Budget, check_budget, optimizer_model  # noqa: E402
from torchmemlint.dynamic.measure import measure_training_step  # noqa: E402
from torchmemlint.dynamic.parallel import ParallelOptions, measure_parallel  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "distributed_table.json"
WORLD_SIZES = (1, 8, 64)
GPUS_PER_NODE = 8


def llama_config(quick: bool) -> Any:
    from transformers import LlamaConfig

    layers = 2 if quick else 22
    return LlamaConfig(
        vocab_size=32000, hidden_size=2048, intermediate_size=5632, num_hidden_layers=layers,
        num_attention_heads=32, num_key_value_heads=4, max_position_embeddings=2048,
        tie_word_embeddings=False, attention_dropout=0.0,
    )


def builder(config: Any) -> Any:
    from transformers import LlamaForCausalLM

    def build() -> torch.nn.Module:
        model = LlamaForCausalLM(config)
        model.config.use_cache = False
        return model

    return build


def our_rows(build: Any, shape: List[Any], quick: bool) -> List[Dict[str, Any]]:
    adam = optimizer_model("adam")
    unbounded = Budget(1 << 60, "unbounded")
    rows = []
    single = measure_training_step(build, [shape])
    check = check_budget(single, unbounded, adam, 0, shape[0])
    rows.append(_row("single device", 1, single, check, {}))
    for world in WORLD_SIZES:
        for strategy in ("ddp", "fsdp"):
            report = measure_parallel(build, [shape], ParallelOptions(strategy, world))
            check = check_budget(report.step, unbounded, adam, 0, shape[0])
            extra = {"bucket_bytes": report.bucket_bytes, "all_gather_bytes": report.all_gather_bytes,
                     "reduce_scatter_bytes": report.reduce_scatter_bytes,
                     "activation_bytes": report.activation_bytes, "wrapped": len(report.wrapped)}
            rows.append(_row(strategy, world, report.step, check, extra))
            print("%-6s %3d  peak %.2f GiB, allocated with Adam %.2f GiB (%.0f s)" % (
                strategy, world, report.step.peak_bytes / 2**30, check.estimate.allocated_bytes / 2**30,
                report.step.seconds), flush=True)
    return rows


def _row(strategy: str, world: int, step: Any, check: Any, extra: Dict[str, Any]) -> Dict[str, Any]:
    row = {
        "strategy": strategy, "world_size": world,
        "param_bytes": step.param_bytes, "grad_bytes": step.grad_bytes,
        "optimizer_state_bytes": check.estimate.optimizer_state_bytes,
        "buffer_bytes": step.buffer_bytes, "input_bytes": step.input_bytes,
        "kept_after_forward": step.kept_after_forward,
        "step_peak_bytes": step.peak_bytes, "peak_phase": step.peak_phase,
        "allocated_peak_bytes": check.estimate.allocated_bytes,
        "reserved_model_bytes": check.estimate.reserved_bytes,
        "model_states_bytes": step.param_bytes + step.grad_bytes + check.estimate.optimizer_state_bytes,
        "seconds": round(step.seconds, 1),
    }
    row.update(extra)
    return row


def accelerate_figures(config: Any) -> Optional[Dict[str, Any]]:
    try:
        from accelerate import init_empty_weights
        from accelerate.commands.estimate import estimate_training_usage
        from accelerate.utils import calculate_maximum_sizes
        from transformers import LlamaForCausalLM
    except ImportError as error:
        return {"error": "accelerate is not installed: %s" % error}
    with init_empty_weights():
        model = LlamaForCausalLM(config)
    total, largest = calculate_maximum_sizes(model)
    usage = estimate_training_usage(total, "float32")
    return {"version": _version("accelerate"), "total_size_bytes": total, "largest_layer_bytes": largest[0],
            "training_usage_float32": usage, "training_using_adam_bytes": max(usage.values()),
            "counts": "model + gradients + Adam's two states (fp32: 4x the parameter bytes); one device, "
                      "no activations, no buffers, no world size"}


def deepspeed_figures(params: int, largest_layer_params: int) -> Dict[str, Any]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
            from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs
    except Exception as error:  # no deepspeed, or it does not import without CUDA
        return {"error": "%s: %s" % (type(error).__name__, error)}
    rows = {}
    for world in WORLD_SIZES:
        per_node, nodes = min(world, GPUS_PER_NODE), max(1, world // GPUS_PER_NODE)
        _, zero2 = estimate_zero2_model_states_mem_needs(params, per_node, nodes, cpu_offload=False)
        _, zero3, _ = _zero3(estimate_zero3_model_states_mem_needs, params, largest_layer_params, per_node, nodes)
        rows[str(world)] = {"zero2_gpu_bytes": int(zero2), "zero3_gpu_bytes": int(zero3)}
    return {"version": _version("deepspeed"), "per_world_size": rows,
            "counts": "model states of fp16 mixed-precision training with fp32 master weights: ZeRO-2 "
                      "2 bytes per parameter (fp16 parameters) on every GPU + 18 bytes per parameter "
                      "(fp16 and fp32 gradients, fp32 parameters, Adam's two states) / N; ZeRO-3 4 bytes "
                      "per parameter of the largest layer + 18 bytes per parameter / N; no activations, "
                      "no communication buffers"}


def _zero3(function: Any, params: int, largest: int, per_node: int, nodes: int) -> Any:
    result = function(params, largest, per_node, nodes, cpu_offload=False, cpu_offload_params=False,
                      zero_init=True)
    return result if len(result) == 3 else (*result, None)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a 2-layer config; print only")
    args = parser.parse_args()
    started = time.perf_counter()
    config = llama_config(args.quick)
    build = builder(config)
    shape = [1, 512 if args.quick else 2048, "int64"]
    from accelerate import init_empty_weights
    from transformers import LlamaForCausalLM

    with init_empty_weights():
        empty = LlamaForCausalLM(config)
    params = sum(p.numel() for p in empty.parameters())
    largest = max(sum(p.numel() for p in layer.parameters()) for layer in empty.model.layers)
    largest = max(largest, empty.lm_head.weight.numel(), empty.model.embed_tokens.weight.numel())
    del empty
    results: Dict[str, Any] = {
        "model": "LlamaForCausalLM from a config: %d layers, hidden 2048, MLP 5632, 32 heads, 4 kv heads, "
                 "vocab 32000, float32 parameters" % config.num_hidden_layers,
        "parameters": params,
        "input_per_rank": "x".join(str(d) for d in shape),
        "optimizer": "Adam",
        "method": "one rank's training step on fake tensors (CPU estimate of CUDA: its attention and "
                  "dropout kernels emulated), 512-byte blocks; Adam's state added as --budget does",
        "ours": our_rows(build, shape, args.quick),
        "accelerate": accelerate_figures(config),
        "deepspeed": deepspeed_figures(params, largest),
        "torch": torch.__version__,
        "transformers": _version("transformers"),
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
