"""The whole `guard run` pipeline on real git repositories, in real subprocesses."""

from __future__ import annotations

import json
import math
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from guard.config import METRICS
from guard.measure import interleave
from guard.report import SCHEMA_VERSION
from tests.conftest import commit_all, git
from guard.calibrate import calibrate
from guard.cli import main
from tests.standin import Process, StandIn, run_in_process
from tests.workload_sources import BUSY_TOKENS, busy_workload

CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1, 2]
steps = 12
warmup_steps = 2
tok_per_s_min_s = 0.2
warmup_max_s = 0.1
[build]
method = "{method}"
install = "{install}"
[measure]
repeats = {repeats}
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
"""


def write_workload(repo: Path, work: int, token_expr: str = BUSY_TOKENS, shift: int = 0) -> None:
    (repo / "wl.py").write_text(busy_workload(work, shift, token_expr))


def make_repo(
    tmp_path: Path, method: str = "none", install: str = "", repeats: int = 3, files: dict[str, str] | None = None,
    config: str | None = None,
) -> Path:
    """main holds the config (the base's, which the guard reads); head is branch feature."""
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(config or CONFIG.format(method=method, install=install, repeats=repeats))
    write_workload(repo, work=3000)
    for name, text in (files or {}).items():
        (repo / name).write_text(text)
    commit_all(repo, "base workload")
    git(repo, "checkout", "--quiet", "-b", "feature")
    return repo


def guard_run(repo: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out), *extra],
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_slower_head_is_a_regression(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write_workload(repo, work=30000)  # ten times the work per step
    commit_all(repo, "make decode ten times slower")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    assert proc.returncode == 1, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "regression"
    assert report["hash_match"] is True
    # a workload that does not compile gets no unmeasured process, though each writes its bytecode
    assert report["compile_caches"] is True and report.get("compile_filled", []) == []
    assert not any("unmeasured process" in line for line in proc.stderr.splitlines())
    for batch in report["batch_sizes"]:
        assert batch["verdict"] == "regression"
        assert batch["gpu_ms_change"]["pct"] > 100  # ten times the loop: far beyond +100%
    comment = (out / "comment.md").read_text()
    assert "make decode ten times slower" in comment
    assert comment.splitlines()[1].startswith("**Decode ") and re.search(r"\d(%|x) slower at batch size ",
                                                                          comment.splitlines()[1])
    assert "; the output tokens are identical in every process." in comment
    # progress is shown for every process, in interleaved order
    runs = [line for line in proc.stderr.splitlines() if re.search(r"\] (base|head) repeat ", line)]
    # in mirrored rounds: base, head, then head, base; a confirmation round (the busy CPU's noise
    # may leave a batch size undecided after the first: max_rounds 2), or a slow process measured
    # again in its place, goes on in the same pattern
    repeats = len(list((out / "runs").glob("base-[0-9]*.spec.json")))
    assert repeats >= 3 * report["rounds"] and len(runs) == 2 * repeats
    assert [("base" in r, "head" in r) for r in runs] == [
        (arm == "base", arm == "head") for arm, _ in interleave(["base", "head"], repeats)]
    # by default the first process of each arm is asked for the profiled pass, no later one
    specs = {path.name: json.loads(path.read_text()) for path in (out / "runs").glob("*.spec.json")}
    assert {name: spec["profile_steps"] for name, spec in specs.items() if name != "reference.spec.json"} == {
        f"{arm}-{repeat}.spec.json": 64 if repeat < 1 else 0 for arm in ("base", "head") for repeat in range(repeats)}
    # tok/s from the configured seconds of decode, every process alike
    for arm in ("base", "head"):
        for repeat in range(repeats):
            result = json.loads((out / "runs" / f"{arm}-{repeat}.json").read_text())
            for run in result["runs"]:
                assert run["timed_s"] >= 0.2 and run["timed_passes"] > 1 and run["gc_disabled"]


def test_different_tokens_make_the_comparison_invalid(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "note.txt").write_text("off by one from step 5\n")
    commit_all(repo, "off by one from step 5")
    # head generates another token from step 5 on (steps count warmup, from 1)
    standin = StandIn(token=lambda p, _bs, step, row: (step * 7 + row + (p.arm == "head" and step >= 5)) % 101)
    run = run_in_process(repo, tmp_path / "out", standin)
    assert run.exit_code == 3  # invalid: compared, and not comparable
    assert run.report.verdict == "invalid" and run.report.hash_match is False
    mismatch = run.report.batch_sizes[0].mismatch
    assert mismatch is not None and mismatch.model_dump() == {
        "step": 5, "sequence": 0, "expected": (5 * 7) % 101, "found": (5 * 7 + 1) % 101}
    assert "first at step 5" in run.comment


def test_nondeterministic_workload_is_invalid(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    (repo / "note.txt").write_text("tokens depend on the process\n")
    commit_all(repo, "tokens depend on the process")
    standin = StandIn(token=lambda p, _bs, step, row: (step + row + (p.number if p.arm == "head" else 0)) % 101)
    run = run_in_process(repo, tmp_path / "out", standin)
    assert run.exit_code == 3  # invalid: compared, and not comparable
    assert run.report.verdict == "invalid"
    assert any(r.kind == "not_deterministic" and r.arm == "head" for r in run.report.reasons)
    assert not any(r.kind == "not_deterministic" and r.arm == "base" for r in run.report.reasons)


def test_failed_build_keeps_the_other_arm(tmp_path: Path) -> None:
    """The builds are real (a venv each, the install step run as the build user); their
    processes are the stand-in's."""
    repo = make_repo(
        tmp_path, method="venv", install="sh build.sh", repeats=2, files={"build.sh": "echo building fine\n"}
    )
    (repo / "build.sh").write_text("echo compiler exploded: marker-7731 >&2\nexit 4\n")
    commit_all(repo, "break the build")
    standin = StandIn()
    run = run_in_process(repo, tmp_path / "out", standin)
    assert run.exit_code == 3  # invalid: compared, and not comparable
    report = run.report
    assert report.verdict == "invalid"
    base, head = report.arms[0], report.arms[1]
    assert head.status == "build_failed" and "marker-7731" in (head.log_tail or "")
    assert base.status == "ok" and base.repeats == 2
    # the base arm's measurements are kept in the report, and only base ran (its reference process first)
    assert [a.arm for a in report.batch_sizes[0].arms] == ["base"]
    assert {p.arm for p in standin.asked} == {"base"} and len(standin.asked) == 3
    assert "build failed" in run.comment and "marker-7731" in run.comment


def test_bad_ref_is_one_message(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    proc = guard_run(repo, tmp_path / "out", "--base", "no-such-branch")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "no-such-branch" in proc.stderr


SLOW_ENV = 'pass_env = ["SLOW_COUNTER", "SLOW_AT", "SLOW_FACTOR"]\n'
SLEEPY_STEPS = "steps = 96"


def _steady(ms: float, slow_at: int = -1, factor: float = 3.0) -> StandIn:
    """Each process `ms` a step, a thousandth more each repeat, but for the one numbered `slow_at`
    (from 0, the reference process first), `factor` times as slow."""
    return StandIn(step_ms=lambda p, _bs: ms * (1 + 0.001 * p.repeat) * (factor if p.number == slow_at else 1.0))


def test_every_run_names_its_slow_processes_and_their_rate(tmp_path: Path) -> None:
    """One process of the run (the 4th measured) is three times as slow per step: the progress
    output, report.json and the comment name it, and the report holds up when read back."""
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]")
    repo = make_repo(tmp_path, config=config.replace("[measure]", "[measure]\nconfirm = false"))
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    standin = _steady(2.0, slow_at=4)
    run = run_in_process(repo, tmp_path / "out", standin)
    assert run.exit_code in (0, 1, 4), run.text  # a verdict, any
    slow_one = standin.asked[4]
    figures = {(p.arm, p.repeat + 1): run.result(p.arm, p.repeat)["runs"][0]["gpu_ms_per_step"]
               for p in standin.asked if p.mode == "measure"}
    # its arm's median as the run finds it: of the logs, over the 4 processes the arm ran
    median = math.exp(statistics.median(math.log(v) for (a, _), v in figures.items() if a == slow_one.arm))
    off_pct = (figures[(slow_one.arm, slow_one.repeat + 1)] / median - 1) * 100
    named = f"{slow_one.arm} repeat {slow_one.repeat + 1} at batch size 1, CPU ms per step {off_pct:+.2f}%"

    progress = [line for line in run.progress if "Slow processes: " in line]
    assert len(progress) == 1 and named in progress[0], run.text
    # rule 3 sets it aside and measures each arm once more in its place: 8 processes
    assert "slow processes set aside at batch size 1: 1 more per arm of base and head" in run.text
    assert re.search(r"Slow processes: 1 of 8 \(\d+%; 95% interval [\d.]+% to \d+%\)", progress[0])
    slow = run.report.slow_processes
    assert slow is not None and slow.processes == 8
    aside = run.report.batch_sizes[0].set_aside
    assert [(s.arm, s.repeat, s.metric) for s in aside] == [(slow_one.arm, slow_one.repeat + 1, "gpu_ms")]
    assert "The decision set 1 of these aside" in run.comment
    assert {"arm": slow_one.arm, "repeat": slow_one.repeat + 1, "batch_size": 1, "metric": "gpu_ms"}.items() <= next(
        s.model_dump() for s in slow.slow if s.metric == "gpu_ms" and s.arm == slow_one.arm).items()
    environment = run.comment.split("<summary>Environment</summary>", 1)[1]
    assert named in environment

    # read back, the report holds up; one that names a process its figures do not is refused
    assert main(["summary", "--report", str(run.out / "report.json")]) == 0
    report = json.loads((run.out / "report.json").read_text())
    report["slow_processes"]["slow"] = [s for s in report["slow_processes"]["slow"] if s["arm"] != slow_one.arm]
    (tmp_path / "forged.json").write_text(json.dumps(report))
    assert main(["summary", "--report", str(tmp_path / "forged.json")]) == 2


def _same(tmp_path: Path, config: str, base: str = "main") -> Path:
    """A repository whose head (branch `same`, off `base`) changes nothing."""
    repo = make_repo(tmp_path, config=config)
    if base == "main":
        git(repo, "checkout", "--quiet", "main")
    git(repo, "checkout", "--quiet", "-b", "same")
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    return repo


# Delays of 1, 2 and 3 ms in turn, head's the other way round: both arms the same, with a spread far too large
# to decide
def _jitter(process: Process, _batch_size: int) -> float:
    turn = process.repeat % 3
    return float(1 + turn if process.arm == "base" else 3 - turn)


def _wide(process: Process, _batch_size: int) -> float:
    """Each arm's processes at 1, 1.15 and 1.32 ms a step, in turn: an unchanged commit whose
    spread (about 14%) leaves a 20% threshold open after 2 rounds of 3, but not so wide that no
    round could decide it (the processes it would take are counted, not more than 200)."""
    turn = process.repeat % 3
    return 1.15 ** (turn if process.arm == "base" else 2 - turn)


def test_noisy_result_gets_a_confirmation_round_then_stays_inconclusive(tmp_path: Path) -> None:
    repo = _same(tmp_path, CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]").replace(
        "[measure]", "[measure]\nthreshold_pct = 20.0"))
    standin = StandIn(step_ms=_wide)
    run = run_in_process(repo, tmp_path / "out", standin, head="same")
    report = run.report
    # the reference process, then 2 arms x 3 repeats x 2 rounds, one process each
    assert len(standin.asked) == 13
    assert "confirmation round 2 of at most 2" in run.text
    assert report.rounds == 2 and report.rule.looks == 2 and report.schema_version == SCHEMA_VERSION
    assert report.rounds_stopped == "max_rounds"
    assert [a.repeats for a in report.arms] == [6, 6]
    assert report.verdict == "inconclusive" and run.exit_code == 4  # undecided: neither a pass nor a regression
    (batch,) = report.batch_sizes
    assert batch.look == 2 and batch.decided_by == "gpu_ms" and report.reasons == []
    # the second of 2 looks spends what the first (62%, Pocock-type) left, over 2 families x 1 batch size
    assert batch.alpha_per_look == pytest.approx((0.01 - 0.01 * math.log(1 + (math.e - 1) / 2)) / (2 * 1))
    assert batch.gpu_ms_bounds is not None
    assert batch.gpu_ms_bounds.ci_low_pct <= 0 and batch.gpu_ms_bounds.ci_high_pct >= 20.0
    # the comment names the processes that would decide it
    needed = batch.repeats_to_decide
    assert needed is not None and needed > 6
    count = f"about {max(needed, 5)}"
    assert "from none after its confirmation round." in run.comment and "too noisy to tell a" in run.comment
    assert run.comment.splitlines()[3].startswith(f"**Needs {count} processes per arm to decide** (this run: 6)")
    assert "3 more in a confirmation round for batch size 1 (stopped at the most rounds allowed)" in run.comment


