"""A stored comparison decided again from its own numbers, by the rule that made it.

A report read back (from another job, or from a pull request's run) states verdicts beside
the numbers they came from. Here each batch size's verdict is made again from the values
kept in its spreads and its disagreement counts, with `compare_timings` (`_timings.py`) and the agreement
rule, and every stated verdict, change and count that the comment or the status would show
is held against it.

A stated `invalid`, of a batch size or of the whole, stands: it claims no timing verdict and
sets no success, and a report can be invalid for what it keeps only as a reason (two arms on
different GPUs) or by a stricter rule of an older guard. A report states its rule, the interval
rule with the looks it could take, and is decided again by it. The `min_excess` an agreement
records is the rule's as it ran, not a count.
"""

from __future__ import annotations

import math
import statistics
from typing import Literal

from pydantic import BaseModel

from guard.compare._agreement import ConfidentCounts, judge
from guard.compare._models import UNHELD_SHARE, Agreement, ArmAgreement, ArmStats, BatchComparison, Verdict
from guard.compare._models import most_severe
from guard.compare._ranks import straggler_again
from guard.compare._timings import compare_timings
from guard.compare._verdict import ranks_disagree, with_rank_change
from guard.config import Rule
from guard.measure import Change, Spread

# Floats read back from JSON are the ones written; another scipy may differ in the last digits.
REL_TOLERANCE = 1e-6
ABS_TOLERANCE = 1e-9

Kind = Literal["verdict", "change", "count", "shape"]


class Discrepancy(BaseModel):
    """One thing a report states that its own numbers do not give."""

    kind: Kind  # a verdict, a change's figure, a count or flag, or the report's shape
    batch_size: int | None  # None: the report as a whole
    field: str  # the report's name for it: "verdict", "gpu_ms_change.pct", "arms[head].repeats"
    stated: str
    recomputed: str


def recheck(
    batches: list[BatchComparison], base: str, head: str, rule: Rule, *,
    verdict: Verdict, hash_match: bool | None, failed_arms: list[str],
) -> list[Discrepancy]:
    """Every discrepancy between what `batches` and the overall `verdict` / `hash_match` state
    and what their own values give under `rule`, the one the report states (`Comparison.rule`); []
    for a report that holds up. `failed_arms`:
    arms that failed to build or run (the comparison is invalid then)."""
    found = _rule_discrepancies(rule, len(batches))
    if found:
        return found
    again = []
    for stored in batches:
        shape = _shape(stored, base, head, rule)
        found += shape
        if shape:
            continue
        changed = with_rank_change(stored, base, head).rank_change
        if stored.rank_change != changed:
            found.append(Discrepancy(kind="count", batch_size=stored.batch_size, field="rank_change",
                                     stated=str(stored.rank_change), recomputed=str(changed)))
        if stored.verdict == "invalid":
            again.append(stored)
            continue
        recomputed = decide_again(stored, base, head, rule)
        found += _batch_discrepancies(stored, recomputed)
        again.append(recomputed)
    if found:
        return found
    overall: Verdict = "invalid" if failed_arms else most_severe([b.verdict for b in again])
    if verdict not in (overall, "invalid"):
        found.append(Discrepancy(kind="verdict", batch_size=None, field="verdict", stated=verdict,
                                 recomputed=overall))
    matches = [b.hash_match for b in again if b.hash_match is not None]
    overall_match = all(matches) if matches else None
    if hash_match != overall_match:
        found.append(Discrepancy(kind="count", batch_size=None, field="hash_match", stated=str(hash_match),
                                 recomputed=str(overall_match)))
    return found


