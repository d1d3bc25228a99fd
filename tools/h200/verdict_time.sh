#!/usr/bin/env bash
# Issue 48 item 7: the time to verdict at the guard's defaults, by stage and by each measured
# process's phases (benchmarks/time_to_verdict.py), on four workloads:
#   demo      the demo's pair (piecewise capture, with its ablation arm)
#   hf        an A/A pair of guard.workloads.hf (transformers, torch.compile reduce-overhead)
#   compiled  an A/A pair of guard.workloads.compiled (torch.compile reduce-overhead)
#   mix       an A/A pair of the demo's MoE engine over its batch-size mix (scenario fallback)
#
#   tools/h200/verdict_time.sh before [NAMES]   the guard before issue 48, carried as build/before:
#       rm -rf build/before && mkdir -p build/before && git archive 4815a49 guard templates validation \
#         pyproject.toml | tar -x -C build/before
#     run with this tree's benchmarks/time_to_verdict.py (its --workload hf, --scenario and --aa)
#   tools/h200/verdict_time.sh after [NAMES]    this tree
# NAMES: comma-separated, default demo,hf,compiled,mix. A workload starts only while BUDGET_S
# (default 570) seconds leave it 200; its figures stay in /tmp/ttv (a warm machine's second call
# skips what is there) and all of them come back as $OUT/ttv-SIDE.tgz, with a summary on stdout.
set -u
side="${1:?tools/h200/verdict_time.sh before|after [demo,hf,compiled,mix]}"
names="${2:-demo,hf,compiled,mix}"
. tools/h200/wheels.sh
here=$PWD
case "$side" in
  before)
    [ -d build/before/guard ] || { echo "verdict_time.sh: no build/before (see the header)" >&2; exit 2; }
    mkdir -p build/before/benchmarks
    cp benchmarks/time_to_verdict.py build/before/benchmarks/
    root=$here/build/before ;;
  after) root=$here ;;
  *) echo "verdict_time.sh: before or after, not $side" >&2; exit 2 ;;
esac
export PYTHONPATH=/tmp/site:$root TORCHINDUCTOR_COMPILE_THREADS=1
mkdir -p /tmp/ttv
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > /tmp/ttv/gpu.txt 2>&1
for name in ${names//,/ }; do
  stem=/tmp/ttv/$side-$name
  [ -s "$stem.json" ] && { echo "verdict_time: $side $name done already"; continue; }
  if [ $((${BUDGET_S:-570} - SECONDS)) -lt 200 ]; then
    echo "verdict_time: stopping before $side $name: the budget is spent; call again"; break
  fi
  case "$name" in
    demo) flags=() ;;
    hf) flags=(--workload hf --guard-defaults) ;;
    compiled) flags=(--workload compiled --guard-defaults) ;;
    mix) flags=(--scenario fallback --aa) ;;
    *) echo "verdict_time.sh: unknown workload $name" >&2; exit 2 ;;
  esac
  echo "verdict_time: $side $name (${flags[*]:-defaults}) at $SECONDS s"
  (cd "$root" && timeout -k 5 $((${BUDGET_S:-570} - SECONDS)) python3 benchmarks/time_to_verdict.py "${flags[@]}" \
    --out "$stem.json" > "$stem.txt" 2> "$stem.log")
  echo "verdict_time: $side $name exit $? at $SECONDS s"; head -3 "$stem.txt"
done
tar czf "$OUT/ttv-$side.tgz" -C /tmp ttv
for f in /tmp/ttv/$side-*.txt; do echo "== $f"; cat "$f"; done
