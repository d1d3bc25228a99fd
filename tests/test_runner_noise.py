"""A runner's noise from an A/A (measure/_noise.py): the pooled spread against numpy, and its
upper limit, smallest threshold and repeats checked by simulation for what they promise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from guard.measure import PASS_RATE, relative_change, runner_noise


def _draw(rng: np.random.Generator, sigma: float, n: int) -> list[float]:
    return list(3.0 * np.exp(rng.normal(0.0, sigma, n)))


@pytest.mark.slow
def test_the_spread_is_the_pooled_within_side_sd_of_the_logs() -> None:
    sides = [[1.0, 1.02, 0.99, 1.01], [2.0, 2.01, 1.97]]  # each side's level is set aside
    noise = runner_noise(sides, repeats=5, confidence=0.95, thresholds_pct=[1.0])
    logs = [np.log(side) for side in sides]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in logs) / (len(sides[0]) + len(sides[1]) - 2)
    assert noise.sd_pct == pytest.approx(math.sqrt(pooled) * 100)
    assert (noise.processes, noise.degrees_of_freedom, noise.repeats) == (7, 5, 5)
    assert noise.sd_limit_pct > 1.5 * noise.sd_pct  # 5 degrees of freedom leave the spread uncertain


def test_the_upper_limit_covers_the_true_spread_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(1)
    sigma = 0.01
    covered = [
        runner_noise([_draw(rng, sigma, 5), _draw(rng, sigma, 5)], 5, 0.95, []).sd_limit_pct >= sigma * 100
        for _ in range(3000)
    ]
    assert 0.935 <= np.mean(covered) <= 0.965


def test_an_unchanged_commit_passes_the_smallest_threshold_at_least_as_often_as_promised() -> None:
    """Calibrate on one A/A, then run a fresh unchanged pair at the configured repeats: its
    interval's upper bound falls under the supported threshold PASS_RATE of the time or more."""
    rng = np.random.default_rng(2)
    sigma, repeats = 0.02, 5
    passed = []
    for _ in range(2000):
        threshold = runner_noise([_draw(rng, sigma, 5), _draw(rng, sigma, 5)], repeats, 0.95, []).supported_pct
        run = relative_change(_draw(rng, sigma, repeats), _draw(rng, sigma, repeats))
        passed.append(run.ci_high_pct < threshold)
    assert np.mean(passed) >= PASS_RATE


@pytest.mark.slow
def test_the_repeats_needed_pass_a_threshold_at_the_spread_limit() -> None:
    rng = np.random.default_rng(3)
    sigma = 0.01
    noise = runner_noise([_draw(rng, sigma, 400), _draw(rng, sigma, 400)], 5, 0.95, [1.0, 5.0, 1.0, 0.01])
    assert [r.threshold_pct for r in noise.needed] == [1.0, 5.0, 0.01]  # each once, as asked
    at_1, at_5, at_tiny = (r.repeats for r in noise.needed)
    assert at_1 is not None and at_5 is not None and at_5 < at_1 and at_tiny is None  # 0.01%: past 200
    limit = noise.sd_limit_pct / 100  # with 798 degrees of freedom, close to sigma

    def pass_rate(n: int) -> float:
        runs = [relative_change(_draw(rng, limit, n), _draw(rng, limit, n)).ci_high_pct < 1.0 for _ in range(1500)]
        return float(np.mean(runs))

    assert pass_rate(at_1) >= PASS_RATE - 0.015
    assert pass_rate(max(2, at_1 // 3)) < 0.8  # far fewer repeats pass far less often
    # the configured repeats' threshold is the one those repeats need
    assert noise.supported_pct == pytest.approx(
        runner_noise([_draw(rng, sigma, 400), _draw(rng, sigma, 400)], 5, 0.95, []).supported_pct, rel=0.1)
    assert runner_noise([[1.0, 1.0], [1.0, 1.0]], 5, 0.95, [1.0]).supported_pct == 0.0  # no noise, no floor here


def test_a_side_needs_two_processes() -> None:
    with pytest.raises(ValueError, match="two processes"):
        runner_noise([[1.0], [1.0]], 5, 0.95, [])
