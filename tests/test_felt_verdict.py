"""Rule 5: the verdict follows what the user feels. End-to-end ms and tok/s always gate; a
direction they decide stands over GPU ms and host instructions; a felt figure that cannot rule
out its threshold holds its batch size open; each family's alpha is split over its metrics. On
synthetic GPU-timed measurements, every expected figure computed here apart from the code."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats
from hypothesis import given
from hypothesis import strategies as st

from guard.compare import compare, decide_again
from guard.compare._interval import batch_verdict
from guard.config import Threshold
from guard.measure import ArmMeasurement, HostUsage, RepeatResult, smallest_caught_pct
from tests.rules import rule_at
from tests.test_stats_properties import PROPERTIES
from tests.test_verdict import CONFIDENCE, THRESHOLD, TINY, batch_run, welch_bounds

GPU_MS = 10.0
QUIET = [1.0, 1.002, 0.998, 1.001, 0.999]  # a felt figure at about 0.15% from process to process
HOST_NOISE = [1.0, 1.08, 0.93, 1.05, 0.95]  # a host's state from process to process: about 6%
LOOKS = 2


def felt_arm(name: str, gpu_ms: float, end_ms: float, gpu_jitter: list[float] = TINY,
             end_jitter: list[float] = QUIET, instructions: list[float] | None = None) -> ArmMeasurement:
    """Batch size 1, GPU-timed: each process's GPU ms, its end-to-end ms, and its tok/s from the
    same pass (1000 / end-to-end ms: one token per step), as given."""
    repeats = []
    for r, (g, e) in enumerate(zip(gpu_jitter, end_jitter)):
        end = end_ms * e
        host = (HostUsage(voluntary_switches=0, involuntary_switches=0, user_s=0.1, sys_s=0.0,
                          instructions_per_step=instructions[r]) if instructions else None)
        run = batch_run(1, gpu_ms * g).model_copy(update={
            "timer": "cuda_event", "end_to_end_gpu_ms_per_step": end, "tok_per_s": 1000 / end, "host": host})
        repeats.append(RepeatResult(arm=name, repeat=r, environment={}, runs=[run]))
    return ArmMeasurement(arm=name, repeats=repeats)


def decided(base: ArmMeasurement, head: ArmMeasurement, **rule):  # type: ignore[no-untyped-def]
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1],
                       rule_at(THRESHOLD, CONFIDENCE, looks=LOOKS, **rule)).batch_sizes
    return batch


def first_look_share(families: int = 2, sizes: int = 1) -> float:
    """The alpha the first of LOOKS looks spends (Pocock-type), split over families and sizes."""
    return 0.01 * math.log(1 + (math.e - 1) / LOOKS) / (families * sizes)


def test_a_step_the_user_gets_faster_is_an_improvement_where_padding_added_gpu_work() -> None:
    """The removed eager fallback of issue 48: each step does 1.06% more GPU work (padding to a
    captured size), and takes 56.5% less time end to end. Rule 4 called it a slowdown at the
    threshold; rule 5 an improvement, named by end-to-end ms, with GPU ms's own verdict kept."""
    base = felt_arm("base", GPU_MS, 23.0)
    head = felt_arm("head", GPU_MS * 1.0106, 23.0 * 0.435, gpu_jitter=TINY[::-1])
    batch = decided(base, head)
    assert (batch.verdict, batch.decided_by) == ("improvement", "end_to_end_ms")
    assert batch.gpu_ms_verdict in ("regression", "at_threshold")  # the device's figure still said
    assert batch.end_to_end_verdict == "improvement" and batch.tok_per_s_verdict == "improvement"
    assert not batch.undecided
    old = decided(base, head, version=4)
    assert old.verdict in ("regression", "at_threshold") and old.decided_by == "gpu_ms"


def test_a_step_the_user_gets_slower_is_a_regression_whatever_gpu_ms_says() -> None:
    """GPU ms 20% lower, the step 30% longer end to end (work moved to the host): a regression
    by end-to-end ms, not an improvement by GPU ms."""
    batch = decided(felt_arm("base", GPU_MS, 12.0), felt_arm("head", GPU_MS * 0.8, 12.0 * 1.3))
    assert batch.gpu_ms_verdict == "improvement" and batch.end_to_end_verdict == "regression"
    assert batch.verdict == "regression" and batch.decided_by == "end_to_end_ms"


