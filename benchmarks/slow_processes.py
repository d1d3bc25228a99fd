"""Which way of handling slow processes the decision should take, chosen by simulation.

Usage: python benchmarks/slow_processes.py [--trials 4000] [--seed 7] [--repeats 5]

A run's processes are not all alike: a neighbour, a clock state or a cold cache makes some of
them slower in every figure (runners' "slow processes"), and a host can sit in one of two
states for a whole process (a two-level host). One look of the rule at the demo's settings
(5 processes per arm, 2 batch sizes, alpha 1% over 2 looks and 2 families: each one-sided bound
wrong at most `alpha_per_look`), GPU ms per step with a threshold T of 1%, is decided four ways:

- `none`: Welch's bounds on every process, as rule 2 does;
- `set aside`: the processes far on the slow side of their arm (`guard.measure.set_aside`: more
  than 5 robust standard deviations, pooled over the arms, and 0.1%; none of an arm where over
  a third of its processes are slow) left out, Welch's bounds on the rest;
- `yuen`: Yuen's bounds on 20%-trimmed means (a robust estimator; scipy's `trim=`);
- `rerun`: as `set aside`, and both arms measured again, as many processes as the one that lost
  most, once; the decision then sets aside again on all of them (the guard's way, rule 3).

Printed per scenario and true change: the share of trials each way ends regression, undecided
(at_threshold or inconclusive) and pass, with a 95% Clopper-Pearson interval on the first, and
the processes it took per arm. A false alarm is a regression under T; a miss is anything but a
regression at 1.5 T.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from guard.compare import alpha_per_look, bounds_level  # noqa: E402
from guard.compare._interval import Slowdown  # noqa: E402
from guard.measure import relative_change, set_aside  # noqa: E402
from guard.measure import Change  # noqa: E402

THRESHOLD_PCT = 1.0
WAYS = ("none", "set aside", "yuen", "rerun")
# (name, share of processes affected, how much slower: uniform range in percent)
SCENARIOS = (
    ("clean", 0.0, (0.0, 0.0)),
    ("10% slow by 3-10%", 0.10, (3.0, 10.0)),
    ("20% slow by 0.5-2%", 0.20, (0.5, 2.0)),
    ("two-level host: 30% at +2%", 0.30, (2.0, 2.0)),
)
CHANGES_OF_T = (0.0, 0.5, 1.5)


def _draw(n: int, change: float, sd_pct: float, share: float, slow: tuple[float, float],
          rng: np.random.Generator) -> list[float]:
    noise = np.exp(rng.normal(0.0, sd_pct / 100, n))
    hit = rng.random(n) < share
    by = 1 + rng.uniform(slow[0], slow[1], n) / 100
    return list(10.0 * (1 + change) * noise * np.where(hit, by, 1.0))


def _yuen(base: list[float], head: list[float], level: float) -> tuple[float, float]:
    """Yuen's two-sided bounds (percent) on the change of 20%-trimmed mean logs."""
    lb, la = np.log(base), np.log(head)

    def parts(x: np.ndarray) -> tuple[float, float, int]:
        n = len(x)
        g = int(math.floor(0.2 * n))
        h = n - 2 * g
        w = np.sort(x)
        w[:g], w[n - g:] = w[g], w[n - g - 1]  # winsorized
        d = (n - 1) * float(np.var(w, ddof=1)) / (h * (h - 1))
        return float(stats.trim_mean(x, 0.2)), d, h

    mb, db, hb = parts(lb)
    ma, da, ha = parts(la)
    se = math.sqrt(db + da)
    diff = ma - mb
    if se == 0:
        return math.expm1(diff) * 100, math.expm1(diff) * 100
    df = (db + da) ** 2 / (db**2 / (hb - 1) + da**2 / (ha - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return math.expm1(diff - half) * 100, math.expm1(diff + half) * 100


def _kept(base: list[float], head: list[float]) -> tuple[list[float], list[float]]:
    aside = set_aside({"base": base, "head": head}, slower_is_higher=True)
    left_out = {arm: {position for position, _ in slow} for arm, slow in aside.items()}
    return ([v for i, v in enumerate(base, 1) if i not in left_out.get("base", set())],
            [v for i, v in enumerate(head, 1) if i not in left_out.get("head", set())])


def _verdict(low: float, high: float) -> str:
    v = Slowdown(0.0, low, high).verdict(THRESHOLD_PCT, gates=True)
    return "undecided" if v in ("at_threshold", "inconclusive") else v


def trial(way: str, change: float, sd_pct: float, share: float, slow: tuple[float, float], n: int,
          level: float, rng: np.random.Generator) -> tuple[str, int]:
    base, head = _draw(n, 0.0, sd_pct, share, slow, rng), _draw(n, change, sd_pct, share, slow, rng)
    used = 2 * n
    if way in ("set aside", "rerun"):
        kept_b, kept_h = _kept(base, head)
        missing = max(len(base) - len(kept_b), len(head) - len(kept_h))
        if way == "rerun" and missing:  # as the pipeline does: each arm measured again as often, once
            used += 2 * missing
            base += _draw(missing, 0.0, sd_pct, share, slow, rng)
            head += _draw(missing, change, sd_pct, share, slow, rng)
            kept_b, kept_h = _kept(base, head)
        base, head = kept_b, kept_h
    if way == "yuen":
        low, high = _yuen(base, head, level)
    else:
        bounds: Change = relative_change(base, head, level)
        low, high = bounds.ci_low_pct, bounds.ci_high_pct
    return _verdict(low, high), used


def _rate(k: int, n: int) -> str:
    low, high = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k / n:.1%} ({low:.1%}-{high:.1%})"


def main() -> int:
    p = argparse.ArgumentParser(prog="slow_processes.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=4000)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sd-pct", type=float, nargs="+", default=[0.1, 0.3])
    args = p.parse_args()
    if args.trials < 1 or args.repeats < 3 or min(args.sd_pct) <= 0:
        p.error("needs --trials >= 1, --repeats >= 3 and every --sd-pct > 0")
    per_bound = alpha_per_look(0.01, 2, 2, look=1, version=2)
    level = bounds_level(per_bound)
    print(f"One look, {args.repeats} processes per arm, T = {THRESHOLD_PCT:g}%, each one-sided bound "
          f"wrong at most {per_bound:.3%}; {args.trials} trials per cell, seed {args.seed}.\n")
    print("| scenario | GPU sd | true change | way | regression | undecided | pass | processes per arm |")
    print("|---|---|---|---|---|---|---|---|")
    for scenario, share, slow in SCENARIOS:
        for sd in args.sd_pct:
            for of_t in CHANGES_OF_T:
                for way in WAYS:
                    # the same draws for every way: their differences are the way's, not the stream's
                    rng = np.random.default_rng([args.seed, int(sd * 100), int(of_t * 100), int(share * 100)])
                    counts = {"regression": 0, "undecided": 0, "pass": 0, "improvement": 0}
                    used = 0
                    for _ in range(args.trials):
                        verdict, processes = trial(way, of_t * THRESHOLD_PCT / 100, sd, share, slow, args.repeats,
                                                   level, rng)
                        counts[verdict] += 1
                        used += processes
                    print(f"| {scenario} | {sd:g}% | {of_t:g} T | {way} | {_rate(counts['regression'], args.trials)} "
                          f"| {counts['undecided'] / args.trials:.1%} | {counts['pass'] / args.trials:.1%} "
                          f"| {used / args.trials / 2:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
