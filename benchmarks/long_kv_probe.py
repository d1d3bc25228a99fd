"""The reference engine's `long_kv_layers` curve, one fresh process per setting and repeat.

Usage: python benchmarks/long_kv_probe.py --out DIR [--layers 30] [--settings 0,1,2,3,4]
       [--repeats 2] [--steps 128]

For each setting: GPU time per decode step at batch size 1 (median of CUDA-event step
times), the hash of the generated tokens, and a profiler trace of 16 steps in DIR, to read
with `guard diff DIR/long-kv-0-r0.json.gz DIR/long-kv-2-r0.json.gz --steps 16`. The order
of the settings alternates between repeats, so drift of the machine falls on all of them.
Needs a CUDA GPU.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
from pathlib import Path

PROFILE_STEPS = 16
WARMUP_STEPS = 32


def _one(layers: int, setting: int, steps: int, trace: Path) -> dict[str, object]:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from engine_probe import kernels_per_step, time_steps

    from guard.engine import RefEngine

    engine = RefEngine(layers=layers, long_kv_layers=setting)
    engine.setup(1)
    tokens = [engine.step().tolist() for _ in range(WARMUP_STEPS)]
    timed = time_steps(engine, steps)
    profiled = kernels_per_step(engine, PROFILE_STEPS, trace)
    engine.teardown()
    return {
        "setting": setting,
        "gpu_ms_per_step": timed["gpu_ms_per_step"],
        "kernels_per_step": profiled["kernels_per_step"],
        "tokens_sha256": hashlib.sha256(json.dumps(tokens).encode()).hexdigest(),
        "gpu": torch.cuda.get_device_name(),
    }


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--layers", type=int, default=30)
    parser.add_argument("--settings", default="0,1,2,3,4", help="long_kv_layers values, comma-separated")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=128)
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process: one setting
    parser.add_argument("--trace", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args()


def main() -> int:
    args = _args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    if args.one is not None:
        print(json.dumps(_one(args.layers, args.one, args.steps, args.trace)))
        return 0
    try:
        settings = [int(s) for s in args.settings.split(",")]
    except ValueError:
        print(f"long_kv_probe: --settings takes integers separated by commas, not {args.settings!r}", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("long_kv_probe: needs a CUDA GPU (the setting changes GPU kernels); none is visible", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for repeat in range(args.repeats):
        for setting in settings if repeat % 2 == 0 else settings[::-1]:
            trace = args.out / f"long-kv-{setting}-r{repeat}.json.gz"
            command = [sys.executable, __file__, "--out", str(args.out), "--layers", str(args.layers),
                       "--steps", str(args.steps), "--one", str(setting), "--trace", str(trace)]
            proc = subprocess.run(command, capture_output=True, text=True)
            if proc.returncode != 0:
                print(f"long_kv_probe: setting {setting} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
                return 2
            row = json.loads(proc.stdout.strip().splitlines()[-1]) | {"repeat": repeat}
            rows.append(row)
            print(f"[{len(rows)}/{args.repeats * len(settings)}] long_kv_layers {setting} repeat {repeat}: "
                  f"{row['gpu_ms_per_step']:.4f} ms per step, {row['kernels_per_step']:.0f} kernels", flush=True)
    summary = {"layers": args.layers, "steps": args.steps, "rows": rows}
    (args.out / "probe.json").write_text(json.dumps(summary, indent=2))
    base = statistics.median(r["gpu_ms_per_step"] for r in rows if r["setting"] == settings[0])
    for setting in settings:
        mine = [r for r in rows if r["setting"] == setting]
        ms = statistics.median(r["gpu_ms_per_step"] for r in mine)
        same = {r["tokens_sha256"] for r in mine} == {r["tokens_sha256"] for r in rows if r["setting"] == settings[0]}
        print(f"long_kv_layers {setting}: {ms:.4f} ms per step ({(ms / base - 1) * 100:+.2f}% against "
              f"{settings[0]}), tokens {'match' if same else 'DIFFER'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
