"""Does pinning the harness to CPUs (measure.cpus) steady tok/s between fresh processes?

Usage: python benchmarks/host_pinning.py [--cpus 2,3] [--repeats 10] [--steps 128]
                                         [--warmup-steps 32] [--options 'layers = 30'] [--out FILE.json]
                                         [--entry guard.workloads.compiled:make]

Runs a workload (the reference engine unless --entry names another) in fresh harness
processes, alternating an unpinned and a pinned one (the guard's own runner, so exactly what
`measure.cpus` does), and prints for each the spread of tok/s, of GPU ms per step and, where
the CPU counts them, of user-mode instructions per step over its processes, the ratio
pinned / unpinned of the standard deviations, and how many repeats per arm would keep a 1%
threshold at each noise (`repeats_to_rule_out`). Side by side in one run, so the machine's
state is shared.
On a CPU the "GPU ms" are host-clock ms per step. Default CPUs: the first one this process
may use; on a GPU host, pick cores on the GPU's NUMA node (`nvidia-smi topo -m`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from guard._errors import GuardError  # noqa: E402
from guard.measure import ArmTarget, BatchRun, HarnessSpec, check_cpus, repeats_to_rule_out, run_interleaved  # noqa: E402
from guard.sandbox import choose_box  # noqa: E402

THRESHOLD_PCT = 1.0


def _log_sd_pct(values: list[float]) -> float:
    return statistics.stdev(math.log(v) for v in values) * 100


def _figures(values: list[float]) -> dict[str, object]:
    return {
        "values": values,
        "spread_pct": (max(values) - min(values)) / statistics.median(values) * 100,
        "sd_pct": _log_sd_pct(values),
        "repeats_for_1pct": repeats_to_rule_out([values], THRESHOLD_PCT),
    }


def _value(run: BatchRun, metric: str) -> float:
    """A process's figure: tok/s, GPU ms per step, or its host's instructions per step."""
    if metric == "instructions_per_step":
        assert run.host is not None and run.host.instructions_per_step is not None
        return run.host.instructions_per_step
    return float(getattr(run, metric))


def _cpus(text: str) -> list[int]:
    try:
        return [int(c) for c in text.split(",")]
    except ValueError:
        raise GuardError(f"--cpus {text!r}: expected comma-separated CPU ids, e.g. 2,3") from None


def _bad(message: str) -> int:
    print(f"host_pinning: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpus", default=None, help="comma-separated CPU ids for the pinned arm")
    p.add_argument("--repeats", type=int, default=10, help="processes per arm")
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--warmup-steps", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--options", default="", help="workload options, as TOML, e.g. 'layers = 30'")
    p.add_argument("--entry", default="guard.engine:make", help="the workload, module:function")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    try:
        cpus = _cpus(args.cpus) if args.cpus else sorted(os.sched_getaffinity(0))[:1]
        options = tomllib.loads(args.options)
        check_cpus(cpus)
    except tomllib.TOMLDecodeError as exc:
        return _bad(f"--options {args.options!r} is not TOML ({exc}), e.g. 'layers = 30'")
    except GuardError as exc:
        return _bad(str(exc))
    spec = HarnessSpec(entry=args.entry, options=options,
                       batch_sizes=[args.batch_size], steps=args.steps, warmup_steps=args.warmup_steps,
                       profile_steps=0)
    # the guard's own engine, not a pull request's: it runs as whoever runs this (user "")
    box = choose_box()
    targets = [ArmTarget(name=name, python=Path(sys.executable), worktree=ROOT, box=box, cpus=pins, user="")
               for name, pins in (("unpinned", []), ("pinned", cpus))]
    with tempfile.TemporaryDirectory() as tmp:
        results = run_interleaved(targets, spec, args.repeats, Path(tmp), timeout_s=600,
                                  progress=lambda m: print(m, file=sys.stderr))
    failed = [f"{name}: {m.error}" for name, m in results.items() if m.error]
    if failed:
        return _bad(f"a harness process failed: {failed[0]}")
    hosts = [r.runs[0].host for m in results.values() for r in m.repeats]
    counted = all(h is not None and h.instructions_per_step for h in hosts)  # the CPU's counter, everywhere
    metrics = ("tok_per_s", "gpu_ms_per_step") + (("instructions_per_step",) if counted else ())
    values = {name: {metric: [_value(r.runs[0], metric) for r in m.repeats] for metric in metrics}
              for name, m in results.items()}
    arms = {
        name: {"cpus": results[name].repeats[0].environment.get("cpus"),
               "timer": results[name].repeats[0].runs[0].timer}
        | {metric: _figures(series) for metric, series in by_metric.items()}
        for name, by_metric in values.items()
    }
    sd = {name: {metric: _log_sd_pct(series) for metric, series in by_metric.items()}
          for name, by_metric in values.items()}
    ratio = {metric: sd["pinned"][metric] / sd["unpinned"][metric] if sd["unpinned"][metric] else None
             for metric in metrics}
    # each process's host-side figures as it gave them, to read a slow process by its windows
    processes = {name: [{"tok_per_s_windows": r.runs[0].tok_per_s_windows,
                         "host_ms_per_step": r.runs[0].host_ms_per_step,
                         "end_to_end_gpu_ms_per_step": r.runs[0].end_to_end_gpu_ms_per_step,
                         "cpus": r.runs[0].host.cpus if r.runs[0].host else None,
                         "host": r.runs[0].host.model_dump() if r.runs[0].host else None}
                        for r in m.repeats] for name, m in results.items()}
    report = {"entry": args.entry, "repeats": args.repeats, "steps": args.steps, "batch_size": args.batch_size,
              "options": spec.options, "arms": arms, "sd_ratio_pinned_over_unpinned": ratio,
              "processes": processes,
              "instructions_unavailable": None if counted else next(
                  (h.instructions_unavailable for h in hosts if h is not None and h.instructions_unavailable), None)}
    for name, arm in arms.items():
        for metric in metrics:
            f = arm[metric]
            print(f"{name:9s} {metric:21s} sd {f['sd_pct']:.3f}%  spread {f['spread_pct']:.2f}%  "
                  f"repeats for {THRESHOLD_PCT:g}%: {f['repeats_for_1pct'] or 'more than 200'}")
    print("sd pinned / unpinned: " + ", ".join(f"{m} {r:.2f}" if r is not None else f"{m} n/a"
                                               for m, r in ratio.items()))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
