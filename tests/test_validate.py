"""python -m validation injected: sizing by interpolation, re-deciding pairs offline from their
kept reports, the summary's criteria, and the whole run on a CPU with tiny settings."""

from __future__ import annotations

import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from guard.config import CalibratedSpread, Thresholds
from guard.measure import Change, spread
from guard.report import Report
from tests.conftest import git
from tests.report_fixtures import committed, ruled
from validation._inputs import planned_pairs
from validation._models import KIND_BY_NAME, PairFacts, PairRecord, RunSettings, SizingPoint, Summary, TokenCheck
from validation._pairs import Pair, append_record, load_pair, plan, read_records
from validation._render import render_markdown
from validation._progress import KIND_HISTORY, Budget, first_that_fits
from validation._repo import base_long_kv_len, head_branch, make_engine_repo, write_config
from validation._sizing import choose_idle, choose_long_kv, curve_at, interpolate, keep_tokens
from validation._summary import decide, redecide, summarise

REPO_ROOT = Path(__file__).resolve().parents[1]
# an H200 A/A pair's report: its arms' figures are replaced by each test's own
TEMPLATE = committed(REPO_ROOT / "docs" / "validation" / "h200-30l" / "pairs" / "aa-01" / "report.json.gz")


# --- the throwaway repository -------------------------------------------------------------------


SMALL_RUN = RunSettings(
    batch_size=1, steps=8, warmup_steps=2, profile_steps=0, profile_repeats=0, repeats=2, options={},
    options_toml="", build="none", confirm=True, alpha=0.01, confidence=0.95, timeout_s=60,
)


