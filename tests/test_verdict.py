"""compare() on synthetic measurements, and first_mismatch()."""

from __future__ import annotations

import hashlib
import math
from typing import Callable

import numpy as np
import pytest
from scipy import stats as scipy_stats

from guard.compare import compare, first_mismatch
from guard.measure import ArmMeasurement, BatchRun, RepeatResult
from tests.rules import rule_at

STEPS = 8
WARMUP = 3
THRESHOLD = 1.0
CONFIDENCE = 0.95
BASE_MS = 10.0
# Tiny, deterministic jitter per repeat (relative): about 0.01 %.
TINY = [1.0, 1.0001, 0.9999, 1.00005, 0.99995]

Tokens = list[list[int]]


def default_tokens(batch_size: int) -> Tokens:
    return [[(7 * step + 3 * seq) % 97 for seq in range(batch_size)] for step in range(WARMUP + STEPS)]


def sha(tokens: Tokens) -> str:
    return hashlib.sha256(np.asarray(tokens, dtype="<i8").tobytes()).hexdigest()


def batch_run(batch_size: int, ms: float, tokens: Tokens | None = None) -> BatchRun:
    tokens = default_tokens(batch_size) if tokens is None else tokens
    wall_s = ms * STEPS / 1e3
    return BatchRun(
        batch_size=batch_size,
        steps=STEPS,
        warmup_steps=WARMUP,
        timer="perf_counter",
        setup_s=0.01,
        wall_s=wall_s,
        tok_per_s=batch_size * STEPS / wall_s,
        gpu_ms_per_step=ms,
        step_ms=[ms] * STEPS,
        tokens=tokens,
        sha256=sha(tokens),
    )


def arm(
    name: str,
    ms: dict[int, list[float]],
    tokens: Callable[[int, int], Tokens | None] = lambda repeat, bs: None,
    error: str | None = None,
) -> ArmMeasurement:
    """ms: batch size -> one gpu_ms_per_step per repeat. tokens(repeat, bs) overrides tokens."""
    n = len(next(iter(ms.values()))) if ms else 0
    repeats = [
        RepeatResult(
            arm=name,
            repeat=r,
            environment={},
            runs=[batch_run(bs, values[r], tokens(r, bs)) for bs, values in ms.items()],
        )
        for r in range(n)
    ]
    return ArmMeasurement(arm=name, repeats=repeats, error=error)


def scaled(factor: float, jitter: list[float] = TINY, base: float = BASE_MS) -> list[float]:
    return [base * factor * j for j in jitter]


def run_compare(measurements: dict[str, ArmMeasurement], batch_sizes: list[int], threshold: float = THRESHOLD):
    return compare(measurements, "base", "head", batch_sizes, rule_at(threshold, CONFIDENCE))


def geo_change_pct(before: list[float], after: list[float]) -> float:
    return (np.exp(np.mean(np.log(after)) - np.mean(np.log(before))) - 1) * 100


def welch_bounds(before: list[float], after: list[float], alpha: float | None) -> tuple[float, float]:
    """The change's one-sided lower and upper bounds, each wrong `alpha` of the time, in percent:
    Welch's t on the logarithms, computed here apart from the code under test."""
    assert alpha is not None
    lb, la = np.log(before), np.log(after)
    va, vb = np.var(la, ddof=1) / len(la), np.var(lb, ddof=1) / len(lb)
    df = (va + vb) ** 2 / (va**2 / (len(la) - 1) + vb**2 / (len(lb) - 1))
    half = scipy_stats.t.ppf(1 - alpha, df) * np.sqrt(va + vb)
    diff = np.mean(la) - np.mean(lb)
    return float(np.expm1(diff - half) * 100), float(np.expm1(diff + half) * 100)


# -- timing verdicts ---------------------------------------------------------------------