def test_a_confirmation_round_measures_only_the_batch_sizes_left_undecided(tmp_path: Path) -> None:
    """Batch size 1 takes a steady 2 ms a step and passes a 20% threshold in the first round;
    batch size 2 takes 1-1.17 ms a step and stays open after it, within reach of a second round.
    The second round's processes run batch size 2 alone, and batch size 1 keeps its first round."""
    repo = _same(tmp_path, CONFIG.format(method="none", install="", repeats=4).replace(
        "[measure]", "[measure]\nthreshold_pct = 20.0"))
    standin = StandIn(step_ms=lambda p, size: 1.08 ** (p.repeat % 3 if p.arm == "base" else 2 - p.repeat % 3)
                      if size == 2 else 2.0 * (1 + 0.001 * p.repeat))
    run = run_in_process(repo, tmp_path / "out", standin, head="same")
    report = run.report
    assert "batch size(s) [2] undecided: confirmation round 2 of at most 2, 4 repeats per arm" in run.text
    first, second = report.batch_sizes
    assert (first.verdict, first.look, [a.repeats for a in first.arms]) == ("pass", 1, [4, 4])
    assert second.look == 2 and [a.repeats for a in second.arms] == [8, 8]
    assert report.verdict == second.verdict and run.exit_code == {"pass": 0}.get(second.verdict, 4), run.text
    for arm in ("base", "head"):
        sizes = [[r["batch_size"] for r in run.result(arm, repeat)["runs"]] for repeat in range(8)]
        assert sizes == [[1, 2]] * 4 + [[2]] * 4
    assert [a.repeats for a in report.arms] == [8, 8]  # processes per arm, of both rounds


