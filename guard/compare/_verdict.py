"""The comparison: tokens must match, then each batch size's timings, and the batch-size mix's,
are decided by the interval rule (`_interval.py`), more rounds for those it leaves open."""

from __future__ import annotations

from typing import Callable, NamedTuple

from guard.compare._agreement import agreement
from guard.compare._compiled import compiled_change
from guard.compare._fingerprint import check_measurements
from guard.compare._hashes import first_mismatch
from guard.compare._mix import compare_mix
from guard.compare._models import (
    UNHELD_SHARE, ArmStats, BatchComparison, Comparison, RoundsStop, Verdict, most_severe,
)
from guard.compare._ranks import arm_ranks, rank_change
from guard.compare._reasons import Reason
from guard.compare._timings import compare_timings
from guard.config import Rule
from guard.measure import (
    MOST_REPEATS, ArmMeasurement, BatchRun, RepeatResult, spread,
)
from guard.measure._stats import variance_lower_factor


def compare(
    measurements: dict[str, ArmMeasurement],
    base: str,
    head: str,
    batch_sizes: list[int],
    rule: Rule,
    reference: str | None = None,
    *,
    look: dict[int, int] | None = None,
    mix_schedule: list[int] | None = None,
    mix_look: int = 1,
) -> Comparison:
    """Each batch size decided by `rule`: its thresholds, its alpha spent over `rule.looks` (the
    rounds the run may take) and split over the batch sizes, the confidence of the intervals
    shown beside the decision's, and the calibration's spreads, which a metric's bounds borrow
    where the run's own spread agrees with them (`_borrow.py`). `look`: per batch size, the
    round it is decided at (default 1), on the processes of that round and the earlier ones
    that measured it. `reference` names where forced runs' input ids came from. `mix_schedule`:
    the mix pass's sizes per step, as the guard drew them, when the workload has a mix: the mix
    is then decided like one more batch size (at `mix_look`), and alpha is split over it too."""
    reasons = [
        Reason(kind="clock_refused", arm=name, repeats_done=len(m.repeats), clock=m.clock_misfit) if m.clock_misfit
        else Reason(kind="arm_failed", arm=name, repeats_done=len(m.repeats), error=m.error) if m.repeats
        else Reason(kind="arm_no_results", arm=name, error=m.error)
        for name, m in measurements.items() if m.error
    ]
    fingerprints = check_measurements(measurements)
    reasons += fingerprints.invalid_reasons
    rule = rule.model_copy(update={"decided_sizes": len(batch_sizes) + (mix_schedule is not None)})
    batches = [
        with_rank_change(_compare_batch(measurements, base, head, bs, rule.at_look((look or {}).get(bs, 1)),
                                        reference), base, head)
        for bs in batch_sizes
    ]
    mixed = (compare_mix(measurements, base, head, mix_schedule, rule.at_look(mix_look), reference)
             if mix_schedule is not None else None)
    decided = batches + ([mixed] if mixed is not None else [])
    hash_matches = [b.hash_match for b in decided if b.hash_match is not None]
    verdict: Verdict = "invalid" if reasons else most_severe([b.verdict for b in decided])
    return Comparison(
        verdict=verdict,
        reasons=reasons + [r for b in decided for r in b.reasons],
        hash_match=all(hash_matches) if hash_matches else None,
        rule=rule,
        batch_sizes=batches,
        warnings=fingerprints.warnings,
        gpu_fingerprint=fingerprints.summary,
        mix_comparison=mixed,
        compiled=compiled_change(measurements, base, head),
    )


class Rounds(NamedTuple):
    """What the rounds of a run came to: the deciding comparison, the rounds it covers, why no
    further round ran, and whether one was wanted but `next_round` had none (the last stands)."""

    comparison: Comparison
    rounds: int
    stopped: RoundsStop
    unmeasured: bool = False


