#!/usr/bin/env bash
# Issue 49's GPU check: the house's refactor (one harness protocol, one box, the report's facts
# computed once) changes no behaviour on a GPU. Runs every test marked gpu at this tree, the
# harness's CUDA-graph, profiler, torch.compile, rank and mix paths among them, within BUDGET_S
# (default 560) seconds, and brings the log back as $OUT/pytest-gpu.log:
#   GIT_SHA=$(git rev-parse --short HEAD) tools/h200/item49.sh [extra pytest args]
# The device has no cmarkgfm, pyperf or docker; --continue-on-collection-errors lets the GPU tests
# run past the modules that need them.
set -u
. tools/h200/wheels.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git_sha=${GIT_SHA:-unknown}  # the caller names the commit: the device gets a tree, not its history
echo "tree: $git_sha" | tee -a "$OUT/gpu.txt"
timeout -k 10 "${BUDGET_S:-560}" python3 -m pytest -q -rA -m gpu tests/ -p no:cacheprovider \
  --continue-on-collection-errors --durations=15 --basetemp=/tmp/i49 "$@" 2>&1 | tee "$OUT/pytest-gpu.log" | tail -60
