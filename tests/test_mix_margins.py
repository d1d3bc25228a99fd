"""The margin rule over the batch-size mix, as at a fixed size: the reference's top two logits of
every mix output, disagreements at confident outputs counted apart, the mix's agreement decided
from them, decided again when a report is read back, and said in the comment; the count rule
where the reference has no logits. Real harness processes of the reference engine on a CPU."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from guard.compare import Agreement, agreement, compare
from guard.engine import make as make_engine
from guard.measure import (
    MARGIN_FLOOR_ULPS, ArmMeasurement, ArmTarget, BatchRun, HarnessSpec, MixRun, ReferenceTokens, RepeatResult,
)
from guard.measure._disagreements import with_disagreements
from guard.harness._protocol import ReferenceMix, ReferenceRun
from guard.measure._reference import _top_logits, forced_spec, make_reference
from guard.measure._runner import run_interleaved
from guard.report import Report, UnfoundedReport, read_report, render_comment
from guard.sandbox import choose_box
from tests.report_fixtures import committed, current_file, remeasured, with_mix
from tests.rules import rule_at
from tests.test_explain_mix import FALLBACK, _arm, _mix
from tests.test_margins import FLIPPED, WORKLOAD, next_up_ulp

REPO_ROOT = Path(__file__).resolve().parents[1]
MIX = {1: 0.5, 2: 0.25, 4: 0.25}


def confident_count(tokens: list[list[int]], rows: list[list[int]], top: list[list[tuple[float, float]]]
                    ) -> tuple[int, int]:
    """Disagreements at outputs whose bf16 reference margin is above the floor, counted here."""
    count = outputs = 0
    for row, ref, pairs in zip(tokens, rows, top):
        for found, expected, (best, second) in zip(row, ref, pairs):
            if (best - second) / next_up_ulp(torch.bfloat16, max(abs(best), abs(second))) > MARGIN_FLOOR_ULPS:
                outputs += 1
                count += found != expected
    return count, outputs


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A reference of base with a mix, then two forced processes of each arm: base, an
    unchanged copy of it, and a head whose rotary embedding has a sign flipped."""
    tmp = tmp_path_factory.mktemp("mix-margins")
    targets = []
    for name, patch in (("base", ""), ("same", ""), ("flipped", FLIPPED)):
        worktree = tmp / name
        worktree.mkdir()
        (worktree / "wl.py").write_text(WORKLOAD.format(root=str(REPO_ROOT), patch=patch))
        targets.append(ArmTarget(box=choose_box(), name=name, python=Path(sys.executable), worktree=worktree))
    spec = HarnessSpec(entry="wl.py:make", options={"layers": 2, "max_len": 128, "dtype": "bfloat16"},
                       batch_sizes=[2], steps=32, warmup_steps=2, tok_per_s_min_s=0, warmup_max_s=0,
                       profile_steps=0, batch_mix=MIX, batch_mix_seed=3)
    outcome = make_reference(targets[0], spec, tmp / "runs", 300, "base test")
    assert outcome.error is None and outcome.margins_error is None and outcome.tokens is not None, outcome.error
    assert outcome.path is not None
    results = run_interleaved(targets, forced_spec(spec, outcome.tokens, outcome.path), 2, tmp / "runs", 300,
                              reference=outcome.tokens)
    for result in results.values():
        assert result.error is None, result.error
    return spec, outcome.tokens, results


@pytest.mark.slow
def test_the_reference_records_the_engines_own_top_logits_of_every_mix_output(mixed) -> None:  # type: ignore[no-untyped-def]
    spec, reference, _ = mixed
    schedule = spec.mix_schedule()
    assert reference.mix is not None and reference.top_logits is not None and reference.top_logits.mix is not None
    top = reference.top_logits.mix
    assert [len(pairs) for pairs in top] == [len(row) for row in reference.mix]
    # as long as a measured process's passes: on a GPU the GPU-timed pass follows the end-to-end one
    decoded = spec.warmup_steps + (2 * spec.steps if torch.cuda.is_available() else spec.steps)
    assert [len(row) for row in reference.mix] == [max(MIX), *schedule[:decoded]]
    # the same engine in this process, on the same schedule, free-running: the same ids, the same pairs
    engine = make_engine(layers=2, max_len=128, dtype="bfloat16")
    engine.setup(max(MIX))
    last = engine.step().tolist()
    assert last == reference.mix[0]
    assert engine.step_logits().topk(2, -1).values.float().tolist() == [list(p) for p in top[0]]
    for k, size in enumerate(schedule[:8], start=1):
        ids = engine.step(torch.tensor(last[:size])).tolist()
        assert ids == reference.mix[k]
        assert engine.step_logits().topk(2, -1).values.float().tolist() == [list(p) for p in top[k]]
        last[:size] = ids


