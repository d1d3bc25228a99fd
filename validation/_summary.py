"""Summarise the pairs: per kind, the verdicts and causes, under the thresholds they ran with
and re-decided offline by the compare stage itself: at the floor threshold a calibration can
give, when the pairs ran above it, and at the default threshold."""

from __future__ import annotations

import math
import statistics
from typing import Any

from pydantic import ValidationError

from guard._errors import ConfigError
from guard.calibrate import FLOOR_PCT
from guard.report._words import CAUSE
from guard.compare import ArmStats, Comparison, Verdict, compare, confirm_undecided
from guard.config import MeasureConfig, Rule, Threshold
from guard.measure import ArmMeasurement, BatchRun, RepeatResult

from ._models import (
    ROUNDS_BEFORE_THE_SETTING,
    CalibrationRecord, Criterion, Decision, DecisionRole, Kind, KindSummary, PairFacts, RunSettings, Sizing, Summary,
)
from ._pairs import Pair

DEFAULT_THRESHOLD_PCT: float = MeasureConfig.model_fields["threshold_pct"].default
ISSUE_PAIRS = 10  # the issue asks for at least 10 pairs of each kind
ISSUE_HIT_RATE = 0.9  # +1%: a regression with the right cause in at least 9 of 10
VERDICTS: tuple[Verdict, ...] = ("pass", "regression", "at_threshold", "inconclusive", "improvement", "invalid")


def redecide(
    pair: Pair, gpu_pct: float, tok_pct: float, confirm: bool, max_rounds: int,
) -> tuple[Verdict, bool]:
    """The verdict `compare` gives the pair's recorded repeats at other thresholds, with the
    pipeline's confirmation rule: the first round alone, then both when the first leaves the
    batch size undecided and a second was measured. The flag says a second round was wanted
    but not measured (the pair ran without one at its own thresholds). Alpha is split over the
    most rounds the pair's run allowed (`max_rounds`), as it was when the pair ran."""
    if pair.facts.verdict == "invalid" or len(pair.report.batch_sizes[0].arms) < 2:
        return "invalid", False  # not like for like (tokens, hardware, a failed arm): no timing verdict
    looks = max_rounds if confirm else 1
    rounds = pair.report.rounds

    def both_rounds(_undecided: list[int], _mix: bool) -> Comparison | None:
        return compare_pair(pair, rounds, gpu_pct, tok_pct, looks) if rounds >= 2 else None

    comparison, _, _, wanted = confirm_undecided(compare_pair(pair, 1, gpu_pct, tok_pct, looks), both_rounds)
    return comparison.verdict, wanted


def compare_pair(pair: Pair, rounds: int, gpu_pct: float, tok_pct: float, looks: int = 1) -> Comparison:
    """The compare stage on the repeats of the pair's first `rounds` rounds, as its report keeps
    them, decided at look `rounds` of `looks`: step times (GPU ms, end-to-end ms) at `gpu_pct`,
    tok/s at `tok_pct`."""
    report = pair.report
    batch = report.batch_sizes[0]
    count = rounds * report.workload.repeats
    measurements = {a.arm: _measurement(a, batch.batch_size, report.workload.steps, count) for a in batch.arms}
    times = Threshold(pct=gpu_pct)
    rule = Rule(gpu_ms=times, tok_per_s=Threshold(pct=tok_pct), end_to_end_ms=times, alpha=report.rule.alpha,
                confidence=report.rule.confidence, looks=max(looks, rounds))
    return compare(measurements, report.base, report.head, [batch.batch_size], rule, look={batch.batch_size: rounds})


def _measurement(arm: ArmStats, batch_size: int, steps: int, count: int) -> ArmMeasurement:
    """The arm's first `count` repeats rebuilt from the report's figures. Tokens are not kept,
    their hash is: the comparison only reads tokens where hashes differ, and such a pair is
    invalid already."""
    repeats = [
        RepeatResult(arm=arm.arm, repeat=i, environment={}, runs=[BatchRun(
            batch_size=batch_size, steps=steps, warmup_steps=0, timer=arm.timer, setup_s=0.0,
            wall_s=batch_size * steps / tok, tok_per_s=tok, gpu_ms_per_step=gpu,
            step_ms=[], tokens=[], sha256=arm.sha256,
        )])
        for i, (gpu, tok) in enumerate(zip(arm.gpu_ms_per_step.values[:count], arm.tok_per_s.values[:count]))
    ]
    return ArmMeasurement(arm=arm.arm, repeats=repeats)