def test_clear_slowdown_is_a_regression() -> None:
    base = arm("base", {1: scaled(1.0)})
    head = arm("head", {1: scaled(1.05, TINY[::-1])})
    result = run_compare({"base": base, "head": head}, [1])
    assert result.verdict == "regression"
    assert result.hash_match is True
    (batch,) = result.batch_sizes
    assert batch.batch_size == 1
    assert batch.verdict == "regression"
    assert batch.hash_match is True
    assert batch.gpu_ms_change is not None and batch.tok_per_s_change is not None
    assert batch.gpu_ms_change.pct == pytest.approx(geo_change_pct(scaled(1.0), scaled(1.05, TINY[::-1])))
    assert batch.gpu_ms_change.pct == pytest.approx(5.0, abs=0.01)
    assert batch.gpu_ms_change.ci_low_pct > 0
    # tok/s is bs * 1000 / ms here, so it falls by 1 - 1/1.05
    assert batch.tok_per_s_change.pct == pytest.approx((1 / 1.05 - 1) * 100, abs=0.01)
    assert [a.arm for a in batch.arms] == ["base", "head"]
    assert batch.arms[0].gpu_ms_per_step.values == scaled(1.0)
    assert all(a.deterministic and a.repeats == 5 for a in batch.arms)


def test_small_significant_change_below_threshold_passes() -> None:
    base = arm("base", {1: scaled(1.0)})
    head = arm("head", {1: scaled(1.002, TINY[::-1])})
    result = run_compare({"base": base, "head": head}, [1])
    (batch,) = result.batch_sizes
    assert batch.gpu_ms_change is not None
    # the change is real (interval excludes zero) but smaller than the threshold
    assert batch.gpu_ms_change.ci_low_pct > 0
    assert batch.gpu_ms_change.ci_high_pct < THRESHOLD
    assert batch.gpu_ms_change.pct == pytest.approx(0.2, abs=0.01)
    assert batch.verdict == "pass"
    assert result.verdict == "pass"
    assert result.reasons == []


def test_clear_speedup_is_an_improvement() -> None:
    base = arm("base", {1: scaled(1.0)})
    head = arm("head", {1: scaled(0.95, TINY[::-1])})
    result = run_compare({"base": base, "head": head}, [1])
    (batch,) = result.batch_sizes
    assert batch.verdict == "improvement"
    assert result.verdict == "improvement"
    assert batch.gpu_ms_change is not None and batch.gpu_ms_change.ci_high_pct < 0
    assert batch.gpu_ms_change.pct == pytest.approx(-5.0, abs=0.01)


def test_huge_noise_is_inconclusive() -> None:
    noisy_base = [0.90, 1.10, 0.95, 1.05, 1.00]
    noisy_head = [1.10, 0.90, 1.00, 0.95, 1.05]
    base = arm("base", {2: scaled(1.0, noisy_base)})
    head = arm("head", {2: scaled(1.015, noisy_head)})
    result = run_compare({"base": base, "head": head}, [2])
    (batch,) = result.batch_sizes
    change = batch.gpu_ms_change
    assert change is not None
    assert change.pct == pytest.approx(geo_change_pct(scaled(1.0, noisy_base), scaled(1.015, noisy_head)))
    assert change.pct == pytest.approx(1.5, abs=0.05)
    # the scenario really is "could be nothing, could be past the threshold"
    low, high = welch_bounds(scaled(1.0, noisy_base), scaled(1.015, noisy_head), batch.alpha_per_look)
    assert low < 0 < THRESHOLD < high
    assert batch.verdict == "inconclusive" and batch.decided_by == "gpu_ms" and batch.undecided
    assert result.verdict == "inconclusive"
    # the render layer says why, from these fields: the comparison holds no sentence for it
    assert batch.reasons == [] and result.reasons == []
    assert batch.repeats_to_decide is None or batch.repeats_to_decide > 5


@pytest.mark.parametrize(
    ("factors", "expected"),
    [
        ({1: 1.0, 2: 1.05, 4: 0.95}, "regression"),
        ({1: 1.0, 2: 0.95}, "improvement"),
        ({1: 0.95, 2: "noisy"}, "inconclusive"),
        ({1: 1.05, 2: "noisy"}, "regression"),
        ({1: 1.0, 2: 1.0}, "pass"),
    ],
)
def test_overall_verdict_is_the_most_severe(factors: dict[int, float | str], expected: str) -> None:
    noisy_base = [0.90, 1.10, 0.95, 1.05, 1.00]
    noisy_head = [1.10, 0.90, 1.00, 0.95, 1.05]
    base_ms, head_ms = {}, {}
    for bs, f in factors.items():
        if f == "noisy":
            base_ms[bs], head_ms[bs] = scaled(1.0, noisy_base), scaled(1.015, noisy_head)
        else:
            base_ms[bs], head_ms[bs] = scaled(1.0), scaled(float(f), TINY[::-1])
    result = run_compare({"base": arm("base", base_ms), "head": arm("head", head_ms)}, list(factors))
    per_batch = {b.batch_size: b.verdict for b in result.batch_sizes}
    # each batch on its own is what its factor says
    for bs, f in factors.items():
        want = {1.0: "pass", 1.05: "regression", 0.95: "improvement", "noisy": "inconclusive"}[f]
        assert per_batch[bs] == want
    assert result.verdict == expected


