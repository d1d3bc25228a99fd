#!/usr/bin/env bash
# The graph break in another module on one GPU: the two-file compiled workload (model in
# engine/model.py, the compiled decode step in engine/workload.py) with its graph-break-callee
# head, then its A/A pair, each a `guard run` kept under $OUT/ve (traces left out).
#   tools/h200/graph_break_callee.sh [extra validation args]
# Needs pydantic and msgspec as wheels in .whl/ (docs/validation.md, "Running it on the H200").
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 TORCHINDUCTOR_COMPILE_THREADS=1
rm -rf /tmp/ve /tmp/vew
python3 -m validation engines --out /tmp/ve --workdir /tmp/vew \
  --pairs two-file:graph-break-callee,two-file:aa --budget-s $((565 - SECONDS)) "$@" 2>&1 | tee "$OUT/validate.log"
rc=${PIPESTATUS[0]}
tar czf "$OUT/ve.tgz" --exclude=traces -C /tmp ve
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