def decide(
    label: str, pairs: list[Pair], kinds: list[Kind], confirm: bool, max_rounds: int,
    gpu_pct: float | None = None, tok_pct: float | None = None, role: DecisionRole = "as run",
) -> Decision:
    """Without thresholds: the verdicts the pairs got as they ran. With them: re-decided."""
    verdicts: dict[str, Verdict] = {}
    unconfirmed = 0
    for pair in pairs:
        if gpu_pct is None or tok_pct is None:
            verdicts[pair.facts.pair_id] = pair.facts.verdict
            continue
        verdicts[pair.facts.pair_id], missing = redecide(pair, gpu_pct, tok_pct, confirm, max_rounds)
        unconfirmed += missing
    notes = []
    if unconfirmed:
        notes.append(
            f"{unconfirmed} pair(s) would have had a confirmation round at these thresholds but ran without "
            "one; they are decided on their first round"
        )
    facts = [p.facts for p in pairs]
    if gpu_pct is None:
        used = sorted({(r.threshold_pct, r.tok_threshold_pct) for r in facts})
        if len(used) == 1:
            gpu_pct, tok_pct = used[0]
        elif used:
            notes.append("the pairs ran with different thresholds: " + ", ".join(f"{g:g}%/{t:g}%" for g, t in used))
    summaries = [kind_summary(kind, [r for r in facts if r.kind == kind.name], verdicts) for kind in kinds]
    return Decision(
        label=label, role=role, gpu_ms_pct=gpu_pct, tok_per_s_pct=tok_pct, kinds=summaries,
        criteria=criteria(summaries), verdicts=verdicts, notes=notes,
    )


def kind_summary(kind: Kind, records: list[PairFacts], verdicts: dict[str, Verdict]) -> KindSummary:
    tally = {v: 0 for v in VERDICTS}
    for record in records:
        tally[verdicts[record.pair_id]] += 1
    regressions = tally["regression"]
    right = sum(
        1 for r in records
        if verdicts[r.pair_id] == "regression" and kind.expected_cause is not None and r.cause == kind.expected_cause
    )
    injected = kind.injection != "none" and bool(records)
    return KindSummary(
        kind=kind.name,
        target_pct=kind.target_pct,
        expected_cause=kind.expected_cause,
        pairs=len(records),
        verdicts={v: n for v, n in tally.items() if n},
        regressions=regressions,
        right_cause=right,
        traced=sum(1 for r in records if r.traced),
        detection_rate=regressions / len(records) if injected else None,
        right_cause_rate=right / len(records) if injected else None,
        median_gpu_ms_change_pct=_median([r.gpu_ms_change.pct for r in records if r.gpu_ms_change]),
        median_tok_per_s_change_pct=_median([r.tok_per_s_change.pct for r in records if r.tok_per_s_change]),
        median_duration_s=_median([r.duration_s for r in records]),
    )


def criteria(kinds: list[KindSummary]) -> list[Criterion]:
    """The issue's two criteria: every A/A pair passes; +1% of each kind is a regression with
    the right cause in at least 9 of 10."""
    found = []
    for s in kinds:
        if s.target_pct == 0:
            found.append(_all_pass(s))
        elif s.target_pct == 1.0:
            found.append(_hits(s))
    return found


def _all_pass(s: KindSummary) -> Criterion:
    passed = s.verdicts.get("pass", 0)
    name = "A/A: every pair passes"
    detail = f"{passed} of {s.pairs} pass"
    if passed < s.pairs:
        others = ", ".join(f"{n} {v}" for v, n in s.verdicts.items() if v != "pass")
        return Criterion(name=name, status="not met", detail=f"{detail} ({others})")
    if s.pairs < ISSUE_PAIRS:
        return Criterion(name=name, status="incomplete", detail=f"{detail}; the issue asks for {ISSUE_PAIRS}")
    return Criterion(name=name, status="met", detail=detail)


