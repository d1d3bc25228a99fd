#!/usr/bin/env bash
# The margin rule on one GPU: its tests (the reference engine captured in CUDA graphs, float32
# and bf16), then validation's bf16 engine pairs, whose reports keep agreement.margin_floor and
# each arm's confident disagreements; a summary line per pair under $OUT.
#   tools/h200/margins.sh [PAIRS]   (default: the A/As, a graph break, a changed output)
set -u
pairs="${1:-ref-bf16:aa,compiled:aa,hf:aa,compiled:graph-break,compiled:output-change}"
python3 -m pytest -q -rA -p no:cacheprovider tests/test_margins.py 2>&1 | tee "$OUT/pytest-margins.log"
rc=${PIPESTATUS[0]}
python3 -m validation engines --out "$OUT/engines" --workdir /tmp/guard-h200-margins --pairs "$pairs" \
  --repeats 3 --budget-s 480 2>&1 | tail -40 > "$OUT/engines.log"
for report in "$OUT"/engines/pairs/*/report.json; do
  [ -f "$report" ] || continue
  python3 - "$report" >> "$OUT/margins.txt" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
for batch in report["batch_sizes"]:
    found = batch.get("agreement") or {}
    arms = {a["arm"]: (a["disagreements"], a.get("confident"), a.get("confident_compared"), a["output_changed"])
            for a in found.get("arms", [])}
    print(sys.argv[1].split("/")[-2], report["verdict"], found.get("margin_floor"), arms)
PY
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
