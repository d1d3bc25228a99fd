#!/usr/bin/env bash
# The validation (python -m validation injected) at the guard's default settings, on one GPU,
# resumable across calls: 256 timed and 32 warmup steps, 5 processes per arm, 2 of them
# profiled, up to 4 rounds (measure.max_rounds) within the rule's own budget, the interval
# rule's alpha; the default engine (20 layers) at batch size 1 (a validation pair measures one
# batch size). The sizing is the one docs/validation/h200/ measured for this engine (the
# injections' size does not depend on the settings above); calibration and pairs are new.
#   BUDGET_S=560 tools/h200/validation_defaults.sh [KINDS]    (default aa,idle-1,kernel-1)
# Unpacks docs/validation/h200-defaults/ into /tmp/vd where the machine lacks it, and always
# tars it back to $OUT/vd.tgz: `tar xzf vd.tgz --strip-components=1 -C docs/validation/h200-defaults`.
# BUDGET_S: seconds from the call's start (bash's SECONDS, so a script sourced after others
# gets what they left) by which the folder must be tarred.
set -u
. tools/h200/wheels.sh
budget=${BUDGET_S:-565}
mkdir -p /tmp/vd; [ -e /tmp/vd/sizing.json ] || cp -r docs/validation/h200-defaults/. /tmp/vd/; chmod -R u+w /tmp/vd
timeout -k 5 $((budget - 10 - SECONDS)) python3 -m validation injected --out /tmp/vd --workdir /tmp/gvd --resume \
  --budget-s $((budget - 45 - SECONDS)) --steps 256 --warmup-steps 32 --repeats 5 --profile-repeats 2 \
  --max-rounds 4 --kinds "${1:-aa,idle-1,kernel-1}"
rc=$?
tar czf "$OUT/vd.tgz" -C /tmp vd
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
