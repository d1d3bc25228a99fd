"""The whole `guard run` pipeline on real git repositories, in real subprocesses."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guard.report import SCHEMA_VERSION
from tests.conftest import commit_all, git, writable_by_all
from tests.workload_sources import BUSY_TOKENS, JITTER_WORKLOAD, SLEEPY_WORKLOAD, busy_workload

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
    runs = [line for line in proc.stderr.splitlines() if " repeat " in line and "/6]" in line]
    # in mirrored rounds: base, head, then head, base
    assert [("base" in r, "head" in r) for r in runs] == [(True, False), (False, True), (False, True), (True, False),
                                                          (True, False), (False, True)]
    # by default the first two processes of each arm are asked for the profiled pass, not the third
    specs = {path.name: json.loads(path.read_text()) for path in (out / "runs").glob("*.spec.json")}
    assert {name: spec["profile_steps"] for name, spec in specs.items() if name != "reference.spec.json"} == {
        f"{arm}-{repeat}.spec.json": 64 if repeat < 2 else 0 for arm in ("base", "head") for repeat in range(3)}
    # tok/s from the configured seconds of decode, every process alike
    for arm in ("base", "head"):
        for repeat in range(3):
            result = json.loads((out / "runs" / f"{arm}-{repeat}.json").read_text())
            for run in result["runs"]:
                assert run["timed_s"] >= 0.2 and run["timed_passes"] > 1 and run["gc_disabled"]


@pytest.mark.slow
def test_different_tokens_make_the_comparison_invalid(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    # Head generates another token from step 5 on (steps count warmup, from 1).
    write_workload(repo, work=3000, token_expr="(self.t * 7 + row + (1 if self.t >= 5 else 0)) % 101")
    commit_all(repo, "off by one from step 5")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    assert proc.returncode == 2
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "invalid"
    assert report["hash_match"] is False
    mismatch = report["batch_sizes"][0]["mismatch"]
    assert mismatch == {"step": 5, "sequence": 0, "expected": (5 * 7) % 101, "found": (5 * 7 + 1) % 101}
    assert "first at step 5" in (out / "comment.md").read_text()


@pytest.mark.slow
def test_nondeterministic_workload_is_invalid(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    write_workload(repo, work=3000, token_expr="(os.getpid() + self.t + row) % 101")
    commit_all(repo, "tokens depend on the process")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    assert proc.returncode == 2
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "invalid"
    assert any(r["kind"] == "not_deterministic" and r["arm"] == "head" for r in report["reasons"])
    assert not any(r["kind"] == "not_deterministic" and r["arm"] == "base" for r in report["reasons"])


@pytest.mark.slow
def test_failed_build_keeps_the_other_arm(tmp_path: Path) -> None:
    repo = make_repo(
        tmp_path, method="venv", install="sh build.sh", repeats=2, files={"build.sh": "echo building fine\n"}
    )
    (repo / "build.sh").write_text("echo compiler exploded: marker-7731 >&2\nexit 4\n")
    commit_all(repo, "break the build")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert report["verdict"] == "invalid"
    head = next(a for a in report["arms"] if a["name"] == "head")
    base = next(a for a in report["arms"] if a["name"] == "base")
    assert head["status"] == "build_failed"
    assert "marker-7731" in head["log_tail"]
    assert base["status"] == "ok" and base["repeats"] == 2
    # the base arm's measurements are kept in the report
    arms_measured = [a["arm"] for a in report["batch_sizes"][0]["arms"]]
    assert arms_measured == ["base"]
    comment = (out / "comment.md").read_text()
    assert "build failed" in comment and "marker-7731" in comment


def test_bad_ref_is_one_message(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    proc = guard_run(repo, tmp_path / "out", "--base", "no-such-branch")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "no-such-branch" in proc.stderr


SLOW_ENV = 'pass_env = ["SLOW_COUNTER", "SLOW_AT", "SLOW_FACTOR"]\n'
SLEEPY_STEPS = "steps = 96"


@pytest.mark.slow
def test_every_run_names_its_slow_processes_and_their_rate(tmp_path: Path) -> None:
    """One process of the run (the 4th measured) sleeps three times as long per step: the
    progress output, report.json and the comment name it, and the report holds up when read back."""
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]")
    config = config.replace("[measure]", f"{SLOW_ENV}[measure]\nconfirm = false").replace("steps = 12", SLEEPY_STEPS)
    repo = make_repo(tmp_path, config=config, files={"wl.py": SLEEPY_WORKLOAD})
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    counter = writable_by_all(tmp_path / "notes") / "count"
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
        env=os.environ | {"SLOW_COUNTER": str(counter), "SLOW_AT": "4"},
    )
    assert proc.returncode in (0, 1), proc.stderr
    # which process that was, from the processes' own result files
    figures = {}
    for path in (out / "runs").glob("*-[0-9].json"):
        arm, repeat = path.stem.rsplit("-", 1)
        figures[(arm, int(repeat) + 1)] = json.loads(path.read_text())["runs"][0]["gpu_ms_per_step"]
    assert len(figures) == 6
    arm, repeat = max(figures, key=figures.__getitem__)
    median = sorted(v for (a, _), v in figures.items() if a == arm)[1]
    assert figures[(arm, repeat)] > 2.5 * median
    off_pct = (figures[(arm, repeat)] / median - 1) * 100
    named = f"{arm} repeat {repeat} at batch size 1, CPU ms per step {off_pct:+.2f}%"  # timed on a CPU

    progress = [line for line in proc.stderr.splitlines() if "Slow processes: " in line]
    assert len(progress) == 1 and named in progress[0], proc.stderr
    assert re.search(r"Slow processes: \d of 6 \(\d+%; 95% interval [\d.]+% to \d+%\)", progress[0])
    report = json.loads((out / "report.json").read_text())
    slow = report["slow_processes"]
    assert slow["processes"] == 6
    assert {"arm": arm, "repeat": repeat, "batch_size": 1, "metric": "gpu_ms"}.items() <= next(
        s for s in slow["slow"] if s["metric"] == "gpu_ms" and s["arm"] == arm).items()
    comment = (out / "comment.md").read_text()
    environment = comment.split("<summary>Environment</summary>", 1)[1]
    assert named in environment

    # read back, the report holds up; one that names a process its figures do not is refused
    summary = subprocess.run([sys.executable, "-m", "guard", "summary", "--report", str(out / "report.json")],
                             capture_output=True, text=True, timeout=120)
    assert summary.returncode == 0, summary.stderr
    slow["slow"] = [s for s in slow["slow"] if s["arm"] != arm]
    (tmp_path / "forged.json").write_text(json.dumps(report))
    forged = subprocess.run([sys.executable, "-m", "guard", "summary", "--report", str(tmp_path / "forged.json")],
                            capture_output=True, text=True, timeout=120)
    assert forged.returncode == 2 and "slow_processes" in forged.stderr, forged.stderr


def _noisy_repo(tmp_path: Path, config: str, workload: str = JITTER_WORKLOAD) -> tuple[Path, Path]:
    """A repository whose head changes nothing, with the jitter workload; and the file its
    processes count themselves in."""
    repo = make_repo(tmp_path, files={"wl.py": workload})
    (repo / "guard.toml").write_text(config.replace("[measure]", 'pass_env = ["JITTER_COUNTER"]\n[measure]'))
    commit_all(repo, "noisy workload")
    git(repo, "checkout", "--quiet", "main")
    git(repo, "merge", "--quiet", "feature")
    git(repo, "checkout", "--quiet", "-b", "same")
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    return repo, writable_by_all(tmp_path / "notes") / "count"  # the workload counts its processes there


def _run_same(repo: Path, out: Path, counter: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "same", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=os.environ | {"JITTER_COUNTER": str(counter)},
    )


@pytest.mark.slow
def test_noisy_result_gets_a_confirmation_round_then_stays_inconclusive(tmp_path: Path) -> None:
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]")
    repo, counter = _noisy_repo(tmp_path, config)
    out = tmp_path / "out"
    proc = _run_same(repo, out, counter)
    report = json.loads((out / "report.json").read_text())
    # the reference process, then 2 arms x 3 repeats x 2 rounds, one process each
    assert counter.read_text() == "13"
    assert "confirmation round 2 of at most 2" in proc.stderr
    assert report["rounds"] == 2 and report["looks"] == 2 and report["schema_version"] == SCHEMA_VERSION
    assert report["rounds_stopped"] == "max_rounds"
    assert [a["repeats"] for a in report["arms"]] == [6, 6]
    assert report["verdict"] == "inconclusive" and proc.returncode == 0
    (batch,) = report["batch_sizes"]
    assert batch["look"] == 2 and batch["decided_by"] == "gpu_ms" and report["reasons"] == []
    assert batch["alpha_per_look"] == pytest.approx(0.01 / (2 * 3 * 1))  # 2 looks x 3 metrics x 1 batch size
    assert batch["gpu_ms_bounds"]["ci_low_pct"] <= 0 and batch["gpu_ms_bounds"]["ci_high_pct"] >= 1.0
    # the comment names the processes that would decide it (delays of 1-3 ms: far too many)
    needed = batch["repeats_to_decide"]
    count = "more than 200" if needed is None else f"about {needed}"
    comment = (out / "comment.md").read_text()
    assert "from none after its confirmation round; " in comment and "too noisy to tell a" in comment
    assert f"{count} processes per arm would decide it (this run: 6)" in comment
    assert "3 more in a confirmation round for batch size 1 (stopped at the most rounds allowed)" in comment


SPLIT_WORKLOAD = JITTER_WORKLOAD.replace(
    "        self.delay_s = _DELAY_S",
    "        self.delay_s = _DELAY_S if batch_size == 2 else 0.002  # steady at batch size 1",
)


@pytest.mark.slow
def test_a_confirmation_round_measures_only_the_batch_sizes_left_undecided(tmp_path: Path) -> None:
    """Batch size 1 sleeps a steady 2 ms a step and passes a 20% threshold in the first round
    (4 processes per arm: each bound is some 3.3 sds of a process away, so a sd of up to 5%
    passes); batch size 2 takes the jitter's 1-3 ms and stays open. The second round's
    processes run batch size 2 alone, and batch size 1 keeps its first round."""
    config = CONFIG.format(method="none", install="", repeats=4).replace(
        "[measure]", "[measure]\nthreshold_pct = 20.0")
    repo, counter = _noisy_repo(tmp_path, config, SPLIT_WORKLOAD)
    out = tmp_path / "out"
    proc = _run_same(repo, out, counter)
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert "batch size(s) [2] undecided: confirmation round 2 of at most 2, 4 repeats per arm" in proc.stderr
    first, second = report["batch_sizes"]
    assert (first["verdict"], first["look"], [a["repeats"] for a in first["arms"]]) == ("pass", 1, [4, 4])
    assert second["look"] == 2 and [a["repeats"] for a in second["arms"]] == [8, 8]
    assert second["verdict"] in ("at_threshold", "inconclusive") and report["verdict"] == second["verdict"]
    for arm in ("base", "head"):
        sizes = [[run["batch_size"] for run in json.loads((out / "runs" / f"{arm}-{repeat}.json").read_text())["runs"]]
                 for repeat in range(8)]
        assert sizes == [[1, 2]] * 4 + [[2]] * 4
    assert [a["repeats"] for a in report["arms"]] == [8, 8]  # processes per arm, of both rounds


@pytest.mark.slow
def test_a_confirmation_round_runs_base_and_head_and_not_the_ablation_arms(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, files={"wl.py": JITTER_WORKLOAD})
    config = CONFIG.format(method="none", install="", repeats=3).replace("[1, 2]", "[1]")
    config = config.replace("[measure]", 'pass_env = ["JITTER_COUNTER"]\n[measure]')
    (repo / "guard.toml").write_text(config + '[[arms]]\nname = "again"\nfrom = "head"\n')
    commit_all(repo, "noisy workload")
    git(repo, "checkout", "--quiet", "-b", "same")
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    out = tmp_path / "out"
    counter = writable_by_all(tmp_path / "notes") / "count"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--base", "feature", "--head", "same",
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=os.environ | {"JITTER_COUNTER": str(counter)},
    )
    report = json.loads((out / "report.json").read_text())
    # delays of 3, 1, 3 ms for base and 2, 1, 2 for head in the first round: far from decided
    assert report["rounds"] == 2, proc.stderr
    assert {a["name"]: a["repeats"] for a in report["arms"]} == {"base": 6, "head": 6, "again": 3}
    # the reference process, 3 arms x 3 repeats, then 2 arms x 3 repeats
    assert counter.read_text() == "16"
    assert not (out / "runs" / "again-3.json").exists() and (out / "runs" / "head-5.json").exists()


@pytest.mark.slow
def test_ablation_arm_reuses_a_build_with_its_env(tmp_path: Path) -> None:
    config = CONFIG.format(method="none", install="", repeats=2).replace("[1, 2]", "[1]")
    config += '[[arms]]\nname = "slow"\nfrom = "head"\nenv = { SLOWER = "4" }\nlabel = "head, four times the delay"\n'
    repo = make_repo(tmp_path, files={"wl.py": JITTER_WORKLOAD},
                     config=config.replace("repeats = 2", "repeats = 2\nconfirm = false"))
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    out = tmp_path / "out"
    proc = guard_run(repo, out)
    report = json.loads((out / "report.json").read_text())
    names = [a["name"] for a in report["arms"]]
    assert names == ["base", "head", "slow"], proc.stderr
    slow = report["arms"][2]
    assert slow["source"] == "head" and slow["sha"] == report["arms"][1]["sha"] and slow["repeats"] == 2
    stats = {a["arm"]: a["gpu_ms_per_step"]["median"] for a in report["batch_sizes"][0]["arms"]}
    assert stats["slow"] > 3 * stats["head"]  # four times the sleep, measured
    assert "head, four times the delay (head build" in (out / "comment.md").read_text()
    runs = [line for line in proc.stderr.splitlines() if "/6]" in line]
    assert [line.split("] ")[2].split(" ")[0] for line in runs] == ["base", "head", "slow", "slow", "head", "base"]


@pytest.mark.slow
def test_calibrate_writes_thresholds_that_run_then_uses(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, files={"wl.py": SLEEPY_WORKLOAD},
                     config=CONFIG.format(method="none", install="", repeats=5).replace("steps = 12", SLEEPY_STEPS))
    out = tmp_path / "thr.toml"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "calibrate", "--repo", str(repo), "--ref", "main", "--out", str(out),
         "--threshold-pct", "30"],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
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
    supported = {}
    for batch_size, noise in zip((1, 2), calibration["noise"], strict=True):
        for label, metric, key in (("GPU ms per step", "gpu", "gpu_ms"), ("tok/s", "tok", "tok_per_s")):
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
            assert smallest == pytest.approx(math.expm1(factor * exact["sd_limit_pct"] / 100) * 100, abs=0.01)
            assert alone == pytest.approx(
                math.expm1(welch_upper_quantile(5, level, PASS_RATE) * exact["sd_limit_pct"] / 100) * 100, abs=0.01)
            supported.setdefault(metric, []).append(smallest)
    # the spreads are kept with the thresholds, for the run to borrow
    assert [(s.batch_size, s.metric) for s in thresholds.spreads] == [
        (1, "gpu_ms"), (1, "tok_per_s"), (2, "gpu_ms"), (2, "tok_per_s")]
    assert thresholds.gpu_ms_pct == pytest.approx(max(0.25, math.ceil(max(supported["gpu"]) * 10 - 1e-6) / 10),
                                                  abs=0.1)
    assert thresholds.tok_per_s_pct == pytest.approx(max(0.25, math.ceil(max(supported["tok"]) * 10 - 1e-6) / 10),
                                                     abs=0.1)
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
    assert proc.stderr.rstrip().endswith(f"wrote {out} and {tmp_path / 'thr-calibration.json'}")

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
    run_out = tmp_path / "out"
    guard_run(repo, run_out)
    report = json.loads((run_out / "report.json").read_text())
    assert report["threshold_pct"] == pytest.approx(thresholds.gpu_ms_pct)
    assert report["tok_threshold_pct"] == pytest.approx(thresholds.tok_per_s_pct)
    assert report["threshold_sources"] == {  # a CPU's calibration measures no end-to-end figure
        "gpu_ms": "calibrated", "tok_per_s": "calibrated",
        "end_to_end_ms": "gpu_ms_fallback" if thresholds.end_to_end_ms_pct is None else "calibrated"}
    # the run checked its spread against each calibrated one, and pooled in those it was not past
    assert report["calibrated_spreads"] == [s.model_dump() for s in thresholds.spreads]
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

    assert read_report(run_out / "report.json").calibrated_spreads == thresholds.spreads  # holds up, read back
