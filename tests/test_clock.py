"""The guard's own clock over a process's timed passes (guard/measure/_clock.py): the rule on
its own, then real harness processes, one of which reports a step time its clock made up."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from guard.measure._clock import FLOOR, SLACK_S, Claim, misfit
from guard.measure._models import SeenPass
from guard.measure import ArmTarget, HarnessSpec, run_interleaved
from guard.sandbox import choose_box

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


def _e2e(*claimed: tuple[float, int]) -> list[Claim]:
    return [Claim("end_to_end", size, s, s, passes) for size, (s, passes) in enumerate(claimed, start=1)]


def _seen(*seconds: float, kind: str = "end_to_end") -> list[SeenPass]:
    return [SeenPass(kind=kind, s=s) for s in seconds]  # type: ignore[arg-type]


def test_claims_that_fit_the_guards_clock_pass_and_others_are_named() -> None:
    assert misfit(_e2e((1.0, 1)), _seen(1.02)) is None  # the marks' latency
    assert misfit(_e2e((0.96, 2), (0.5, 1)), _seen(0.5, 0.5, 0.52)) is None
    assert misfit(_e2e((0.01, 1)), _seen(0.2)) is None  # a short pass: within SLACK_S, its marks' latency
    short = 1.0 * FLOOR - SLACK_S - 0.01  # just under what a pass of 1 s may claim
    under = misfit(_e2e((short, 1)), _seen(1.0))
    assert under is not None and (under.why, under.kind, under.batch_size, under.seen_s) == (
        "under", "end_to_end", 1, 1.0)
    over = misfit(_e2e((1.0 + SLACK_S + 0.01, 1)), _seen(1.0))
    assert over is not None and over.why == "over"
    count = misfit(_e2e((1.0, 2)), _seen(1.0))
    assert count is not None and (count.why, count.claimed_passes, count.seen_passes) == ("pass_count", 2, 1)
    assert misfit(_e2e((1.0, 1)), None) is not None and misfit(_e2e((1.0, 1)), None).why == "unpaired"
    # each batch size on its own: one that over-claims does not cover one that under-claims
    assert misfit(_e2e((3.0, 1), (1.0, 1)), _seen(2.0, 2.0)) is not None


def test_a_gpu_timed_pass_counts_its_holds_toward_the_floor_and_never_past_the_pass() -> None:
    """A GPU-timed pass: steps of 1 ms behind holds of 1 ms fill a 2 s pass of 1000 steps; its
    step times alone (1 s) may not be over the pass, and a made-up 0.3 s with those holds is under."""
    both = _seen(2.0) + _seen(2.02, kind="gpu_timed")
    honest = [Claim("end_to_end", 1, 2.0, 2.0, 1), Claim("gpu_timed", 1, 1.0, 2.0, 1)]
    assert misfit(honest, both) is None
    made_up = [Claim("end_to_end", 1, 2.0, 2.0, 1), Claim("gpu_timed", 1, 0.3, 0.3 + 0.4, 1)]
    refused = misfit(made_up, both)
    assert refused is not None and (refused.why, refused.kind) == ("under", "gpu_timed")
    over = [Claim("end_to_end", 1, 2.0, 2.0, 1), Claim("gpu_timed", 1, 2.4, 3.0, 1)]
    assert misfit(over, both) is not None and misfit(over, both).why == "over"
    # a GPU-timed pass the guard did not see (the process skipped its marks) is a pass_count misfit
    missing = misfit(honest, _seen(2.0))
    assert missing is not None and (missing.why, missing.kind, missing.seen_passes) == ("pass_count", "gpu_timed", 0)
    # the mix's passes are held on their own
    mixed = misfit([Claim("mix", None, 0.1, 0.1, 1)], _seen(1.0, kind="mix"))
    assert mixed is not None and (mixed.why, mixed.kind, mixed.batch_size) == ("under", "mix", None)


@pytest.mark.slow
def test_a_process_whose_clock_is_not_the_guards_is_refused(tmp_path: Path) -> None:
    """Base honest; the head 3x slower, its clock slowed 3x to report base's step time."""
    worktree = tmp_path / "arm"
    worktree.mkdir()
    (worktree / "wl.py").write_text(WORKLOAD)
    targets = [
        ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=worktree, env={}),
        ArmTarget(name="head", python=Path(sys.executable),
                  box=choose_box(), worktree=worktree, env={"SLOWER": "3", "SCALE": "3"}),
    ]
    spec = HarnessSpec(entry="wl.py:make", batch_sizes=[1], steps=40, warmup_steps=1, tok_per_s_min_s=0,
                       warmup_max_s=0)
    results = run_interleaved(targets, spec, 2, tmp_path / "runs", timeout_s=120, progress=lambda line: None)
    base, head = results["base"], results["head"]
    assert base.error is None, base.error
    for repeat in base.repeats:
        (seen,) = [p.s for p in repeat.seen_passes or []] or [None]
        run = repeat.run_for(1)
        assert repeat.clock_watched and seen is not None
        assert run.timed_s is not None and FLOOR * seen - SLACK_S <= run.timed_s <= seen + SLACK_S
        assert run.timed_s == pytest.approx(40 * 0.02, rel=0.5)  # the 40 steps' 0.8 s, on the host's clock
    # the head claimed about 0.8 s for passes the guard saw take about 2.4 s
    assert head.error is not None and "is refused" in head.error, head.error
    refused = head.clock_misfit
    assert refused is not None and (refused.why, refused.kind, refused.batch_size, refused.repeat) == (
        "under", "end_to_end", 1, 0)
    assert refused.claimed_s is not None and refused.seen_s is not None
    assert refused.claimed_s < FLOOR * refused.seen_s - SLACK_S


def test_a_refusal_is_the_reports_fact_and_is_worded_from_it() -> None:
    """The verdict's reason carries the figures; the comment's sentence is made from them, the same
    however often the report is rendered."""
    from guard.compare import Reason
    from guard.measure import ClockMisfit
    from guard.report._reason_text import reason_sentence, reason_short

    misfit = ClockMisfit(why="under", repeat=2, kind="gpu_timed", batch_size=1, claimed_s=0.312, seen_s=0.954)
    reason = Reason.model_validate_json(Reason(kind="clock_refused", arm="head", clock=misfit).model_dump_json())
    assert reason.clock == misfit
    assert reason_short(reason) == "the head arm's timings did not fit the guard's clock"
    assert reason_sentence(reason) == (
        "process 3 of the head arm was refused and the arm stopped: its step times in the GPU-timed pass at batch "
        "size 1 add up to 0.312 s, where the guard saw the pass take 0.954 s: its clock is not the guard's (the "
        "workload may have replaced a timer). Its figures are not used")
