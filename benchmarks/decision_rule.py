"""Error rates of the decision rule, by simulation through the guard's own compare stage and
its own rounds budget.

Usage: python benchmarks/decision_rule.py [--trials 400] [--seed 15] [--threshold-pct 1.0]
                                          [--alpha 0.01] [--repeats 5] [--max-rounds 4]
                                          [--process-s 9] [--budget-s 180] [--jobs 1]
                                          [--slow-share 0.1 --slow-pct 3 10]
                                          [--instructions-share 1.0] [--instructions-pct 2.0]
                                          [--rule 5] [--calibrated] [--quick]

Each trial makes synthetic measurements of two arms at batch sizes 1 and 2 (`ArmMeasurement`s
of fresh "processes", as a GPU run's harness reports them). Per process and batch size:
- GPU ms per step: nominal x (1 + device change) x exp(N(0, GPU sd));
- end-to-end ms per step (the unheld pass, the host's launch time in it): nominal x (1 + device
  change) x (1 + host change) x exp(N(0, end-to-end sd)), the host's state drawn per process;
- tok/s: from the same pass, batch size x 1000 / end-to-end ms, x exp(N(0, 0.2%)) for its own
  window timing: tied to end-to-end ms, as the harness's two figures of one pass are.
A device change moves all three; a host change (a slower launch path, GPU time unchanged)
moves end-to-end ms and tok/s only. A stall (50 ms every 32 steps of the head's end-to-end
pass, on the host) moves a process's figure by its share of the mean step where the figure is
the mean over the steps (rule 5: +50/32 ms a step, +13% here) and not at all where it is the
median (rules 2 to 4: the median step and the median tok/s window never hold one).
`--rule N` decides by that rule's version (guard/config/_rule.py; 4: the rule before issue 48,
with every confirmation round the budget holds, as the guard then ran, none stopped as futile).
`--calibrated` holds end-to-end ms and tok/s to what a calibration of the runner resolves, as
`Rule.of_config` does with a thresholds file: per noise setting, an A/A of CALIBRATION_REPEATS
processes per side drawn at that spread is put through the guard's own `runner_noise` at the
felt metrics' bound level, and its upper limit's supported threshold (rounded up as
`guard calibrate` rounds it) replaces T where it is larger. `--slow-share` makes that share of processes, in either
arm, slower in every figure by a uniform draw from `--slow-pct LOW HIGH` percent: the slow
processes runners produce (a clock state, a neighbour), which rule 3 sets aside and measures
again (guard/compare/_set_aside.py).
With `--instructions-share S`, every process also counts its host instructions per step, and
rule 4 decides them at `--instructions-pct`: nominal x (1 + S x host change) x
exp(N(0, INSTRUCTIONS_SD_PCT)), from a stream of their own, so every other figure is drawn as
without the flag and the two tables compare draw for draw. S = 1: a host slowdown that is all
added work (code on the launch path); S = 0: one that is the machine's state (a slower clock, a
neighbour), which adds no instruction. Device changes and slow processes add none.

The trial runs through the guard's own rounds (`guard.compare.decide_in_rounds`), as `guard run`
does: the first round of `--repeats` processes per arm, its slow processes measured again, the
looks planned from it (`RoundsBudget.looks_that_fit`: the first, and as many confirmation rounds
of 2 x repeats processes of `--process-s` each as `--budget-s` holds, `--max-rounds` at most),
decided by `guard.compare.compare` at those looks, confirmation rounds until every batch size
is decided, the looks are spent, or the budget is.

Printed, per noise setting and true change: the share of trials whose overall verdict was
regression, at_threshold, inconclusive, pass and improvement, each with its 95% Clopper-Pearson
interval; the share left undecided (exit code 4 from rule 5: the merge is held); the share
green (pass or improvement); the share that took a confirmation round; the mean rounds and
processes per arm. False alarm: a regression at a device change under T. Detection: a
regression at a device change over T, or at any host change or stall (the user feels it
whatever GPU ms says). `--quick`: fewer settings, for a look in seconds.
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
    FAMILIES_PER_LOOK, RULE_VERSION, UNDECIDED, Comparison, Verdict, alpha_per_look, compare, decide_in_rounds,
)
from guard.calibrate import _suggest  # noqa: E402
from guard.config import Rule, Threshold  # noqa: E402
from guard.measure import ArmMeasurement, BatchRun, HarnessSpec, HostUsage, RepeatResult, RoundsBudget  # noqa: E402
from guard.measure._noise import runner_noise  # noqa: E402

BATCH_SIZES = [1, 2]
BASE_MS = {1: 10.0, 2: 11.0}  # nominal GPU ms per step; the level does not matter, only ratios
HOST_SHARE = 1.2  # end-to-end ms over GPU ms: the host's launch time a step carries unheld
STEPS = 128
CONFIDENCE = 0.95  # of the intervals shown; the rule decides on its own bounds
TOK_OWN_SD_PCT = 0.2  # tok/s's own timing beside end-to-end ms's (the windows of the same pass)
# measured per-process spreads (sd of the log): GPU ms 0.05-0.3% on the H200; end-to-end ms
# 0.3% (quiet host), 1.4% (the reference engine), 10% (compiled engines: 12-22% measured)
GPU_SD_PCT = (0.1, 0.3)
# host instructions per step from process to process: near-deterministic (0.01-0.1% between
# processes of one commit); drawn at 0.1%, the top of that range
INSTRUCTIONS_SD_PCT = 0.1
BASE_INSTRUCTIONS = {1: 1.5e6, 2: 1.6e6}  # the level does not matter, only ratios
END_TO_END_SD_PCT = (0.3, 1.4, 3.0, 10.0)
# (device change as a multiple of T, host change in percent, stall ms every STALL_EVERY steps)
CHANGES: tuple[tuple[float, float, float], ...] = (
    (0.0, 0.0, 0), (0.5, 0.0, 0), (1.0, 0.0, 0), (1.25, 0.0, 0), (1.5, 0.0, 0), (2.0, 0.0, 0),
    (0.0, 2.0, 0), (0.0, 5.0, 0), (0.0, 10.0, 0), (0.0, 25.0, 0), (0.0, 100.0, 0), (0.0, 0.0, 50.0),
)
QUICK_CHANGES = ((0.0, 0.0, 0), (2.0, 0.0, 0), (0.0, 10.0, 0), (0.0, 0.0, 50.0))
STALL_EVERY = 32
CALIBRATION_REPEATS = 10  # processes per side of the simulated calibration (`--calibrated`)
SHOWN: tuple[Verdict, ...] = ("regression", "at_threshold", "inconclusive", "pass", "improvement")
TOKENS = {bs: [[7] * bs for _ in range(4)] for bs in BATCH_SIZES}
SHA = {bs: hashlib.sha256(repr(TOKENS[bs]).encode()).hexdigest() for bs in BATCH_SIZES}


@dataclass(frozen=True)
class Cell:
    gpu_sd_pct: float
    end_to_end_sd_pct: float
    device_of_t: float
    host_pct: float
    stall_ms: float = 0.0


@dataclass(frozen=True)
class Settings:
    trials: int
    seed: int
    threshold_pct: float
    alpha: float
    repeats: int
    max_rounds: int
    process_s: float
    budget_s: float
    slow_share: float = 0.0
    slow_pct: tuple[float, float] = (0.0, 0.0)
    instructions_share: float | None = None  # None: no process counts its instructions (rule 3's figures)
    instructions_pct: float = 2.0
    rule: int = RULE_VERSION
    calibrated: bool = False


def _process(arm: str, repeat: int, sizes: list[int], device: float, host: float, cell: Cell,
             settings: Settings, rng: np.random.Generator, counts: np.random.Generator) -> RepeatResult:
    runs = []
    slow = 1.0
    if settings.slow_share:  # drawn for every process then; without it the stream is as before
        slow_draw, slow_by = float(rng.random()), float(rng.uniform(*settings.slow_pct)) / 100
        slow = 1 + slow_by if slow_draw < settings.slow_share else 1.0
    for bs in sizes:
        gpu_ms = BASE_MS[bs] * (1 + device) * slow * float(np.exp(rng.normal(0, cell.gpu_sd_pct / 100)))
        end_ms = (BASE_MS[bs] * HOST_SHARE * (1 + device) * (1 + host) * slow
                  * float(np.exp(rng.normal(0, cell.end_to_end_sd_pct / 100))))
        if arm == "head" and settings.rule >= 5:  # the mean step holds the stall; a median never does
            end_ms += cell.stall_ms / STALL_EVERY
        tok_per_s = bs * 1000 / end_ms * float(np.exp(rng.normal(0, TOK_OWN_SD_PCT / 100)))
        counted = None
        if settings.instructions_share is not None:
            counted = HostUsage(voluntary_switches=0, involuntary_switches=0, user_s=0.0, sys_s=0.0,
                                instructions_per_step=BASE_INSTRUCTIONS[bs] * (1 + settings.instructions_share * host)
                                * float(np.exp(counts.normal(0, INSTRUCTIONS_SD_PCT / 100))))
        runs.append(BatchRun(
            batch_size=bs, steps=STEPS, warmup_steps=0, timer="cuda_event", setup_s=0.0,
            wall_s=bs * STEPS / tok_per_s, tok_per_s=tok_per_s, gpu_ms_per_step=gpu_ms, step_ms=[],
            end_to_end_gpu_ms_per_step=end_ms, tokens=TOKENS[bs], sha256=SHA[bs], host=counted,
        ))
    return RepeatResult(arm=arm, repeat=repeat, environment={}, runs=runs, process_s=settings.process_s)


# processes drawn per arm and trial, whether used or not: every trial takes as many draws from
# the stream. Enough for the first round, each slow one's replacement and every confirmation round.
def _pool_size(settings: Settings) -> int:
    return settings.repeats * (2 * settings.max_rounds)


def trial(cell: Cell, settings: Settings, rng: np.random.Generator,
          counts: np.random.Generator) -> tuple[Verdict, int, int]:
    """One run as the pipeline makes it, through the guard's own rounds (`decide_in_rounds`): the
    first round, the slow processes rule 3 sets aside measured again, the looks planned from the
    budget, confirmation rounds while undecided. The verdict, the rounds taken and the processes
    per arm."""
    device = cell.device_of_t * settings.threshold_pct / 100
    host = cell.host_pct / 100
    pool = {arm: [_process(arm, i, BATCH_SIZES, device if arm == "head" else 0.0, host if arm == "head" else 0.0,
                           cell, settings, rng, counts) for i in range(_pool_size(settings))]
            for arm in ("base", "head")}
    taken = {arm: 0 for arm in pool}
    every = Threshold(pct=settings.threshold_pct)
    felt = Threshold(pct=calibrated_pct(cell, settings)) if settings.calibrated else every
    counted = Threshold(pct=settings.instructions_pct) if settings.instructions_share is not None else None
    rule = Rule(gpu_ms=every, tok_per_s=felt, end_to_end_ms=felt, instructions=counted, alpha=settings.alpha,
                confidence=CONFIDENCE, version=settings.rule)

    def take(arm: str, processes: int, sizes: list[int]) -> list[RepeatResult]:
        drawn = pool[arm][taken[arm]:taken[arm] + processes]
        taken[arm] += processes
        return [r.model_copy(update={"runs": [run for run in r.runs if run.batch_size in sizes]}) for r in drawn]

    def measure(arms: list[str], spec: HarnessSpec, _first_repeat: int, processes: int) -> dict[str, ArmMeasurement]:
        return {arm: ArmMeasurement(arm=arm, repeats=take(arm, processes, spec.batch_sizes)) for arm in arms}

    def decide(measured: dict[str, ArmMeasurement], look: dict[int, int], _mix_look: int, looks: int) -> Comparison:
        return compare(measured, "base", "head", BATCH_SIZES, rule.model_copy(update={"looks": looks}), look=look)

    first = measure(["base", "head"], HarnessSpec(batch_sizes=BATCH_SIZES), 0, settings.repeats)
    outcome = decide_in_rounds(first, ("base", "head"), HarnessSpec(batch_sizes=BATCH_SIZES), settings.repeats,
                               settings.budget_s, decide, measure, most_looks=settings.max_rounds,
                               stop_futile=settings.rule >= 5)  # rule 4's guard ran every round it could
    return outcome.comparison.verdict, outcome.rounds, len(outcome.measurements["base"].repeats)


def calibrated_pct(cell: Cell, settings: Settings) -> float:
    """End-to-end ms's and tok/s's threshold as a calibration of this runner would set it
    (`Rule.of_config`): the larger of T and the supported threshold of an A/A of
    CALIBRATION_REPEATS processes per side at the cell's end-to-end spread, through the guard's
    own `runner_noise`, at the bound level of those metrics at the first look."""
    rng = np.random.default_rng([settings.seed, int(cell.end_to_end_sd_pct * 100), 99])
    sides = [list(12.0 * np.exp(rng.normal(0, cell.end_to_end_sd_pct / 100, CALIBRATION_REPEATS))) for _ in "ab"]
    looks = RoundsBudget(settings.budget_s, process_s=settings.process_s).looks_that_fit(
        2 * settings.repeats, settings.max_rounds)
    every = Threshold(pct=settings.threshold_pct)
    rule = Rule(gpu_ms=every, tok_per_s=every, end_to_end_ms=every, alpha=settings.alpha, confidence=CONFIDENCE,
                looks=looks, decided_sizes=len(BATCH_SIZES), version=settings.rule)
    level = rule.bound_level("end_to_end_ms", ("gpu_ms", "end_to_end_ms", "tok_per_s"))
    supported = runner_noise(sides, settings.repeats, level, [settings.threshold_pct]).supported_pct
    return max(settings.threshold_pct, _suggest(supported))


def run_cell(cell: Cell, settings: Settings) -> dict[str, int]:
    # one stream per cell, from the seed and the cell: a cell's figures do not depend on the others
    key = [settings.seed, int(cell.gpu_sd_pct * 100), int(cell.end_to_end_sd_pct * 100),
           int(cell.device_of_t * 100), int(cell.host_pct * 100)] + ([int(cell.stall_ms)] if cell.stall_ms else [])
    rng = np.random.default_rng(key)
    instructions = np.random.default_rng([*key, 1])  # their own stream: the others' draws as without them
    counts = {v: 0 for v in (*SHOWN, "invalid")} | {"confirmed": 0, "rounds": 0, "processes": 0}
    for _ in range(settings.trials):
        verdict, rounds, processes = trial(cell, settings, rng, instructions)
        counts[verdict] += 1
        counts["confirmed"] += rounds > 1
        counts["rounds"] += rounds
        counts["processes"] += processes
    return counts


def _rate(k: int, n: int) -> str:
    low, high = binomtest(k, n).proportion_ci(0.95, method="exact")
    return f"{k / n:.1%} ({low:.1%}-{high:.1%})"


def _change(cell: Cell) -> str:
    if cell.stall_ms:
        return f"stall {cell.stall_ms:g} ms / {STALL_EVERY} steps"
    return f"host +{cell.host_pct:g}%" if cell.host_pct else f"{cell.device_of_t:g} T"


def _role(cell: Cell) -> str:
    """What a regression verdict is at this true change: a false alarm under T, a detection over
    T or at any host change or stall; at T itself, the edge the bounds are built for."""
    if cell.host_pct or cell.stall_ms or cell.device_of_t > 1:
        return "detection"
    return "at T" if cell.device_of_t == 1 else "false alarm"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="decision_rule.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400, help="runs per noise setting and true change")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--threshold-pct", type=float, default=1.0, help="T, for every metric")
    parser.add_argument("--alpha", type=float, default=0.01)
    parser.add_argument("--repeats", type=int, default=5, help="processes per arm per round")
    parser.add_argument("--max-rounds", type=int, default=4, help="rounds at most, the first included")
    parser.add_argument("--process-s", type=float, default=9.0, help="seconds a process takes, start-up included")
    parser.add_argument("--budget-s", type=float, default=180.0, help="seconds the confirmation rounds may take")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes")
    parser.add_argument("--slow-share", type=float, default=0.0, help="share of processes made slow")
    parser.add_argument("--slow-pct", type=float, nargs=2, default=(3.0, 10.0), metavar=("LOW", "HIGH"),
                        help="how much slower a slow process is, percent, drawn uniformly")
    parser.add_argument("--instructions-share", type=float, default=None,
                        help="count host instructions; the share of a host change that is added work (0 to 1)")
    parser.add_argument("--instructions-pct", type=float, default=2.0, help="their threshold")
    parser.add_argument("--rule", type=int, choices=(4, 5), default=RULE_VERSION, help="the rule's version")
    parser.add_argument("--calibrated", action="store_true",
                        help="end-to-end ms and tok/s at what a calibration of the runner resolves")
    parser.add_argument("--quick", action="store_true", help="fewer settings: a look in seconds")
    args = parser.parse_args(argv)
    if (args.trials < 1 or args.repeats < 2 or args.jobs < 1 or not 0 < args.alpha < 0.5 or args.threshold_pct <= 0
            or args.max_rounds < 1 or args.process_s <= 0 or args.budget_s < 0 or not 0 <= args.slow_share < 1
            or not 0 <= (args.instructions_share or 0) <= 1 or args.instructions_pct <= 0):
        parser.error("needs --trials >= 1, --repeats >= 2, --jobs >= 1, 0 < --alpha < 0.5, --threshold-pct > 0, "
                     "--max-rounds >= 1, --process-s > 0, --budget-s >= 0, 0 <= --slow-share < 1, "
                     "0 <= --instructions-share <= 1, --instructions-pct > 0")
    settings = Settings(args.trials, args.seed, args.threshold_pct, args.alpha, args.repeats, args.max_rounds,
                        args.process_s, args.budget_s, args.slow_share, tuple(args.slow_pct),
                        args.instructions_share, args.instructions_pct, args.rule, args.calibrated)
    gpu_sds, changes = (GPU_SD_PCT[-1:], QUICK_CHANGES) if args.quick else (GPU_SD_PCT, CHANGES)
    cells = [Cell(g, e, d, h, stall) for g in gpu_sds for e in END_TO_END_SD_PCT for d, h, stall in changes]
    started = time.perf_counter()
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(run_cell, cells, [settings] * len(cells)))
    elapsed = time.perf_counter() - started
    n = settings.trials
    budget = RoundsBudget(settings.budget_s, process_s=settings.process_s)
    looks = budget.looks_that_fit(2 * settings.repeats, settings.max_rounds)
    first = alpha_per_look(settings.alpha, looks, len(BATCH_SIZES), look=1, version=settings.rule)
    split = (" (GPU ms's; end-to-end ms's and tok/s's half that, or a third where instructions count: the host "
             "family's share split over its metrics)" if settings.rule >= 5 else "")
    felt = ({e: calibrated_pct(Cell(0, e, 0, 0), settings) for e in END_TO_END_SD_PCT} if settings.calibrated else {})
    print(f"Rule {settings.rule}, T = {settings.threshold_pct:g}% for "
          + ("GPU ms, and end-to-end ms and tok/s at what a calibration of each runner resolves ("
             + ", ".join(f"{pct:g}% at sd {e:g}%" for e, pct in felt.items()) + ")" if felt else "every metric")
          + f", alpha {settings.alpha:g}, "
          f"{settings.repeats} processes per arm per round of {settings.process_s:g} s each, a "
          f"{settings.budget_s:g} s budget: {looks} look(s) planned of at most {settings.max_rounds} (each bound of "
          f"the first {first:.4g}{split}: its Pocock-type share over {FAMILIES_PER_LOOK} families x {len(BATCH_SIZES)} "
          f"batch sizes), batch sizes {BATCH_SIZES}, {n} trials per row, seed {settings.seed}"
          + (f", {settings.slow_share:.0%} of processes slower by {settings.slow_pct[0]:g}-{settings.slow_pct[1]:g}%"
             if settings.slow_share else "")
          + (f", host instructions counted (sd {INSTRUCTIONS_SD_PCT:g}%, T {settings.instructions_pct:g}%; "
             f"{settings.instructions_share:g} of a host change is added work)"
             if settings.instructions_share is not None else "") + ". "
          "Rates with their 95% Clopper-Pearson interval.\n")
    print("| GPU ms sd | end-to-end sd | true change | regression is a | regression | at threshold | inconclusive "
          "| pass | improvement | undecided | green | confirmation round | mean rounds | processes per arm |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for cell, counts in zip(cells, results):
        shown = " | ".join(_rate(counts[v], n) for v in SHOWN)
        assert counts["invalid"] == 0, f"{cell}: {counts['invalid']} trials were invalid"  # like for like
        undecided = sum(counts[v] for v in UNDECIDED)
        print(f"| {cell.gpu_sd_pct:g}% | {cell.end_to_end_sd_pct:g}% | {_change(cell)} | {_role(cell)} | {shown} "
              f"| {_rate(undecided, n)} | {_rate(counts['pass'] + counts['improvement'], n)} "
              f"| {_rate(counts['confirmed'], n)} | {counts['rounds'] / n:.2f} "
              f"| {counts['processes'] / n:.1f} |")
    print(f"\n{len(cells) * n} runs in {elapsed:.0f} s with {args.jobs} worker(s).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
