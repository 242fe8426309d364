#!/usr/bin/env bash
# Measure every held-out label set (recall_holdout2 ... recall_holdoutLAST) and the families set
# with the torchmemlint of WORKTREE, two sets at a time; results go to WORKTREE/benchmarks/results
# under LABEL, logs to /tmp/all_sets-LABEL/. Wheels are cached per set in
# ${TML_CORPUS_DIR:-/tmp/tml-corpus}/holdoutN. Commit (or stash) result files before running.
#
#   bash benchmarks/all_sets.sh WORKTREE LABEL [LAST]     # e.g. a `git worktree add /tmp/x HEAD`
# Run it with the project's environment active (or PYTHON=.venv/bin/python): its python needs libcst.
set -u
WT=$(cd "$1" && pwd); LABEL=$2; LAST=${3:-52}
PY=${PYTHON:-python}
CACHE=${TML_CORPUS_DIR:-/tmp/tml-corpus}
LOG=/tmp/all_sets-$LABEL; mkdir -p "$LOG"
cd "$WT"
run() {
  N=$1
  PYTHONPATH=$WT $PY benchmarks/recall_families.py --labels benchmarks/results/recall_holdout${N}_labels.json \
     --cache "$CACHE/holdout$N" --corpus-dir "$CACHE/holdout$N" --tool "$WT" --label "$LABEL" > "$LOG/set$N.txt" 2>&1
  echo "set $N rc=$?" >> "$LOG/done.txt"
}
export -f run; export WT LABEL PY LOG CACHE
seq 2 "$LAST" | xargs -P 2 -I{} bash -c 'run {}'
PYTHONPATH=$WT $PY benchmarks/recall_families.py --tool "$WT" --label "$LABEL" > "$LOG/families.txt" 2>&1
echo "families rc=$?" >> "$LOG/done.txt"