# -- like-for-like checks ----------------------------------------------------------------


def test_different_tokens_make_the_comparison_invalid() -> None:
    def head_tokens(repeat: int, bs: int) -> Tokens | None:
        if bs != 2:
            return None
        tokens = default_tokens(2)
        tokens[4][1] += 1  # 5th generated token (2nd timed step after 3 warmup), sequence 1
        tokens[6][0] += 1  # a later difference that must not be the one reported
        return tokens

    base = arm("base", {1: scaled(1.0), 2: scaled(1.0)})
    head = arm("head", {1: scaled(1.05, TINY[::-1]), 2: scaled(1.0)}, tokens=head_tokens)
    result = run_compare({"base": base, "head": head}, [1, 2])
    assert result.verdict == "invalid"
    assert result.hash_match is False
    by_bs = {b.batch_size: b for b in result.batch_sizes}
    assert by_bs[1].hash_match is True
    assert by_bs[1].verdict == "regression"
    bad = by_bs[2]
    assert bad.verdict == "invalid"
    assert bad.hash_match is False
    assert bad.mismatch is not None
    assert bad.mismatch.step == 5
    assert bad.mismatch.sequence == 1
    assert bad.mismatch.expected == default_tokens(2)[4][1]
    assert bad.mismatch.found == default_tokens(2)[4][1] + 1
    assert bad.gpu_ms_change is None  # timings of unlike runs are not compared
    assert [(r.kind, r.batch_size, r.step, r.sequence) for r in bad.reasons] == [("tokens_differ", 2, 5, 1)]
    assert bad.reasons[0] in result.reasons


def test_nondeterministic_arm_is_invalid() -> None:
    def head_tokens(repeat: int, bs: int) -> Tokens | None:
        if repeat != 1:
            return None
        tokens = default_tokens(bs)
        tokens[9][0] += 2
        return tokens

    base = arm("base", {1: scaled(1.0, [1.0, 1.0001])})
    head = arm("head", {1: scaled(1.0, [1.0, 1.0001])}, tokens=head_tokens)
    result = run_compare({"base": base, "head": head}, [1])
    assert result.verdict == "invalid"
    (batch,) = result.batch_sizes
    assert batch.verdict == "invalid"
    # base and head agree on their first repeats, so the hashes across arms match
    assert batch.hash_match is True
    stats = {a.arm: a for a in batch.arms}
    assert stats["head"].deterministic is False
    assert stats["base"].deterministic is True
    assert len(batch.reasons) == 1
    reason = batch.reasons[0]
    assert (reason.kind, reason.arm) == ("not_deterministic", "head")
    assert (reason.repeat, reason.first_repeat) == (2, 1)  # the second repeat (1-based) is the odd one
    assert reason.step == 10


def test_arm_with_error_and_no_repeats_is_invalid_and_keeps_the_other_arm() -> None:
    base_ms = {1: scaled(1.0), 2: scaled(2.0)}
    base = arm("base", base_ms)
    head = arm("head", {}, error="RuntimeError at load: kaboom")
    result = run_compare({"base": base, "head": head}, [1, 2])
    assert result.verdict == "invalid"
    assert [(r.kind, r.arm, r.error) for r in result.reasons] == [
        ("arm_no_results", "head", "RuntimeError at load: kaboom")]
    assert result.hash_match is None
    assert [b.batch_size for b in result.batch_sizes] == [1, 2]
    for batch in result.batch_sizes:
        assert batch.verdict == "invalid"
        assert [a.arm for a in batch.arms] == ["base"]
        kept = batch.arms[0]
        assert kept.repeats == 5
        assert kept.gpu_ms_per_step.values == base_ms[batch.batch_size]
        assert kept.gpu_ms_per_step.median == pytest.approx(float(np.median(base_ms[batch.batch_size])))
        assert kept.sha256 == sha(default_tokens(batch.batch_size))


