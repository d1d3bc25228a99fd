"""Error rates of the interval rule, by simulation through the guard's own compare stage.

Usage: python benchmarks/decision_rule.py [--trials 600] [--seed 15] [--threshold-pct 1.0]
                                          [--alpha 0.01] [--repeats 5] [--jobs 1]

Each trial makes synthetic measurements of two arms at batch sizes 1 and 2 (`ArmMeasurement`s
of fresh "processes", as the harness reports them), with lognormal noise per process: GPU ms
per step and tok/s each drawn as nominal x (1 + change) x exp(N(0, sd)), independently per
process, batch size and metric. They are decided by `guard.compare.compare` with the
pipeline's confirmation rule (`confirm_undecided`, 2 looks): a batch size left undecided by
the first round gets a second round of as many processes, of that batch size alone, and is
decided on both. The true change is applied to both metrics (tok/s falls by 1/(1 + change)).

Printed: per noise setting and true change, the share of trials whose overall verdict was
regression, at_threshold, inconclusive, pass and improvement, each with its 95% Clopper-Pearson
interval, and the share that took a confirmation round. False alarm: a regression at a true change
of 0 or 0.9 T; detection: a regression at 1.25 T or 1.5 T; at T itself, the edge the bounds are
built for. The noise settings are the H200's
measured per-process sd (of the log): GPU ms 0.1% and 0.3%; tok/s 1.5% (reference engine)
and 15% (a torch.compile engine).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.stats import binomtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from guard.compare import (  # noqa: E402
    METRICS_PER_LOOK, UNDECIDED, Comparison, Verdict, alpha_per_look, compare, confirm_undecided,
)
from guard.measure import ArmMeasurement, BatchRun, RepeatResult  # noqa: E402

BATCH_SIZES = [1, 2]
BASE_MS = {1: 10.0, 2: 11.0}  # nominal GPU ms per step; the level does not matter, only ratios
STEPS = 128
CONFIDENCE = 0.95  # of the intervals shown; the rule decides on its own bounds
GPU_SD_PCT = (0.1, 0.3)
TOK_SD_PCT = (1.5, 15.0)
CHANGES_OF_T = (0.0, 0.9, 1.0, 1.25, 1.5)  # true slowdown, as a multiple of the threshold
SHOWN: tuple[Verdict, ...] = ("regression", "at_threshold", "inconclusive", "pass", "improvement")
TOKENS = {bs: [[7] * bs for _ in range(4)] for bs in BATCH_SIZES}
SHA = {bs: hashlib.sha256(repr(TOKENS[bs]).encode()).hexdigest() for bs in BATCH_SIZES}


@dataclass(frozen=True)
class Cell:
    gpu_sd_pct: float
    tok_sd_pct: float
    change_of_t: float


@dataclass(frozen=True)
class Settings:
    trials: int
    seed: int
    threshold_pct: float
    alpha: float
    repeats: int


def _process(arm: str, repeat: int, sizes: list[int], slowdown: float, cell: Cell,
             rng: np.random.Generator) -> RepeatResult:
    runs = []
    for bs in sizes:
        gpu_ms = BASE_MS[bs] * (1 + slowdown) * float(np.exp(rng.normal(0, cell.gpu_sd_pct / 100)))
        tok_per_s = bs * 1000 / BASE_MS[bs] / (1 + slowdown) * float(np.exp(rng.normal(0, cell.tok_sd_pct / 100)))
        runs.append(BatchRun(
            batch_size=bs, steps=STEPS, warmup_steps=0, timer="cuda_event", setup_s=0.0,
            wall_s=bs * STEPS / tok_per_s, tok_per_s=tok_per_s, gpu_ms_per_step=gpu_ms, step_ms=[],
            tokens=TOKENS[bs], sha256=SHA[bs],
        ))
    return RepeatResult(arm=arm, repeat=repeat, environment={}, runs=runs)


Round = dict[str, list[RepeatResult]]  # arm -> its processes of one round


def _round(first_repeat: int, cell: Cell, settings: Settings, rng: np.random.Generator) -> Round:
    """One round of processes per arm, each measuring every batch size."""
    slowdown = cell.change_of_t * settings.threshold_pct / 100
    return {arm: [_process(arm, first_repeat + i, BATCH_SIZES, slowdown if arm == "head" else 0.0, cell, rng)
                  for i in range(settings.repeats)] for arm in ("base", "head")}


def _measured(*rounds: Round, sizes: list[int] | None = None) -> dict[str, ArmMeasurement]:
    """The arms' processes of `rounds`; of the last round only the runs of `sizes` (all: None)."""
    merged = {}
    for arm in ("base", "head"):
        repeats = [r for one in rounds[:-1] for r in one[arm]]
        repeats += [r.model_copy(update={"runs": [run for run in r.runs if sizes is None or run.batch_size in sizes]})
                    for r in rounds[-1][arm]]
        merged[arm] = ArmMeasurement(arm=arm, repeats=repeats)
    return merged


