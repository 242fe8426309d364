"""The recall oracle: what the measurement finds in popular architectures, and what the linter finds.

    venv-oracle/bin/python benchmarks/oracle_recall.py           # all models; writes results/oracle_recall.json
    venv-oracle/bin/python benchmarks/oracle_recall.py --only resnet18,vit_tiny   # a few, prints only

Needs torch, torchvision, timm and transformers that load together (the project's own venv has
a torch that torchvision/timm from PyPI do not load with; a venv with torch 2.14.1 and
torchvision 0.29.1 does).  For each architecture (small configs, CPU, no weights) one training
step runs under fake tensors with CUDA's attention and dropout kernels emulated (``profile``'s
default) while ``lines.StepObserver`` records the ops, with the library's own files (torchvision,
timm, transformers) as "the user's code".  The detectors of ``dynamic/detectors.py`` report the
measured sites; the static linter, every rule selected, runs over the same source files, and a
measured site counts as found when the linter reports the same code in the same function (or on
the same line).  Per code: measured sites, found statically, recall; and every miss with its file
and line.  A site is a (code, file, line); the same line reached from several models counts once.
A TML601 miss where the shared analysis found the eager attention and leaves it alone by design
(its weights are returned or stored; it is the eager arm of an ``if`` whose other arm calls SDPA)
says so ("quiet_by_design", from ``AttentionSites.quiet``): it still counts as a miss.

transformers models run with ``attn_implementation="eager"`` where they accept it, the
implementation their documentation gives for full control of attention (the default is SDPA,
which keeps no attention weights and is no finding); timm and torchvision models run as built.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Tuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "oracle_recall.json"
IMAGE = [2, 3, 224, 224]
SMALL_IMAGE = [2, 3, 64, 64]
TOKENS = [2, 32, "int64"]
# The codes the detectors report: each is a row of the table, measured sites or none.
DETECTED = ("TML201", "TML203", "TML204", "TML301", "TML403", "TML601")


def _torchvision(name: str, **kwargs: Any) -> Callable[[], Any]:
    def build() -> Any:
        import torchvision.models as models

        return getattr(models, name)(weights=None, **kwargs)

    return build


def _timm(name: str, **kwargs: Any) -> Callable[[], Any]:
    def build() -> Any:
        import timm

        return timm.create_model(name, pretrained=False, **kwargs)

    return build


def _hf(config_name: str, model_name: str, **config: Any) -> Callable[[], Any]:
    def build() -> Any:
        import torch.nn as nn
        import transformers

        settings = getattr(transformers, config_name)(**config)
        try:
            settings._attn_implementation = "eager"
        except Exception:  # noqa: BLE001 - older configs: their only implementation
            pass
        model = getattr(transformers, model_name)(settings)

        class FirstOutput(nn.Module):
            """The model's first output (logits or hidden states) as a plain tensor."""

            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, ids: Any) -> Any:
                if model_name.endswith("ForImageClassification") or model_name == "ViTModel":
                    return self.model(pixel_values=ids)[0]
                if getattr(self.model.config, "is_encoder_decoder", False):
                    return self.model(input_ids=ids, decoder_input_ids=ids)[0]
                return self.model(input_ids=ids)[0]

        return FirstOutput()

    return build


SMALL_TEXT = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                  vocab_size=1000)

