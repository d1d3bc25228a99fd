"""End-to-end ms per step (unheld, the host's launch time included) decided beside GPU ms:
a host-only slowdown the held GPU figure cannot see, on synthetic GPU-timed measurements. Here
as rules 2 to 4 decide it (a figure too noisy to detect its threshold informs, and its noise
alone never holds a verdict open): how a stored report of schemas 8 to 11 is decided again.
Rule 5, where what the user feels always gates: tests/test_felt_verdict.py."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from guard.compare import compare, decide_again
from guard.config import Threshold
from guard.measure import ArmMeasurement, RepeatResult
from tests.rules import rule_at
from tests.test_verdict import CONFIDENCE, THRESHOLD, TINY, batch_run, detectable_pct, welch_bounds

GPU_MS = 10.0
HOST_JITTER = [1.0, 1.08, 0.93, 1.05, 0.95]  # a host's state from process to process: about 6%
TOK_JITTER = [1.0, 1.9, 0.55, 1.4, 0.7]  # tok/s on a compiled engine: far too noisy to decide


def gpu_arm(name: str, end_to_end_ms: list[float], tok_factor: float = 1.0, gpu_ms: float = GPU_MS) -> ArmMeasurement:
    """One batch size (1), GPU-timed: GPU ms held steady, the end-to-end figure as given."""
    repeats = []
    for r, (end, jitter) in enumerate(zip(end_to_end_ms, TINY)):
        plain = batch_run(1, gpu_ms * jitter)
        run = plain.model_copy(update={
            "timer": "cuda_event", "end_to_end_gpu_ms_per_step": end,
            "tok_per_s": 1000 / end * tok_factor * TOK_JITTER[r],
        })
        repeats.append(RepeatResult(arm=name, repeat=r, environment={}, runs=[run]))
    return ArmMeasurement(arm=name, repeats=repeats)


def decided(base: ArmMeasurement, head: ArmMeasurement, looks: int = 2, **rule: Any):  # type: ignore[no-untyped-def]
    return compare({"base": base, "head": head}, "base", "head", [1],
                   rule_at(THRESHOLD, CONFIDENCE, looks=looks, **rule))


RULE_4 = 4  # the last rule under which a figure too noisy to gate informs


def test_a_host_only_2x_slowdown_is_a_regression_decided_by_end_to_end_time() -> None:
    base_end = [GPU_MS * 1.1 * j for j in HOST_JITTER]
    head_end = [2 * v for v in base_end[::-1]]
    comparison = decided(gpu_arm("base", base_end), gpu_arm("head", head_end, tok_factor=1.0), version=RULE_4)
    (batch,) = comparison.batch_sizes
    assert comparison.verdict == "regression" and batch.decided_by == "end_to_end_ms"
    assert batch.gpu_ms_verdict == "pass" and batch.end_to_end_verdict == "regression"
    # too noisy to gate at 5 processes: it decides on a whole interval past the threshold
    each = 0.01 * math.log(1 + (math.e - 1) / 2) / (2 * 1)  # the first of 2 looks' share, 2 families x 1 size
    assert batch.alpha_per_look == pytest.approx(each)
    low, high = welch_bounds(base_end, head_end, each)
    assert batch.end_to_end_bounds is not None
    assert batch.end_to_end_bounds.ci_low_pct == pytest.approx(low) and low > THRESHOLD
    assert batch.end_to_end_bounds.ci_high_pct == pytest.approx(high)
    assert batch.end_to_end_gates is False
    assert batch.end_to_end_detectable_pct == pytest.approx(detectable_pct(base_end, head_end, 5, 1 - 2 * each))
    assert batch.end_to_end_detectable_pct > THRESHOLD
    assert comparison.rule.end_to_end_ms is not None and comparison.rule.end_to_end_ms.pct == THRESHOLD


def test_end_to_end_noise_never_leaves_an_unchanged_commit_undecided() -> None:
    """A/A pairs: the same host noise on both sides, in 200 draws; the end-to-end figure does
    not gate at that noise, so no draw is held open by it, and none is a regression."""
    rng = np.random.default_rng(7)
    verdicts = []
    for _ in range(200):
        base_end, head_end = (list(GPU_MS * 1.2 * np.exp(rng.normal(0, 0.06, 5))) for _ in range(2))
        (batch,) = decided(gpu_arm("base", base_end), gpu_arm("head", head_end), version=RULE_4).batch_sizes
        assert batch.end_to_end_gates is False
        verdicts.append((batch.verdict, batch.end_to_end_verdict))
    assert {v for v, _ in verdicts} <= {"pass", "improvement", "regression"}
    assert sum(e in ("regression", "improvement") for _, e in verdicts) <= 2  # each bound wrong 0.17% of the time
    assert all(e not in ("at_threshold", "inconclusive") for _, e in verdicts)


def test_a_quiet_end_to_end_figure_gates_and_holds_a_slowdown_at_its_threshold_open() -> None:
    """At a spread of 0.1% it detects 1%: +1% host time is a slowdown shown, not told from 1%."""
    base_end = [GPU_MS * 1.05 * j for j in (1.0, 1.001, 0.999, 1.0005, 0.9995)]
    head_end = [1.01 * v for v in base_end[::-1]]
    (batch,) = decided(gpu_arm("base", base_end), gpu_arm("head", head_end)).batch_sizes
    assert batch.end_to_end_gates is True and batch.gpu_ms_verdict == "pass"
    low, high = welch_bounds(base_end, head_end, batch.alpha_per_look)
    assert 0 < low < THRESHOLD < high  # the interval holds the threshold: not told from it
    expected = "at_threshold"
    assert batch.end_to_end_verdict == expected and batch.verdict == expected
    assert batch.decided_by == "end_to_end_ms" and batch.at_threshold == ["end_to_end_ms"]


def test_its_own_threshold_decides_it() -> None:
    base_end = [GPU_MS * 1.05 * j for j in TINY]
    head_end = [1.03 * v for v in base_end]
    (over,) = decided(gpu_arm("base", base_end), gpu_arm("head", head_end), version=RULE_4).batch_sizes
    (under,) = decided(gpu_arm("base", base_end), gpu_arm("head", head_end),
                       end_to_end_ms=Threshold(pct=5.0), version=RULE_4).batch_sizes
    assert over.verdict == "regression" and over.decided_by == "end_to_end_ms"
    assert under.verdict == "pass" and under.end_to_end_verdict == "pass"


def test_a_cpu_run_decides_no_end_to_end_figure_and_writes_no_key_for_it() -> None:
    """On a CPU the step time is already the wall clock of the unheld pass: one figure, GPU ms's."""
    base, head = (ArmMeasurement(arm=name, repeats=[
        RepeatResult(arm=name, repeat=r, environment={}, runs=[batch_run(1, GPU_MS * j)]) for r, j in enumerate(TINY)])
        for name in ("base", "head"))
    (batch,) = decided(base, head).batch_sizes
    assert batch.verdict == "pass" and batch.end_to_end_verdict is None and batch.end_to_end_bounds is None
    keys = {k for k in json.loads(batch.model_dump_json()) if k.startswith("end_to_end_")}
    assert keys == {"end_to_end_gpu_ms_change"}


