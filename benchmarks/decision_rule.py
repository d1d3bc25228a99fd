"""Error rates of the interval rule, by simulation through the guard's own compare stage.

Usage: python benchmarks/decision_rule.py [--trials 600] [--seed 15] [--threshold-pct 1.0]
                                          [--alpha 0.01] [--repeats 5] [--max-rounds 4]
                                          [--zone] [--jobs 1]

Each trial makes synthetic measurements of two arms at batch sizes 1 and 2 (`ArmMeasurement`s
of fresh "processes", as the harness reports them), with lognormal noise per process: GPU ms
per step and tok/s each drawn as nominal x (1 + change) x exp(N(0, sd)), independently per
process, batch size and metric. They are decided by `guard.compare.compare` with the
pipeline's confirmation rule (`confirm_undecided`, alpha split over --max-rounds looks): a
batch size left undecided gets another round of as many processes, of the batch sizes still
undecided alone, until every one is decided or --max-rounds rounds were taken. The true change
is applied to both metrics (tok/s falls by 1/(1 + change)).

--zone decides with an indifference zone from T/2 to T: a regression where the lower bound of
the slowdown is above T/2 (compare at T/2), a pass where the upper bound is under T (compare at
T), undecided otherwise; the two compare calls are the guard's own, combined per batch size.

Printed: per noise setting and true change, the share of trials whose overall verdict was
regression, at_threshold, inconclusive, pass and improvement, each with its 95% Clopper-Pearson
interval, the share that took a confirmation round, the mean rounds and the mean processes per
arm (each round's processes per arm, summed: a later round measures fewer batch sizes but as
many processes). False alarm: a regression at a true change under T (under T/2 with --zone);
detection: a regression at 1.25 T or 1.5 T; at T itself, the edge the bounds are built for.
The noise settings are the H200's measured per-process sd (of the log): GPU ms 0.1% and 0.3%;
tok/s 1.5% (reference engine).
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
    METRICS_PER_LOOK, UNDECIDED, Comparison, Verdict, alpha_per_look, compare, confirm_undecided, most_severe,
)
from guard.measure import ArmMeasurement, BatchRun, RepeatResult  # noqa: E402

BATCH_SIZES = [1, 2]
BASE_MS = {1: 10.0, 2: 11.0}  # nominal GPU ms per step; the level does not matter, only ratios
STEPS = 128
CONFIDENCE = 0.95  # of the intervals shown; the rule decides on its own bounds
GPU_SD_PCT = (0.1, 0.3)
# tok/s at 15% (a torch.compile engine) never gates at these processes, and its rows differ from
# 1.5%'s only by tok/s's rare decisions past its bounds: left out, it halves the run
TOK_SD_PCT = (1.5,)
CHANGES_OF_T = (0.0, 0.5, 0.9, 1.0, 1.25, 1.5)  # true slowdown, as a multiple of the threshold
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
    max_rounds: int
    zone: bool


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


def _measured(rounds: list[Round], sizes: list[list[int]]) -> dict[str, ArmMeasurement]:
    """The arms' processes of `rounds`, of each round only the runs of the batch sizes it measured."""
    merged = {}
    for arm in ("base", "head"):
        repeats = [r.model_copy(update={"runs": [run for run in r.runs if run.batch_size in measured]})
                   for one, measured in zip(rounds, sizes) for r in one[arm]]
        merged[arm] = ArmMeasurement(arm=arm, repeats=repeats)
    return merged


def _zoned(at_t: Comparison, at_half: Comparison) -> Comparison:
    """Per batch size: a regression where the lower bound is past T/2, else at_t's verdict (a pass
    where the upper bound is under T); the batch size is undecided where neither holds."""
    batches = []
    for by_t, by_half in zip(at_t.batch_sizes, at_half.batch_sizes):
        verdict: Verdict = "regression" if by_half.verdict == "regression" else by_t.verdict
        batches.append(by_t.model_copy(update={"verdict": verdict, "undecided": verdict in UNDECIDED}))
    return at_t.model_copy(update={"batch_sizes": batches, "verdict": most_severe([b.verdict for b in batches])})


def trial(cell: Cell, settings: Settings, rng: np.random.Generator) -> tuple[Verdict, int, int]:
    """One run as the pipeline makes it: the verdict, the rounds it took and its processes per
    arm. Every round is drawn whether or not it is used, so that each trial takes as many draws
    from the stream, and rules compared on one seed see the same processes."""
    drawn = [_round(k * settings.repeats, cell, settings, rng) for k in range(settings.max_rounds)]
    sizes: list[list[int]] = [list(BATCH_SIZES)]
    decided_at: dict[int, int] = {}
    t = settings.threshold_pct

    def decide() -> Comparison:
        measured = _measured(drawn[:len(sizes)], sizes)

        def at(threshold: float) -> Comparison:
            return compare(measured, "base", "head", BATCH_SIZES, threshold, CONFIDENCE, settings.alpha, threshold,
                           looks=settings.max_rounds, look=decided_at)

        return _zoned(at(t), at(t / 2)) if settings.zone else at(t)

    def next_round(undecided: list[int], _mix: bool) -> Comparison:  # the cells have no mix
        sizes.append(undecided)
        decided_at.update({size: len(sizes) for size in undecided})
        return decide()

    comparison, rounds, _, _ = confirm_undecided(decide(), next_round)
    return comparison.verdict, rounds, rounds * settings.repeats