def test_arm_that_failed_after_one_repeat_is_invalid_not_a_crash() -> None:
    base = arm("base", {1: scaled(1.0)})
    head = arm("head", {1: scaled(1.0, [1.0])}, error="harness exited with code -9 and no result")
    result = run_compare({"base": base, "head": head}, [1])
    assert result.verdict == "invalid"
    assert any(r.kind == "arm_failed" and r.arm == "head" and r.repeats_done == 1 for r in result.reasons)
    assert {a.arm for a in result.batch_sizes[0].arms} == {"base", "head"}


def test_arm_that_failed_after_some_repeats_is_invalid_but_timed() -> None:
    base = arm("base", {1: scaled(1.0)})
    head = arm("head", {1: scaled(1.05, [1.0, 1.0001, 0.9999])}, error="timed out after 60 s")
    result = run_compare({"base": base, "head": head}, [1])
    assert result.verdict == "invalid"
    assert any(r.kind == "arm_failed" and r.arm == "head" and r.error == "timed out after 60 s"
               for r in result.reasons)
    (batch,) = result.batch_sizes
    assert batch.verdict == "regression"  # what the repeats that ran say
    assert {a.arm: a.repeats for a in batch.arms} == {"base": 5, "head": 3}


# -- first_mismatch ----------------------------------------------------------------------


def test_first_mismatch_none_when_equal() -> None:
    assert first_mismatch([[1, 2], [3, 4]], [[1, 2], [3, 4]]) is None
    assert first_mismatch([], []) is None


def test_first_mismatch_reports_first_difference_one_based() -> None:
    expected = [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    found = [[1, 2, 3], [4, 5, 0], [0, 8, 9]]
    m = first_mismatch(expected, found)
    assert m is not None
    assert (m.step, m.sequence, m.expected, m.found) == (2, 2, 6, 0)


def test_first_mismatch_at_first_step_first_sequence() -> None:
    m = first_mismatch([[5]], [[6]])
    assert m is not None
    assert (m.step, m.sequence, m.expected, m.found) == (1, 0, 5, 6)


@pytest.mark.parametrize(
    ("expected", "found"),
    [([[1, 2], [3, 4], [5, 6]], [[1, 2], [3, 4]]), ([[1, 2], [3, 4]], [[1, 2], [3, 4], [5, 6]])],
)
def test_first_mismatch_different_lengths(expected: Tokens, found: Tokens) -> None:
    m = first_mismatch(expected, found)
    assert m is not None
    assert m.step == 3  # the first step one record has and the other lacks
    assert m.sequence == 0
    assert (m.expected, m.found) == (-1, -1)


def test_first_mismatch_difference_before_length_difference_wins() -> None:
    m = first_mismatch([[1], [2], [3]], [[1], [9]])
    assert m is not None
    assert (m.step, m.sequence, m.expected, m.found) == (2, 0, 2, 9)


def test_first_mismatch_different_row_widths() -> None:
    m = first_mismatch([[1, 2], [3, 4]], [[1, 2], [3]])
    assert m is not None
    assert m.step == 2


def with_tok(measurement: ArmMeasurement, factors: list[float]) -> ArmMeasurement:
    """The arm with each repeat's tok/s scaled by its factor, its step times as they were."""
    repeats = [
        r.model_copy(update={"runs": [run.model_copy(update={"tok_per_s": run.tok_per_s * f}) for run in r.runs]})
        for r, f in zip(measurement.repeats, factors)
    ]
    return measurement.model_copy(update={"repeats": repeats})


def detectable_pct(base: list[float], head: list[float], n: int, confidence: float = CONFIDENCE,
                   power: float = 0.95) -> float:
    """The smallest change n repeats per arm detect, from the pooled variance of the logs."""
    logs = [np.log(base), np.log(head)]
    variance = sum(np.var(v, ddof=1) * (len(v) - 1) for v in logs) / (len(base) + len(head) - 2)
    t = scipy_stats.t.ppf(0.5 + confidence / 2, 2 * n - 2) + scipy_stats.t.ppf(power, 2 * n - 2)
    return float(np.expm1(t * np.sqrt(2 * variance / n)) * 100)


def level(batch) -> float:  # type: ignore[no-untyped-def]
    """The two-sided confidence whose tails are the batch size's alpha per look."""
    return 1 - 2 * batch.alpha_per_look


def test_tok_per_s_too_noisy_to_detect_its_threshold_informs_and_does_not_decide() -> None:
    """Steady GPU time and tok/s spread 8%, as on a shared host, against a 1% threshold: tok/s
    cannot detect 1% at 5 repeats, so by rule 4 it neither gates nor leaves the verdict undecided
    (rule 5 holds it open: tests/test_felt_verdict.py)."""
    base = with_tok(arm("base", {1: scaled(1.0, TINY)}), [1.0, 0.96, 1.04, 0.98, 1.02])
    head = with_tok(arm("head", {1: scaled(1.0, TINY)}), [0.97, 1.03, 0.99, 1.01, 0.95])
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1],
                       rule_at(THRESHOLD, CONFIDENCE, version=4)).batch_sizes
    assert batch.verdict == "pass" and batch.reasons == [] and batch.decided_by is None
    assert (batch.gpu_ms_verdict, batch.tok_per_s_verdict) == ("pass", "pass")
    assert batch.tok_per_s_gates is False
    tok = [[r.runs[0].tok_per_s for r in m.repeats] for m in (base, head)]
    # detectable at the decision's own level: each bound wrong alpha / (1 look x 2 families x 1 batch size)
    assert batch.alpha_per_look == pytest.approx(0.01 / 2)
    assert batch.tok_per_s_detectable_pct == pytest.approx(detectable_pct(*tok, 5, level(batch)), rel=1e-9)
    assert batch.tok_per_s_detectable_pct > THRESHOLD
    assert batch.tok_per_s_repeats_to_gate is None  # an 8% spread against 1%: over 200 repeats