def test_a_confirmation_round_runs_base_and_head_and_not_the_ablation_arms(tmp_path: Path) -> None:
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]").replace(
        "[measure]", "[measure]\nthreshold_pct = 20.0")
    repo = _same(tmp_path, config + '[[arms]]\nname = "again"\nfrom = "head"\n', base="feature")
    standin = StandIn(step_ms=_wide)
    run = run_in_process(repo, tmp_path / "out", standin, base="feature", head="same")
    assert run.report.rounds == 2, run.text
    assert {a.name: a.repeats for a in run.report.arms} == {"base": 6, "head": 6, "again": 3}
    # the reference process, 3 arms x 3 repeats, then 2 arms x 3 repeats
    assert len(standin.asked) == 16 and {p.arm for p in standin.asked[10:]} == {"base", "head"}
    assert not (run.out / "runs" / "again-3.json").exists() and (run.out / "runs" / "head-5.json").exists()


def test_ablation_arm_reuses_a_build_with_its_env(tmp_path: Path) -> None:
    config = CONFIG.format(method="none", install="", repeats=2).replace("[1, 2]", "[1]")
    config += '[[arms]]\nname = "slow"\nfrom = "head"\nenv = { SLOWER = "4" }\nlabel = "head, four times the delay"\n'
    repo = make_repo(tmp_path, config=config.replace("repeats = 2", "repeats = 2\nconfirm = false"))
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    # the stand-in reads the arm's own variables, as a process does its environment
    standin = StandIn(step_ms=lambda p, _bs: 2.0 * float(p.env.get("SLOWER", "1")) * (1 + 0.001 * p.repeat))
    run = run_in_process(repo, tmp_path / "out", standin)
    report = run.report
    assert [a.name for a in report.arms] == ["base", "head", "slow"], run.text
    slow = report.arms[2]
    assert slow.source == "head" and slow.sha == report.arms[1].sha and slow.repeats == 2
    medians = {a.arm: a.gpu_ms_per_step.median for a in report.batch_sizes[0].arms}
    assert medians["slow"] == pytest.approx(4 * medians["head"])
    assert "head, four times the delay (head build" in run.comment
    runs = [line for line in run.progress if "/6]" in line]
    assert [line.split("] ")[1].split(" ")[0] for line in runs] == ["base", "head", "slow", "slow", "head", "base"]