def test_gpu_ms_decides_where_the_felt_figures_decide_no_direction() -> None:
    """A device slowdown of 5% whose end-to-end step moved 0.2% (a launch-bound step hides it):
    the felt figures rule their threshold out, and GPU ms's regression stands, as in rule 4."""
    batch = decided(felt_arm("base", GPU_MS, 20.0), felt_arm("head", GPU_MS * 1.05, 20.0 * 1.002))
    assert (batch.end_to_end_verdict, batch.tok_per_s_verdict) == ("pass", "pass")
    assert (batch.verdict, batch.decided_by) == ("regression", "gpu_ms")


def test_a_felt_figure_that_cannot_rule_out_its_threshold_holds_the_batch_size_open() -> None:
    """An unchanged commit on a host whose end-to-end time spreads 6% between processes: 5
    processes cannot tell 1% from nothing. Rule 4 passed it; rule 5 leaves it inconclusive, names
    the processes per arm that would decide it, and takes another round."""
    base = felt_arm("base", GPU_MS, 12.0, end_jitter=HOST_NOISE)
    head = felt_arm("head", GPU_MS, 12.0, gpu_jitter=TINY[::-1], end_jitter=HOST_NOISE[::-1])
    batch = decided(base, head)
    low, high = welch_bounds([12.0 * j for j in HOST_NOISE], [12.0 * j for j in HOST_NOISE[::-1]],
                             batch.alpha_of("end_to_end_ms"))
    assert low < 0 < THRESHOLD < high  # nothing shown, and the threshold not ruled out
    assert batch.end_to_end_gates is True and batch.end_to_end_verdict == "inconclusive"
    assert batch.gpu_ms_verdict == "pass"
    assert (batch.verdict, batch.decided_by) == ("inconclusive", "end_to_end_ms") and batch.undecided
    # ruling 1% out at this spread takes about 2 s^2 (z_level + z_power)^2 / log(1.01)^2 processes per
    # arm, some thousands: more than the rule counts (None), which the comment says as such
    logs = [[math.log(12.0 * j) for j in noise] for noise in (HOST_NOISE, HOST_NOISE[::-1])]
    variance = sum(scipy_stats.tvar(v) for v in logs) / 2
    z = scipy_stats.norm.ppf(1 - batch.alpha_of("end_to_end_ms")) + scipy_stats.norm.ppf(0.95)
    assert 2 * variance * z**2 / math.log1p(THRESHOLD / 100) ** 2 > 200
    assert batch.repeats_to_decide is None
    assert decided(base, head, version=4).verdict == "pass"


def test_a_felt_figure_undecided_keeps_an_improvement_gpu_ms_alone_shows_from_going_green() -> None:
    """GPU ms 5% lower, end-to-end ms +3% at a 6% host spread (work moved to the host, not told
    from its threshold): not an improvement, which would pass a step the user may feel slower."""
    base = felt_arm("base", GPU_MS, 12.0, end_jitter=HOST_NOISE)
    head = felt_arm("head", GPU_MS * 0.95, 12.0 * 1.03, end_jitter=HOST_NOISE[::-1])
    batch = decided(base, head)
    assert batch.gpu_ms_verdict == "improvement"
    assert batch.end_to_end_verdict in ("inconclusive", "at_threshold")
    assert batch.verdict == batch.end_to_end_verdict and batch.decided_by == "end_to_end_ms"


def test_alpha_within_the_host_family_is_split_over_its_metrics() -> None:
    """GPU ms takes its family's whole share of the look's alpha; end-to-end ms and tok/s split
    the host family's, and host instructions, where counted, take a third of it. Each bound is
    at its own level, as the interval computed here at that level shows."""
    base = felt_arm("base", GPU_MS, 12.0)
    head = felt_arm("head", GPU_MS, 12.0 * 1.2)
    batch = decided(base, head)
    share = first_look_share()
    assert batch.alpha_per_bound == pytest.approx({"gpu_ms": share, "end_to_end_ms": share / 2,
                                                   "tok_per_s": share / 2})
    low, high = welch_bounds([12.0 * j for j in QUIET], [14.4 * j for j in QUIET], share / 2)
    assert batch.end_to_end_bounds is not None
    assert (batch.end_to_end_bounds.ci_low_pct, batch.end_to_end_bounds.ci_high_pct) == pytest.approx((low, high))
    counts = [1.5e6 * j for j in QUIET]
    counted = decided(felt_arm("base", GPU_MS, 12.0, instructions=counts),
                      felt_arm("head", GPU_MS, 12.0 * 1.2, instructions=counts[::-1]),
                      instructions=Threshold(pct=2.0, source="configured"))
    assert counted.alpha_per_bound == pytest.approx({"gpu_ms": share, "end_to_end_ms": share / 3,
                                                     "tok_per_s": share / 3, "instructions": share / 3})
    assert "alpha_per_bound" not in decided(base, head, version=4).model_dump(exclude_defaults=True)