def confirm_undecided(
    first: Comparison, next_round: Callable[[list[int], bool], Comparison | None],
    fits: Callable[[list[int], bool], bool] = lambda _sizes, _mix: True, stop_futile: bool = False,
    added_per_round: int = 0,
) -> Rounds:
    """The confirmation rule: while a batch size or the mix is undecided and the run may take
    another look (up to `first.rule.looks` rounds), `fits(sizes, mix)` is asked whether one more
    round fits the time left, and `next_round(sizes, mix)` measures (or looks up) a round of
    more processes for those alone (and the mix where `mix`) and decides them at the next look,
    on every round that measured them. `stop_futile`: no round runs where the rounds left, of
    `added_per_round` processes per arm each, could not decide anything (`could_decide`): the run
    stops undecided at once, and says what would decide it, rather than spend its budget on
    rounds that cannot tell."""
    decided, rounds = first, 1
    while decided.undecided_sizes or decided.mix_undecided:
        if rounds >= first.rule.looks:
            return Rounds(decided, rounds, "max_rounds")
        if stop_futile and added_per_round and not could_decide(decided, added_per_round * (first.rule.looks - rounds)):
            return Rounds(decided, rounds, "futile")
        if not fits(decided.undecided_sizes, decided.mix_undecided):
            return Rounds(decided, rounds, "budget")
        more = next_round(decided.undecided_sizes, decided.mix_undecided)
        if more is None:
            return Rounds(decided, rounds, "max_rounds", unmeasured=True)
        decided, rounds = more, rounds + 1
    return Rounds(decided, rounds, "decided")


def could_decide(comparison: Comparison, more: int) -> bool:
    """Whether `more` processes per arm could decide a metric an undecided batch size (or the mix)
    left open: a GPU ms regression told from the threshold decides the batch size whatever the
    felt metrics still say. The processes a metric needs (`fewest_to_decide`, the fewest over the
    open metrics; MOST_REPEATS where more than that) are an estimate from a few processes, and go
    with the spread's square: a round is futile only where even at the spread's lower 95% limit
    (`variance_lower_factor`) they are more than the processes it has and `more` would give."""
    for batch in comparison.decided():
        if not batch.undecided or (batch.mix and not comparison.mix_undecided):
            continue
        has = min((a.repeats for a in batch.arms), default=0)
        fewest = batch.fewest_to_decide if batch.fewest_to_decide is not None else batch.repeats_to_decide
        needed = fewest if fewest is not None else MOST_REPEATS
        if needed * variance_lower_factor(2 * (has - 1)) <= has + more:
            return True
    return False


def _runs_for(repeats: list[RepeatResult], batch_size: int) -> list[BatchRun]:
    """The processes that measured the batch size: a confirmation round measures only the
    batch sizes still undecided."""
    return [run for r in repeats for run in r.runs if run.batch_size == batch_size]


def arm_stats(arm: str, repeats: list[RepeatResult], batch_size: int) -> ArmStats:
    """An arm's figures at one batch size over every process that measured it."""
    runs = _runs_for(repeats, batch_size)
    end_to_end = [r.end_to_end_gpu_ms_per_step for r in runs]
    host = [r.host_ms_per_step for r in runs]
    instructions = [r.host.instructions_per_step if r.host and r.host.instructions_per_step else None for r in runs]
    uncounted = next((r.host.instructions_unavailable or "no count" if r.host else "no host figures"
                      for r, count in zip(runs, instructions) if count is None), None)
    forced = all(r.forced for r in runs)
    unheld = [r.unheld_steps for r in runs] if runs[0].timer == "cuda_event" else []
    return ArmStats(
        arm=arm,
        repeats=len(runs),
        gpu_ms_per_step=spread([r.gpu_ms_per_step for r in runs]),
        tok_per_s=spread([r.tok_per_s for r in runs]),
        end_to_end_gpu_ms_per_step=spread(end_to_end) if None not in end_to_end else None,  # type: ignore[arg-type]
        host_ms_per_step=spread(host) if None not in host else None,  # type: ignore[arg-type]
        instructions_per_step=spread(instructions) if None not in instructions else None,  # type: ignore[arg-type]
        instructions_unavailable=uncounted,
        timer=runs[0].timer,
        sha256=runs[0].sha256,
        deterministic=None if forced else len({r.sha256 for r in runs}) == 1,
        steps=runs[0].steps,
        unheld_steps=unheld,
        outran_hold=bool(unheld) and sum(unheld) > UNHELD_SHARE * runs[0].steps * len(unheld),
        ranks=arm_ranks(runs),
    )