def test_calibrate_writes_thresholds_that_run_then_uses(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, config=CONFIG.format(method="none", install="", repeats=5))
    out = tmp_path / "thr.toml"
    # every process about 2 ms a step, within a few tenths of a percent of the others
    standin = StandIn(step_ms=lambda p, size: 2.0 * size ** 0.5 * (1 + 0.003 * ((p.number * 7) % 5 - 2)))
    lines: list[str] = []
    calibrate(repo, "main", None, out, lines.append, thresholds_pct=[30], harness=standin)
    from guard.config import load_thresholds

    thresholds = load_thresholds(out)
    text = out.read_text()
    assert "A/A, 5 repeats per side" in text
    from guard.calibrate import calibration_path
    from guard.measure._noise import borrowed_upper_quantile, welch_upper_quantile
    from guard.measure._stats import PASS_RATE

    calibration = json.loads(calibration_path(out).read_text())
    level = calibration["bounds_level"]
    # per batch size and metric: the spread, its upper limit, the smallest threshold 5 repeats
    # support at that limit for a run that borrows the spread, and on a run's own processes
    # alone (recomputed here from the limit, at the rule's level the file names), and the
    # repeats 1% and 30% need
    for batch_size, noise in zip((1, 2), calibration["noise"], strict=True):
        for label, key in (("GPU ms per step", "gpu_ms"), ("tok/s", "tok_per_s")):
            line = re.search(
                rf"bs {batch_size}, {re.escape(label)}: within-side sd ([\d.]+)% \(upper 95% limit ([\d.]+)%, "
                r"(\d+) processes, (\d+) degrees of freedom\); smallest threshold at 5 repeats per arm ([\d.]+)% "
                r"\(a run borrowing this spread; ([\d.]+)% on its own processes alone\); "
                r"(about \d+|more than 200) repeats per arm for 1% \(measure.threshold_pct\); "
                r"(about \d+|more than 200) repeats per arm for 30%\.", text)
            assert line, text
            sd, limit, processes, dof, smallest, alone = (float(line.group(i)) for i in range(1, 7))
            assert limit > sd and dof == processes - 2 and processes <= 10
            exact = noise[key]
            factor = borrowed_upper_quantile(5, level, PASS_RATE, int(dof),
                                             round(exact["sd_pct"] / exact["sd_limit_pct"], 4))
            assert exact["supported_pct"] == pytest.approx(math.expm1(factor * exact["sd_limit_pct"] / 100) * 100,
                                                           rel=1e-6)
            assert smallest == pytest.approx(exact["supported_pct"], abs=0.005)  # the text's two decimals
            assert alone == pytest.approx(
                math.expm1(welch_upper_quantile(5, level, PASS_RATE) * exact["sd_limit_pct"] / 100) * 100, abs=0.005)
    # the spreads are kept with the thresholds, for the run to borrow
    assert [(s.batch_size, s.metric) for s in thresholds.spreads] == [
        (1, "gpu_ms"), (1, "tok_per_s"), (2, "gpu_ms"), (2, "tok_per_s")]
    # each threshold is the widest batch size's supported figure, rounded up to the next tenth, and at
    # least 0.25%: compared at the figures the file keeps, by the rule that wrote it, never at rounded ones
    for metric, key in (("gpu_ms_pct", "gpu_ms"), ("tok_per_s_pct", "tok_per_s")):
        widest = max(n[key]["supported_pct"] for n in calibration["noise"])
        tenths = math.ceil(widest / 0.1 - 1e-9)
        assert getattr(thresholds, metric) == pytest.approx(max(0.25, tenths / 10))
    assert re.search(r"Slow processes: (none|\d+) of 10 \(", text), text
    assert "bs 1: no profiled pass (no GPU, or workload.profile_steps = 0): no gap figures." in text
    assert (tmp_path / "thr-runs").is_dir()  # the A/A runs are kept beside the file
    # and its figures as fields, named in the last progress line
    suggested, written = calibration["suggested"], thresholds.model_dump()
    spreads = suggested.pop("spreads"), written.pop("spreads")
    assert suggested == pytest.approx(written)
    for kept, read in zip(*spreads, strict=True):  # the file keeps 6 significant digits of each sd
        assert kept == read | {"sd_pct": pytest.approx(read["sd_pct"], rel=1e-5)}
    assert [n["batch_size"] for n in calibration["noise"]] == [1, 2]

    # The thresholds file, named in the base's config, sets the report's thresholds.
    git(repo, "checkout", "--quiet", "main")
    (repo / "thr.toml").write_text(out.read_text())
    text = (repo / "guard.toml").read_text().replace("[measure]", '[measure]\nthresholds_file = "thr.toml"')
    (repo / "guard.toml").write_text(text)
    commit_all(repo, "use calibrated thresholds")
    git(repo, "checkout", "--quiet", "feature")
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")  # a head that is not its base
    git(repo, "merge", "--quiet", "main")
    run = run_in_process(repo, tmp_path / "out", standin)
    run_out = run.out
    report = json.loads((run_out / "report.json").read_text())
    rule = report["rule"]
    assert rule["gpu_ms"]["pct"] == pytest.approx(thresholds.gpu_ms_pct)
    # what the user feels is held to the larger of the config's 1% and what the runner resolves (rule 5)
    assert thresholds.tok_per_s_pct is not None
    assert rule["tok_per_s"]["pct"] == pytest.approx(max(1.0, thresholds.tok_per_s_pct))
    # a CPU's calibration measures no end-to-end figure
    assert {metric: rule[metric]["source"] for metric in METRICS} == {
        "gpu_ms": "calibrated", "tok_per_s": "calibrated" if thresholds.tok_per_s_pct > 1.0 else "configured",
        "end_to_end_ms": "configured" if thresholds.end_to_end_ms_pct is None else "calibrated",
        "instructions": "configured"}  # a thresholds file writes none for instructions
    # the run checked its spread against each calibrated one, and pooled in those it was not past
    assert rule["spreads"] == [s.model_dump() for s in thresholds.spreads]
    for batch in report["batch_sizes"]:
        checks = {c["metric"]: c for c in batch["borrowed"]}
        assert set(checks) == {"gpu_ms", "tok_per_s"}
        for check in checks.values():
            assert check["borrowed"] is (check["run_sd_pct"] <= check["limit_sd_pct"])
    comment = (run_out / "comment.md").read_text()
    pooled = [c["borrowed"] for b in report["batch_sizes"] for c in b["borrowed"]]
    assert ("pool this run's spread with the calibrated one" in comment) is any(pooled)
    assert ("Not borrowed, as this run's spread was past the calibrated one" in comment) is not all(pooled)
    from guard.report import read_report

    assert read_report(run_out / "report.json").rule.spreads == tuple(thresholds.spreads)  # holds up, read back


