"""The batch-size mix decided like a batch size: its like-for-like check, then its step time
and tok/s by the interval rule, at the same level as every fixed size.

Each process's figure is the mean GPU ms over its timed mix steps (the mix is a whole: its
sizes in their shares), the same value `report.mix` keeps per process, and its tok/s from the
end-to-end pass. Only the processes that followed the guard's schedule count, as for the
mix's figures (`guard.measure.usable_mix_runs`).
"""

from __future__ import annotations

import statistics

from guard.compare._agreement import agreement
from guard.compare._models import MIX_BATCH, ArmStats, BatchComparison
from guard.compare._reasons import Reason
from guard.compare._timings import compare_timings  # the one timing decision, the sizes' own
from guard.compare._hashes import first_mismatch
from guard.config import Rule
from guard.harness._protocol import tokens_sha256  # the hash the harness gives each batch size's tokens
from guard.measure import ArmMeasurement, MixRun, spread, usable_mix_runs


def compare_mix(
    measurements: dict[str, ArmMeasurement], base: str, head: str, schedule: list[int], rule: Rule,
    reference: str | None = None,
) -> BatchComparison:

    runs = {name: usable_mix_runs([r.mix for r in m.repeats if r.mix is not None], schedule)
            for name, m in measurements.items() if m.repeats}
    runs = {name: found for name, found in runs.items() if found}
    arms = [_arm_stats(name, found) for name, found in runs.items()]
    missing = [name for name in (base, head) if name not in runs]
    if missing:
        reason = Reason(kind="arm_no_results", batch_size=MIX_BATCH, arm=missing[0],
                        error="no process of this arm decoded the mix's schedule whole")
        return BatchComparison(batch_size=MIX_BATCH, verdict="invalid", reasons=[reason], arms=arms)
    if any(r.forced for found in runs.values() for r in found):
        agreed = agreement(runs, base, reference or "reference")  # the fixed sizes' rule, margins and all
        head_agreement = agreed.arm(head)
        if agreed.unforced or head_agreement is None or head_agreement.output_changed:
            return BatchComparison(batch_size=MIX_BATCH, verdict="invalid", arms=arms, agreement=agreed)
        return compare_timings(MIX_BATCH, arms, base, head, rule, agreement=agreed)
    reasons = _free_running_reasons(runs, base, head)
    if reasons:
        mismatch = first_mismatch(runs[base][0].tokens, runs[head][0].tokens)
        return BatchComparison(batch_size=MIX_BATCH, verdict="invalid", reasons=reasons, arms=arms,
                               hash_match=mismatch is None, mismatch=mismatch)
    return compare_timings(MIX_BATCH, arms, base, head, rule, hash_match=True)


def _arm_stats(arm: str, runs: list[MixRun]) -> ArmStats:
    hashes = [tokens_sha256(r.tokens) for r in runs]
    forced = all(r.forced for r in runs)
    return ArmStats(
        arm=arm, repeats=len(runs),
        gpu_ms_per_step=spread([statistics.fmean(r.step_ms) for r in runs]),  # as the mix keeps them
        tok_per_s=spread([r.tok_per_s for r in runs]),
        timer=runs[0].timer, sha256=hashes[0],
        deterministic=None if forced else len(set(hashes)) == 1,
        steps=runs[0].steps,
    )


def _free_running_reasons(runs: dict[str, list[MixRun]], base: str, head: str) -> list[Reason]:
    """An arm whose processes decoded other tokens, then base against head."""
    reasons = []
    for name, found in runs.items():
        first = found[0]
        for repeat, other in enumerate(found[1:], start=2):
            if other.tokens != first.tokens:
                where = first_mismatch(first.tokens, other.tokens)
                reasons.append(Reason(kind="not_deterministic", batch_size=MIX_BATCH, arm=name, repeat=repeat,
                                      first_repeat=1, step=where.step if where else None,
                                      sequence=where.sequence if where else None))
                break
    if reasons:
        return reasons
    where = first_mismatch(runs[base][0].tokens, runs[head][0].tokens)
    if where is not None:
        reasons.append(Reason(kind="tokens_differ", batch_size=MIX_BATCH, arm=base, other_arm=head,
                              step=where.step, sequence=where.sequence))
    return reasons
