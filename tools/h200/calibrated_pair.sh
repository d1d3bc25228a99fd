#!/usr/bin/env bash
# On one GPU: how long the compiled and HF workloads take to make (import, model, fill) in a
# fresh process; the compiled workload calibrated at 5 processes per side, then its A/A pair at
# 3 per arm borrowing that spread (tools/h200/engine_pairs.sh, --calibrate 5); then the margin
# rule's tests on the GPU with what is left of the call.
#   END=440 tools/h200/calibrated_pair.sh    (END: seconds from the call's start to be done by;
#                                            SMOKE='' leaves out the make times)
set -u
end="${END:-440}"
. tools/h200/wheels.sh
for w in ${SMOKE-compiled hf}; do
  python3 -c "import time, torch; torch.zeros(1, device='cuda'); t = time.perf_counter()
from guard.workloads.$w import make; w = make(layers=4, d_model=1024); torch.cuda.synchronize()
print('$w engine', round(time.perf_counter() - t, 2), 's')" 2>&1 | tail -1 | tee -a "$OUT/engine-build.txt"
done
BUDGET_S=$((end - 60)) tools/h200/engine_pairs.sh compiled:aa --calibrate 5
rc=$?
left=$((end - SECONDS))
[ "$left" -gt 30 ] && timeout -k 5 "$left" python3 -m pytest -q -rA -p no:cacheprovider \
  tests/test_mix_margins.py tests/test_margins.py 2>&1 | tee "$OUT/pytest-margins.log"
exit "$rc"