def test_end_to_end_ms_is_held_to_what_the_runner_resolves() -> None:
    """At a 6% host spread an unchanged commit is undecided at 1%, and passes at the threshold
    a calibration of that runner writes (here 30%); a 2x host slowdown is a regression at both."""
    base = felt_arm("base", GPU_MS, 12.0, end_jitter=HOST_NOISE)
    same = felt_arm("head", GPU_MS, 12.0, gpu_jitter=TINY[::-1], end_jitter=HOST_NOISE[::-1])
    slower = felt_arm("head", GPU_MS, 24.0, gpu_jitter=TINY[::-1], end_jitter=HOST_NOISE[::-1])
    resolved = {"end_to_end_ms": Threshold(pct=30.0, source="calibrated"),
                "tok_per_s": Threshold(pct=30.0, source="calibrated")}
    assert decided(base, same).verdict == "inconclusive"
    assert decided(base, same, **resolved).verdict == "pass"
    assert decided(base, slower).verdict == decided(base, slower, **resolved).verdict == "regression"


@pytest.mark.parametrize(("verdicts", "expected"), [
    # the mix decides GPU ms and tok/s: tok/s 48% faster, GPU ms at its threshold
    ({"gpu_ms": "at_threshold", "tok_per_s": "improvement"}, ("improvement", "tok_per_s")),
    ({"gpu_ms": "regression", "end_to_end_ms": "improvement", "tok_per_s": "inconclusive"},
     ("improvement", "end_to_end_ms")),
    ({"gpu_ms": "regression", "end_to_end_ms": "pass", "tok_per_s": "pass"}, ("regression", "gpu_ms")),
    ({"gpu_ms": "pass", "end_to_end_ms": "pass", "tok_per_s": "pass", "instructions": "regression"},
     ("regression", "instructions")),
    ({"gpu_ms": "improvement", "end_to_end_ms": "regression", "tok_per_s": "regression"},
     ("regression", "end_to_end_ms")),
    # a felt improvement beside a felt slowdown shown: held open, not green
    ({"gpu_ms": "pass", "end_to_end_ms": "improvement", "tok_per_s": "at_threshold"}, ("at_threshold", "tok_per_s")),
    ({"gpu_ms": "improvement", "end_to_end_ms": "inconclusive", "tok_per_s": "pass"},
     ("inconclusive", "end_to_end_ms")),
    ({"gpu_ms": "improvement", "end_to_end_ms": "pass", "tok_per_s": "pass"}, ("improvement", "gpu_ms")),
    ({"gpu_ms": "inconclusive", "end_to_end_ms": "pass", "tok_per_s": "pass"}, ("inconclusive", "gpu_ms")),
    ({"gpu_ms": "pass", "end_to_end_ms": "pass", "tok_per_s": "pass"}, ("pass", None)),
])
def test_within_a_batch_size_what_the_user_feels_decides_first(verdicts, expected) -> None:  # type: ignore[no-untyped-def]
    assert batch_verdict(verdicts, felt_gates=True) == expected


JITTER = st.lists(st.floats(min_value=0.8, max_value=1.25), min_size=5, max_size=5)


@PROPERTIES
@given(base=JITTER, head=JITTER, change=st.floats(min_value=0.5, max_value=2.0), gpu=st.floats(0.7, 1.4))
def test_a_felt_upper_bound_past_its_threshold_is_never_green(base: list[float], head: list[float], change: float,
                                                             gpu: float) -> None:
    """Whatever was drawn: where end-to-end ms's or tok/s's bounds leave a slowdown past the
    threshold possible, the batch size is neither a pass nor an improvement by GPU ms."""
    batch = decided(felt_arm("base", GPU_MS, 12.0, end_jitter=base),
                    felt_arm("head", GPU_MS * gpu, 12.0 * change, gpu_jitter=TINY[::-1], end_jitter=head))
    slower = [b.ci_high_pct > THRESHOLD for b in (batch.end_to_end_bounds,) if b is not None]
    tok = batch.tok_per_s_bounds
    assert tok is not None
    slower.append(-tok.ci_low_pct > THRESHOLD)  # a rate: its fall is the slowdown
    if any(slower):
        assert batch.verdict != "pass"
        assert batch.verdict != "improvement" or batch.decided_by in ("end_to_end_ms", "tok_per_s")