def test_each_head_changes_one_default_and_nothing_else(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    base = make_engine_repo(repo, SMALL_RUN)
    assert make_engine_repo(repo, SMALL_RUN) == base  # a second call reuses it
    assert base_long_kv_len(repo) == 2048

    def changed(branch: str) -> tuple[list[str], list[str]]:
        diff = git(repo, "diff", "--unified=0", f"main...{branch}").splitlines()
        return ([line for line in diff if line.startswith("-") and not line.startswith("---")],
                [line for line in diff if line.startswith("+") and not line.startswith("+++")])

    idle = head_branch(repo, KIND_BY_NAME["idle-1"], 12.5)
    assert idle == "validate/idle-12.5us"
    removed, added = changed(idle)
    assert [" ".join(line.split()) for line in removed + added] == [
        "- self.idle_us = float(idle_us if idle_us is not None else os.environ.get(IDLE_ENV, 0.0))",
        "+ self.idle_us = float(idle_us if idle_us is not None else os.environ.get(IDLE_ENV, 12.5))",
    ]
    kernel = head_branch(repo, KIND_BY_NAME["kernel-1"], 3)
    assert changed(kernel) == (["-    long_kv_layers: int = 0"], ["+    long_kv_layers: int = 3"])
    split = head_branch(repo, KIND_BY_NAME["idle-0.5"], 0.0)  # the split alone
    removed, added = changed(split)
    assert [" ".join(line.split()) for line in removed + added] == [
        "- split: bool | None = None,", "+ split: bool | None = True,"]
    removed, added = changed(head_branch(repo, KIND_BY_NAME["aa"], None))
    assert removed == [] and all(line.startswith("+#") or line == "+" for line in added)
    assert head_branch(repo, KIND_BY_NAME["idle-0.5"], 12.5) == idle  # made once, reused
    assert git(repo, "rev-parse", "--abbrev-ref", "HEAD") == "main"


# --- sizing ------------------------------------------------------------------------------------


def test_a_pair_takes_the_rounds_its_run_was_set_to_and_an_older_run_its_two(tmp_path: Path) -> None:
    from guard.config import load_config

    path = tmp_path / "guard.toml"
    write_config(path, SMALL_RUN.model_copy(update={"max_rounds": 4}), None)
    assert load_config(path, required=True).measure.max_rounds == 4
    older = json.loads(SMALL_RUN.model_dump_json())
    del older["max_rounds"]  # a settings.json written before the setting: its pairs ran with 2
    write_config(path, RunSettings.model_validate(older), None)
    assert load_config(path, required=True).measure.max_rounds == 2
    for settings, said in ((SMALL_RUN.model_copy(update={"max_rounds": 4}), "confirmation rounds on (up to 4 rounds"),
                           (SMALL_RUN.model_copy(update={"confirm": False}), "confirmation round off")):
        text = render_markdown(summarise([], [KIND_BY_NAME["aa"]], {"aa": 1}, settings, None, None), [])
        assert said in text


def test_interpolation_between_extrapolation_beyond_and_clamping_below() -> None:
    curve = [(6.0, 0.9), (2.0, 0.6), (12.0, 1.3)]
    assert interpolate(curve, 1.0)[:2] == (pytest.approx(6 + 0.1 / 0.4 * 6), "interpolated")
    assert interpolate(curve, 0.6)[:2] == (pytest.approx(2.0), "interpolated")
    x, how, note = interpolate(curve, 2.0)  # beyond 12: the line through (6, 0.9) and (12, 1.3)
    assert (x, how) == (pytest.approx(12 + 0.7 * 6 / 0.4), "extrapolated") and "widen the grid" in note
    x, how, note = interpolate(curve, 0.5)  # the smallest setting already adds more
    assert (x, how) == (2.0, "clamped") and "+0.60%" in note
    assert interpolate([(2.0, 0.6), (6.0, 0.4)], 1.0)[:2] == (None, "none")
    assert curve_at(curve, 9.0) == pytest.approx(0.9 + 0.4 / 2)
    assert curve_at(curve, 0.0) == pytest.approx(0.6 - 0.3 / 4 * 2)


def _point(setting: str, change: float, idle_us: float | None = None, layers: int | None = None,
           match: bool = True) -> SizingPoint:
    return SizingPoint(label=f"{setting}-{idle_us or layers}", setting=setting, idle_us=idle_us,
                       long_kv_layers=layers, gpu_ms_per_step=[1.0], change_pct=change, tokens_match_base=match,
                       sha256="x")


def test_idle_is_sized_on_the_idle_points_only_and_rounded() -> None:
    points = [_point("base", 0.0), _point("split", 0.4), _point("idle", 0.7, idle_us=2.0),
              _point("idle", 1.1, idle_us=6.0), _point("kernel", 5.0, layers=2)]
    size = choose_idle(KIND_BY_NAME["idle-1"], points)
    # (1.0 - 0.7) / 0.4 * 4 + 2 = 5.0 us exactly; the split and kernel points play no part
    assert (size.setting, size.how) == (5.0, "interpolated")
    assert size.predicted_pct == pytest.approx(1.0)
    low = choose_idle(KIND_BY_NAME["idle-0.5"], points)  # 0.5% is below 2 us: the split alone is nearer
    assert (low.setting, low.how, low.predicted_pct) == (0.0, "measured", pytest.approx(0.4))
    assert "the split alone" in low.note
    far_split = [points[0], _point("split", 0.05), *points[2:]]
    low = choose_idle(KIND_BY_NAME["idle-0.5"], far_split)  # nearer as a ratio: 0.7 / 0.5 against 0.5 / 0.05
    assert (low.setting, low.how, low.predicted_pct) == (2.0, "clamped", pytest.approx(0.7))
    split_changes_tokens = [*points[:2], _point("idle", 0.7, idle_us=2.0, match=False), points[3]]
    assert choose_idle(KIND_BY_NAME["idle-1"], split_changes_tokens).setting is None


def test_long_kv_layers_is_a_whole_number_moved_to_the_nearest_that_keeps_the_tokens() -> None:
    points = [_point("base", 0.0), _point("kernel", 0.45, layers=1), _point("kernel", 0.9, layers=2),
              _point("kernel", 1.8, layers=4)]
    size = choose_long_kv(KIND_BY_NAME["kernel-1"], points)
    # of 1 (0.45%), 2 (0.9%), 3 (1.35% on the line to 4) and 4 (1.8%), 2 is nearest 1%
    assert (size.setting, size.how, size.predicted_pct) == (2, "measured", pytest.approx(0.9))
    assert choose_long_kv(KIND_BY_NAME["kernel-0.5"], points).setting == 1
    uneven = [points[0], _point("kernel", 0.97, layers=1), _point("kernel", 0.79, layers=2),
              _point("kernel", 2.43, layers=4)]
    assert choose_long_kv(KIND_BY_NAME["kernel-1"], uneven).setting == 1  # the curve need not rise evenly
    assert choose_long_kv(KIND_BY_NAME["kernel-0.5"], uneven).setting == 2
    ran: list[int] = []

    def run_once(layers: int) -> TokenCheck:
        ran.append(layers)
        return TokenCheck(long_kv_layers=layers, tokens_match_base=layers == 3, change_pct=None)

    changes_tokens = [points[0], _point("kernel", 0.45, layers=1, match=False),
                      _point("kernel", 0.9, layers=2, match=False), points[3]]
    kept = keep_tokens(size, changes_tokens, run_once)
    assert ran == [3]  # 2 and 1 are known to change the tokens; 3 is run once
    assert kept.setting == 3 and kept.predicted_pct == pytest.approx(1.35)
    assert "2 changes the tokens; 3 is the nearest" in kept.note
    nothing = keep_tokens(size, points[:1], lambda n: TokenCheck(long_kv_layers=n, tokens_match_base=False,
                                                                 change_pct=None))
    assert nothing.setting is None and "no long_kv_layers near 2" in nothing.note


# --- re-deciding and summarising ----------------------------------------------------------------


def _record(kind: str, index: int, base: list[float], head: list[float], verdict: str = "regression",
            cause: str | None = None, rounds: int = 1, repeats: int = 4, threshold_pct: float = 0.5,
            duration_s: float = 60.0) -> Pair:
    """A pair whose report holds these per-repeat GPU ms per step (tok/s: 1000 over them)."""
    k = KIND_BY_NAME[kind]
    batch = TEMPLATE.batch_sizes[0]
    values = {TEMPLATE.base: base, TEMPLATE.head: head}
    arms = [a.model_copy(update={"gpu_ms_per_step": spread(values[a.arm]), "repeats": len(values[a.arm]),
                                 "tok_per_s": spread([1000 / v for v in values[a.arm]])})
            for a in batch.arms if a.arm in values]
    report = ruled(TEMPLATE, gpu_ms=threshold_pct, tok_per_s=0.5).model_copy(update={
        "batch_sizes": [batch.model_copy(update={"arms": arms})], "rounds": rounds,
        "workload": TEMPLATE.workload.model_copy(update={"repeats": repeats, "steps": 64}),
    })
    change = Change(pct=0.0, ci_low_pct=0.0, ci_high_pct=0.0, p_value=1.0, confidence=0.95)
    facts = PairFacts(
        pair_id=f"{kind}-{index:02d}", kind=kind, injection=k.injection, setting=None, predicted_pct=None,
        batch_size=1, verdict=verdict, threshold_pct=threshold_pct, tok_threshold_pct=0.5, gpu_ms_change=change,
        tok_per_s_change=change, cause=cause, title="t", capture_changed=False, traced=cause is not None,
        rounds=rounds, duration_s=duration_s,
    )
    return Pair(facts, report)


BASE = [1.000, 1.001, 0.999, 1.000]


def test_redecide_uses_the_compare_stage_at_other_thresholds() -> None:
    # 4 processes per arm, spread 0.2%: at 1 batch size the first of 2 looks has each bound wrong
    # 0.31% of the time (62% of alpha over 2 families), so the bounds sit about 0.25% either side
    record = _record("kernel-1", 1, BASE, [v * 1.008 for v in BASE])
    assert redecide(record, 0.5, 0.5, confirm=True, max_rounds=2) == ("regression", False)  # +0.8%: above 0.5% + 0.25%
    assert redecide(_record("kernel-1", 1, BASE, [v * 1.003 for v in BASE]), 1.0, 1.0, confirm=True, max_rounds=2) == (
        "pass", False)  # +0.3%: its upper bound is under 1%
    # +1.2% against 1%: the first round cannot tell them apart, a second round was wanted and none was run
    near = _record("kernel-1", 2, BASE, [v * 1.012 for v in BASE])
    assert redecide(near, 1.0, 1.0, confirm=True, max_rounds=2) == ("at_threshold", True)
    assert redecide(near, 1.0, 1.0, confirm=False, max_rounds=2) == ("at_threshold", False)  # one look: final
    # with a second round recorded, both rounds decide: twice the processes narrow the bounds past 1%
    two = _record("kernel-1", 3, BASE * 2, [v * 1.012 for v in BASE] * 2, rounds=2)
    assert redecide(two, 1.0, 1.0, confirm=True, max_rounds=2) == ("regression", False)
    invalid = _record("aa", 1, BASE, BASE, verdict="invalid")
    assert redecide(invalid, 1.0, 1.0, confirm=True, max_rounds=2) == ("invalid", False)
    # a run that planned more looks spends less of alpha at the first: its first bounds are wider
    from validation._summary import compare_pair

    lows = [compare_pair(record, 1, 0.5, 0.5, looks).batch_sizes[0].gpu_ms_bounds.ci_low_pct  # type: ignore[union-attr]
            for looks in (2, 4, 8)]
    assert lows == sorted(lows, reverse=True) and lows[0] - lows[-1] > 0.05


def test_every_committed_calibration_reads_as_data_and_a_broken_one_is_one_message(tmp_path: Path) -> None:
    from guard._errors import ConfigError
    from validation._summary import calibration_record

    for path in sorted((REPO_ROOT / "docs" / "validation").glob("*/calibration.json")):
        record = calibration_record(json.loads(path.read_text()))
        assert record is not None and record.suggested is not None and record.noise, path
    newest = json.loads((REPO_ROOT / "docs" / "validation" / "h200-defaults" / "calibration.json").read_text())
    assert calibration_record(newest).slow is not None and calibration_record(newest).noise[0].gpu_ms is not None
    newest["noise"][0]["gpu_ms_aa_ci_pct"] = "wide"
    with pytest.raises(ConfigError, match=r"calibration.json: noise.0.gpu_ms_aa_ci_pct: .*remove it"):
        calibration_record(newest)


def test_criteria_count_regressions_with_the_right_cause() -> None:
    same = [v * 1.0 for v in BASE]
    idle, kernel = "idle_between_kernels", "slower_kernels"
    records = (
        [_record("aa", i, BASE, same, verdict="pass") for i in range(10)]
        + [_record("idle-1", i, BASE, same, cause=idle) for i in range(9)]
        + [_record("idle-1", 9, BASE, same, verdict="inconclusive", cause=idle)]
        + [_record("kernel-1", i, BASE, same, cause=kernel) for i in range(8)]
        + [_record("kernel-1", i, BASE, same, cause=idle) for i in range(8, 10)]  # regression, wrong cause
    )
    kinds = [KIND_BY_NAME[k] for k in ("aa", "idle-1", "kernel-1")]
    decision = decide("as run", records, kinds, confirm=True, max_rounds=2)
    by_kind = {k.kind: k for k in decision.kinds}
    assert by_kind["idle-1"].regressions == 9 and by_kind["idle-1"].right_cause == 9
    assert by_kind["kernel-1"].regressions == 10 and by_kind["kernel-1"].right_cause == 8
    assert by_kind["idle-1"].detection_rate == pytest.approx(0.9)
    assert [c.status for c in decision.criteria] == ["met", "met", "not met"]
    early = decide("as run", records[:5] + records[10:13], kinds, confirm=True, max_rounds=2)
    assert [c.status for c in early.criteria] == ["incomplete", "incomplete", "incomplete"]
    failed_aa = decide("as run", [_record("aa", 1, BASE, same, verdict="inconclusive")], kinds,
                       confirm=True, max_rounds=2)
    assert failed_aa.criteria[0].status == "not met"


QUIET = [1.0000, 1.0002, 0.9998, 1.0000]  # a 0.04% spread: bounds about 0.05% either side


def test_pairs_run_above_the_floor_are_re_decided_at_it_too() -> None:
    # kernel-0.5 measured +0.4%: under the 0.5% the pairs ran with, over the 0.25% floor
    records = [_record("kernel-0.5", i, QUIET, [v * 1.004 for v in QUIET], verdict="pass") for i in range(1, 4)]
    kinds = [KIND_BY_NAME["kernel-0.5"]]
    summary = summarise(records, kinds, {"kernel-0.5": 3}, None, None, None)
    assert [d.role for d in summary.decisions] == ["as run", "own", "floor", "default"]
    floor = summary.decisions[2]
    assert (floor.gpu_ms_pct, floor.tok_per_s_pct) == (0.25, 0.5)  # tok/s keeps the threshold the pairs ran with
    assert [k.detection_rate for k in floor.kinds] == [1.0]
    assert [k.detection_rate for k in summary.decisions[0].kinds] == [0.0]
    at_floor = [_record("kernel-0.5", i, QUIET, [v * 1.004 for v in QUIET], verdict="pass", threshold_pct=0.25)
                for i in range(1, 4)]
    assert [d.role for d in summarise(at_floor, kinds, {"kernel-0.5": 3}, None, None, None).decisions] == [
        "as run", "own", "default"]  # already at the floor: nothing to re-decide there


def test_a_calibration_that_wrote_no_tok_s_threshold_is_summarised_and_said() -> None:
    # guard calibrate writes tok/s and end-to-end as none where the runner tells no change in them,
    # with the spreads a run may borrow; the summary keeps those as they were written
    records = [_record("aa", i, QUIET, QUIET, verdict="pass") for i in range(1, 3)]
    written = Thresholds(gpu_ms_pct=1.1, spreads=[
        CalibratedSpread(batch_size=1, metric="gpu_ms", sd_pct=0.19, degrees_of_freedom=8)])
    calibration = {"repeats": 5, "noise": [], "suggested": written.model_dump(mode="json")}
    summary = summarise(records, [KIND_BY_NAME["aa"]], {"aa": 2}, None, None, calibration)
    assert summary.thresholds == written
    text = render_markdown(Summary.model_validate_json(summary.model_dump_json()), [])
    assert ("GPU ms per step 1.1%, tok/s none (held to measure.threshold_pct), end-to-end ms per step "
            "none written (held to measure.threshold_pct).") in text


def _line(pair_id: str, kind: str = "aa", duration_s: float = 60.0) -> PairRecord:
    return PairRecord(pair_id=pair_id, kind=kind, index=0, setting=None, predicted_pct=None, duration_s=duration_s,
                      finished_at="2026-01-01T00:00:00+00:00")


def test_a_line_cut_off_by_a_killed_run_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    first = _line("aa-01")
    append_record(path, first)
    with path.open("a") as f:
        f.write(first.model_dump_json()[:50])  # killed mid-write
    assert [r.pair_id for r in read_records(path, repair=True)] == ["aa-01"]
    append_record(path, _line("aa-02"))
    assert [r.pair_id for r in read_records(path)] == ["aa-01", "aa-02"]


def test_a_pair_is_read_from_its_kept_report_and_an_older_line_gives_only_its_plan() -> None:
    """A committed line of an older run holds a copy of its report's figures: the summary reads
    the report instead, here an H200 schema-1 report whose verdict was made by the rule of then."""
    folder = REPO_ROOT / "docs" / "validation" / "h200-30l"
    line = next(json.loads(t) for t in (folder / "pairs.jsonl").read_text().splitlines()
                if json.loads(t)["pair_id"] == "idle-1-09")
    pair = load_pair(folder, PairRecord.model_validate(line))
    kept = json.loads(gzip.decompress((folder / "pairs" / "idle-1-09" / "report.json.gz").read_bytes()))
    assert pair.facts.verdict == kept["verdict"] == line["verdict"]  # as it ran
    batch = kept["batch_sizes"][0]
    assert pair.facts.gpu_ms_change.pct == pytest.approx(batch["gpu_ms_change"]["pct"])
    assert pair.facts.rounds == kept["rounds"] and pair.facts.duration_s == line["duration_s"]
    assert pair.facts.cause == "idle_between_kernels" and pair.facts.traced
    assert [a.gpu_ms_per_step.values for a in pair.report.batch_sizes[0].arms] == [
        a["gpu_ms_per_step"]["values"] for a in batch["arms"]]


def test_a_pair_whose_report_is_missing_is_one_message(tmp_path: Path) -> None:
    append_record(tmp_path / "pairs.jsonl", _line("aa-01"))
    proc = _validate("--out", str(tmp_path), "--summarise-only")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "the report of pair aa-01 is missing" in proc.stderr


# --- the script ------------------------------------------------------------------------------


def _validate(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "validation", "injected", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def test_the_suite_must_be_named() -> None:
    proc = subprocess.run([sys.executable, "-m", "validation"], capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 2 and "name the suite to run: injected or engines" in proc.stderr


def test_kinds_take_turns_each_with_its_count() -> None:
    planned = planned_pairs("aa, idle-1,idle-0.5=1", 2)
    assert planned == {"aa": 2, "idle-1": 2, "idle-0.5": 1}
    assert [f"{k.name}#{i}" for k, i in plan(planned)] == ["aa#0", "idle-1#0", "idle-0.5#0", "aa#1", "idle-1#1"]


def test_bad_inputs_are_one_message(tmp_path: Path) -> None:
    proc = _validate("--out", str(tmp_path / "o"), "--options", "long_kv_layers = 2")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--options sets long_kv_layers" in proc.stderr
    proc = _validate("--out", str(tmp_path / "o"), "--kinds", "aa,idle-2")
    assert proc.returncode == 2 and "unknown kind 'idle-2'" in proc.stderr
    proc = _validate("--out", str(tmp_path / "o"), "--kinds", "aa=0")
    assert proc.returncode == 2 and "a count must be a whole number of 1 or more" in proc.stderr
    proc = _validate("--out", str(tmp_path / "o"), "--idle-grid-us", "5")
    assert proc.returncode == 2 and "give at least 2 different value(s)" in proc.stderr
    assert not (tmp_path / "o" / "settings.json").exists()  # nothing is started by a bad input


# One process per sizing setting and a noisy CPU: the grid's settings are far apart (1 and 3 ms of
# idle on a step of about 1.5 ms, one of two layers with a KV cache 8 times as long), so the
# sizing curves always rise.
TINY = [
    "--steps", "12", "--warmup-steps", "2", "--repeats", "2", "--calibrate-repeats", "2", "--pairs", "1",
    "--options", "layers = 2, long_kv_len = 8192", "--build", "none", "--sizing-repeats", "1",
    "--idle-grid-us", "1000,3000", "--long-kv-grid", "1", "--max-rounds", "1",  # resuming is the point, not rounds
    "--tok-per-s-min-s", "0", "--warmup-max-s", "0",  # one timed pass per batch size, no settling warmup
]


@pytest.mark.slow
def test_whole_run_on_cpu_resumed_across_calls(tmp_path: Path) -> None:
    out, work = tmp_path / "out", tmp_path / "work"
    common = ["--out", str(out), "--workdir", str(work), *TINY]

    stopped = _validate(*common, "--budget-s", "1")  # too little for the sizing: stops cleanly before it
    assert stopped.returncode == 0, stopped.stderr
    assert "stopping before it" in stopped.stderr
    assert json.loads((out / "summary.json").read_text())["done"] == 0

    again = _validate(*common)
    assert again.returncode == 2 and "pass --resume" in again.stderr

    first = _validate(*common, "--resume", "--kinds", "aa,idle-1")
    assert first.returncode == 0, first.stderr
    assert "[2/2] idle-1-01" in first.stderr and "ETA" in first.stderr
    assert first.stderr.splitlines()[-1].endswith("] complete: all 2 planned pairs are in")  # its own plan
    # reuses sizing and calibration, and runs the kind its plan adds
    rest = _validate(*common, "--resume", "--kinds", "aa,idle-1,kernel-1")
    assert rest.returncode == 0, rest.stderr
    assert "sizing: reusing" in rest.stderr and "calibration: reusing" in rest.stderr
    assert "s per process (from the sizing)" in rest.stderr and "s per process (assumed" in first.stderr
    assert "[1/1] kernel-1-01" in rest.stderr
    assert rest.stderr.splitlines()[-1].endswith("] complete: all 3 planned pairs are in")

    lines = [json.loads(line) for line in (out / "pairs.jsonl").read_text().splitlines()]
    assert [r["pair_id"] for r in lines] == ["aa-01", "idle-1-01", "kernel-1-01"]
    assert set(lines[0]) == set(PairRecord.model_fields)  # the plan and the time; the figures are the report's
    sizing = json.loads((out / "sizing.json").read_text())
    settings = {i["kind"]: i["setting"] for i in sizing["injections"]}
    summary = json.loads((out / "summary.json").read_text())
    records = summary["pairs"]
    by_id = {r["pair_id"]: r for r in records}
    assert list(by_id) == [r["pair_id"] for r in lines]
    # On a CPU the noise is the host's: an A/A pair must compare (not invalid), and whether it
    # passes is the H200 run's question, not this test's.
    aa_verdict = by_id["aa-01"]["verdict"]
    assert aa_verdict != "invalid" and by_id["aa-01"]["setting"] is None
    for record in records:
        assert record["rounds"] == 1 and record["duration_s"] > 0
        report = Report.model_validate_json(gzip.decompress(
            (out / "pairs" / record["pair_id"] / "report.json.gz").read_bytes()))
        assert report.verdict == record["verdict"] and report.rounds == record["rounds"]
        assert [len(a.gpu_ms_per_step.values) for a in report.batch_sizes[0].arms] == [2 * record["rounds"]] * 2
        assert math.isfinite(record["gpu_ms_change"]["p_value"])
        # a CPU has no profiler trace: no cause is claimed
        assert record["traced"] is False and record["cause"] is None
        if record["setting"] is not None:
            assert record["setting"] == settings[record["kind"]]
    assert [p["label"] for p in sizing["points"]] == ["base", "split", "idle-1000us", "idle-3000us", "long-kv-1"]
    assert all(p["timer"] == "perf_counter" for p in sizing["points"])

    assert summary["complete"] is True and summary["done"] == 3
    # A busy CPU's tok/s is often too noisy for any threshold that guards: then the calibration
    # is refused, said once, and the pairs run at measure.threshold_pct, as a runner without a
    # thresholds file would. Which of the two happened is read from the calibration.
    calibration = json.loads((out / "calibration.json").read_text())
    if "refused" in calibration:
        assert "calibration: refused, the pairs run at measure.threshold_pct (1%): this runner is too noisy" in (
            first.stderr)
        assert not (out / "thresholds.toml").exists() and summary["thresholds"] is None
        assert {(r["threshold_pct"], r["tok_threshold_pct"]) for r in records} == {(1.0, 1.0)}
        assert "refused to suggest thresholds: this runner is too noisy" in (out / "summary.md").read_text()
        summary["thresholds"] = {"gpu_ms_pct": 1.0, "tok_per_s_pct": 1.0}  # what they ran at
    else:
        assert {r["threshold_pct"] for r in records} == {summary["thresholds"]["gpu_ms_pct"]}
    # tok/s too noisy to gate is written as none and informs at GPU ms per step's threshold
    tok_pct = summary["thresholds"]["tok_per_s_pct"] or summary["thresholds"]["gpu_ms_pct"]
    assert {r["tok_threshold_pct"] for r in records} == {tok_pct}
    # the floor re-decision is there only when the pairs ran above the floor (a CPU's noise
    # puts them far above it, but the test reads it from the calibration, not from hope)
    above_floor = summary["thresholds"]["gpu_ms_pct"] > 0.25
    roles = ["as run", "own", *(["floor"] if above_floor else []), "default"]
    assert [d["role"] for d in summary["decisions"]] == roles
    assert summary["decisions"][-1]["label"] == "re-decided at the default threshold, 1%"
    if above_floor:
        floor = summary["decisions"][2]
        assert (floor["gpu_ms_pct"], floor["tok_per_s_pct"]) == (0.25, tok_pct)
    calibrated = summary["decisions"][0]
    assert {k["kind"]: k["pairs"] for k in calibrated["kinds"]} == {r["kind"]: 1 for r in records}
    assert calibrated["verdicts"]["aa-01"] == aa_verdict
    assert calibrated["gpu_ms_pct"] == summary["thresholds"]["gpu_ms_pct"]
    # pairs run under today's rule, decided again by it offline from their figures: the same
    assert summary["decisions"][1]["verdicts"] == calibrated["verdicts"]
    markdown = (out / "summary.md").read_text()
    assert "no trace" in markdown and f"| aa-01 | A/A | {aa_verdict} |" in markdown
    # every pair of the folder, and the last invocation's own plan (every kind, by default)
    assert markdown.splitlines()[2] == ("3 pairs in this folder. The last invocation planned 3 "
                                        "(aa 1, idle-1 1, kernel-1 1): 3 done (complete).")
    # the idle heads change a setting capture reads; the A/A and kernel heads do not
    assert {r["pair_id"]: r["capture_changed"] for r in records} == {
        "aa-01": False, "idle-1-01": True, "kernel-1-01": False}
    assert all(r["title"] for r in records)
    invocations = (out / "invocations.txt").read_text().splitlines()
    assert len(invocations) == 3 and all(i.startswith("python -m validation injected --out ") for i in invocations)

    merged = _validate("--out", str(out), "--summarise-only", "--jsonl", str(out / "pairs.jsonl"))
    assert merged.returncode == 0, merged.stderr
    assert "3 pair id(s) appear more than once" in merged.stderr
    rebuilt = json.loads((out / "summary.json").read_text())
    assert rebuilt["done"] == 3 and rebuilt["complete"] is True  # the plan of the run, not the defaults
    assert rebuilt["planned"] == dict.fromkeys(["aa", "idle-1", "kernel-1"], 1)

    changed = _validate(*common[:-len(TINY)], *TINY[:1], "13", *TINY[2:], "--resume")
    assert changed.returncode == 2 and "was run with steps = 12, not 13" in changed.stderr

    # a later call that plans one kind only: the other kinds' pairs stay in the folder but are not its plan
    narrower = _validate(*common, "--resume", "--kinds", "kernel-1=2", "--budget-s", "1")
    assert narrower.returncode == 0, narrower.stderr
    assert "pairs, 1 done, 1 to run;" in narrower.stderr
    last = narrower.stderr.splitlines()[-1]
    assert last.endswith("] incomplete: 1 of 2 planned pairs are in; continue with --resume")
    narrowed = json.loads((out / "summary.json").read_text())
    assert narrowed["done"] == 1 and narrowed["planned"] == {"kernel-1": 2}
    assert [k["kind"] for k in narrowed["decisions"][0]["kinds"]] == [r["kind"] for r in records]  # all still shown


def test_near_the_end_of_the_budget_a_shorter_kind_goes_first() -> None:
    settings = SMALL_RUN
    def done(kind: str, seconds: list[float]) -> list[PairRecord]:
        return [_line(f"{kind}-{i:02d}", kind, s) for i, s in enumerate(seconds, start=1)]

    records = done("idle-1", [140.0, 62.0, 144.0]) + done("aa", [59.0, 74.0, 70.0])
    pending = ["idle-1", "aa", "kernel-0.5"]
    assert first_that_fits(pending, records, settings, 7.0, Budget(None)) == (0, 74.0)
    assert first_that_fits(pending, records, settings, 7.0, Budget(100)) == (1, 74.0)  # aa's longest is 74 s
    assert first_that_fits(pending, records, settings, 7.0, Budget(60)) == (None, 74.0)
    # kernel-0.5 has no pairs of its own yet: it may take as long as the longest of any kind
    assert first_that_fits(["kernel-0.5"], records, settings, 7.0, Budget(100)) == (None, 144.0)
    # one or two pairs of a kind are not enough to go by
    few = records[:3] + records[3:3 + KIND_HISTORY - 1]
    assert first_that_fits(["aa"], few, settings, 7.0, Budget(100)) == (None, 144.0)
