"""What a run says it could see, against what it could: the coverage of the stated figure.

Usage: python benchmarks/caught_coverage.py [--statements 20000] [--seed 5]

"This run would have caught a slowdown of X%" (`caught_pct`, `measure.smallest_caught_pct`)
promises that a true slowdown of X is called a regression PASS_RATE (95%) of the time. X is made
from the run's own spread, which is itself drawn. Here, at a known true sd and n processes per
arm, `--statements` unchanged runs each state X from their own processes (Welch's bound at the
default rule's level at one batch size, a 1% threshold), once at their spread (as reports to
rule 4 state it) and once at its upper SPREAD_LIMIT_CONFIDENCE limit (`at_spread_limit`). Each
X is then held to the true power of a run at that sd and n: the chance that Welch's lower bound,
drawn here apart from the guard's own draws, clears the threshold at a true slowdown of X.

Printed per n and sd: the share of statements whose true power is at least PASS_RATE (the
promise, for at least that share of runs, is met where it is 95% or more), the mean true power,
and its 5% quantile (the most optimistic twentieth of statements). The passing columns: the share
and the mean among the runs whose own verdict was a pass, above the comment's fold where it
states the figure, and how many passed: a pass wants a quiet draw, so where passes are rare
(the spread near the threshold) they state the figures of runs quieter than their runner.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from guard.config import Rule, parse_config  # noqa: E402
from guard.measure import PASS_RATE, SPREAD_LIMIT_CONFIDENCE, relative_change, smallest_caught_pct  # noqa: E402

THRESHOLD_PCT = 1.0
REPEATS = (2, 3, 5, 8)
SDS_PCT = (0.1, 1.0, 5.0)
PIVOTS = 200_000  # drawn pairs behind each true power: its 5% point to about 0.3%


def default_level() -> float:
    """The two-sided level of the default rule's bounds at one batch size, its first look."""
    return Rule.of_config(parse_config({}).measure).model_copy(update={"decided_sizes": 1}).bounds_confidence


@functools.lru_cache(maxsize=16)
def _welch_pivot(repeats: int, level: float) -> np.ndarray:
    """Welch's lower bound less the true change, in true standard errors of the difference
    (sd x sqrt(2 / n)), over PIVOTS unchanged pairs at sd 1; sorted. Its own seed, not the guard's."""
    rng = np.random.default_rng([repeats, 48])
    base, head = rng.standard_normal((2, PIVOTS, repeats))
    se2_b, se2_h = base.var(axis=1, ddof=1) / repeats, head.var(axis=1, ddof=1) / repeats
    dof = (se2_b + se2_h) ** 2 / ((se2_b**2 + se2_h**2) / (repeats - 1))
    low = head.mean(axis=1) - base.mean(axis=1) - stats.t.ppf(0.5 + level / 2, dof) * np.sqrt(se2_b + se2_h)
    return np.sort(low / math.sqrt(2 / repeats))


def true_power(stated_pct: np.ndarray, sd_pct: float, repeats: int, level: float) -> np.ndarray:
    """The chance that a run of `repeats` per arm at a true sd of `sd_pct` calls a true slowdown of
    each `stated_pct` a regression: Welch's lower bound at `level` past THRESHOLD_PCT."""
    pivot = _welch_pivot(repeats, level)
    margin = (np.log1p(stated_pct / 100) - math.log1p(THRESHOLD_PCT / 100)) / (sd_pct / 100 * math.sqrt(2 / repeats))
    return 1 - np.searchsorted(pivot, -margin, side="right") / len(pivot)


def stated(rng: np.random.Generator, statements: int, sd_pct: float, repeats: int, level: float,
           at_spread_limit: float | None, passing: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Each unchanged run's stated X (`smallest_caught_pct` on its own processes), and whether its
    own verdict was a pass (its upper bound under the threshold; all False unless `passing`)."""
    figures, passed = np.empty(statements), np.zeros(statements, dtype=bool)
    for i in range(statements):
        base, head = (list(10 * np.exp(rng.normal(0, sd_pct / 100, repeats))) for _ in "bh")
        figures[i] = smallest_caught_pct([base, head], repeats, THRESHOLD_PCT, level, at_spread_limit=at_spread_limit)
        if passing:
            passed[i] = relative_change(base, head, level).ci_high_pct < THRESHOLD_PCT
    return figures, passed


def coverage(statements: int, sd_pct: float, repeats: int, level: float, at_spread_limit: float | None,
             seed: int, passing: bool = False) -> dict[str, float]:
    """The share of statements whose true power is PASS_RATE or more, the mean true power, its 5%
    quantile; and, with `passing`, the share and the mean among the runs that passed (nan where
    none did) and how many did."""
    rng = np.random.default_rng([seed, repeats, round(sd_pct * 1000)])
    figures, passed = stated(rng, statements, sd_pct, repeats, level, at_spread_limit, passing)
    power = true_power(figures, sd_pct, repeats, level)
    met = power >= PASS_RATE
    return {"share": float(met.mean()), "mean": float(power.mean()), "q05": float(np.quantile(power, 0.05)),
            "passing_share": float(met[passed].mean()) if passed.any() else math.nan,
            "passing_mean": float(power[passed].mean()) if passed.any() else math.nan, "passed": float(passed.mean())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="caught_coverage.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)
    level = default_level()
    print(f"Welch's bounds at {level:.4%} two-sided, threshold {THRESHOLD_PCT:g}%, {args.statements:,} unchanged "
          f"runs per row; true power of each stated X from {PIVOTS:,} drawn pairs. Power >= {PASS_RATE:.0%}: the "
          f"share of statements whose X is caught {PASS_RATE:.0%} of the time or more (promised: {PASS_RATE:.0%}).\n")
    print("| n per arm | true sd | stated at | power >= 95% | mean power | power, 5% quantile "
          "| passes: power >= 95% | passes: mean power | passed |")
    print("|---|---|---|---|---|---|---|---|---|")
    ways = (("own spread", None), (f"{SPREAD_LIMIT_CONFIDENCE:.0%} limit", SPREAD_LIMIT_CONFIDENCE))
    for repeats in REPEATS:
        for sd_pct in SDS_PCT:
            for name, limit in ways:
                found = coverage(args.statements, sd_pct, repeats, level, limit, args.seed, passing=True)
                print(f"| {repeats} | {sd_pct:g}% | {name} | {found['share']:.3f} | {found['mean']:.3f} "
                      f"| {found['q05']:.3f} | {found['passing_share']:.3f} | {found['passing_mean']:.3f} "
                      f"| {found['passed']:.1%} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
