"""TML6xx on real code: count each rule's findings on the corpora and attach the hand verdicts.

    python benchmarks/tml6xx_corpus.py                 # lint every corpus dir, write results
    python benchmarks/tml6xx_corpus.py --table         # print the README table from the results

Corpora (read-only, as the speed and corpus benchmarks extract them): `<cache>/M` (timm 1.0.31),
`<cache>/S` (smp 0.6.0), `<cache>/TV` (torchvision models) and `<cache>/findings/<pkg>-<ver>/`
(the 11 packages of corpus_findings.py); `<cache>` is `--cache`, else `$TML_CORPUS_DIR`, else
`/tmp/tml-corpus`.  Each directory is linted with
`torchmemlint --select TML6 --isolated --exit-zero --output-format json -j 1 DIR` (TML605, off by
default, is selected too).  VERDICTS below are the hand judgments (each finding read in the
extracted code); a finding without one is listed as "not judged".
Results: `results/tml6xx_corpus.json`.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "tml6xx_corpus.json"

# "<corpus dir>/<path>:<row> <code>" -> (verdict, reason)
VERDICTS: Dict[str, tuple] = {}
_JUDGED = {
    'timm/models/convit.py:202 TML601': ('true', 'MHSA of ConViT: q@kᵀ*scale, softmax, nn.Dropout, @v over all N tokens, weights not kept; the fix keeps scale and dropout'),
    'timm/models/crossvit.py:133 TML601': ('true', 'cross-attention of the class token: the pattern is there, but L=1, so the weights are B·H·1·N and the saving is small'),
    'timm/models/csatv2.py:414 TML601': ('false', "q, k, v are 2-D (B, N) after unbind(-1): SDPA's fused kernels need 4-D, it would run the math path and keep the same weights; no saving"),
    'timm/models/edgenext.py:173 TML601': ('true', 'XCA: the C×C weights per head are kept for backward; reported without a fix since the temperature is a learned tensor (folding it into q would work)'),
    'timm/models/efficientformer.py:122 TML601': ('true', 'attention with a learned additive bias: SDPA takes it as an additive attn_mask'),
    'timm/models/gcvit.py:235 TML601': ('true', 'GCViT window attention (q pre-scaled, k transposed then .contiguous()), relative position bias module on the scores, nn.Dropout, no fused path: weights kept; no fix (the bias is a module SDPA cannot run)'),
    'timm/models/levit.py:329 TML601': ('true', 'LeViT attention, token layout: k split from one projection and permuted to (B, h, d, N), learned bias added after scaling; the fix passes k transposed back, the bias as an additive attn_mask'),
    'timm/models/levit.py:464 TML601': ('true', 'LeViT attention-subsample, token layout: as :329 with queries from a subsampled grid'),
    'timm/models/tnt.py:67 TML601': ('true', 'TNT inner/outer attention, plain eager attention with nn.Dropout'),
    'timm/models/volo.py:373 TML601': ('true', 'class attention: q pre-scaled, L=1 (small saving); the fix passes scale=1.0, correct'),
    'segmentation_models_pytorch/encoders/mix_transformer.py:157 TML601': ('true', 'SegFormer efficient self-attention (keys spatially reduced): N×N/R² weights per layer at high resolution'),
    'torchvision/models/maxvit.py:207 TML601': ('true', 'MaxViT block/grid attention with a relative positional bias: the weights are kept; reported without a fix (5-D einsum, the fused kernels take 4-D)'),
    'kornia/feature/dedode/transformer/layers/attention.py:81 TML601': ('true', 'DINOv2-style attention with q pre-scaled and nn.Dropout: the fix passes scale=1.0 and the dropout p'),
    'kornia/geometry/transform/image_registrator.py:359 TML605': ('false', 'the loop fits a handful of transform parameters (a similarity/homography) to two images: no network activations to halve, and bf16 would cost registration accuracy'),
    'kornia/models/tiny_vit.py:357 TML601': ('true', 'TinyViT attention with a learned bias added after scaling: an additive attn_mask'),
    'kornia/models/vit.py:98 TML601': ('true', 'ViT attention written with einsum (4-D), nn.Dropout on the weights'),
    'monai/networks/blocks/cablock.py:144 TML601': ('true', 'channel attention (Restormer-style) with a learned temperature tensor: weights kept; no fix offered (tensor scale)'),
    'monai/networks/nets/navit.py:176 TML601': ('true', 'NaViT attention with a boolean mask filled with -finfo.max and a Dropout: the fix passes attn_mask=attn_mask (fully masked rows differ, as the doc says)'),
    # packages judged once, under findings/
    "transformers/models/levit/modeling_levit.py:208 TML601": ("true", "LeViT attention with learned biases added after scaling: additive attn_mask, no weights kept by the caller"),
    "transformers/models/levit/modeling_levit.py:292 TML601": ("true", "LeViT subsample attention, same form (queries from a subsampled grid)"),
    "transformers/models/mobilevit/modeling_mobilevit.py:227 TML601": ("true", "MobileViT self-attention, BERT-style with nn.Dropout; this class does not return the probabilities"),
    "transformers/models/nystromformer/modeling_nystromformer.py:207 TML601": ("debatable", "Nystrom kernel_1 = softmax(q k_landmarksᵀ) times pinv(kernel_2): SDPA can express it, but the weights are L×m with m=64 landmarks, so the saving is small"),
    "transformers/models/nystromformer/modeling_nystromformer.py:208 TML601": ("debatable", "Nystrom kernel_3 = softmax(q_landmarks kᵀ + mask) @ v: m×S weights with m=64, linear in S; small saving"),
    "ultralytics/models/sam/modules/tiny_encoder.py:511 TML601": ("true", "TinyViT attention in SAM's image encoder with a learned bias (train/eval variants, kept as one conditional attn_mask)"),
}
for _finding in [k for k in _JUDGED if k.startswith(("transformers/", "ultralytics/"))]:
    VERDICTS["findings/%s/%s" % ({"transformers": "transformers-5.24.0", "ultralytics": "ultralytics-8.4.190"}[_finding.split("/")[0]], _finding)] = _JUDGED.pop(_finding)
# timm, smp and torchvision appear both as M/S/TV and under findings/: one verdict for both
_PREFIXES = ("M/", "S/", "TV/", "findings/timm-1.0.31/", "findings/segmentation_models_pytorch-0.6.0/",
             "findings/torchvision-0.29.1/", "findings/kornia-0.9.0/", "findings/monai-1.6.1/")
for _prefix in _PREFIXES:
    for _finding, _verdict in _JUDGED.items():
        VERDICTS[_prefix + _finding] = _verdict


def corpus_dirs(cache: Path) -> List[Path]:
    dirs = [cache / name for name in ("M", "S", "TV")]
    findings = cache / "findings"
    if findings.is_dir():
        dirs += sorted(p for p in findings.iterdir() if p.is_dir())
    return [d for d in dirs if d.is_dir()]


def lint(directory: Path) -> List[Dict[str, Any]]:
    command = [
        sys.executable, "-m", "torchmemlint", "--select", "TML6", "--isolated", "--exit-zero",
        "--output-format", "json", "-j", "1", str(directory),
    ]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if run.returncode != 0:
        raise SystemExit("torchmemlint failed on %s: %s" % (directory, run.stderr.strip()[-500:]))
    return json.loads(run.stdout)


def key(cache: Path, finding: Dict[str, Any]) -> str:
    path = Path(finding["filename"]).resolve().relative_to(cache.resolve())
    return "%s:%d %s" % (path, finding["location"]["row"], finding["code"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path(os.environ.get("TML_CORPUS_DIR", "/tmp/tml-corpus")))
    parser.add_argument("--table", action="store_true", help="print the README table from the results")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(RESULTS.read_text())))
        return
    corpora = []
    for directory in corpus_dirs(args.cache):
        findings = lint(directory)
        counts = collections.Counter(f["code"] for f in findings)
        corpora.append({
            "corpus": str(directory.relative_to(args.cache)),
            "counts": dict(sorted(counts.items())),
            "findings": [
                {
                    "finding": key(args.cache, f),
                    "fix": (f.get("fix") or {}).get("applicability"),
                    "message": f["message"],
                    "verdict": VERDICTS.get(key(args.cache, f), ("not judged", ""))[0],
                    "reason": VERDICTS.get(key(args.cache, f), ("not judged", ""))[1],
                }
                for f in findings
            ],
        })
        print("%-40s %s" % (directory.name, dict(sorted(counts.items()))), flush=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    results = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "linter_commit": commit,
        "command": "torchmemlint --select TML6 --isolated --exit-zero --output-format json -j 1 DIR",
        "corpora": corpora,
    }
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results))
    print("wrote", RESULTS)


def table(results: Dict[str, Any]) -> str:
    rules: Dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for corpus in results["corpora"]:
        for finding in corpus["findings"]:
            code = finding["finding"].rsplit(" ", 1)[1]
            rules[code]["findings"] += 1
            rules[code][finding["verdict"]] += 1
            rules[code]["with a fix"] += finding["fix"] is not None
    lines = ["| rule | findings | with a fix | true | false | debatable | not judged |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for code in sorted(rules):
        c = rules[code]
        lines.append("| %s | %d | %d | %d | %d | %d | %d |" % (
            code, c["findings"], c["with a fix"], c["true"], c["false"], c["debatable"], c["not judged"]))
    per = ["| corpus | %s |" % " | ".join(sorted(rules)), "|---|%s" % ("---:|" * len(rules))]
    for corpus in results["corpora"]:
        per.append("| %s | %s |" % (corpus["corpus"], " | ".join(str(corpus["counts"].get(code, 0)) for code in sorted(rules))))
    return "\n".join(lines) + "\n\n" + "\n".join(per)


if __name__ == "__main__":
    main()
