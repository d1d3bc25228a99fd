#!/usr/bin/env bash
# The fallback scenarios on one GPU, as their GPU tests run them, with every file they wrote
# copied under $OUT: pytest keeps each test's folder under --basetemp.
#   tools/h200/scenarios.sh fallback|fallback-win|engine [extra pytest args]
set -u
which="$1"; shift
base=/tmp/guard-h200-$which
rm -rf "$base"
case "$which" in
  fallback) tests=(tests/test_demo_scenarios.py -k "regression_named_padding") ;;
  fallback-win) tests=(tests/test_demo_scenarios.py -k "not_flagged") ;;
  engine) tests=(tests/test_engine_mix.py tests/test_mix_passes.py tests/test_engine.py) ;;
  *) echo "scenarios.sh: fallback, fallback-win or engine" >&2; exit 2 ;;
esac
python3 -m pytest -q -rA -m gpu --continue-on-collection-errors -p no:cacheprovider --basetemp="$base" \
  "${tests[@]}" "$@" 2>&1 | tee "$OUT/pytest-$which.log"
rc=${PIPESTATUS[0]}
for out in "$base"/*/out; do
  [ -d "$out" ] && [ ! -L "${out%/out}" ] || continue  # pytest's "current" link names one of them again
  dest="$OUT/$which"
  mkdir -p "$dest"
  cp "$out"/report.json "$out"/comment.md "$out"/progress.log "$dest"/ 2>/dev/null
  cp "$out"/*.svg "$dest"/ 2>/dev/null
  [ -d "$out/runs" ] && tar czf "$dest/runs.tar.gz" -C "$out" runs
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1
exit "$rc"