def _compare_batch(
    measurements: dict[str, ArmMeasurement], base: str, head: str, batch_size: int, rule: Rule,
    reference: str | None = None,
) -> BatchComparison:
    usable = {name: m.repeats for name, m in measurements.items() if m.repeats}
    arms = [arm_stats(name, repeats, batch_size) for name, repeats in usable.items()]
    if base not in usable or head not in usable:
        return BatchComparison(batch_size=batch_size, verdict="invalid", reasons=_unforced_reasons(
            usable, batch_size), arms=arms)
    if split := ranks_disagree(arms, batch_size):
        return BatchComparison(batch_size=batch_size, verdict="invalid", reasons=split, arms=arms)
    runs = {name: _runs_for(repeats, batch_size) for name, repeats in usable.items()}
    if any(run.forced for arm_runs in runs.values() for run in arm_runs):
        agreed = agreement(runs, base, reference or "reference")
        head_agreement = agreed.arm(head)
        if agreed.unforced or head_agreement is None or head_agreement.output_changed:
            # the render layer says which arm ran free, or where the head's output changed
            return BatchComparison(batch_size=batch_size, verdict="invalid", arms=arms, agreement=agreed)
        return compare_timings(batch_size, arms, base, head, rule, agreement=agreed)

    reasons = _unforced_reasons(usable, batch_size)
    base_run = _runs_for(usable[base], batch_size)[0]
    head_run = _runs_for(usable[head], batch_size)[0]
    hash_match = base_run.sha256 == head_run.sha256
    mismatch = None
    if not hash_match:
        mismatch = first_mismatch(base_run.tokens, head_run.tokens)
        reasons.append(Reason(kind="tokens_differ", batch_size=batch_size, arm=base, other_arm=head,
                              step=mismatch.step if mismatch else None,
                              sequence=mismatch.sequence if mismatch else None))
    if reasons:
        return BatchComparison(
            batch_size=batch_size, verdict="invalid", reasons=reasons, arms=arms,
            hash_match=hash_match, mismatch=mismatch,
        )
    return compare_timings(batch_size, arms, base, head, rule, hash_match=True)


def with_rank_change(batch: BatchComparison, base: str, head: str) -> BatchComparison:
    arms = {a.arm: a.ranks for a in batch.arms}
    return batch.model_copy(update={"rank_change": rank_change(arms.get(base), arms.get(head))})


def ranks_disagree(arms: list[ArmStats], batch_size: int) -> list[Reason]:
    """Arms of several ranks where a rank generated other tokens than rank 0: its ranks did not
    decode one batch together, so its step times are not one decode's."""
    reasons = []
    for arm in arms:
        first = arm.ranks.first_disagreeing() if arm.ranks is not None else None
        if first is not None:
            where = first.first_disagreement
            reasons.append(Reason(kind="ranks_disagree", batch_size=batch_size, arm=arm.arm, rank=first.rank,
                                  step=where.step if where else None, sequence=where.sequence if where else None))
    return reasons


def _unforced_reasons(usable: dict[str, list[RepeatResult]], batch_size: int) -> list[Reason]:
    """Free-running arms whose repeats generated different tokens: the workload is not deterministic."""
    reasons = []
    for name, repeats in usable.items():
        measured = [r for r in repeats if any(run.batch_size == batch_size for run in r.runs)]
        first = measured[0].run_for(batch_size)
        for other in measured[1:]:
            run = other.run_for(batch_size)
            if run.sha256 != first.sha256:
                where = first_mismatch(first.tokens, run.tokens)
                reasons.append(Reason(
                    kind="not_deterministic", batch_size=batch_size, arm=name, repeat=other.repeat + 1,
                    first_repeat=measured[0].repeat + 1, step=where.step if where else None,
                    sequence=where.sequence if where else None))
                break
    return reasons
