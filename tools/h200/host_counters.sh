#!/usr/bin/env bash
# On the GPU machine: whether its CPU counts user-mode instructions for an unprivileged
# process, the harness's per-window host state, and instructions per step beside tok/s on the
# compiled engine, unpinned and pinned, in fresh processes.
#   tools/h200/host_counters.sh [repeats (default 8)] [cpus for the pinned arm (default 2,3)]
set -u
repeats="${1:-8}"; cpus="${2:-2,3}"
{ echo "perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid 2>&1)"
  echo "cpufreq: $(cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq 2>&1)"
  grep -m1 -o 'hypervisor' /proc/cpuinfo || echo "no hypervisor flag"; } | tee "$OUT/host-counters-machine.txt"
python3 -m pytest -q -rA -p no:cacheprovider tests/test_host_counters.py 2>&1 | tee "$OUT/pytest-host-counters.log"
python3 benchmarks/host_pinning.py --entry guard.workloads.compiled:make --repeats "$repeats" --cpus "$cpus" \
  --out "$OUT/host-counters-compiled-h200.json" 2>&1 | tee "$OUT/host-counters-compiled-h200.log"
