#!/usr/bin/env bash
# Pairs of the engines validation on one GPU (python -m validation engines), each a `guard run`
# kept under $OUT/ve.tgz (traces left out), with where each pair's processes spent their
# seconds (benchmarks/process_phases.py) in $OUT/phases.txt.
#   tools/h200/engine_pairs.sh PAIRS [extra validation args]
#   e.g. tools/h200/engine_pairs.sh compiled:aa,two-file:graph-break-callee,hf:aa
# Needs pydantic and msgspec as wheels in .whl/ (docs/notebook/validation.md, "Running it on the H200").
# BUDGET_S (default 565) is the seconds from the call's start by which the last pair must end.
set -u
pairs="${1:?tools/h200/engine_pairs.sh PAIRS [extra validation args]}"; shift
. tools/h200/wheels.sh
export TORCHINDUCTOR_COMPILE_THREADS=1
rm -rf /tmp/ve /tmp/vew
python3 -m validation engines --out /tmp/ve --workdir /tmp/vew --pairs "$pairs" \
  --budget-s $((${BUDGET_S:-565} - SECONDS)) "$@" 2>&1 | tee "$OUT/validate.log"
rc=${PIPESTATUS[0]}
python3 benchmarks/process_phases.py /tmp/ve/pairs/* > "$OUT/phases.txt" 2>&1
tar czf "$OUT/ve.tgz" --exclude=traces -C /tmp ve
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
