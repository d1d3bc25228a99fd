"""How honest harness processes' step times fit the passes the guard sees on its own clock
(guard/measure/_clock.py): for each process and kind of timed pass (end-to-end, GPU-timed, the
mix's two), the seconds its steps add up to (with the holds it states, for a GPU-timed pass)
over the seconds the guard saw the passes take, per batch size. The rule refuses a process
below FLOOR of it (beyond SLACK_S); this says how far above that honest processes stay.

Usage: python3 benchmarks/clock_fit.py [--processes N] [--engine] [--steps S]

Real harness processes through the guard's own runner (run_interleaved), two arms of the same
workload: a pure-Python one whose step busy-waits 2 ms, or with --engine the demo's reference
engine (2 layers; on a GPU its default size, CUDA graphs) with a batch-size mix of 1 and 2.
Prints every ratio, then per kind of pass the smallest, the median and the largest, and the
rule's FLOOR and SLACK_S. Figures in
docs/measurements/clock-check.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from guard.measure import ArmTarget, HarnessSpec, run_interleaved  # noqa: E402
from guard.measure._clock import FLOOR, SLACK_S, claims  # noqa: E402
from guard.sandbox import choose_box  # noqa: E402

BUSY = textwrap.dedent(
    """
    import time


    class Workload:
        def setup(self, batch_size):
            self.batch = batch_size

        def step(self):
            until = time.monotonic() + 0.002
            while time.monotonic() < until:
                pass
            return [7] * self.batch


    def make():
        return Workload()
    """
)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--processes", type=int, default=6, help="per arm")
    p.add_argument("--steps", type=int, default=128)
    p.add_argument("--engine", action="store_true", help="the demo's reference engine instead of a busy loop")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        folder.chmod(0o755)  # run as root, the processes run as build.user, which must reach it
        if args.engine:
            import torch

            from guard.demo._repo import make_demo_repo

            worktree = folder / "repo"
            make_demo_repo(worktree)  # its base commit: the engine with whole-step CUDA graphs
            entry = "bench/guard_workload.py:make"
            options = {} if torch.cuda.is_available() else {"layers": 2, "max_len": 256}
        else:
            worktree = folder
            (folder / "wl.py").write_text(BUSY)
            entry, options = "wl.py:make", {}
        env = {"PYTHONPATH": str(worktree)} if args.engine else {}  # the engine's package, not built here
        box = choose_box()
        targets = [ArmTarget(name=name, python=Path(sys.executable), worktree=worktree, box=box, env=env)
                   for name in ("a", "b")]
        spec = HarnessSpec(entry=entry, options=options, batch_sizes=[1, 2], steps=args.steps, warmup_steps=8,
                           profile_steps=0, batch_mix={1: 0.5, 2: 0.5} if args.engine else None)
        results = run_interleaved(targets, spec, args.processes, folder / "runs", timeout_s=600,
                                  progress=lambda line: print(line, file=sys.stderr))
    ratios: dict[str, list[float]] = {}
    for arm in results.values():
        if arm.error:
            print(f"{arm.arm}: {arm.error}")
            continue
        for repeat in arm.repeats:
            seen = repeat.seen_passes or []
            for kind in ("end_to_end", "gpu_timed", "mix", "mix_gpu_timed"):
                theirs = [p.s for p in seen if p.kind == kind]
                at = 0
                for claim in (c for c in claims(repeat) if c.kind == kind):
                    window = sum(theirs[at:at + claim.passes])
                    at += claim.passes
                    ratios.setdefault(kind, []).append(claim.filled_s / window)
                    where = f"bs {claim.batch_size}" if claim.batch_size is not None else "mix"
                    print(f"{arm.arm} {repeat.repeat} {kind} {where}: {claim.passes} pass(es), claimed "
                          f"{claim.claimed_s:.4f} s, with holds {claim.filled_s:.4f} s, seen {window:.4f} s, "
                          f"ratio {claim.filled_s / window:.4f}")
    if not ratios:
        return 1
    for kind, found in ratios.items():
        print(f"{kind}: {len(found)} ratios: smallest {min(found):.4f}, median {statistics.median(found):.4f}, "
              f"largest {max(found):.4f}")
    print(f"the rule refuses under {FLOOR} (beyond {SLACK_S} s), and a claim over what the guard saw")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
