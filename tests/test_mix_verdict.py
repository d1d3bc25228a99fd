"""The batch-size mix decided like a batch size: by the interval rule at the same level, in the
overall verdict and in alpha's split, its like-for-like check first, a confirmation round of
its own where it is left open, and a stored report held to it."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from guard.compare import MIX_BATCH, alpha_per_look, compare, confirm_undecided
from guard.measure import ArmMeasurement, BatchRun, MixRun, RepeatResult, TokenMismatch
from guard._errors import GuardError
from guard.report import ReportError, read_report
from tests.report_fixtures import committed, current_file, remeasured, with_mix
from tests.rules import rule_at
from tests.test_explain_mix import FALLBACK, NO_FALLBACK, _arm, _mix

REPO_ROOT = Path(__file__).resolve().parents[1]
SCHEDULE = [1, 3, 1, 6, 2, 1, 3, 1]  # a CPU's timed mix pass: no warmup, the end-to-end pass timed
JITTER = [0.0, 0.004, -0.003, 0.002, -0.001]  # a share, per process: real processes scatter
THRESHOLD, CONFIDENCE = 1.0, 0.99


def _mix_run(ms: float, forced: bool = False, disagreements: int | None = None) -> MixRun:
    rows = [[7] * max(SCHEDULE)] + [[7] * size for size in SCHEDULE]
    return MixRun(max_batch_size=max(SCHEDULE), steps=len(SCHEDULE), warmup_steps=0, timer="perf_counter",
                  setup_s=0.0, tok_per_s=sum(SCHEDULE) * 1000 / (ms * len(SCHEDULE)),
                  step_ms=[ms * size / 2 for size in SCHEDULE], tokens=rows, forced=forced,
                  disagreements=disagreements, compared=sum(SCHEDULE) if forced else 0,
                  first_disagreement=TokenMismatch(step=1, sequence=0, expected=7, found=8) if disagreements else None)


def _fixed(ms: float) -> BatchRun:
    return BatchRun(batch_size=1, steps=8, warmup_steps=0, timer="perf_counter", setup_s=0.0, tok_per_s=1000 / ms,
                    gpu_ms_per_step=ms, wall_s=8 * ms / 1000, step_ms=[ms] * 8, sha256="a" * 64, tokens=[[7]] * 9)


def _arm_of(name: str, fixed_ms: float, mix_ms: float, *, forced: bool = False,
            disagreements: list[int] | None = None) -> ArmMeasurement:
    repeats = []
    for i, j in enumerate(JITTER):
        d = disagreements[i] if disagreements else (0 if forced else None)
        repeats.append(RepeatResult(arm=name, repeat=i, environment={}, runs=[_fixed(fixed_ms * (1 + j))],
                                    mix=_mix_run(mix_ms * (1 - j), forced, d)))
    return ArmMeasurement(arm=name, repeats=repeats)


def _compare(base: ArmMeasurement, head: ArmMeasurement, looks: int = 1, **more):  # type: ignore[no-untyped-def]
    return compare({"base": base, "head": head}, "base", "head", [1], rule_at(THRESHOLD, CONFIDENCE, looks=looks),
                   mix_schedule=SCHEDULE, **more)


def test_a_slower_mix_makes_the_verdict_a_regression_where_every_fixed_size_passes() -> None:
    found = _compare(_arm_of("base", 1.0, 2.0), _arm_of("head", 1.0, 2.2))
    (fixed,) = found.batch_sizes
    assert fixed.verdict == "pass"
    mixed = found.mix_comparison
    assert mixed is not None and mixed.batch_size == MIX_BATCH and mixed.mix
    assert mixed.verdict == "regression" and found.verdict == "regression"
    assert mixed.gpu_ms_bounds is not None and mixed.gpu_ms_bounds.ci_low_pct > THRESHOLD
    # one bound of each metric of each of the two: the fixed size's level is the mix's too
    assert mixed.alpha_per_look == fixed.alpha_per_look == pytest.approx(alpha_per_look(0.01, 1, 2, look=1, version=2))
    head = next(a for a in mixed.arms if a.arm == "head")
    # each process's mean over its timed steps, the value report.mix keeps per process
    assert head.gpu_ms_per_step.values == pytest.approx([statistics.fmean(2.2 * (1 - j) * s / 2 for s in SCHEDULE)
                                                         for j in JITTER])
    without = compare({"base": _arm_of("base", 1.0, 2.0), "head": _arm_of("head", 1.0, 2.2)}, "base", "head", [1],
                      rule_at(THRESHOLD, CONFIDENCE))
    assert without.mix_comparison is None and without.verdict == "pass"  # no schedule given: no mix decided


def test_the_mix_passes_and_a_faster_one_is_an_improvement() -> None:
    same = _compare(_arm_of("base", 1.0, 2.0), _arm_of("head", 1.0, 2.0))
    assert same.mix_comparison is not None and same.mix_comparison.verdict == "pass" and same.verdict == "pass"
    faster = _compare(_arm_of("base", 1.0, 2.0), _arm_of("head", 1.0, 1.6))
    assert faster.mix_comparison is not None and faster.mix_comparison.verdict == "improvement"


def test_a_head_whose_mix_output_changed_makes_the_comparison_invalid() -> None:
    base = _arm_of("base", 1.0, 2.0, forced=True)
    head = _arm_of("head", 1.0, 2.0, forced=True, disagreements=[9, 10, 11, 9, 12])
    for arm in (base, head):  # forced fixed sizes too: their agreement is clean
        arm.repeats[:] = [r.model_copy(update={"runs": [run.model_copy(update={
            "forced": True, "disagreements": 0, "compared": 8}) for run in r.runs]}) for r in arm.repeats]
    found = _compare(base, head, reference="base abc")
    assert found.batch_sizes[0].verdict == "pass"
    mixed = found.mix_comparison
    assert mixed is not None and mixed.verdict == "invalid" and found.verdict == "invalid"
    assert mixed.agreement is not None and mixed.agreement.arm("head").output_changed  # type: ignore[union-attr]


def test_free_running_mixes_whose_tokens_differ_are_not_compared() -> None:
    head = _arm_of("head", 1.0, 2.0)
    first = head.repeats[0]
    rows = [list(row) for row in first.mix.tokens]  # type: ignore[union-attr]
    rows[3][0] = 8
    head.repeats[:] = [r.model_copy(update={"mix": r.mix.model_copy(update={"tokens": rows})})  # type: ignore[union-attr]
                       for r in head.repeats]
    found = _compare(_arm_of("base", 1.0, 2.0), head)
    mixed = found.mix_comparison
    assert mixed is not None and mixed.verdict == "invalid" and found.verdict == "invalid"
    # the lead row is step 1: the fourth row is step 4
    assert [(r.kind, r.batch_size, r.step) for r in mixed.reasons] == [("tokens_differ", MIX_BATCH, 4)]


def test_an_open_mix_gets_a_confirmation_round_of_its_own() -> None:
    # at the threshold: slower, its interval still holding 1%
    base, head = _arm_of("base", 1.0, 2.0), _arm_of("head", 1.0, 2.0 * 1.011)
    first = _compare(base, head, looks=2)
    assert first.mix_comparison is not None and first.mix_comparison.undecided
    assert first.undecided_sizes == [] and first.mix_undecided
    asked: list[tuple[list[int], bool]] = []

    def second(sizes: list[int], mix: bool):  # type: ignore[no-untyped-def]
        asked.append((sizes, mix))
        more = {name: ArmMeasurement(arm=name, repeats=arm.repeats + [
            r.model_copy(update={"repeat": r.repeat + 5, "runs": []}) for r in arm.repeats])
            for name, arm in (("base", base), ("head", head))}
        return compare(more, "base", "head", [1], rule_at(THRESHOLD, CONFIDENCE, looks=2), mix_schedule=SCHEDULE,
                       mix_look=2)

    final, rounds, stopped, missing = confirm_undecided(first, second)
    assert asked == [([], True)] and (rounds, stopped, missing) == (2, "max_rounds", False)
    assert final.mix_comparison is not None and final.mix_comparison.look == 2
    assert [a.repeats for a in final.mix_comparison.arms] == [10, 10]
    assert final.batch_sizes[0] == first.batch_sizes[0]  # the fixed size stands on its first round


def _report_with_mix():  # type: ignore[no-untyped-def]
    report = remeasured(committed(current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f"
                                               / "report.json")), 1.0)
    return with_mix(report, _mix(_arm(report.base, FALLBACK), _arm(report.head, NO_FALLBACK)))


def test_a_stored_mix_verdict_is_decided_again_and_held_to_the_mixs_own_figures(tmp_path: Path) -> None:
    report = _report_with_mix()
    assert report.verdict == "regression" and report.mix_comparison is not None
    path = tmp_path / "report.json"
    path.write_text(report.model_dump_json(indent=2))
    assert read_report(path).verdict == "regression"  # holds up as written

    data = json.loads(path.read_text())
    data["mix_comparison"]["verdict"] = data["verdict"] = "pass"
    path.write_text(json.dumps(data))
    with pytest.raises(GuardError, match="the batch-size mix: verdict pass, but its numbers give regression"):
        read_report(path)

    data = json.loads(report.model_dump_json())
    del data["mix_comparison"]  # a mix whose verdict was dropped
    data["verdict"] = "pass"
    path.write_text(json.dumps(data))
    with pytest.raises(GuardError, match="mix_comparison is absent"):
        read_report(path)

    data = json.loads(report.model_dump_json())
    values = data["mix_comparison"]["arms"][1]["gpu_ms_per_step"]["values"]
    data["mix_comparison"]["arms"][1]["gpu_ms_per_step"]["values"] = [v * 0.9 for v in values]
    path.write_text(json.dumps(data))
    with pytest.raises(GuardError, match="mix_comparison.arms"):
        read_report(path)


def test_a_schema_5_report_with_a_mix_is_refused_and_one_without_is_read() -> None:
    older = REPO_ROOT / "docs" / "examples" / "h200-fallback-92c2758" / "report.json"
    assert json.loads(older.read_text())["schema_version"] == 5
    with pytest.raises(ReportError, match="with a batch-size mix, whose verdict it did not decide"):
        read_report(older)
    plain = REPO_ROOT / "docs" / "examples" / "h200-demo-545b03b" / "report.json"
    assert json.loads(plain.read_text())["schema_version"] == 5 and read_report(plain).mix_comparison is None
