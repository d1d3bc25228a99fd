#!/usr/bin/env bash
# torch.compile's caches shared per arm (measure.compile_cache) on and off, side by side, on one GPU.
#   tools/h200/compile_cache.sh ttv      the compiled workload (bf16, reduce-overhead, 4 layers of 1024),
#                                        an A/A pair at 3 repeats, timed by stage and process
#   tools/h200/compile_cache.sh engines [PAIRS]  pairs of the engines validation (default compiled:aa;
#                                        hf:aa for the HF Llama), cache on then off, each pair's
#                                        processes by phase; one pair per setting fits a 10-minute call
set -u
case "${1:-}" in
  ttv)
    python3 benchmarks/time_to_verdict.py --workload compiled --compile-cache both --repeats 3 --steps 64 \
      --warmup-steps 16 --profile-steps 8 --out "$OUT/time-to-verdict-compiled-h200.json" \
      > "$OUT/time-to-verdict-compiled-h200.txt" 2> "$OUT/time-to-verdict-compiled-h200.log"
    rc=$?
    cat "$OUT/time-to-verdict-compiled-h200.txt" ;;
  engines)
    rc=0
    for setting in on off; do
      rm -rf "/tmp/guard-engines-cache-$setting"
      python3 -m validation engines --pairs "${2:-compiled:aa}" --compile-cache "$setting" --budget-s 280 \
        --out "$OUT/engines-cache-$setting" --workdir "/tmp/guard-engines-cache-$setting" || rc=$?
      python3 benchmarks/process_phases.py "$OUT/engines-cache-$setting"/pairs/* | tee "$OUT/phases-cache-$setting.txt"
    done ;;
  *) echo "compile_cache.sh: ttv or engines" >&2; exit 2 ;;
esac
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