def test_informational_tok_per_s_still_counts_a_slowdown_its_whole_interval_shows() -> None:
    """The same noise, head's tok/s 40% lower: the interval is past the threshold end to end (rule 4)."""
    base = with_tok(arm("base", {1: scaled(1.0, TINY)}), [1.0, 0.96, 1.04, 0.98, 1.02])
    head = with_tok(arm("head", {1: scaled(1.0, TINY)}), [0.6 * f for f in [0.97, 1.03, 0.99, 1.01, 0.95]])
    (batch,) = compare({"base": base, "head": head}, "base", "head", [1],
                       rule_at(THRESHOLD, CONFIDENCE, version=4)).batch_sizes
    assert batch.tok_per_s_gates is False
    tok = [[r.runs[0].tok_per_s for r in m.repeats] for m in (base, head)]
    low, _ = welch_bounds(*tok, batch.alpha_per_look)
    assert batch.tok_per_s_bounds is not None and batch.tok_per_s_bounds.ci_low_pct == pytest.approx(low)
    assert (batch.gpu_ms_verdict, batch.tok_per_s_verdict, batch.verdict) == ("pass", "regression", "regression")
    assert batch.decided_by == "tok_per_s"


def test_quiet_tok_per_s_gates_and_its_noise_can_leave_the_verdict_open() -> None:
    """tok/s spread 0.7%: it just detects 1% at 5 repeats and the decision's level, so it gates,
    and a possible slowdown past 1% that it cannot show keeps the verdict open, by tok/s."""
    quiet = [1.0, 0.9965, 1.0035, 0.99825, 1.00175]
    base = with_tok(arm("base", {1: scaled(1.0, TINY)}), quiet)
    head = with_tok(arm("head", {1: scaled(1.0, TINY)}), [0.995 * f for f in quiet[::-1]])
    (batch,) = run_compare({"base": base, "head": head}, [1]).batch_sizes
    tok = [[r.runs[0].tok_per_s for r in m.repeats] for m in (base, head)]
    assert detectable_pct(*tok, 5, level(batch)) <= THRESHOLD and batch.tok_per_s_gates is True
    # tok/s falls when decode slows: its slowdown's bounds are minus the change's, swapped
    low, high = welch_bounds(*tok, batch.alpha_per_look)
    assert -high <= 0 < THRESHOLD <= -low
    assert (batch.gpu_ms_verdict, batch.tok_per_s_verdict, batch.verdict) == ("pass", "inconclusive", "inconclusive")
    assert batch.decided_by == "tok_per_s" and batch.at_threshold == [] and batch.undecided