@pytest.mark.slow
def test_a_mix_that_disagrees_at_confident_outputs_in_every_process_changed_its_output(mixed) -> None:  # type: ignore[no-untyped-def]
    spec, reference, results = mixed
    schedule = spec.mix_schedule()
    top = reference.top_logits.mix
    flipped = [r.mix for r in results["flipped"].repeats]
    own = [confident_count(m.tokens, reference.mix, top) for m in flipped]
    assert all(m.margin_floor is not None and m.margin_floor.ulps == MARGIN_FLOOR_ULPS for m in flipped)
    assert [(m.confident_disagreements, m.confident_compared) for m in flipped] == own

    found = compare({"base": results["base"], "head": results["flipped"]}, "base", "head", [2], rule_at(1.0, 0.99),
                    mix_schedule=schedule, reference="base test")
    mixed_size = found.mix_comparison
    assert mixed_size is not None and mixed_size.verdict == "invalid" and found.verdict == "invalid"
    agreed = mixed_size.agreement
    assert agreed is not None and agreed.margin_floor is not None and agreed.margin_floor.dtype == "bfloat16"
    head, base = agreed.arm("head"), agreed.arm("base")
    assert head is not None and base is not None and base.confident == [0, 0]
    assert head.confident == [count for count, _ in own] and min(head.confident) > 0 and head.output_changed
    assert head.first_confident is not None and head.first_confident.margin_ulps > MARGIN_FLOOR_ULPS

    same = compare({"base": results["base"], "head": results["same"]}, "base", "head", [2], rule_at(1.0, 0.99),
                   mix_schedule=schedule, reference="base test").mix_comparison
    assert same is not None and same.agreement is not None and same.agreement.margin_floor is not None
    unchanged = same.agreement.arm("head")
    assert unchanged is not None and unchanged.confident == [0, 0] and not unchanged.output_changed
    assert unchanged.confident_compared == own[0][1] > 0


def test_the_mixs_margins_are_data_checked_and_bad_ones_lose_only_the_margins() -> None:
    run = ReferenceRun(batch_size=1, tokens=[[3]], sha256="", top_logits=[[[2.0, 1.0]]], logits_dtype="bfloat16")
    mix = ReferenceMix(tokens=[[3, 4], [5]], top_logits=[[[2.0, 1.0], [3.0, 0.5]], [[1.0, 1.0]]],
                        logits_dtype="bfloat16")
    top, error = _top_logits([run], mix)
    assert error is None and top is not None and top.mix == [[(2.0, 1.0), (3.0, 0.5)], [(1.0, 1.0)]]
    for bad in ({"logits_dtype": "float32"}, {"logits_dtype": ["bfloat16", "float32"]}, {"logits_dtype": None},
                {"top_logits": [[[1.0, 2.0]]]}, {"top_logits": [[[float("inf"), 1.0]]]}):
        top, error = _top_logits([run], replace(mix, **bad))
        assert top is None and error, bad
    with pytest.raises(ValueError, match="top_logits of the mix are not one pair per id"):
        ReferenceTokens(source="t", batch_sizes={}, mix=[[3, 4], [5]],
                        top_logits={"dtype": "float32", "batch_sizes": {}, "mix": [[(2.0, 1.0)], [(1.0, 0.0)]]})


# -- the rule on known counts ---------------------------------------------------------------
SCHEDULE = [1, 3, 1, 6, 2, 1, 3, 1]  # a CPU's timed mix pass: no warmup, the end-to-end pass timed
ROWS = [[7] * max(SCHEDULE)] + [[7] * size for size in SCHEDULE]
NEAR_TIE, CONFIDENT = (4.0, 4.0 - 1 / 32), (4.0, 2.0)  # 1 and 64 bf16 ulps at 4.0 (ulp 1/32)


def _tied(step: int, sequence: int) -> bool:
    return (step + sequence) % 2 == 0