def decide_again(stored: BatchComparison, base: str, head: str, stated: Rule) -> BatchComparison:
    """The batch size's comparison made again from its stored arms and counts, as
    `compare` makes it from the measurements: the like-for-like check, then the timings."""
    rule = stated.at_look(stored.look)
    size, arms = stored.batch_size, stored.arms
    by_name = {a.arm: a for a in arms}
    if base not in by_name or head not in by_name:
        return BatchComparison(batch_size=size, verdict="invalid", arms=arms)
    if split := ranks_disagree(arms, size):
        return BatchComparison(batch_size=size, verdict="invalid", reasons=split, arms=arms)
    if stored.agreement is not None:  # forced: the disagreement counts decide
        agreed = _agreement_again(stored.agreement, base)
        head_agreement = agreed.arm(head)
        if agreed.unforced or head_agreement is None or head_agreement.output_changed:
            return BatchComparison(batch_size=size, verdict="invalid", arms=arms, agreement=agreed)
        return compare_timings(size, arms, base, head, rule, agreement=agreed)
    hash_match = by_name[base].sha256 == by_name[head].sha256
    if not hash_match or any(a.deterministic is False for a in arms):
        return BatchComparison(batch_size=size, verdict="invalid", arms=arms, hash_match=hash_match,
                               mismatch=stored.mismatch)
    return compare_timings(size, arms, base, head, rule, hash_match=True)


def _agreement_again(stored: Agreement, base: str) -> Agreement:
    counts: dict[str, list[int] | None] = {a.arm: a.disagreements for a in stored.arms}
    counts |= {name: None for name in stored.unforced}
    margins = None
    if stored.margin_floor is not None:
        margins = (stored.margin_floor, {a.arm: ConfidentCounts(a.confident, a.confident_compared, a.first_confident)
                                         for a in stored.arms if a.confident is not None})
    return judge(counts, {a.arm: a.compared for a in stored.arms}, base, stored.reference,
                 {a.arm: a.first_disagreement for a in stored.arms}, margins)


def _rule_discrepancies(rule: Rule, batch_sizes: int) -> list[Discrepancy]:
    """The batch sizes alpha was split over are the ones decided (the rule holds its own ranges)."""
    if rule.decided_sizes == batch_sizes:
        return []
    return [Discrepancy(kind="shape", batch_size=None, field="batch_sizes", stated=f"{batch_sizes}",
                        recomputed=f"{rule.decided_sizes} (alpha was split over them)")]


def _shape(stored: BatchComparison, base: str, head: str, rule: Rule) -> list[Discrepancy]:
    """What must hold before the batch size can be decided again: each arm once, its spreads
    its own values' (positive and finite), a count per repeat; counts within what was compared."""
    found: list[Discrepancy] = []
    size = stored.batch_size

    def wrong(field: str, stated: object, expected: object) -> None:
        found.append(Discrepancy(kind="shape", batch_size=size, field=field, stated=str(stated),
                                 recomputed=str(expected)))

    names = [a.arm for a in stored.arms]
    if len(set(names)) != len(names):
        wrong("arms", ", ".join(names), "each arm once")
    if not 1 <= stored.look <= rule.looks:
        wrong("look", stored.look, f"1 to {rule.looks} (the looks the run could take)")
    for arm in stored.arms:
        found += arm_discrepancies(arm, size)
    if stored.agreement is not None:
        repeats = {a.arm: a.repeats for a in stored.arms}
        for agreed in stored.agreement.arms:
            where = f"agreement.arms[{agreed.arm}].disagreements"
            if agreed.arm in repeats and len(agreed.disagreements) != repeats[agreed.arm]:
                wrong(where, f"{len(agreed.disagreements)} counts", f"{repeats[agreed.arm]} (the repeats)")
            elif not agreed.disagreements or not all(0 <= d <= agreed.compared for d in agreed.disagreements):
                wrong(where, agreed.disagreements, f"one count per process, each 0 to {agreed.compared}")
            found += _confident_shape(stored.agreement, agreed, size)
    return found


