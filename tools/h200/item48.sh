#!/usr/bin/env bash
# Issue 48's GPU runs, on one machine, in calls of at most 10 minutes; each part resumes where a
# call on the same warm machine stopped (its figures stay under /tmp/i48), and everything made so
# far comes back as $OUT/i48.tgz:
#   tools/h200/item48.sh pairs   tools/h200/decision_v4.py's fallback-mix pair (an eager fallback
#                                removed: faster end to end, more GPU work per padded step; expected
#                                improvement) and host-only pair (GPU time unchanged, the host slower;
#                                expected regression titled end to end), at this tree
#   tools/h200/item48.sh demo    the demo's time to verdict with the guard before issue 48 (carried as
#                                build/before, see tools/h200/verdict_time.sh) and at this tree, one
#                                after the other
#   tools/h200/item48.sh times   the time to verdict at this tree of the built-in Hugging Face
#                                workload with torch.compile, the compiled engine and the MoE mix
# BUDGET_S (default 570) is the call's seconds; a part that would not fit is left for the next call.
set -u
what="${1:?tools/h200/item48.sh pairs|demo|times}"
. tools/h200/wheels.sh
mkdir -p /tmp/i48
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/i48/gpu.txt 2>&1
left() { echo $((${BUDGET_S:-570} - SECONDS)); }
case "$what" in
  pairs)
    python3 tools/h200/decision_v4.py --out /tmp/i48/pairs --work /tmp/i48w --only fallback-mix,host-only \
      --budget-s "$(left)" ;;
  demo)
    BUDGET_S=$(left) tools/h200/verdict_time.sh before demo
    cp -r /tmp/ttv/. /tmp/i48/ttv/ 2>/dev/null || { mkdir -p /tmp/i48/ttv && cp -r /tmp/ttv/. /tmp/i48/ttv/; }
    BUDGET_S=$(left) tools/h200/verdict_time.sh after demo
    cp -r /tmp/ttv/. /tmp/i48/ttv/ ;;
  times)
    BUDGET_S=$(left) tools/h200/verdict_time.sh after hf,compiled,mix
    mkdir -p /tmp/i48/ttv && cp -r /tmp/ttv/. /tmp/i48/ttv/ ;;
  *) echo "item48.sh: unknown part $what" >&2; exit 2 ;;
esac
tar czf "$OUT/i48.tgz" -C /tmp i48
