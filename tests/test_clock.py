"""The guard's own clock over a process's timed passes (guard/measure/_clock.py): the rule on
its own, then real harness processes, one of which reports a step time its clock made up."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from guard.measure._clock import FLOOR, SLACK_S, misfit
from guard.measure import ArmTarget, HarnessSpec, run_interleaved

# Each step takes STEP_S of the host's time. With SCALE set, the workload's module replaces
# time.perf_counter, which the harness reads, by one that runs at 1/SCALE of the real rate:
# a head 3x slower reports base's step time, in one line.
WORKLOAD = textwrap.dedent(
    """
    import os
    import time

    STEP_S = 0.02
    if os.environ.get("SCALE"):
        real, scale = time.perf_counter, float(os.environ["SCALE"])
        start = real()
        time.perf_counter = lambda: start + (real() - start) / scale


    class Workload:
        def setup(self, batch_size):
            self.batch = batch_size

        def step(self):
            until = time.monotonic() + STEP_S * float(os.environ.get("SLOWER", "1"))
            while time.monotonic() < until:
                pass
            return [7] * self.batch


    def make():
        return Workload()
    """
)


def test_claims_that_fit_the_guards_clock_pass_and_others_are_named() -> None:
    assert misfit([(1.0, 1)], [1.02]) is None  # the marks' latency
    assert misfit([(0.96, 2), (0.5, 1)], [0.5, 0.5, 0.52]) is None
    assert misfit([(0.01, 1)], [0.2]) is None  # a short pass: within SLACK_S, its marks' latency
    short = 1.0 * FLOOR - SLACK_S - 0.01  # just under what a pass of 1 s may claim
    assert "its clock is not the guard's" in (misfit([(short, 1)], [1.0]) or "")
    assert "more than the" in (misfit([(1.0 + SLACK_S + 0.01, 1)], [1.0]) or "")
    assert misfit([(1.0, 2)], [1.0]) == "its result claims 2 end-to-end pass(es), and the guard saw 1"
    assert misfit([(1.0, 1)], None) == "its marks of the timed passes on the guard's pipe do not pair up"
    # each batch size on its own: one that over-claims does not cover one that under-claims
    assert misfit([(3.0, 1), (1.0, 1)], [2.0, 2.0]) is not None


@pytest.mark.slow
def test_a_process_whose_clock_is_not_the_guards_is_refused(tmp_path: Path) -> None:
    """Base honest; the head 3x slower, its clock slowed 3x to report base's step time."""
    worktree = tmp_path / "arm"
    worktree.mkdir()
    (worktree / "wl.py").write_text(WORKLOAD)
    targets = [
        ArmTarget(name="base", python=Path(sys.executable), worktree=worktree, env={}),
        ArmTarget(name="head", python=Path(sys.executable), worktree=worktree, env={"SLOWER": "3", "SCALE": "3"}),
    ]
    spec = HarnessSpec(entry="wl.py:make", batch_sizes=[1], steps=40, warmup_steps=1, tok_per_s_min_s=0,
                       warmup_max_s=0)
    results = run_interleaved(targets, spec, 2, tmp_path / "runs", timeout_s=120, progress=lambda line: None)
    base, head = results["base"], results["head"]
    assert base.error is None, base.error
    for repeat in base.repeats:
        (seen,) = repeat.seen_pass_s or [None]
        run = repeat.run_for(1)
        assert repeat.clock_watched and seen is not None
        assert run.timed_s is not None and FLOOR * seen - SLACK_S <= run.timed_s <= seen + SLACK_S
        assert run.timed_s == pytest.approx(40 * 0.02, rel=0.5)  # the 40 steps' 0.8 s, on the host's clock
    # the head claimed about 0.8 s for passes the guard saw take about 2.4 s
    assert head.error is not None and "its clock is not the guard's" in head.error, head.error
    assert "is refused" in head.error