def arm_discrepancies(arm: ArmStats, size: int) -> list[Discrepancy]:
    """One arm's figures at a batch size against its own values: each spread its values' (a
    value per repeat, positive and finite), its counts one per repeat, its flags the ones its
    counts give. A record of one commit is read back by this check alone."""
    found: list[Discrepancy] = []
    where = f"arms[{arm.arm}]"

    def wrong(field: str, stated: object, expected: object) -> None:
        found.append(Discrepancy(kind="shape", batch_size=size, field=f"{where}.{field}", stated=str(stated),
                                 recomputed=str(expected)))

    spreads = {"gpu_ms_per_step": arm.gpu_ms_per_step, "tok_per_s": arm.tok_per_s}
    spreads |= {name: s for name, s in (("end_to_end_gpu_ms_per_step", arm.end_to_end_gpu_ms_per_step),
                                        ("host_ms_per_step", arm.host_ms_per_step),
                                        ("instructions_per_step", arm.instructions_per_step)) if s is not None}
    for name, spread in spreads.items():
        floor = 0.0 if name == "host_ms_per_step" else math.nextafter(0.0, 1.0)  # host time may be 0
        if len(spread.values) != arm.repeats:
            wrong(f"{name}.values", f"{len(spread.values)} values", f"{arm.repeats} (the repeats)")
        elif not all(math.isfinite(v) and v >= floor for v in spread.values):
            wrong(f"{name}.values", "a value not finite or not positive", "positive finite values")
        elif spread.values:
            found += _spread_discrepancies(spread, size, f"{where}.{name}")
    if arm.unheld_steps and len(arm.unheld_steps) != arm.repeats:
        wrong("unheld_steps", f"{len(arm.unheld_steps)} counts", f"{arm.repeats} (the repeats)")
    held = bool(arm.unheld_steps) and sum(arm.unheld_steps) > UNHELD_SHARE * arm.steps * len(arm.unheld_steps)
    if arm.outran_hold != held:
        wrong("outran_hold", arm.outran_hold, held)
    if arm.ranks is not None:
        found += _ranks_shape(arm, size)
    return found


def _confident_shape(agreement: Agreement, agreed: ArmAgreement, size: int) -> list[Discrepancy]:
    """Under the margin rule every arm has a confident count per process, each within its
    process's disagreements and the confident outputs, and those within the outputs compared."""
    where = f"agreement.arms[{agreed.arm}].confident"
    floor = agreement.margin_floor
    if floor is None:
        ok = agreed.confident is None
        expected = "none: the count rule decided"
    else:
        confident = agreed.confident or []
        ok = (math.isfinite(floor.ulps) and floor.ulps > 0 and 0 <= agreed.confident_compared <= agreed.compared
              and len(confident) == len(agreed.disagreements)
              and all(0 <= c <= min(d, agreed.confident_compared) for c, d in zip(confident, agreed.disagreements)))
        expected = "one count per process, each 0 to its disagreements and the confident outputs compared"
    if ok:
        return []
    return [Discrepancy(kind="shape", batch_size=size, field=where, stated=f"{agreed.confident!r}",
                        recomputed=expected)]


def _ranks_shape(arm: ArmStats, size: int) -> list[Discrepancy]:
    """An arm's ranks: one each, a spread per rank of its repeats' values, and the straggler
    and the disagreement flag its own counts give."""
    ranks, where = arm.ranks, f"arms[{arm.arm}].ranks"
    assert ranks is not None
    found = []

    def wrong(field: str, stated: object, expected: object) -> None:
        found.append(Discrepancy(kind="shape", batch_size=size, field=f"{where}.{field}", stated=str(stated),
                                 recomputed=str(expected)))

    if [r.rank for r in ranks.ranks] != list(range(ranks.world_size)):
        wrong("ranks", [r.rank for r in ranks.ranks], f"ranks 0 to {ranks.world_size - 1}, once each")
        return found
    for rank in ranks.ranks:
        if len(rank.gpu_ms_per_step.values) != arm.repeats:
            wrong(f"[{rank.rank}].gpu_ms_per_step.values", len(rank.gpu_ms_per_step.values), arm.repeats)
    if sum(r.slowest_steps for r in ranks.ranks) != ranks.steps:
        wrong("steps", ranks.steps, sum(r.slowest_steps for r in ranks.ranks))
    straggler = straggler_again(ranks, arm.gpu_ms_per_step.median)
    if ranks.straggler != straggler:
        wrong("straggler", ranks.straggler, straggler)
    if ranks.disagree != any(r.disagreements for r in ranks.ranks):
        wrong("disagree", ranks.disagree, not ranks.disagree)
    return found


