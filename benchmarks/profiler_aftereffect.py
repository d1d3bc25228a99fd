"""Does a profiler session slow the decode steps timed after it, in the same process?

Usage: python benchmarks/profiler_aftereffect.py   (needs a CUDA GPU)

Times the reference engine at batch size 2 (CUDA events, median of 128 steps), profiles
16 steps at batch size 1, then times batch size 2 again; and the same without the
profiler in between, as control. This is why the harness runs its profiled passes only
after all timed ones.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from engine_probe import time_steps  # noqa: E402  (beside this file)

from guard.engine import RefEngine  # noqa: E402


def timed_ms(engine: RefEngine, batch_size: int, steps: int = 128) -> float:
    engine.setup(batch_size)
    for _ in range(16):
        engine.step().tolist()
    return time_steps(engine, steps)["gpu_ms_per_step"]


def one(with_profiler: bool) -> None:
    from torch.profiler import ProfilerActivity, profile

    engine = RefEngine()
    before = timed_ms(engine, 2)
    engine.setup(1)
    if with_profiler:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]):
            for _ in range(16):
                engine.step().tolist()
            torch.cuda.synchronize()
    else:
        for _ in range(16):
            engine.step().tolist()
    after = timed_ms(engine, 2)
    label = "profiled bs 1 in between" if with_profiler else "no profiler (control)"
    print(f"{label:26s} bs 2 before {before:.4f} ms, after {after:.4f} ms, change {after / before - 1:+.2%}")


def main() -> None:
    # Each variant in a fresh process: the effect, if any, outlives the profiler session.
    for variant in ("control", "profile", "control", "profile"):
        subprocess.run([sys.executable, __file__, variant], check=True)


if __name__ == "__main__":
    if len(sys.argv) > 1:
        one(sys.argv[1] == "profile")
    else:
        main()