def _reference(margins: bool) -> ReferenceTokens:
    """The mix's reference: every output 7; its logits near a tie at half of them, 64 ulps apart
    at the other half."""
    top = [[NEAR_TIE if _tied(k, j) else CONFIDENT for j in range(len(row))] for k, row in enumerate(ROWS)]
    return ReferenceTokens(source="t", batch_sizes={}, mix=ROWS,
                           top_logits={"dtype": "bfloat16", "batch_sizes": {}, "mix": top} if margins else None)


def _flipped(near_ties: int, confident: int) -> list[list[int]]:
    """The reference's rows with the first `near_ties` near-tie outputs and `confident`
    confident ones turned to 8."""
    rows, left = [list(row) for row in ROWS], {True: near_ties, False: confident}
    for k, row in enumerate(rows):
        for j in range(len(row)):
            if left[_tied(k, j)]:
                left[_tied(k, j)] -= 1
                row[j] = 8
    return rows


def _measured(name: str, tokens: list[list[int]], reference: ReferenceTokens, ms: float = 2.0) -> ArmMeasurement:
    """Three forced processes of one arm, their mix counted by the guard against `reference`."""
    repeats = []
    for i, jitter in enumerate((0.0, 0.004, -0.003)):
        step = ms * (1 + jitter)
        fixed = BatchRun(batch_size=1, steps=8, warmup_steps=0, timer="perf_counter", setup_s=0.0,
                         tok_per_s=1000 / step, gpu_ms_per_step=step, wall_s=8 * step / 1000, step_ms=[step] * 8,
                         sha256="a" * 64, tokens=[[7]] * 9)
        mix = MixRun(max_batch_size=max(SCHEDULE), steps=len(SCHEDULE), warmup_steps=0, timer="perf_counter",
                     setup_s=0.0, tok_per_s=sum(SCHEDULE) * 1000 / (step * len(SCHEDULE)),
                     step_ms=[step * size / 2 for size in SCHEDULE], tokens=tokens, forced=True)
        result = RepeatResult(arm=name, repeat=i, environment={}, runs=[fixed], mix=mix)
        repeats.append(with_disagreements(result, reference))
    return ArmMeasurement(arm=name, repeats=repeats)


def _mix_agreement(near_ties: int, confident: int, margins: bool, base: str = "base", head: str = "head"
                   ) -> Agreement:
    reference = _reference(margins)
    found = compare({base: _measured(base, ROWS, reference), head: _measured(head, _flipped(near_ties, confident),
                                                                              reference)},
                    base, head, [1], rule_at(1.0, 0.99), mix_schedule=SCHEDULE, reference="base test")
    assert found.mix_comparison is not None and found.mix_comparison.agreement is not None
    return found.mix_comparison.agreement


def test_disagreements_only_below_the_floor_are_noise_and_the_count_rule_decides_without_margins() -> None:
    outputs = sum(len(row) for row in ROWS)  # 24: 12 near ties, 12 confident
    agreed = _mix_agreement(near_ties=7, confident=0, margins=True)
    head = agreed.arm("head")
    assert agreed.margin_floor is not None and (agreed.margin_floor.dtype, agreed.margin_floor.ulps) == ("bfloat16", 16)
    assert head is not None and head.disagreements == [7] * 3 and head.compared == outputs
    assert head.confident == [0] * 3 and head.confident_compared == outputs // 2
    assert (head.output_changed, head.numerics_changed) == (False, True)
    # without the mix's logits: 7 more of 24 per process, past a quarter (6), the count rule's change
    counted = _mix_agreement(near_ties=7, confident=0, margins=False)
    head = counted.arm("head")
    assert counted.margin_floor is None and head is not None and head.confident is None and head.output_changed


def test_one_confident_disagreement_in_every_process_is_a_change_the_count_rule_would_miss() -> None:
    agreed = _mix_agreement(near_ties=0, confident=1, margins=True)
    head = agreed.arm("head")
    assert head is not None and head.confident == [1] * 3 and head.output_changed and not head.numerics_changed
    first = head.first_confident
    # the first confident output: step 1 (the lead row), sequence 1, whose logits were 64 ulps apart
    assert first is not None and (first.step, first.sequence, first.found, first.expected) == (1, 1, 8, 7)
    assert first.margin_ulps == pytest.approx(64)
    counted = _mix_agreement(near_ties=0, confident=1, margins=False).arm("head")
    assert counted is not None and not counted.output_changed and counted.numerics_changed  # 1 of 24: under 6