def test_a_stored_comparison_of_rule_4_is_decided_again_by_rule_4() -> None:
    """The speed-up with padding, decided by rule 4 and stored: decided again by the rule it
    states, the same verdict; by rule 5, the improvement."""
    base = felt_arm("base", GPU_MS, 23.0)
    head = felt_arm("head", GPU_MS * 1.0106, 23.0 * 0.435, gpu_jitter=TINY[::-1])
    stored = decided(base, head, version=4)
    again = decide_again(stored, "base", "head", rule_at(THRESHOLD, CONFIDENCE, looks=LOOKS, version=4))
    assert again.verdict == stored.verdict != "improvement"
    now = decide_again(stored, "base", "head", rule_at(THRESHOLD, CONFIDENCE, looks=LOOKS))
    assert now.verdict == "improvement"


def test_a_host_only_slowdown_at_a_quiet_host_is_a_regression_titled_end_to_end() -> None:
    """GPU time unchanged, the step 5% longer end to end at a 0.15% spread: a regression of
    end-to-end ms (the figure a user feels), with GPU ms passing."""
    batch = decided(felt_arm("base", GPU_MS, 12.0), felt_arm("head", GPU_MS, 12.6, gpu_jitter=TINY[::-1]))
    assert batch.gpu_ms_verdict == "pass"
    assert (batch.verdict, batch.decided_by) == ("regression", "end_to_end_ms")
    low, _ = welch_bounds([12.0 * j for j in QUIET], [12.6 * j for j in QUIET], batch.alpha_of("end_to_end_ms"))
    assert batch.end_to_end_bounds is not None and batch.end_to_end_bounds.ci_low_pct == pytest.approx(low)
    assert low > THRESHOLD


def test_the_sight_a_run_states_is_at_the_upper_limit_of_its_spread() -> None:
    """Rule 5 states what the run could see at the upper 95% limit of its spread, so a run that
    drew a quiet spread by luck does not claim more than it saw: larger than rule 4's figure by
    the chi-square factor on the run's degrees of freedom."""
    base = felt_arm("base", GPU_MS, 12.0, end_jitter=HOST_NOISE)
    head = felt_arm("head", GPU_MS, 12.0, gpu_jitter=TINY[::-1], end_jitter=HOST_NOISE[::-1])
    now, old = decided(base, head), decided(base, head, version=4)
    dof = 2 * (5 - 1)  # the run's pooled within-arm degrees of freedom
    factor = math.sqrt(dof / scipy_stats.chi2.ppf(0.05, dof))
    # the distance past the threshold scales with the spread's sd, on the log scale
    for batch in (now, old):
        assert batch.caught_pct["end_to_end_ms"] > THRESHOLD
    level_now, level_old = 1 - 2 * now.alpha_of("end_to_end_ms"), 1 - 2 * old.alpha_of("end_to_end_ms")
    assert level_now > level_old  # its own share of the host family's alpha: a wider interval
    ends = [[12.0 * j for j in HOST_NOISE], [12.0 * j for j in HOST_NOISE[::-1]]]
    at_sd = smallest_caught_pct(ends, 5, THRESHOLD, level_now)
    margin = math.log1p(at_sd / 100) - math.log1p(THRESHOLD / 100)
    expected = math.expm1(math.log1p(THRESHOLD / 100) + margin * factor) * 100
    assert now.caught_pct["end_to_end_ms"] == pytest.approx(expected, rel=1e-9)