def run_cell(cell: Cell, settings: Settings) -> dict[str, int]:
    # one stream per cell, from the seed and the cell: a cell's figures do not depend on the others
    key = [settings.seed, int(cell.gpu_sd_pct * 100), int(cell.tok_sd_pct * 100), int(cell.change_of_t * 100)]
    rng = np.random.default_rng(key)
    counts = {v: 0 for v in (*SHOWN, "invalid")} | {"confirmed": 0, "rounds": 0, "processes": 0}
    for _ in range(settings.trials):
        verdict, rounds, processes = trial(cell, settings, rng)
        counts[verdict] += 1
        counts["confirmed"] += rounds > 1
        counts["rounds"] += rounds
        counts["processes"] += processes
    return counts


def _rate(k: int, n: int) -> str:
    low, high = binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k / n:.1%} ({low:.1%}-{high:.1%})"


def _role(change_of_t: float, zone: bool) -> str:
    """What a regression verdict is at this true change: a false alarm under the level the rule
    promises to pass (T, or T/2 with the zone), a detection over T; in between, either is right."""
    if change_of_t > 1:
        return "detection"
    if change_of_t < (0.5 if zone else 1):
        return "false alarm"
    return "at T" if change_of_t == 1 else "either"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="decision_rule.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=600, help="runs per noise setting and true change")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--threshold-pct", type=float, default=1.0, help="T, for both metrics")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5, help="processes per arm per round")
    parser.add_argument("--max-rounds", type=int, default=4, help="rounds at most, the first included")
    parser.add_argument("--zone", action="store_true", help="an indifference zone: regression past T/2, pass under T")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    args = parser.parse_args(argv)
    if (args.trials < 1 or args.repeats < 2 or args.jobs < 1 or not 0 < args.alpha < 0.5 or args.threshold_pct <= 0
            or args.max_rounds < 1):
        parser.error("needs --trials >= 1, --repeats >= 2, --jobs >= 1, 0 < --alpha < 0.5, --threshold-pct > 0, "
                     "--max-rounds >= 1")
    settings = Settings(args.trials, args.seed, args.threshold_pct, args.alpha, args.repeats, args.max_rounds,
                        args.zone)
    cells = [Cell(g, t, c) for g in GPU_SD_PCT for t in TOK_SD_PCT for c in CHANGES_OF_T]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_cell, cells, [settings] * len(cells)))
    elapsed = time.perf_counter() - started
    n = settings.trials
    alpha_look = alpha_per_look(settings.alpha, settings.max_rounds, len(BATCH_SIZES))
    zone = ", indifference zone T/2 to T (regression past T/2, pass under T)" if settings.zone else ""
    print(f"Interval rule{zone}, T = {settings.threshold_pct:g}% for GPU ms and tok/s, alpha {settings.alpha:g} "
          f"(each bound {alpha_look:.4g}: {settings.max_rounds} looks x {METRICS_PER_LOOK} metrics x "
          f"{len(BATCH_SIZES)} batch sizes), {settings.repeats} processes per arm per round, up to "
          f"{settings.max_rounds} rounds, batch sizes {BATCH_SIZES}, {n} trials per row, seed {settings.seed}. "
          "Rates with their 95% Clopper-Pearson interval.\n")
    print("| GPU ms sd | tok/s sd | true change | regression is a | regression | at threshold | inconclusive | pass "
          "| improvement | confirmation round | mean rounds | processes per arm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, counts in zip(cells, results):
        shown = " | ".join(_rate(counts[v], n) for v in SHOWN)
        assert counts["invalid"] == 0, f"{cell}: {counts['invalid']} trials were invalid"  # like for like
        print(f"| {cell.gpu_sd_pct:g}% | {cell.tok_sd_pct:g}% | {cell.change_of_t:g} T | "
              f"{_role(cell.change_of_t, settings.zone)} | {shown} | {_rate(counts['confirmed'], n)} "
              f"| {counts['rounds'] / n:.2f} | {counts['processes'] / n:.1f} |")
    undecided = sum(counts[v] for counts in results for v in UNDECIDED)
    print(f"\n{len(cells) * n} runs, {undecided} left undecided, in {elapsed:.0f} s with {args.jobs} worker(s).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