def test_a_host_that_cannot_box_stops_a_root_guard_or_runs_as_the_base_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where no cgroup or no namespaces can be made (not root, no delegated subtree, a
    container without its own), a guard run as root stops before anything is built, saying
    what the host lacks, unless the base's config says build.isolation = "auto" (what the host
    gives) or "none" (nothing); the plan then holds what the processes get, the report's fact."""
    from guard import pipeline
    from guard._errors import ConfigError
    from guard.config import ConfigOverrides
    from guard.sandbox import Isolation, _cgroup, _namespace

    repo = make_repo(tmp_path)
    write_workload(repo, work=3001)
    commit_all(repo, "head")
    root = os.geteuid() == 0

    def plan(lines: list[str]) -> pipeline.Plan:
        return pipeline.plan_run(repo, None, "feature", None, None, ConfigOverrides(), lines.append)

    def base_says(isolation: str) -> None:  # the base's config decides, never the head's
        git(repo, "checkout", "--quiet", "main")
        config = repo / "guard.toml"
        text = re.sub(r'(?m)^isolation = ".*"\n', "", config.read_text())
        config.write_text(text.replace("[build]\n", f'[build]\nisolation = "{isolation}"\n', 1))
        commit_all(repo, f"isolation {isolation}")
        git(repo, "checkout", "--quiet", "feature")
        git(repo, "merge", "--quiet", "--no-edit", "main")

    monkeypatch.setattr(_cgroup, "folder", lambda: (None, "cgroup v2 is not mounted here"))
    monkeypatch.setattr(_namespace, "available", lambda: "")
    lines: list[str] = []
    if root:
        with pytest.raises(ConfigError) as caught:
            plan(lines)
        assert caught.value.message.startswith(
            "this host cannot box the pull request's processes (cgroup v2 is not mounted here), and run as root the "
            "guard does not run them unboxed: ")
        assert caught.value.message.endswith('set build.isolation = "none" in the base\'s guard.toml to run them '
                                             "so, which the report and the comment then say")
        monkeypatch.setattr(_cgroup, "folder", lambda: (tmp_path, ""))
        monkeypatch.setattr(_namespace, "available", lambda: "unshare not found")
        with pytest.raises(ConfigError, match=r"cannot box the pull request's processes \(unshare not found\)"):
            plan(lines)
        monkeypatch.setattr(_cgroup, "folder", lambda: (None, "cgroup v2 is not mounted here"))
        monkeypatch.setattr(_namespace, "available", lambda: "")
        base_says("auto")
    got = plan(lines).box
    assert got.isolation == Isolation(requested="auto" if root else "kernel", cgroup=False, namespaces=True,
                                      as_root=root)
    assert "warning: the pull request's processes run without the kernel's box: cgroup v2 is not mounted here" in lines
    assert got.cgroups is None and got.spaces  # what the host gives is used
    base_says("none")
    nothing = plan(lines).box
    assert nothing.isolation == Isolation(requested="none", as_root=root)
    assert nothing.cgroups is None and not nothing.spaces  # nothing, even where the host could
    monkeypatch.setattr(_cgroup, "folder", lambda: (tmp_path, ""))
    base_says("kernel")
    kernel = plan(lines).box
    assert kernel.isolation.boxed() and kernel.cgroups == tmp_path and kernel.spaces