ARCHITECTURES: List[Tuple[str, str, Callable[[], Any], List[Any]]] = [
    # (name, library, factory, input shape)
    ("resnet18", "torchvision", _torchvision("resnet18"), SMALL_IMAGE),
    ("resnet50", "torchvision", _torchvision("resnet50"), SMALL_IMAGE),
    ("resnext50_32x4d", "torchvision", _torchvision("resnext50_32x4d"), SMALL_IMAGE),
    ("mobilenet_v2", "torchvision", _torchvision("mobilenet_v2"), SMALL_IMAGE),
    ("mobilenet_v3_small", "torchvision", _torchvision("mobilenet_v3_small"), SMALL_IMAGE),
    ("efficientnet_b0", "torchvision", _torchvision("efficientnet_b0"), SMALL_IMAGE),
    ("densenet121", "torchvision", _torchvision("densenet121"), SMALL_IMAGE),
    ("squeezenet1_1", "torchvision", _torchvision("squeezenet1_1"), SMALL_IMAGE),
    ("shufflenet_v2_x0_5", "torchvision", _torchvision("shufflenet_v2_x0_5"), SMALL_IMAGE),
    ("mnasnet0_5", "torchvision", _torchvision("mnasnet0_5"), SMALL_IMAGE),
    ("regnet_y_400mf", "torchvision", _torchvision("regnet_y_400mf"), SMALL_IMAGE),
    ("convnext_tiny", "torchvision", _torchvision("convnext_tiny"), SMALL_IMAGE),
    ("swin_t", "torchvision", _torchvision("swin_t"), SMALL_IMAGE),
    ("vit_b_16", "torchvision", _torchvision("vit_b_16"), [1, 3, 224, 224]),
    ("maxvit_t", "torchvision", _torchvision("maxvit_t"), [1, 3, 224, 224]),
    ("vit_tiny_patch16_224", "timm", _timm("vit_tiny_patch16_224"), IMAGE),
    ("deit_tiny_patch16_224", "timm", _timm("deit_tiny_patch16_224"), IMAGE),
    ("levit_128s", "timm", _timm("levit_128s"), IMAGE),
    ("xcit_nano_12_p16_224", "timm", _timm("xcit_nano_12_p16_224"), IMAGE),
    ("coat_lite_tiny", "timm", _timm("coat_lite_tiny"), IMAGE),
    ("crossvit_tiny_240", "timm", _timm("crossvit_tiny_240"), [2, 3, 240, 240]),
    ("pvt_v2_b0", "timm", _timm("pvt_v2_b0"), IMAGE),
    ("mobilevit_xxs", "timm", _timm("mobilevit_xxs"), [2, 3, 256, 256]),
    ("poolformer_s12", "timm", _timm("poolformer_s12"), SMALL_IMAGE),
    ("convnext_atto", "timm", _timm("convnext_atto"), SMALL_IMAGE),
    ("efficientnet_b0_timm", "timm", _timm("efficientnet_b0"), SMALL_IMAGE),
    ("resnet18_timm", "timm", _timm("resnet18"), SMALL_IMAGE),
    ("cspdarknet53", "timm", _timm("cspdarknet53"), SMALL_IMAGE),
    ("dla34", "timm", _timm("dla34"), SMALL_IMAGE),
    ("tnt_s_patch16_224", "timm", _timm("tnt_s_patch16_224"), [1, 3, 224, 224]),
    ("bert", "transformers", _hf("BertConfig", "BertModel", **SMALL_TEXT), TOKENS),
    ("roberta", "transformers", _hf("RobertaConfig", "RobertaModel", **SMALL_TEXT), TOKENS),
    ("gpt2", "transformers",
     _hf("GPT2Config", "GPT2LMHeadModel", n_embd=64, n_layer=2, n_head=4, vocab_size=1000), TOKENS),
    ("llama", "transformers",
     _hf("LlamaConfig", "LlamaForCausalLM", **SMALL_TEXT, num_key_value_heads=2), TOKENS),
    ("mistral", "transformers",
     _hf("MistralConfig", "MistralForCausalLM", **SMALL_TEXT, num_key_value_heads=2), TOKENS),
    ("t5", "transformers",
     _hf("T5Config", "T5ForConditionalGeneration", d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
         vocab_size=1000), TOKENS),
    ("bart", "transformers",
     _hf("BartConfig", "BartForConditionalGeneration", d_model=64, encoder_layers=2, decoder_layers=2,
         encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
         vocab_size=1000), TOKENS),
    ("distilbert", "transformers",
     _hf("DistilBertConfig", "DistilBertModel", dim=64, n_layers=2, n_heads=4, hidden_dim=128, vocab_size=1000),
     TOKENS),
    ("vit_hf", "transformers",
     _hf("ViTConfig", "ViTModel", hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
         intermediate_size=128, image_size=64, patch_size=16), SMALL_IMAGE),
]


def library_roots() -> List[str]:
    roots = []
    for name in ("torchvision", "timm", "transformers"):
        try:
            module = __import__(name)
        except Exception:  # noqa: BLE001 - a library that does not load is reported by its models
            continue
        roots.append(os.path.dirname(module.__file__))
    return roots


def short(path: str, roots: List[str]) -> str:
    for root in roots:
        if path.startswith(root + os.sep):
            return os.path.join(os.path.basename(root), os.path.relpath(path, root))
    return path


def measure_one(factory: Callable[[], Any], shape: List[Any], roots: List[str]) -> Tuple[List[Any], Dict[str, Any]]:
    from torchmemlint.dynamic.detectors import detect
    from torchmemlint.dynamic.lines import StepObserver
    from torchmemlint.dynamic.measure import measure_training_step

    observer = StepObserver(user_roots=roots)
    report = measure_training_step(factory, [shape], device="fake", observer=observer)
    peak = report.peak_bytes
    step = sum(line.bytes for line in observer.step_lines)
    return detect(observer, cuda_kernels=True), {
        "peak_bytes": peak, "lines_bytes": step, "ops": len(observer.trace), "built": report.built,
    }