def repeats_to_tell(before: list[float], after: list[float], change_pct: float, alpha: float) -> int | None:
    """The fewest repeats per arm whose bound, at the pooled spread, leaves the 1% threshold
    out 95% of the time were `change_pct` the true change; a scan, apart from the code."""
    logs = [np.log(before), np.log(after)]
    variance = sum(np.var(v, ddof=1) * (len(v) - 1) for v in logs) / (len(before) + len(after) - 2)
    margin = abs(np.log1p(THRESHOLD / 100) - np.log1p(change_pct / 100))
    for n in range(2, 201):
        t = scipy_stats.t.ppf(1 - alpha, 2 * n - 2) + scipy_stats.t.ppf(0.95, 2 * n - 2)
        if t * np.sqrt(2 * variance / n) <= margin:
            return n
    return None


def test_a_real_slowdown_at_the_threshold_is_at_threshold_not_noise() -> None:
    """As the H200's +0.46% kernel pairs against 0.5%: a slowdown plainly shown, its interval
    around the threshold. The verdict says at_threshold, with the repeats that would decide."""
    wider = [1.0, 1.0005, 0.9995, 1.00025, 0.99975]  # 0.1% spread
    base = arm("base", {1: scaled(1.0, wider)})
    head = arm("head", {1: scaled(1.0098, wider[::-1])})
    (batch,) = run_compare({"base": base, "head": head}, [1]).batch_sizes
    low, high = welch_bounds(scaled(1.0, wider), scaled(1.0098, wider[::-1]), batch.alpha_per_look)
    assert 0 < low < THRESHOLD < high
    assert batch.gpu_ms_bounds is not None
    assert batch.gpu_ms_bounds.ci_low_pct == pytest.approx(low)
    assert batch.gpu_ms_bounds.ci_high_pct == pytest.approx(high)
    # tok/s follows the step time here (the workload is the step): both sit at the threshold
    assert batch.verdict == "at_threshold" and batch.at_threshold == ["gpu_ms", "tok_per_s"]
    assert batch.decided_by == "gpu_ms"  # a tie names the step time
    assert batch.reasons == [] and batch.undecided
    assert batch.gpu_ms_change is not None
    needed = repeats_to_tell(scaled(1.0, wider), scaled(1.0098, wider[::-1]), batch.gpu_ms_change.pct,
                             batch.alpha_per_look)
    assert batch.repeats_to_decide == needed and needed is not None and needed > 5


@pytest.mark.parametrize(
    ("factor", "jitter", "expected"),
    [
        (1.05, TINY, "regression"),  # lower bound above T
        (1.002, TINY, "pass"),  # upper bound under T
        (0.95, TINY, "improvement"),  # upper bound under -T
        (1.0098, [1.0, 1.0005, 0.9995, 1.00025, 0.99975], "at_threshold"),  # 0 < lower bound <= T <= upper
        (1.015, [0.90, 1.10, 0.95, 1.05, 1.00], "inconclusive"),  # lower bound <= 0, upper >= T
    ],
)
def test_each_verdict_is_where_its_bounds_stand_against_the_threshold(
    factor: float, jitter: list[float], expected: str
) -> None:
    before, after = scaled(1.0, jitter), scaled(factor, jitter[::-1])
    (batch,) = run_compare({"base": arm("base", {1: before}), "head": arm("head", {1: after})}, [1]).batch_sizes
    low, high = welch_bounds(before, after, batch.alpha_per_look)
    by_bounds = ("regression" if low > THRESHOLD else "improvement" if high < -THRESHOLD
                 else "pass" if high < THRESHOLD else "at_threshold" if low > 0 else "inconclusive")
    assert by_bounds == expected  # the case is what it says, by this test's own arithmetic
    assert batch.gpu_ms_verdict == expected and batch.verdict == expected
    # an improvement names what the user feels where it decided one too (tok/s follows the step here)
    assert batch.decided_by == {"pass": None, "improvement": "tok_per_s"}.get(expected, "gpu_ms")
    # p-values stay beside the shown 95% interval, for reference
    assert batch.gpu_ms_change is not None and batch.gpu_ms_change.confidence == CONFIDENCE
    assert 0 <= batch.gpu_ms_change.p_value <= 1