def test_the_comment_of_a_faster_step_says_what_gpu_ms_did() -> None:
    """The speed-up with padding, as a report: titled faster, and its first sentence says GPU ms
    per step rose, not told apart from the threshold or past it, while the step took less time."""
    from pathlib import Path

    from guard.report import render_comment, title
    from tests.report_fixtures import committed, explained, ruled

    demo = committed(Path(__file__).resolve().parents[1] / "docs/examples/h200-demo-b31932f/report.json")
    base = felt_arm("base", GPU_MS, 23.0)
    head = felt_arm("head", GPU_MS * 1.0106, 23.0 * 0.435, gpu_jitter=TINY[::-1])
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1],
                       rule_at(THRESHOLD, CONFIDENCE, looks=1)).batch_sizes
    report = explained(ruled(demo, version=5, looks=1, decided_sizes=1, end_to_end_ms=THRESHOLD).model_copy(update={
        "schema_version": 12, "base": "base", "head": "head", "batch_sizes": [batch],
        "verdict": batch.verdict, "mix": None, "mix_comparison": None, "traces": [], "rank_traces": [],
        "arms": [a.model_copy(update={"name": name}) for a, name in zip(demo.arms[:2], ("base", "head"))],
    }))
    rise = report.explanation.headline.device_rise
    assert rise is not None and rise.gpu_ms == batch.gpu_ms_bounds and rise.rows is None
    assert title(report).startswith("Decode 2.3x faster at batch size 1 with ")
    comment = render_comment(report)
    said = {"regression": "slower past the threshold", "at_threshold": "not told from the threshold"}
    assert (f"GPU ms per step rose {batch.gpu_ms_bounds.pct:.2f}% ({said[batch.gpu_ms_verdict]}): the GPU does "  # type: ignore[union-attr]
            "more work per step, and the step still takes less time than base's.") in comment


def test_an_undecided_run_held_open_by_what_the_user_feels_asks_for_a_calibration() -> None:
    """An unchanged commit at a 6% host spread: GPU ms passes, end-to-end ms cannot rule 1% out.
    The line under the title says what this runner resolves end to end (the run's own detectable
    change), which `guard calibrate` would hold the metric to."""
    from pathlib import Path

    from guard.report import render_comment
    from tests.report_fixtures import committed, explained, ruled

    demo = committed(Path(__file__).resolve().parents[1] / "docs/examples/h200-demo-b31932f/report.json")
    base = felt_arm("base", GPU_MS, 12.0, end_jitter=HOST_NOISE)
    head = felt_arm("head", GPU_MS, 12.0, gpu_jitter=TINY[::-1], end_jitter=HOST_NOISE[::-1])
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1],
                       rule_at(THRESHOLD, CONFIDENCE, looks=1)).batch_sizes
    assert (batch.verdict, batch.gpu_ms_verdict) == ("inconclusive", "pass")
    report = explained(ruled(demo, version=5, looks=1, decided_sizes=1, end_to_end_ms=THRESHOLD).model_copy(update={
        "schema_version": 12, "base": "base", "head": "head", "batch_sizes": [batch],
        "verdict": batch.verdict, "mix": None, "mix_comparison": None, "traces": [], "rank_traces": [],
        "arms": [a.model_copy(update={"name": name}) for a, name in zip(demo.arms[:2], ("base", "head"))],
    }))
    resolved = max(batch.end_to_end_detectable_pct or 0, batch.tok_per_s_detectable_pct or 0)
    name = "end-to-end ms per step" if resolved == batch.end_to_end_detectable_pct else "tokens per second"
    assert resolved > THRESHOLD
    assert (f"or calibrate the runner (`guard calibrate`): {name} resolves about {resolved:.2g}% here at 5 "
            "processes per arm, and a run then holds it there.") in render_comment(report)


def test_a_report_that_states_another_level_for_a_metric_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The comment states each family's level from `alpha_per_bound`: a report read back that
    halves end-to-end ms's (a narrower interval than the one decided on) is refused."""
    import json
    from pathlib import Path

    from guard.report import UnfoundedReport, read_report
    from tests.report_fixtures import committed, remeasured

    report = remeasured(committed(Path(__file__).resolve().parents[1] / "docs/examples/h200-demo-b31932f/report.json"),
                        1.05, jitter=0.003)
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json())
    assert read_report(path).batch_sizes[0].alpha_per_bound  # it holds up as written
    data = json.loads(report.model_dump_json())
    stated = data["batch_sizes"][0]["alpha_per_bound"]
    stated["tok_per_s"] = stated["tok_per_s"] * 2
    path.write_text(json.dumps(data))
    with pytest.raises(UnfoundedReport, match="alpha_per_bound"):
        read_report(path)
