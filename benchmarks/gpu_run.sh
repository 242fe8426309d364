#!/usr/bin/env bash
# One GPU lease's checks, in one command (a lease is short: every part has its own time limit).
#
#   OUT=/some/dir bash benchmarks/gpu_run.sh
#
# Writes into $OUT: env.txt (GPU, driver, torch/transformers/timm versions), profile_*.txt
# (`torchmemlint profile --device cuda` on two fixtures: the CUDA path of the CLI, findings
# verified by measuring their fixes on the GPU), estimates.log and budget.log (the output of
# benchmarks/gpu_check.py and of its --budget 8GiB mode) and gpu_check.json (their results,
# written after each model, so a part stopped at its limit keeps the models it finished).
# Copy gpu_check.json into benchmarks/results/ afterwards.  Needs libcst importable (on a
# machine without it, carry its wheel and put it on PYTHONPATH).
set -u
OUT=${OUT:-/tmp/gpu_run}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
{
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
  "$PY" -c "import transformers, timm; print('transformers', transformers.__version__, 'timm', timm.__version__)"
  "$PY" -c "import libcst; print('libcst', libcst.__file__)"
} > "$OUT/env.txt" 2>&1
timeout 45 "$PY" -m torchmemlint profile fixtures/models/leaky_convnet.py:LeakyConvNet \
  --input-shape 64,3,128,128 --device cuda > "$OUT/profile_leaky_convnet.txt" 2>&1
echo "profile leaky_convnet: exit $?" >> "$OUT/env.txt"
timeout 60 "$PY" -m torchmemlint profile fixtures/models/transformer_lm.py:TransformerLM \
  --input-shape 4,512,int64 --device cuda > "$OUT/profile_transformer_lm.txt" 2>&1
echo "profile transformer_lm: exit $?" >> "$OUT/env.txt"
timeout "${ESTIMATES_S:-250}" "$PY" benchmarks/gpu_check.py --results "$OUT/gpu_check.json" > "$OUT/estimates.log" 2>&1
echo "estimates: exit $?" >> "$OUT/env.txt"
timeout "${BUDGET_S:-180}" "$PY" benchmarks/gpu_check.py --budget 8GiB --results "$OUT/gpu_check.json" > "$OUT/budget.log" 2>&1
echo "budget: exit $?" >> "$OUT/env.txt"
cat "$OUT/env.txt" "$OUT/estimates.log" "$OUT/budget.log"