def test_the_mix_runs_and_the_fixed_sizes_are_judged_by_one_rule() -> None:
    reference = _reference(True)
    runs = {name: [r.mix for r in _measured(name, tokens, reference).repeats]
            for name, tokens in (("base", ROWS), ("head", _flipped(3, 2)))}
    assert agreement(runs, "base", "base test") == _mix_agreement(near_ties=3, confident=2, margins=True)


# -- read back and said ---------------------------------------------------------------------
def _report(near_ties: int, confident: int, margins: bool = True) -> Report:
    base = committed(current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json"))
    report = remeasured(base, 1.0)
    agreed = _mix_agreement(near_ties, confident, margins, report.base, report.head)
    return with_mix(report, _mix(_arm(report.base, FALLBACK), _arm(report.head, FALLBACK)), agreed)


def _written(report: Report, path: Path, edit=None) -> Path:  # type: ignore[no-untyped-def]
    data = json.loads(report.model_dump_json())
    if edit is not None:
        edit(data)
    path.write_text(json.dumps(data))
    return path


def test_a_mixs_margin_agreement_reads_back_and_the_comment_says_its_figures(tmp_path: Path) -> None:
    noise = _report(near_ties=7, confident=0)
    assert noise.mix_comparison is not None and noise.mix_comparison.verdict == "pass"
    again = read_report(_written(noise, tmp_path / "noise.json"))
    assert again.mix_comparison == noise.mix_comparison
    comment = render_comment(again)
    assert "arithmetic changed: over the batch-size mix every one of its processes disagrees" in comment
    assert "more than 16 bfloat16 ulps (12 of the 24 outputs), its processes disagreed 0, 0, 0 times" in comment

    changed = _report(near_ties=0, confident=1)
    assert changed.mix_comparison is not None and changed.mix_comparison.verdict == "invalid"
    assert changed.verdict == "invalid"
    comment = render_comment(read_report(_written(changed, tmp_path / "changed.json")))
    assert "the batch-size mix: the output of" in comment
    assert "more than 16 bfloat16 ulps, which rounding does not move (1, 1, 1 of those 12 outputs, against 0, 0, 0" \
        in comment
    # a report whose mix the count rule decided, as an older guard wrote it, is read as it was
    counted = _report(near_ties=7, confident=0, margins=False)
    assert counted.mix_comparison is not None and counted.mix_comparison.verdict == "invalid"
    assert read_report(_written(counted, tmp_path / "counted.json")).mix_comparison == counted.mix_comparison


def _head_agreement(data: dict) -> dict:  # type: ignore[type-arg]
    return data["mix_comparison"]["agreement"]["arms"][1]


@pytest.mark.parametrize("edit,said", [
    # confident disagreements in every process, where the report kept none: the head changed
    (lambda d: _head_agreement(d).update(confident=[1, 1, 1]), "the batch-size mix: verdict pass, but its numbers "
                                                              "give invalid"),
    # no floor: the count rule, by which 7 of 24 is a change of output
    (lambda d: d["mix_comparison"]["agreement"].pop("margin_floor"), "confident is"),
    # more confident disagreements than disagreements
    (lambda d: _head_agreement(d).update(confident=[8, 0, 0]), "confident is [8, 0, 0]"),
    # a floor that is no floor
    (lambda d: d["mix_comparison"]["agreement"]["margin_floor"].update(ulps=0), "confident is"),
])
def test_a_forged_mix_agreement_is_refused(tmp_path: Path, edit, said: str) -> None:  # type: ignore[no-untyped-def]
    noise = _report(near_ties=7, confident=0)
    with pytest.raises(UnfoundedReport, match=re.escape(said)):
        read_report(_written(noise, tmp_path / "report.json", edit))


def test_a_changed_mix_stated_as_passing_is_refused(tmp_path: Path) -> None:
    changed = _report(near_ties=0, confident=1)

    def edit(data: dict) -> None:  # type: ignore[type-arg]
        _head_agreement(data)["output_changed"] = False
        data["mix_comparison"]["verdict"] = data["verdict"] = "pass"

    with pytest.raises(UnfoundedReport, match="the batch-size mix: verdict pass, but its numbers give invalid"):
        read_report(_written(changed, tmp_path / "report.json", edit))
