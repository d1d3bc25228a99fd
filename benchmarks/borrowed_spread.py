"""Borrowing the calibrated spread (compare/_borrow.py), simulated: for a calibration of
`--calibration` processes per side and runs of `--repeats` per arm, each bound's error rate on an
unchanged commit, with the runner as steady as calibrated and noisier since, and the smallest
threshold an unchanged commit passes PASS_RATE of the time (in sds of one process), for three
rules: the run's own processes alone (Welch), the calibrated estimate pooled in, and its upper
limit pooled in (the shipped rule). Each pair checks its spread against the calibration's first
(an F test at BORROW_CHECK_ALPHA) and falls back to Welch where it fails, as a run does.

    python benchmarks/borrowed_spread.py --draws 400000 --seed 3

prints a Markdown table (docs/notebook/decision-rule.md holds one)."""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from guard.calibrate import rule_level
from guard.config import parse_config
from guard.measure import BORROW_CHECK_ALPHA, PASS_RATE, SPREAD_LIMIT_CONFIDENCE


def simulate(rng: np.random.Generator, draws: int, calibration: int, repeats: int, noisier: float,
             level: float) -> dict[str, tuple[float, float]]:
    """Per rule: (one bound's error rate on unchanged pairs, PASS_RATE quantile of the upper bound)."""
    cal_dof, run_dof = 2 * calibration - 2, 2 * repeats - 2
    cal_var = rng.chisquare(cal_dof, draws) / cal_dof  # the calibration's estimate, at a true sd of 1
    upper_var = cal_var * cal_dof / stats.chi2.ppf(1 - SPREAD_LIMIT_CONFIDENCE, cal_dof)
    base, head = rng.normal(0, noisier, (2, draws, repeats))
    var_b, var_h = base.var(axis=1, ddof=1), head.var(axis=1, ddof=1)
    diff = head.mean(axis=1) - base.mean(axis=1)
    run_var = (var_b + var_h) / 2
    tail = 0.5 + level / 2
    se2 = (var_b + var_h) / repeats
    welch_dof = se2**2 / (((var_b / repeats) ** 2 + (var_h / repeats) ** 2) / (repeats - 1))
    welch = stats.t.ppf(tail, welch_dof) * np.sqrt(se2)
    passes = run_var <= cal_var * stats.f.ppf(1 - BORROW_CHECK_ALPHA, run_dof, cal_dof)
    found = {}
    for name, prior in (("alone", None), ("estimate", cal_var), ("limit", upper_var)):
        if prior is None:
            half = welch
        else:
            pooled = (cal_dof * prior + run_dof * run_var) / (cal_dof + run_dof)
            half = np.where(passes, stats.t.ppf(tail, cal_dof + run_dof) * np.sqrt(2 * pooled / repeats), welch)
        found[name] = (float(np.mean(diff - half > 0)), float(np.quantile(diff + half, PASS_RATE)))
    found["borrowed"] = (float(np.mean(passes)), 0.0)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=400_000)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--calibration", type=int, nargs="+", default=[5, 10])
    parser.add_argument("--repeats", type=int, nargs="+", default=[3, 5])
    parser.add_argument("--noisier", type=float, nargs="+", default=[1.0, 1.5, 2.0])
    args = parser.parse_args()
    level = rule_level(parse_config({"measure": {"repeats": 5}}), 1)  # the defaults, one batch size
    rng = np.random.default_rng(args.seed)
    print(f"Each bound may be wrong {(1 - level) / 2:.5f} of the time (the defaults at one batch size); "
          f"{args.draws:,} unchanged pairs per row.\n")
    print("| calibration per side | run per arm | runner's sd / calibrated | borrowed | error: alone | "
          "error: estimate | error: limit (shipped) | smallest threshold, sds: alone | estimate | limit |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for calibration in args.calibration:
        for repeats in args.repeats:
            for noisier in args.noisier:
                f = simulate(rng, args.draws, calibration, repeats, noisier, level)
                print(f"| {calibration} | {repeats} | {noisier:g} | {f['borrowed'][0]:.0%} | {f['alone'][0]:.5f} | "
                      f"{f['estimate'][0]:.5f} | {f['limit'][0]:.5f} | {f['alone'][1]:.2f} | "
                      f"{f['estimate'][1]:.2f} | {f['limit'][1]:.2f} |", flush=True)


if __name__ == "__main__":
    main()
