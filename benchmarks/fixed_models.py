#!/usr/bin/env python3
"""Do the fixes leave real models working? torchvision, timm and smp, fixed and run.

    python benchmarks/fixed_models.py --python PATH/TO/venv/bin/python [--only timm] [--quick]

``--python`` is an interpreter where torch, torchvision, timm and (optionally)
segmentation_models_pytorch import (the project's own venv has a CPU torch these builds of
torchvision/timm do not load with: make one, e.g. ``python3 -m venv V && V/bin/pip install
torch==2.14.1 torchvision==0.29.1 timm==1.0.31`` and
``V/bin/pip install --no-deps segmentation_models_pytorch==0.6.0``).

For each package the script copies the installed package into a scratch directory twice and
runs this repository's CLI over the copies:

- ``safe``:   ``torchmemlint --select ALL --fix``                  (safe fixes only)
- ``unsafe``: ``torchmemlint --select ALL --fix --unsafe-fixes``   (every fix)

(torchvision: only ``torchvision/models`` is linted; the rest of the package is copied as is.)
Then, in a child process of ``--python`` per package and variant, it builds every model of its
list with the same seed, runs one forward and backward pass in training mode on a seeded input,
and records the output and every parameter's gradient. A model is *broken* when the fixed copy
cannot import, build or run it where the original can; the comparison against the original
copy's outputs and gradients must be bitwise for the safe fixes and is reported as a maximum
absolute difference for the unsafe ones (an unsafe fix may change numerics, never break).

Results: benchmarks/results/fixed_models.json (per package and variant: files fixed, fixes
applied, models run, broken models with their error, numeric differences).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "fixed_models.json"

# Models built by name; each list holds the architectures that broke or changed under the
# unsafe fixes before the project index (quantizable torchvision models, IntermediateLayerGetter
# backbones, timm features_only, subclasses that delete a parent's module) and a spread of others.
TORCHVISION = [
    "resnet18", "resnet50", "resnext50_32x4d", "wide_resnet50_2", "mobilenet_v2",
    "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0", "efficientnet_v2_s",
    "regnet_y_400mf", "shufflenet_v2_x0_5", "squeezenet1_0", "densenet121", "mnasnet0_5",
    "convnext_tiny", "vgg11_bn", "alexnet", "googlenet", "inception_v3", "vit_b_16",
    "swin_t", "maxvit_t",
    "quantization.resnet18", "quantization.mobilenet_v2", "quantization.mobilenet_v3_large",
    "quantization.shufflenet_v2_x0_5", "quantization.googlenet", "quantization.inception_v3",
    "segmentation.fcn_resnet50", "segmentation.deeplabv3_resnet50",
    "segmentation.deeplabv3_mobilenet_v3_large", "segmentation.lraspp_mobilenet_v3_large",
]
TIMM = [
    "resnet18", "resnet50d", "seresnext26d_32x4d", "efficientnet_b0", "mobilenetv3_small_100",
    "mobilenetv3_large_100", "rexnet_100", "regnetx_002", "dla34", "densenet121", "dpn68",
    "ghostnet_100", "hrnet_w18_small", "cspresnet50", "darknet53", "vovnet39a", "res2net50_26w_4s",
    "selecsls42b", "tresnet_m", "xception41", "inception_v3",
    "vit_tiny_patch16_224", "deit_tiny_patch16_224", "convnext_atto", "levit_128s", "coat_lite_tiny",
    "crossvit_tiny_240", "efficientformer_l1", "mixer_b16_224", "resmlp_12_224",
    "resnet18:features_only", "efficientnet_b0:features_only", "mobilenetv3_large_100:features_only",
    "rexnet_100:features_only", "regnetx_002:features_only", "dla34:features_only",
]
SMP = [
    "Unet:resnet34", "FPN:resnet34", "DeepLabV3Plus:resnet34", "Linknet:resnet18", "PSPNet:resnet34",
    "Unet:efficientnet-b0", "Unet:mobilenet_v2", "UnetPlusPlus:resnet18", "MAnet:resnet18", "PAN:resnet18",
]
PACKAGES = {
    "torchvision": ("torchvision", "torchvision/models", TORCHVISION),
    "timm": ("timm", "timm", TIMM),
    "smp": ("segmentation_models_pytorch", "segmentation_models_pytorch", SMP),
}

CHILD = r'''
import hashlib, json, sys, traceback, warnings
warnings.filterwarnings("ignore")
root, package, out_path = sys.argv[1], sys.argv[2], sys.argv[3]
names = json.loads(sys.argv[4])
sys.path.insert(0, root)
import torch
torch.set_num_threads(1)
results = {}

def build(name):
    if package == "torchvision":
        import torchvision.models as tvm
        import importlib
        if "." in name:
            sub, arch = name.split(".")
            module = importlib.import_module("torchvision.models." + sub)
            kwargs = {"weights": None}
            if sub == "segmentation":
                kwargs["weights_backbone"] = None
                kwargs["num_classes"] = 5
                if "lraspp" not in arch:
                    kwargs["aux_loss"] = False
            if sub == "quantization":
                kwargs["quantize"] = False
            model = getattr(module, arch)(**kwargs)
        else:
            model = tvm.get_model(name, weights=None)
        size = 299 if "inception" in name else 224
        return model, size
    if package == "timm":
        import timm
        arch, _, option = name.partition(":")
        kwargs = {"pretrained": False}
        if option == "features_only":
            kwargs["features_only"] = True
        model = timm.create_model(arch, **kwargs)
        cfg = getattr(model, "pretrained_cfg", None) or getattr(model, "default_cfg", {}) or {}
        size = (cfg.get("input_size") or (3, 224, 224))[-1]
        return model, size
    import segmentation_models_pytorch as smp
    arch, encoder = name.split(":")
    return getattr(smp, arch)(encoder_name=encoder, encoder_weights=None, classes=3), 128

for name in names:
    try:
        torch.manual_seed(0)
        model, size = build(name)
        model.train()
        torch.manual_seed(1)
        x = torch.randn(2, 3, size, size)
        torch.manual_seed(2)
        out = model(x)
        tensors = []
        def collect(value):
            if torch.is_tensor(value):
                tensors.append(value)
            elif isinstance(value, dict):
                for key in sorted(value):
                    collect(value[key])
            elif isinstance(value, (list, tuple)):
                for item in value:
                    collect(item)
            elif hasattr(value, "logits"):
                collect(value.logits)
        collect(out)
        loss = sum(t.float().mean() for t in tensors)
        loss.backward()
        record = {"outputs": [t.detach().float().flatten()[:4096].tolist() for t in tensors],
                  "shapes": [list(t.shape) for t in tensors],
                  "grads": {k: p.grad.flatten()[:256].tolist() for k, p in model.named_parameters() if p.grad is not None}}
        results[name] = {"ok": True, "record": record}
    except Exception as error:
        results[name] = {"ok": False, "error": (type(error).__name__ + ": " + str(error)).splitlines()[0][:300]}
with open(out_path, "w") as handle:
    json.dump(results, handle)
'''


def package_dir(python: str, module: str) -> Path:
    code = f"import {module}, os; print(os.path.dirname({module}.__file__))"
    result = subprocess.run([python, "-c", code], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{module} does not import with {python}: {result.stderr.strip().splitlines()[-1:]}")
    return Path(result.stdout.strip())


def lint_fix(target: Path, unsafe: bool) -> Dict[str, object]:
    args = [sys.executable, "-m", "torchmemlint", "--select", "ALL", "--fix", "--no-cache",
            "--isolated", "--exit-zero", "-j", "2"]
    if unsafe:
        args.append("--unsafe-fixes")
    result = subprocess.run([*args, str(target)], capture_output=True, text=True,
                            cwd=target.parent, env={**os.environ, "PYTHONPATH": str(REPO)})
    fixed_line = next((line for line in result.stdout.splitlines()
                       if line.startswith(("Fixed ", "Found ", "All checks"))), "")
    return {"returncode": result.returncode, "summary": fixed_line or result.stdout.strip().splitlines()[-1:],
            "traceback": "Traceback" in result.stderr}


def run_models(python: str, root: Path, package: str, names: List[str], out: Path) -> Dict[str, dict]:
    subprocess.run([python, "-c", CHILD, str(root), package, str(out), json.dumps(names)],
                   check=False, timeout=3600)
    try:
        return json.loads(out.read_text())
    except (OSError, ValueError):
        return {name: {"ok": False, "error": "the child process died"} for name in names}


def compare(original: dict, fixed: dict) -> Dict[str, object]:
    if original["shapes"] != fixed["shapes"]:
        return {"identical": False, "max_abs_diff": None, "shapes": [original["shapes"], fixed["shapes"]]}
    worst = 0.0
    identical = True
    for left, right in zip(original["outputs"], fixed["outputs"]):
        for a, b in zip(left, right):
            if a != b:
                identical = False
                worst = max(worst, abs(a - b))
    if sorted(original["grads"]) != sorted(fixed["grads"]):
        return {"identical": False, "max_abs_diff": None, "grads": "different parameters"}
    for key, values in original["grads"].items():
        for a, b in zip(values, fixed["grads"][key]):
            if a != b:
                identical = False
                worst = max(worst, abs(a - b))
    return {"identical": identical, "max_abs_diff": worst}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", required=True, help="an interpreter with torch, torchvision, timm")
    parser.add_argument("--only", default=",".join(PACKAGES), help="torchvision,timm,smp")
    parser.add_argument("--quick", action="store_true", help="the first 6 models of each list")
    args = parser.parse_args()
    summary: Dict[str, object] = {
        "date": datetime.date.today().isoformat(),
        "torchmemlint_commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                              capture_output=True, text=True).stdout.strip(),
        "python": args.python,
        "machine": platform.machine(),
        "device": "cpu",
        "packages": {},
    }
    torch_version = subprocess.run([args.python, "-c", "import torch; print(torch.__version__)"],
                                   capture_output=True, text=True).stdout.strip()
    summary["torch"] = torch_version
    with tempfile.TemporaryDirectory(prefix="tml-fixed-") as scratch:
        for key in args.only.split(","):
            module, lint_target, names = PACKAGES[key]
            names = names[:6] if args.quick else names
            try:
                source = package_dir(args.python, module)
            except SystemExit as error:
                summary["packages"][key] = {"skipped": str(error)}
                print(f"{key}: skipped ({error})", flush=True)
                continue
            copies = {}
            for variant in ("original", "safe", "unsafe"):
                root = Path(scratch) / variant / key
                shutil.copytree(source, root / module, ignore=shutil.ignore_patterns("__pycache__"))
                copies[variant] = root
            report: Dict[str, object] = {"models": len(names)}
            for variant in ("safe", "unsafe"):
                report[f"lint_{variant}"] = lint_fix(copies[variant] / lint_target, variant == "unsafe")
            runs = {variant: run_models(args.python, copies[variant], key, names,
                                        Path(scratch) / f"{key}-{variant}.json")
                    for variant in copies}
            for variant in ("safe", "unsafe"):
                broken, differing, identical, compared = [], [], 0, 0
                for name in names:
                    before, after = runs["original"][name], runs[variant][name]
                    if not before["ok"]:
                        continue  # does not run unfixed here either (memory, missing extras)
                    if not after["ok"]:
                        broken.append({"model": name, "error": after["error"]})
                        continue
                    compared += 1
                    verdict = compare(before["record"], after["record"])
                    if verdict["identical"]:
                        identical += 1
                    else:
                        differing.append({"model": name, **verdict})
                report[variant] = {"compared": compared, "identical": identical,
                                   "broken": broken, "differing": differing}
            report["not_running_unfixed"] = {name: runs["original"][name]["error"]
                                             for name in names if not runs["original"][name]["ok"]}
            summary["packages"][key] = report
            print(f"{key}: safe {report['safe']['identical']}/{report['safe']['compared']} identical, "
                  f"{len(report['safe']['broken'])} broken; unsafe {report['unsafe']['identical']}/"
                  f"{report['unsafe']['compared']} identical, {len(report['unsafe']['broken'])} broken",
                  flush=True)
    RESULTS.write_text(json.dumps(summary, indent=1) + "\n")
    print(f"written {RESULTS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