def trial(cell: Cell, settings: Settings, rng: np.random.Generator) -> tuple[Verdict, int]:
    """One run as the pipeline makes it: the interval rule's verdict and the rounds it took.
    Both rounds are drawn whether or not the second is used, so that each trial takes as
    many draws from the stream."""
    first, second = _round(0, cell, settings, rng), _round(settings.repeats, cell, settings, rng)

    def decide(measurements: dict[str, ArmMeasurement], look: dict[int, int] | None = None) -> Comparison:
        return compare(measurements, "base", "head", BATCH_SIZES, settings.threshold_pct, CONFIDENCE,
                       settings.alpha, settings.threshold_pct, looks=2, look=look)

    def second_round(undecided: list[int], _mix: bool) -> Comparison:  # the cells have no mix
        return decide(_measured(first, second, sizes=undecided), {size: 2 for size in undecided})

    comparison, rounds, _ = confirm_undecided(decide(_measured(first)), second_round)
    return comparison.verdict, rounds


def run_cell(cell: Cell, settings: Settings) -> dict[str, int]:
    # one stream per cell, from the seed and the cell: a cell's figures do not depend on the others
    key = [settings.seed, int(cell.gpu_sd_pct * 100), int(cell.tok_sd_pct * 100), int(cell.change_of_t * 100)]
    rng = np.random.default_rng(key)
    counts = {v: 0 for v in (*SHOWN, "invalid")} | {"confirmed": 0}
    for _ in range(settings.trials):
        verdict, rounds = trial(cell, settings, rng)
        counts[verdict] += 1
        counts["confirmed"] += rounds > 1
    return counts


def _rate(k: int, n: int) -> str:
    low, high = binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k / n:.1%} ({low:.1%}-{high:.1%})"


def _role(change_of_t: float) -> str:
    """What a regression verdict is at this true change; at T itself each bound errs at most alpha_per_look."""
    return "false alarm" if change_of_t < 1 else "detection" if change_of_t > 1 else "at T"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="decision_rule.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=600, help="runs per noise setting and true change")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--threshold-pct", type=float, default=1.0, help="T, for both metrics")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5, help="processes per arm per round")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args(argv)
    if args.trials < 1 or args.repeats < 2 or args.jobs < 1 or not 0 < args.alpha < 0.5 or args.threshold_pct <= 0:
        parser.error("needs --trials >= 1, --repeats >= 2, --jobs >= 1, 0 < --alpha < 0.5, --threshold-pct > 0")
    settings = Settings(args.trials, args.seed, args.threshold_pct, args.alpha, args.repeats)
    cells = [Cell(g, t, c) for g in GPU_SD_PCT for t in TOK_SD_PCT for c in CHANGES_OF_T]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_cell, cells, [settings] * len(cells)))
    elapsed = time.perf_counter() - started
    n = settings.trials
    alpha_look = alpha_per_look(settings.alpha, 2, len(BATCH_SIZES))
    print(f"Interval rule, T = {settings.threshold_pct:g}% for GPU ms and tok/s, alpha {settings.alpha:g} "
          f"(each bound {alpha_look:.4g}: 2 looks x {METRICS_PER_LOOK} metrics x {len(BATCH_SIZES)} batch sizes), "
          f"{settings.repeats} processes per arm per round, batch sizes {BATCH_SIZES}, {n} trials per row, "
          f"seed {settings.seed}. Rates with their 95% Clopper-Pearson interval.\n")
    print("| GPU ms sd | tok/s sd | true change | regression is a | regression | at threshold | inconclusive | pass "
          "| improvement | confirmation round |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for cell, counts in zip(cells, results):
        shown = " | ".join(_rate(counts[v], n) for v in SHOWN)
        assert counts["invalid"] == 0, f"{cell}: {counts['invalid']} trials were invalid"  # like for like
        print(f"| {cell.gpu_sd_pct:g}% | {cell.tok_sd_pct:g}% | {cell.change_of_t:g} T | {_role(cell.change_of_t)} "
              f"| {shown} | {_rate(counts['confirmed'], n)} |")
    undecided = sum(counts[v] for counts in results for v in UNDECIDED)
    print(f"\n{len(cells) * n} runs, {undecided} left undecided, in {elapsed:.0f} s with {args.jobs} worker(s).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