def why_quiet(filename: str, row: int) -> str:
    """Why TML601 is left alone, by design, at ``row``: what the shared analysis says of an eager
    attention it found in the function holding that line and did not report ("" when none)."""
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from torchmemlint.analysis.attention import AttentionSites
    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.names import Bindings

    try:
        text = Path(filename).read_text(encoding="utf-8")
        module = cst.parse_module(text)
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError):
        return ""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    attention = AttentionSites(FileAnalysis(module, bindings, text=text))
    attention.sites()
    for function, _, why in attention.quiet:
        span = positions[function]
        if span.start.line <= row <= span.end.line:
            return why
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated architecture names (prints, writes nothing)")
    args = parser.parse_args()
    import warnings

    import torch

    from torchmemlint.dynamic.detectors import static_flags

    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    roots = library_roots()
    chosen = ARCHITECTURES
    if args.only:
        wanted = set(args.only.split(","))
        chosen = [a for a in ARCHITECTURES if a[0] in wanted]
    runs: List[Dict[str, Any]] = []
    sites: Dict[Tuple[str, str, int], Dict[str, Any]] = {}
    for name, library, factory, shape in chosen:
        started = time.perf_counter()
        try:
            findings, figures = measure_one(factory, shape, roots)
        except Exception as error:  # noqa: BLE001 - one architecture's failure is a row, not the end
            text = str(error).strip()
            message = "%s: %s" % (type(error).__name__, text.splitlines()[0] if text else "")
            runs.append({"name": name, "library": library, "input": shape, "error": message})
            print("%-24s FAILED %s" % (name, message), flush=True)
            traceback.print_exc(limit=2, file=sys.stderr)
            continue
        seconds = time.perf_counter() - started
        for finding in findings:
            key = (finding.code, finding.filename, finding.row)
            site = sites.setdefault(key, {"finding": finding, "models": [], "bytes": {}})
            site["models"].append(name)
            site["bytes"][name] = finding.bytes
        runs.append({"name": name, "library": library, "input": shape, "seconds": round(seconds, 1),
                     "measured": sorted({"%s %s:%d" % (f.code, short(f.filename, roots), f.row) for f in findings}),
                     **figures})
        print("%-24s %5.1f s  %d measured: %s" % (name, seconds, len(findings),
              ", ".join("%s %s:%d" % (f.code, short(f.filename, roots), f.row) for f in findings)), flush=True)
    static_flags([site["finding"] for site in sites.values()])
    codes: Dict[str, Dict[str, Any]] = {code: {"measured": 0, "static": 0, "quiet_by_design": 0} for code in DETECTED}
    misses, found = [], []
    for (code, filename, row), site in sorted(sites.items()):
        stats = codes.setdefault(code, {"measured": 0, "static": 0})
        stats["measured"] += 1
        entry = {"code": code, "file": short(filename, roots), "row": row, "models": site["models"],
                 "bytes": site["bytes"]}
        if site["finding"].static:
            stats["static"] += 1
            found.append(entry)
        else:
            if code == "TML601":
                entry["quiet_by_design"] = why_quiet(filename, row)
                stats["quiet_by_design"] += bool(entry["quiet_by_design"])
            misses.append(entry)
    for stats in codes.values():
        stats["recall"] = round(stats["static"] / stats["measured"], 3) if stats["measured"] else None
    total_measured = sum(s["measured"] for s in codes.values())
    total_static = sum(s["static"] for s in codes.values())
    ran = [r for r in runs if "error" not in r]
    print("\n%d architectures ran, %d failed" % (len(ran), len(runs) - len(ran)))
    print("| code | measured sites | found statically | missed, quiet by design | recall |")
    print("|---|---|---|---|---|")
    for code, stats in sorted(codes.items()):
        recall = "%.0f %%" % (100 * stats["recall"]) if stats["recall"] is not None else "no site"
        print("| %s | %d | %d | %d | %s |" % (code, stats["measured"], stats["static"], stats["quiet_by_design"], recall))
    if total_measured:
        quiet = sum(stats["quiet_by_design"] for stats in codes.values())
        print("| all | %d | %d | %d | %.0f %% |" % (
            total_measured, total_static, quiet, 100.0 * total_static / total_measured))
    print("\nMissed by the linter:")
    for miss in misses:
        why = miss.get("quiet_by_design")
        print("  %s %s:%d (%s)%s" % (miss["code"], miss["file"], miss["row"], ", ".join(miss["models"]),
                                     "; quiet by design: " + why if why else ""))
    if args.only:
        return
    import timm
    import torchvision
    import transformers

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "command": "python benchmarks/oracle_recall.py",
        "date": datetime.date.today().isoformat(),
        "machine": "%s, %s, %d CPUs (shared)" % (platform.machine(), platform.python_version(), os.cpu_count()),
        "versions": {"torch": torch.__version__, "torchvision": torchvision.__version__, "timm": timm.__version__,
                     "transformers": transformers.__version__},
        "device": "fake tensors on the CPU, an estimate of CUDA (its attention and dropout kernels emulated)",
        "architectures": len(ran),
        "codes": codes,
        "total": {"measured": total_measured, "static": total_static,
                  "recall": round(total_static / total_measured, 3) if total_measured else None},
        "misses": misses,
        "found": found,
        "runs": runs,
    }, indent=2) + "\n")
    print("\nwrote %s" % RESULTS.relative_to(ROOT))


if __name__ == "__main__":
    main()
