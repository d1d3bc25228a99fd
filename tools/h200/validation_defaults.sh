#!/usr/bin/env bash
# The validation (python -m validation injected) at the guard's default settings, on one GPU,
# resumable across calls: 256 timed and 32 warmup steps, 5 processes per arm, 2 of them
# profiled, up to 4 rounds (measure.max_rounds) within the rule's own budget, the interval
# rule's alpha; the reference engine (20 layers) at batch size 1 (a validation pair measures
# one batch size).
#   BUDGET_S=560 [VD=h200-defaults] [OPTIONS='...'] tools/h200/validation_defaults.sh [KINDS]
# KINDS defaults to aa,idle-1,kernel-1. VD names the folder under docs/validation/:
#   h200-defaults   float32; its sizing was reused from docs/validation/h200/ (the injections'
#                   size does not depend on the settings above); calibration and pairs are new.
#   h200-bf16       OPTIONS='dtype = "bfloat16", head_splits = 8': the engine in bf16 with a
#                   split-K LM head, as the engines validation's ref-bf16 case. Sized, calibrated
#                   and paired here, from an empty folder.
# Unpacks docs/validation/$VD/ into /tmp/$VD where the machine lacks it, and always tars it back
# to $OUT/vd.tgz: `tar xzf vd.tgz --strip-components=1 -C docs/validation/$VD`.
# BUDGET_S: seconds from the call's start (bash's SECONDS, so a script sourced after others
# gets what they left) by which the folder must be tarred.
set -u
. tools/h200/wheels.sh
budget=${BUDGET_S:-565}
vd=${VD:-h200-defaults}
mkdir -p "/tmp/$vd"
[ -e "/tmp/$vd/settings.json" ] || [ ! -d "docs/validation/$vd" ] || cp -r "docs/validation/$vd/." "/tmp/$vd/"
chmod -R u+w "/tmp/$vd"
opts=()
[ -z "${OPTIONS:-}" ] || opts=(--options "$OPTIONS")
timeout -k 5 $((budget - 10 - SECONDS)) python3 -m validation injected --out "/tmp/$vd" --workdir "/tmp/g$vd" --resume \
  --budget-s $((budget - 45 - SECONDS)) --steps 256 --warmup-steps 32 --repeats 5 --profile-repeats 2 \
  --max-rounds 4 --kinds "${1:-aa,idle-1,kernel-1}" "${opts[@]}"
rc=$?
tar czf "$OUT/vd.tgz" -C /tmp "$vd"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