def _hits(s: KindSummary) -> Criterion:
    cause = CAUSE[s.expected_cause] if s.expected_cause else "-"
    name = f"{s.kind}: regression with cause '{cause}' in at least {ISSUE_HIT_RATE:.0%} of pairs"
    detail = f"{s.right_cause} of {s.pairs} (regressions: {s.regressions})"
    allowed_misses = math.floor((1 - ISSUE_HIT_RATE) * max(s.pairs, ISSUE_PAIRS) + 1e-9)
    if s.pairs >= ISSUE_PAIRS and s.right_cause >= ISSUE_HIT_RATE * s.pairs - 1e-9:
        return Criterion(name=name, status="met", detail=detail)
    if s.pairs - s.right_cause > allowed_misses:
        return Criterion(name=name, status="not met", detail=detail)
    return Criterion(name=name, status="incomplete", detail=f"{detail}; the issue asks for {ISSUE_PAIRS}")


def calibration_record(calibration: dict[str, Any] | None) -> CalibrationRecord | None:
    """calibration.json's data, checked: a ConfigError that says what to do where it is not a
    calibration this validation can read."""
    if calibration is None:
        return None
    try:
        return CalibrationRecord.model_validate(calibration)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ConfigError(
            f"calibration.json: {where}: {first['msg']}; it is not a calibration this validation can read: "
            "remove it (and thresholds.toml) to calibrate again, or restore the file") from None


def summarise(
    pairs: list[Pair],
    kinds: list[Kind],
    planned: dict[str, int],
    settings: RunSettings | None,
    sizing: Sizing | None,
    calibration: dict[str, Any] | None,
) -> Summary:
    confirm = settings.confirm if settings is not None else True
    max_rounds = settings.max_rounds if settings is not None else ROUNDS_BEFORE_THE_SETTING
    record = calibration_record(calibration)
    refused = record.refused if record is not None else None
    as_run = decide("as run, at measure.threshold_pct (the calibration was refused)" if refused
                    else "as run, at the calibrated thresholds", pairs, kinds, confirm, max_rounds)
    decisions = [as_run]
    if as_run.gpu_ms_pct is not None and as_run.tok_per_s_pct is not None:
        # pairs kept from before the interval rule were decided by the significance rule as they
        # ran: the rule of today, on their own figures at their own thresholds
        decisions.append(decide(
            "re-decided by the interval rule at the thresholds they ran with",
            pairs, kinds, confirm, max_rounds, as_run.gpu_ms_pct, as_run.tok_per_s_pct, "own",
        ))
    if as_run.gpu_ms_pct is not None and as_run.tok_per_s_pct is not None and as_run.gpu_ms_pct > FLOOR_PCT:
        # what a quieter runner, calibrated to the floor, would have made of the same pairs:
        # the smallest regression the guard can be set to catch
        decisions.append(decide(
            "re-decided at the calibration floor",
            pairs, kinds, confirm, max_rounds, FLOOR_PCT, as_run.tok_per_s_pct, "floor",
        ))
    decisions.append(decide(
        f"re-decided at the default threshold, {DEFAULT_THRESHOLD_PCT:g}%", pairs, kinds, confirm,
        max_rounds, DEFAULT_THRESHOLD_PCT, DEFAULT_THRESHOLD_PCT, "default",
    ))
    return Summary(
        settings=settings,
        planned=planned,
        done=planned_done([p.facts.kind for p in pairs], planned),
        complete=all(sum(1 for p in pairs if p.facts.kind == k) >= n for k, n in planned.items()),
        environment=_environment([p.facts for p in pairs], sizing),
        sizing=sizing,
        thresholds=record.suggested if record is not None else None,
        calibration=record,
        decisions=decisions,
        pairs=[p.facts for p in pairs],
    )


def planned_done(kinds: list[str], planned: dict[str, int]) -> int:
    """How many of the planned pairs are in: pairs of kinds this run does not plan, or beyond a kind's
    count, are kept in the folder but do not count towards the plan."""
    return sum(min(n, kinds.count(k)) for k, n in planned.items())


def _environment(records: list[PairFacts], sizing: Sizing | None) -> dict[str, Any]:
    env = dict(sizing.environment) if sizing is not None else {}
    gpus = sorted({r.gpu for r in records if r.gpu})
    uuids = sorted({r.gpu_uuid for r in records if r.gpu_uuid})
    if gpus:
        env["gpus_of_pairs"] = gpus
    if uuids:
        env["gpu_uuids_of_pairs"] = uuids
    return env


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None
