"""The rounds of a run: measure base and head again in place of the first round's slow
processes (rule 3), decide on the first round, then measure base and head again at what is
still undecided, while the looks planned from the first round's process times allow and the
time budget holds. The measuring is the caller's, given as `measure`: this loop decides what
to measure and when to stop, never how."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from guard.compare._models import Comparison, RoundsStop
from guard.compare._verdict import confirm_undecided
from guard.measure import ArmMeasurement, HarnessSpec, RoundsBudget

Progress = Callable[[str], None]
# Measures the named arms again with `spec` (the batch sizes wanted alone), `processes` more of
# each, numbered from `first_repeat` on: a confirmation round's, or the replacements of slow ones.
MeasureRound = Callable[[list[str], HarnessSpec, int, int], dict[str, ArmMeasurement]]
# Decides on what has been measured, given each batch size's look, the mix's, and the looks
# alpha is spent over.
Decide = Callable[[dict[str, ArmMeasurement], dict[int, int], int, int], Comparison]


@dataclass
class RoundsOutcome:
    """What the rounds of a run came to: the deciding comparison, every process measured, the
    rounds taken, why no further one ran, and the budget they were paid from."""

    comparison: Comparison
    measurements: dict[str, ArmMeasurement]
    rounds: int
    stopped: RoundsStop
    budget: RoundsBudget


def decide_in_rounds(
    measurements: dict[str, ArmMeasurement], verdict_arms: tuple[str, str], spec: HarnessSpec, repeats: int,
    budget_s: float, decide: Decide, measure: MeasureRound, progress: Progress = lambda _: None, *,
    most_looks: int = 1, stop_futile: bool = True,
) -> RoundsOutcome:
    """Decide on the first round, then, while a batch size or the mix is undecided and the run
    may look again, measure base and head alone again at what is undecided (a round fits where
    the last round's process times say it does) and decide those at the next look. The looks
    alpha is spent over are planned from the first round's process times: as many as the budget
    holds, `most_looks` at most. The measurements are merged into `measurements`, which the
    outcome holds. `stop_futile`: no round where the rounds left could not decide anything
    (`compare._verdict.could_decide`; False: as the guard ran before, for benchmarks/decision_rule.py)."""
    decided_at: dict[int, int] = {}  # batch size -> the last round that measured it
    mix_at = 1
    next_repeat = repeats  # the number the next process measured takes, per arm
    budget = RoundsBudget(budget_s)
    budget.measured([r for name in verdict_arms if name in measurements for r in measurements[name].repeats],
                    confirmation=False)
    healthy = [name for name in verdict_arms if name in measurements and measurements[name].error is None]

    def merge(more: dict[str, ArmMeasurement]) -> None:
        for name, extra in more.items():
            merged = measurements[name]
            merged.repeats.extend(extra.repeats)
            merged.error, merged.log_tail = merged.error or extra.error, merged.log_tail or extra.log_tail

    # the first round's slow processes (rule 3 sets them aside) measured again in their place,
    # before the looks are planned: the budget they take is no look's
    replace = _replacements(decide(measurements, decided_at, mix_at, 1), verdict_arms)
    if replace is not None and len(healthy) == len(verdict_arms) and budget.fits(2 * replace.processes):
        progress(f"slow processes set aside at {replace.where()}: {replace.processes} more per arm of base and "
                 f"head in their place (about {budget.estimate_s(2 * replace.processes):.0f} s)")
        alone = {"batch_sizes": replace.sizes} | ({} if replace.mix else {"batch_mix": None, "batch_mix_steps": None})
        more = measure(healthy, spec.model_copy(update=alone), next_repeat, replace.processes)
        next_repeat += replace.processes
        budget.paid([r for extra in more.values() for r in extra.repeats])
        merge(more)
    looks = budget.looks_that_fit(2 * repeats, most_looks)
    if looks < most_looks:
        progress(f"the confirmation budget ({budget_s:g} s) holds {looks - 1} round(s) of {2 * repeats} processes "
                 f"at {budget.process_s:.1f} s each: alpha is spent over {looks} look(s), not {most_looks}")
    first = decide(measurements, decided_at, mix_at, looks)

    def fits(_undecided: list[int], _mix: bool) -> bool:
        return budget.fits(2 * repeats)

    def confirmation_round(undecided: list[int], mix: bool) -> Comparison:
        nonlocal mix_at
        round_no = budget.rounds + 1
        what = ([f"batch size(s) {undecided}"] if undecided else []) + (["the batch-size mix"] if mix else [])
        progress(f"{' and '.join(what)} undecided: confirmation round {round_no} of at most {first.rule.looks}, "
                 f"{repeats} repeats per arm of those alone (about {budget.estimate_s(2 * repeats):.0f} s of "
                 f"the {budget.left_s():.0f} s left)")
        nonlocal next_repeat
        # base and head alone: the verdict is theirs, and an ablation arm's row stands on its first round;
        # a mix decided in an earlier round is not measured again: its verdict stands on that round
        healthy = [name for name in verdict_arms if name in measurements and measurements[name].error is None]
        alone = {"batch_sizes": undecided} | ({} if mix else {"batch_mix": None, "batch_mix_steps": None})
        more = measure(healthy, spec.model_copy(update=alone), next_repeat, repeats)
        next_repeat += repeats
        budget.measured([r for extra in more.values() for r in extra.repeats], confirmation=True)
        merge(more)
        decided_at.update({size: round_no for size in undecided})
        mix_at = round_no if mix else mix_at
        return decide(measurements, decided_at, mix_at, looks)

    # a round that cannot decide anything is not run: the run says what would decide it instead
    comparison, rounds, stopped, _ = confirm_undecided(first, confirmation_round, fits, stop_futile=stop_futile,
                                                       added_per_round=repeats)
    if stopped == "max_rounds" and rounds == looks < most_looks:
        stopped = "budget"  # the looks planned were the budget's, not measure.max_rounds
    progress(f"rounds: {rounds}, stopped: {stopped}")
    return RoundsOutcome(comparison, measurements, rounds, stopped, budget)


@dataclass(frozen=True)
class Replacements:
    """The first round's set-aside processes to measure again: at which batch sizes (and the
    mix), and how many more per arm (the most set aside of one arm there)."""

    sizes: list[int]
    mix: bool
    processes: int

    def where(self) -> str:
        return ", ".join([f"batch size {size}" for size in self.sizes] + (["the batch-size mix"] if self.mix else []))


def _replacements(first: Comparison, verdict_arms: tuple[str, str]) -> Replacements | None:
    """What the first round set aside of base and head, as one measuring of both arms alike
    (interleaved, as many of each: like for like), or None where it set none aside."""
    decided = first.batch_sizes + ([first.mix_comparison] if first.mix_comparison is not None else [])
    most = {b.batch_size: max(sum(1 for s in b.set_aside if s.arm == arm) for arm in verdict_arms)
            for b in decided if b.set_aside}
    if not most:
        return None
    mix = first.mix_comparison is not None and first.mix_comparison.batch_size in most
    sizes = [b.batch_size for b in first.batch_sizes if b.batch_size in most]
    return Replacements(sizes, mix, max(most.values()))