def _spread_discrepancies(spread: Spread, size: int, where: str) -> list[Discrepancy]:
    figures = {"median": statistics.median(spread.values), "min": min(spread.values), "max": max(spread.values)}
    return [
        Discrepancy(kind="count", batch_size=size, field=f"{where}.{name}", stated=f"{getattr(spread, name)!r}",
                    recomputed=f"{value!r}")
        for name, value in figures.items()
        if not _close(getattr(spread, name), value)
    ]


def _borrowed(batch: BatchComparison) -> list[str]:
    """Which metrics pooled a calibrated spread in, and which were checked and did not."""
    return [f"{b.metric}: {'borrowed' if b.borrowed else 'not borrowed'}" for b in batch.borrowed]


def _batch_discrepancies(stored: BatchComparison, again: BatchComparison) -> list[Discrepancy]:
    size = stored.batch_size
    found = []

    def differs(kind: Kind, field: str, stated: object, recomputed: object) -> None:
        found.append(Discrepancy(kind=kind, batch_size=size, field=field, stated=str(stated),
                                 recomputed=str(recomputed)))

    if stored.verdict != again.verdict:
        differs("verdict", "verdict", stored.verdict, again.verdict)
    for field in ("gpu_ms_verdict", "tok_per_s_verdict", "end_to_end_verdict", "end_to_end_gates",
                  "instructions_verdict"):
        if getattr(stored, field) != getattr(again, field):
            differs("verdict", field, getattr(stored, field), getattr(again, field))
    if stored.tok_per_s_gates != again.tok_per_s_gates:
        differs("verdict", "tok_per_s_gates", stored.tok_per_s_gates, again.tok_per_s_gates)
    # a report may not hide a tok/s row it could show; one written before the field shows it anyway
    if not stored.tok_per_s_measurable and again.tok_per_s_measurable:
        differs("verdict", "tok_per_s_measurable", stored.tok_per_s_measurable, again.tok_per_s_measurable)
    if not _close(stored.tok_per_s_detectable_pct, again.tok_per_s_detectable_pct):
        differs("change", "tok_per_s_detectable_pct", stored.tok_per_s_detectable_pct, again.tok_per_s_detectable_pct)
    if not _close(stored.end_to_end_detectable_pct, again.end_to_end_detectable_pct):
        differs("change", "end_to_end_detectable_pct", stored.end_to_end_detectable_pct,
                again.end_to_end_detectable_pct)
    for name in ("caught_pct", "expected_caught_pct"):
        kept, made = getattr(stored, name), getattr(again, name)
        if kept.keys() != made.keys() or not all(_close(kept[m], made[m]) for m in made):
            differs("change", name, kept, made)
    interval = again.alpha_per_look is not None  # decided again on its timings, not found invalid
    if interval and sorted(stored.at_threshold) != sorted(again.at_threshold):
        differs("verdict", "at_threshold", stored.at_threshold, again.at_threshold)
    if interval:
        for field in ("decided_by", "repeats_to_decide", "tok_per_s_repeats_to_gate", "end_to_end_repeats_to_gate",
                      "undecided"):
            if getattr(stored, field) != getattr(again, field):
                differs("verdict", field, getattr(stored, field), getattr(again, field))
        if not _close(stored.alpha_per_look, again.alpha_per_look):
            differs("verdict", "alpha_per_look", stored.alpha_per_look, again.alpha_per_look)
        # rule 5: each metric's own level, which the comment states
        kept, made = stored.alpha_per_bound, again.alpha_per_bound
        if kept.keys() != made.keys() or not all(_close(kept[m], made[m]) for m in made):
            differs("verdict", "alpha_per_bound", kept, made)
    fields = ("gpu_ms_change", "tok_per_s_change", "end_to_end_gpu_ms_change", "host_ms_change", "instructions_change")
    for field in fields + (("gpu_ms_bounds", "tok_per_s_bounds", "end_to_end_bounds") if interval else ()):
        stated, recomputed = getattr(stored, field), getattr(again, field)
        if stated is None and recomputed is None:
            continue
        if stated is None or recomputed is None:
            differs("change", field, _or_none(stated), _or_none(recomputed))
            continue
        for name in Change.model_fields:
            if not _close(getattr(stated, name), getattr(recomputed, name)):
                differs("change", f"{field}.{name}", f"{getattr(stated, name)!r}", f"{getattr(recomputed, name)!r}")
    if interval and _borrowed(stored) != _borrowed(again):
        differs("verdict", "borrowed", _borrowed(stored), _borrowed(again))
    elif interval:  # the figures the method fold prints are the check's own, not the report's word
        for kept, made in zip(stored.borrowed, again.borrowed):
            for name in ("calibrated_sd_pct", "calibrated_dof", "calibrated_limit_pct", "run_sd_pct", "run_dof",
                         "limit_sd_pct"):
                if not _close(getattr(kept, name), getattr(made, name)):
                    differs("change", f"borrowed[{kept.metric}].{name}", f"{getattr(kept, name)!r}",
                            f"{getattr(made, name)!r}")
    if _aside(stored) != _aside(again):
        differs("count", "set_aside", _aside(stored), _aside(again))
    if stored.hash_match != again.hash_match:
        differs("count", "hash_match", stored.hash_match, again.hash_match)
    if stored.agreement is not None and again.agreement is not None:
        found += _agreement_discrepancies(stored.agreement, again.agreement, size)
    return found


