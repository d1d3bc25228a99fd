#!/usr/bin/env bash
# Issue 36 item 7 (and item 6's GPU run) on one machine, in calls of at most 10 minutes:
#   tools/h200/item7.sh demo      the demo at the guard before the cuts (69dc49f, carried as
#                                 build/before: `git archive 69dc49f guard tools benchmarks
#                                 templates pyproject.toml validation | tar -x -C build/before`)
#                                 and at this tree, one after the other on the same machine
#   tools/h200/item7.sh compiled  the compiled engine's A/A pair at the guard's defaults
#   tools/h200/item7.sh added-op  decision_v4.py's added-op pair (a copy and kernels per layer)
#   tools/h200/item7.sh all       demo, then compiled and added-op while BUDGET_S (590) seconds hold them
# Each writes under $OUT/item7/ and the GPU's name to $OUT/item7/gpu.txt.
set -u
what="${1:?tools/h200/item7.sh demo|compiled|added-op|all}"
if [ "$what" = all ]; then
  "$0" demo
  [ $((${BUDGET_S:-590} - SECONDS)) -gt 230 ] && "$0" compiled
  [ $((${BUDGET_S:-590} - SECONDS)) -gt 200 ] && "$0" added-op
  exit 0
fi
. tools/h200/wheels.sh
mkdir -p "$OUT/item7"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/item7/gpu.txt" 2>&1
case "$what" in
  demo)
    [ -d build/before/guard ] || { echo "item7.sh: no build/before (see the header)" >&2; exit 2; }
    (cd build/before && export PYTHONPATH=/tmp/site:$PWD && python3 tools/h200/decision_v4.py \
      --out "$OUT/item7/before" --work /tmp/i7b --only demo --budget-s 560)
    python3 tools/h200/decision_v4.py --out "$OUT/item7/after" --work /tmp/i7a --only demo --budget-s 560
    ;;
  compiled)
    export TORCHINDUCTOR_COMPILE_THREADS=1
    python3 benchmarks/time_to_verdict.py --workload compiled --guard-defaults --compile-cache on \
      --out "$OUT/item7/ttv-compiled.json" > "$OUT/item7/ttv-compiled.txt" 2> "$OUT/item7/ttv-compiled.log"
    ;;
  added-op)
    python3 tools/h200/decision_v4.py --out "$OUT/item7/added-op" --work /tmp/i7o --only added-op --budget-s 560
    ;;
  *) echo "item7.sh: unknown part $what" >&2; exit 2 ;;
esac
