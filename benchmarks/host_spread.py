"""How far tok/s spreads between fresh processes: the harness before windows, and now.

Usage: python benchmarks/host_spread.py [--repeats 10] [--steps 64] [--warmup-steps 32]
                                        [--entry guard.engine:make] [--options 'layers = 2']
                                        [--old-rev REV] [--out FILE.json]

Runs the workload in fresh harness processes, alternating (ABBA) the harness as it was at
REV (default: the commit before tok/s windows came in), whose tok/s is one pass of `steps`
over its wall time with the collector on and `warmup_steps` of warmup, and the harness of
this checkout at the config's defaults (tok/s over at least workload.tok_per_s_min_s of decode,
now its tokens over their time, the median of 100 ms windows when this was written; warmup until
it settles, the collector off). Prints, per
harness, the spread of tok/s over its processes ((max - min) / median), its standard deviation
(of the logs, in %), and the repeats per arm `repeats_to_rule_out` asks for at a 1% threshold;
and, from the same new processes, the first timed pass alone (old-style, but warm and
without the collector). Side by side in one run, so the machine's state is shared. The
default engine (2 layers on a CPU: about 77 ms a pass of 64 steps) is as fast per pass as the
engine the issue measured.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from guard.config import GuardConfig  # noqa: E402
from guard.harness import HARNESS_SCRIPT  # noqa: E402
from guard.measure import interleave, repeats_to_rule_out  # noqa: E402
from guard.measure._runner import TOK_PER_S_WINDOW_S  # noqa: E402

THRESHOLD_PCT = 1.0


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def _before_windows() -> str:
    """The commit before the harness's tok/s windows came in."""
    first = _git("log", "--reverse", "--format=%H", "-S", "def window_rates", "--", "guard/harness/run.py")
    return _git("rev-parse", f"{first.splitlines()[0]}^") if first else "HEAD"


def _figures(values: list[float]) -> dict[str, Any]:
    return {
        "values": values,
        "median": statistics.median(values),
        "spread_pct": (max(values) - min(values)) / statistics.median(values) * 100,
        "sd_pct": statistics.stdev(math.log(v) for v in values) * 100,
        "repeats_for_1pct": repeats_to_rule_out([values], THRESHOLD_PCT),
    }


def _bad(message: str) -> int:
    print(f"host_spread: {message}", file=sys.stderr)
    return 2


def main(argv: list[str] | None = None) -> int:
    defaults = GuardConfig().workload
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=10, help="processes per harness")
    p.add_argument("--steps", type=int, default=64)
    p.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--entry", default="guard.engine:make")
    p.add_argument("--options", default="layers = 2", help="workload options, as TOML, e.g. 'layers = 20'")
    p.add_argument("--old-rev", default=None, help="the commit whose harness is the old one")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = p.parse_args(argv)
    if args.repeats < 2:
        return _bad("--repeats must be 2 or more")
    try:
        options = tomllib.loads(args.options)
    except tomllib.TOMLDecodeError as exc:
        return _bad(f"--options {args.options!r} is not TOML ({exc}), e.g. 'layers = 20'")
    try:
        old_rev = _git("rev-parse", args.old_rev or _before_windows())
        old_source = _git("show", f"{old_rev}:guard/harness/run.py")
    except subprocess.CalledProcessError as exc:
        return _bad(f"cannot read the old harness from git: {exc.stderr.strip()}")

    base = {"entry": args.entry, "root": str(ROOT), "options": options, "batch_sizes": [args.batch_size],
            "steps": args.steps, "warmup_steps": args.warmup_steps}
    new = base | {"tok_per_s_min_s": defaults.tok_per_s_min_s, "warmup_max_s": defaults.warmup_max_s,
                  "tok_per_s_window_s": TOK_PER_S_WINDOW_S}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        old_script = folder / "old" / "run.py"
        old_script.parent.mkdir()
        old_script.write_text(old_source + "\n")
        scripts = {"old": (old_script, base), "new": (HARNESS_SCRIPT, new)}
        for index, (arm, repeat) in enumerate(interleave(["old", "new"], args.repeats), start=1):
            script, spec = scripts[arm]
            spec_path, out_path = folder / f"{arm}-{repeat}.spec.json", folder / f"{arm}-{repeat}.json"
            spec_path.write_text(json.dumps(spec | {"arm": arm, "repeat": repeat}))
            proc = subprocess.run([sys.executable, str(script), str(spec_path), str(out_path)], cwd=folder,
                                  capture_output=True, text=True, timeout=600)
            result = json.loads(out_path.read_text()) if out_path.exists() else {}
            if proc.returncode != 0 or "error" in result:
                return _bad(f"{arm} repeat {repeat + 1} failed: {result.get('error') or proc.stderr[-2000:]}")
            run = result["runs"][0]
            runs[arm].append(run)
            detail = f" ({len(run['tok_per_s_windows'])} windows, {run['timed_passes']} passes)" if arm == "new" else ""
            print(f"[{index}/{2 * args.repeats}] {arm} repeat {repeat + 1}: {run['tok_per_s']:.1f} tok/s{detail}",
                  file=sys.stderr)

    series = {
        "old: one pass": [r["tok_per_s"] for r in runs["old"]],
        "new: this checkout's": [r["tok_per_s"] for r in runs["new"]],
        "new, its first pass alone": [args.batch_size * args.steps / r["wall_s"] for r in runs["new"]],
    }
    report = {
        "command": "python benchmarks/host_spread.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "old_rev": old_rev,
        "machine": {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                    "load_average_1min": [load_before[0], os.getloadavg()[0]]},  # before and after: a shared machine
        "entry": args.entry,
        "options": options,
        "repeats": args.repeats,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "batch_size": args.batch_size,
        "pass_s_old": statistics.median(r["wall_s"] for r in runs["old"]),
        "new_settings": {k: new[k] for k in ("tok_per_s_min_s", "warmup_max_s", "tok_per_s_window_s")},
        "new_windows_per_process": statistics.median(len(r["tok_per_s_windows"]) for r in runs["new"]),
        "new_passes_per_process": statistics.median(r["timed_passes"] for r in runs["new"]),
        "new_involuntary_switches": [r["host"]["involuntary_switches"] for r in runs["new"] if r.get("host")],
        # how far one process's windows spread: the noise inside a process that the median leaves out
        "new_window_spread_pct": [(max(w) - min(w)) / statistics.median(w) * 100
                                  for w in (r["tok_per_s_windows"] for r in runs["new"])],
        "series": {name: _figures(values) for name, values in series.items()},
    }
    print(f"one pass of {args.steps} steps: {report['pass_s_old'] * 1e3:.0f} ms (old harness, median)")
    for name, figures in report["series"].items():
        print(f"{name:28s} median {figures['median']:9.1f} tok/s  sd {figures['sd_pct']:6.2f}%  "
              f"spread {figures['spread_pct']:6.2f}%  repeats for {THRESHOLD_PCT:g}%: "
              f"{figures['repeats_for_1pct'] or 'more than 200'}")
    print(f"inside one new process, its windows spread {statistics.median(report['new_window_spread_pct']):.1f}% "
          f"(median over processes); involuntary switches per process "
          f"{min(report['new_involuntary_switches'], default=0)}-{max(report['new_involuntary_switches'], default=0)}")
    old_sd, new_sd = (report["series"][k]["sd_pct"] for k in ("old: one pass", "new: median of windows"))
    report["sd_ratio_new_over_old"] = new_sd / old_sd if old_sd else None
    if old_sd:
        print(f"sd new / old: {new_sd / old_sd:.2f}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