def _aside(batch: BatchComparison) -> list[str]:
    """The processes a batch size set aside, as `arm repeat metric`: which, not their figures
    (those are the spreads' own, checked there)."""
    return sorted(f"{s.arm} {s.repeat} {s.metric}" for s in batch.set_aside)


def _agreement_discrepancies(stored: Agreement, again: Agreement, size: int) -> list[Discrepancy]:
    found = []
    if stored.exact != again.exact:
        found.append(Discrepancy(kind="count", batch_size=size, field="agreement.exact", stated=str(stored.exact),
                                 recomputed=str(again.exact)))
    for arm in stored.arms:
        recomputed = again.arm(arm.arm)
        if recomputed is None:
            continue
        for field in ("output_changed", "numerics_changed", "some_disagree", "excess"):
            stated_value, value = getattr(arm, field), getattr(recomputed, field)
            if not _close(stated_value, value):
                found.append(Discrepancy(kind="count", batch_size=size, field=f"agreement.arms[{arm.arm}].{field}",
                                         stated=str(stated_value), recomputed=str(value)))
    return found


def same_facts(stated: object, recomputed: object) -> bool:
    """Two dumped structures (dicts, lists, figures) alike, each figure within the tolerance of
    floats written on one machine and made again on another."""
    if isinstance(stated, dict) and isinstance(recomputed, dict):
        return stated.keys() == recomputed.keys() and all(same_facts(stated[k], recomputed[k]) for k in stated)
    if isinstance(stated, (list, tuple)) and isinstance(recomputed, (list, tuple)):
        return len(stated) == len(recomputed) and all(same_facts(a, b) for a, b in zip(stated, recomputed))
    if isinstance(stated, float) or isinstance(recomputed, float):
        return _close(stated, recomputed)
    return stated == recomputed


def _close(stated: object, recomputed: object) -> bool:
    if isinstance(stated, bool) or isinstance(recomputed, bool):
        return stated == recomputed
    if isinstance(stated, (int, float)) and isinstance(recomputed, (int, float)):
        if math.isnan(stated) or math.isnan(recomputed):
            return False
        return math.isclose(stated, recomputed, rel_tol=REL_TOLERANCE, abs_tol=ABS_TOLERANCE)
    return stated == recomputed


def _or_none(change: Change | None) -> str:
    return "none" if change is None else f"{change.pct:+.2f}%"