def test_alpha_is_spent_over_looks_and_split_over_families_and_batch_sizes() -> None:
    """+1.95% over a 0.5% spread: a regression when one look at one batch size may spend all of
    alpha over its 2 families (GPU ms; end-to-end ms with tok/s), at the threshold when the
    first of 2 looks spends its Pocock-type share over 2 families x 2 batch sizes."""
    jitter = [1.0, 1.005, 0.995, 1.0025, 0.9975]
    before, after = scaled(1.0, jitter), scaled(1.0195, jitter[::-1])
    measurements = {"base": arm("base", {1: before, 2: before}), "head": arm("head", {1: after, 2: after})}
    (alone,) = compare(measurements, "base", "head", [1], rule_at(THRESHOLD, CONFIDENCE, looks=1)).batch_sizes
    shared = compare(measurements, "base", "head", [1, 2], rule_at(THRESHOLD, CONFIDENCE, looks=2))
    first_look = 0.01 * math.log(1 + (math.e - 1) / 2)  # 62% of alpha at the first of 2 looks
    assert alone.alpha_per_look == pytest.approx(0.01 / 2)
    assert [b.alpha_per_look for b in shared.batch_sizes] == [pytest.approx(first_look / (2 * 2))] * 2
    assert welch_bounds(before, after, 0.01 / 2)[0] > THRESHOLD + 0.05
    assert welch_bounds(before, after, first_look / 4)[0] < THRESHOLD - 0.05
    assert alone.verdict == "regression"
    assert [b.verdict for b in shared.batch_sizes] == ["at_threshold", "at_threshold"] and shared.rule.looks == 2
    assert shared.batch_sizes[0].gpu_ms_bounds is not None and shared.batch_sizes[0].gpu_ms_bounds.confidence == \
        pytest.approx(1 - 2 * first_look / 4)
    # the second look spends the rest of alpha: 38% of it
    (later,) = compare(measurements, "base", "head", [1, 2], rule_at(THRESHOLD, CONFIDENCE, looks=2),
                       look={1: 2, 2: 2}).batch_sizes[:1]
    assert later.alpha_per_look == pytest.approx((0.01 - first_look) / 4)


def test_a_slowdown_in_tok_s_alone_is_a_regression_by_tok_s() -> None:
    """The same GPU time per step, 5% fewer tokens per second: the host got slower."""
    base = arm("base", {1: scaled(1.0, TINY)})
    head = arm("head", {1: scaled(1.0, TINY[::-1])})
    head = head.model_copy(update={"repeats": [
        r.model_copy(update={"runs": [run.model_copy(update={"tok_per_s": run.tok_per_s * 0.95 * j})
                                      for run in r.runs]})
        for r, j in zip(head.repeats, TINY)
    ]})
    (batch,) = run_compare({"base": base, "head": head}, [1]).batch_sizes
    assert batch.verdict == "regression" and batch.decided_by == "tok_per_s"
    assert (batch.gpu_ms_verdict, batch.tok_per_s_verdict) == ("pass", "regression")
    assert batch.tok_per_s_change is not None and batch.tok_per_s_change.pct == pytest.approx(-5.0, abs=0.05)
    # both slower: the step time names it
    (both,) = run_compare({"base": base, "head": arm("head", {1: scaled(1.05, TINY[::-1])})}, [1]).batch_sizes
    assert (both.gpu_ms_verdict, both.tok_per_s_verdict, both.decided_by) == ("regression", "regression", "gpu_ms")


# -- the confirmation rule ----------------------------------------------------------------

AT_T = [1.0, 1.0005, 0.9995, 1.00025, 0.99975]


def with_round(measurement: ArmMeasurement, ms: dict[int, list[float]]) -> ArmMeasurement:
    """The arm with a second round of processes that measured only the batch sizes of `ms`."""
    more = arm(measurement.arm, ms).repeats
    first = len(measurement.repeats)
    return measurement.model_copy(update={"repeats": measurement.repeats + [
        r.model_copy(update={"repeat": first + r.repeat}) for r in more]})