def test_a_stored_comparison_is_decided_again_by_the_rule_it_states() -> None:
    """Decided again with its end-to-end threshold, the verdict and bounds are the same; a rule
    stated without one (a report from before) splits alpha over 2 metrics and leaves it undecided."""
    base_end = [GPU_MS * 1.1 * j for j in HOST_JITTER]
    head_end = [2 * v for v in base_end]
    (batch,) = decided(gpu_arm("base", base_end), gpu_arm("head", head_end)).batch_sizes
    rule = rule_at(THRESHOLD, CONFIDENCE, looks=2)
    again = decide_again(batch, "base", "head", rule)
    assert again.verdict == batch.verdict == "regression" and again.end_to_end_bounds == batch.end_to_end_bounds
    older = decide_again(batch, "base", "head", rule.model_copy(update={"end_to_end_ms": None, "version": 1}))
    assert older.end_to_end_verdict is None and older.alpha_per_look == pytest.approx(0.01 / (2 * 2 * 1))




def test_a_host_slowdown_shown_by_a_figure_too_noisy_to_gate_keeps_its_batch_size_open() -> None:
    """GPU ms unchanged, end-to-end ms 16.5% slower at a host spread of about 6%: too noisy to gate
    or to tell the slowdown from 1%, but its lower bound is above 0. Not a pass: undecided, and
    so another round; schema 7's rule passed it."""
    base_end = [GPU_MS * 1.1 * j for j in HOST_JITTER]
    head_end = [1.165 * v for v in base_end[::-1]]
    comparison = decided(gpu_arm("base", base_end), gpu_arm("head", head_end), version=RULE_4)
    (batch,) = comparison.batch_sizes
    low, high = welch_bounds(base_end, head_end, batch.alpha_per_look)
    assert 0 < low < THRESHOLD < high  # the case is what it says, by this test's own arithmetic
    assert batch.end_to_end_gates is False and batch.gpu_ms_verdict == "pass"
    assert batch.end_to_end_verdict == "at_threshold" == batch.verdict == comparison.verdict
    assert batch.decided_by == "end_to_end_ms" and batch.undecided and comparison.undecided_sizes == [1]
    old = decide_again(batch, "base", "head", rule_at(THRESHOLD, CONFIDENCE, looks=2, version=1))
    assert (old.verdict, old.end_to_end_verdict) == ("pass", "pass")


def test_end_to_end_time_halved_is_an_improvement_where_gpu_ms_is_too_noisy_to_say() -> None:
    """A fallback removed: every step half as long end to end, tok/s twice as high, while the
    GPU-timed figure is too noisy at 5 processes to tell anything from 1%. What the user feels
    decides, and the improvement names it; schema 7's rule left it inconclusive."""
    noisy = [1.0, 1.03, 0.97, 1.02, 0.98]
    base = gpu_arm("base", [GPU_MS * 2.2 * j for j in TINY], gpu_ms=GPU_MS)
    head = gpu_arm("head", [GPU_MS * 1.1 * j for j in TINY[::-1]], tok_factor=1.0, gpu_ms=GPU_MS)
    for arm, scale in ((base, 1.0), (head, 1.0)):
        for r, jitter in zip(arm.repeats, noisy):
            r.runs[0] = r.runs[0].model_copy(update={"gpu_ms_per_step": GPU_MS * scale * jitter,
                                                     "tok_per_s": r.runs[0].tok_per_s / TOK_JITTER[r.repeat]})
    comparison = decided(base, head)
    (batch,) = comparison.batch_sizes
    assert batch.gpu_ms_verdict == "inconclusive"
    assert batch.end_to_end_verdict == "improvement" and batch.tok_per_s_verdict == "improvement"
    assert comparison.verdict == batch.verdict == "improvement" and batch.decided_by == "end_to_end_ms"
    assert not batch.undecided
    old = decide_again(batch, "base", "head", rule_at(THRESHOLD, CONFIDENCE, looks=2, version=1))
    assert old.verdict == "inconclusive" and old.decided_by == "gpu_ms"