def test_a_confirmation_round_decides_only_the_batch_sizes_left_undecided() -> None:
    """bs 1 passes in the first round; bs 2 sits at the threshold. The second round measures
    bs 2 alone; bs 1 keeps its first-round figures, bs 2 is decided on both rounds: narrower,
    still holding the threshold, so at_threshold is its final verdict."""
    from guard.compare import confirm_undecided

    round_one = {"base": arm("base", {1: scaled(1.0), 2: scaled(1.0, AT_T)}),
                 "head": arm("head", {1: scaled(1.0, TINY[::-1]), 2: scaled(1.0098, AT_T[::-1])})}

    def decide(measurements: dict[str, ArmMeasurement], look: dict[int, int] | None = None):  # type: ignore[no-untyped-def]
        return compare(measurements, "base", "head", [1, 2], rule_at(THRESHOLD, CONFIDENCE, looks=2), look=look)

    first = decide(round_one)
    assert [b.verdict for b in first.batch_sizes] == ["pass", "at_threshold"] and first.undecided_sizes == [2]
    asked: list[list[int]] = []
    both_rounds = {"base": with_round(round_one["base"], {2: scaled(1.0, AT_T)}),
                   "head": with_round(round_one["head"], {2: scaled(1.0098, AT_T[::-1])})}

    def second(undecided: list[int], mix: bool):  # type: ignore[no-untyped-def]
        assert not mix
        asked.append(undecided)
        return decide(both_rounds, {size: 2 for size in undecided})

    final, rounds, stopped, missing = confirm_undecided(first, second)
    assert asked == [[2]] and (rounds, stopped, missing) == (2, "max_rounds", False)
    kept, again = final.batch_sizes
    assert kept == first.batch_sizes[0] and kept.look == 1 and [a.repeats for a in kept.arms] == [5, 5]
    assert again.look == 2 and [a.repeats for a in again.arms] == [10, 10]
    values = [scaled(1.0, AT_T) * 2, scaled(1.0098, AT_T[::-1]) * 2]
    low, high = welch_bounds(*values, again.alpha_per_look)
    assert 0 < low < THRESHOLD < high and again.verdict == final.verdict == "at_threshold"
    assert again.gpu_ms_bounds is not None and first.batch_sizes[1].gpu_ms_bounds is not None
    width = [b.ci_high_pct - b.ci_low_pct for b in (first.batch_sizes[1].gpu_ms_bounds, again.gpu_ms_bounds)]
    assert width[1] < 0.6 * width[0]  # twice the processes (1/sqrt 2), and a t of more degrees of freedom


def test_confirmation_round_only_where_a_look_is_left_and_a_batch_size_is_open() -> None:
    from guard.compare import confirm_undecided

    def run(factor: float, jitter: list[float], looks: int):  # type: ignore[no-untyped-def]
        measurements = {"base": arm("base", {1: scaled(1.0, jitter)}), "head": arm("head", {1: scaled(factor, jitter)})}
        return compare(measurements, "base", "head", [1], rule_at(THRESHOLD, CONFIDENCE, looks=looks))

    clear, near, last = run(1.05, TINY, 2), run(1.0098, AT_T, 2), run(1.0098, AT_T, 1)
    assert (clear.verdict, clear.undecided_sizes) == ("regression", [])
    assert (near.verdict, near.undecided_sizes) == ("at_threshold", [1])
    asked: list[object] = []

    def second(undecided, mix):  # type: ignore[no-untyped-def]
        asked.append(undecided)
        return clear

    assert confirm_undecided(clear, second) == (clear, 1, "decided", False)
    assert confirm_undecided(last, second) == (last, 1, "max_rounds", False)  # one look: at_threshold is final
    assert asked == []
    assert confirm_undecided(near, second) == (clear, 2, "decided", False)
    assert asked == [[1]]
    assert confirm_undecided(near, lambda undecided, mix: None) == (near, 1, "max_rounds", True)
    assert confirm_undecided(near, second, fits=lambda undecided, mix: False) == (near, 1, "budget", False)
    assert asked == [[1]]  # no round was measured where none fit
