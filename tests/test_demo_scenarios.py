"""`guard demo --scenario fallback` and `fallback-win`: the repositories they stage, the removed
fallback lines the Cause section names, and whole runs (CPU here; the H200 run at the end)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from guard.cause import find_capture_changes
from guard.demo import make_demo_repo
from guard.demo._scenarios import FALLBACK_LINES
from tests.conftest import git

# each scenario's policy on head, worked out by hand: the next of 1, 2, 4, 8; 9 above them as it is
HEAD_ROWS = {1: 1, 2: 2, 3: 4, 4: 4, 6: 8, 8: 8, 9: 9}
# small enough for a shared CPU; the fallback scenario keeps MoE, with fewer and smaller experts
CPU_OPTIONS = {"fallback": "layers = 1, max_len = 96, moe_ffn = 32, moe_experts = 16",
               "fallback-win": "layers = 1, max_len = 96"}


@pytest.mark.parametrize("scenario", ["fallback", "fallback-win"])
def test_the_head_deletes_the_fallback_lines_and_nothing_else(tmp_path: Path, scenario: str) -> None:
    repo = tmp_path / "repo"
    base, head = make_demo_repo(repo, scenario=scenario)
    assert head == "remove-fallback"
    assert git(repo, "diff", "--name-only", f"main...{head}").splitlines() == ["refengine/engine.py"]
    diff = git(repo, "diff", "--unified=0", f"main...{head}").splitlines()
    removed = [line[1:] for line in diff if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff if line.startswith("+") and not line.startswith("+++")]
    assert added == [] and removed == [line for block in FALLBACK_LINES for line in block.splitlines()]
    # the policy's lines, in the def that replays the graphs, are what the Cause section names
    found = find_capture_changes(repo, base, head, [])
    hunks = [h for f in found.files for h in f.hunks]
    assert [(h.function, h.range.deletion, h.base_lines) for h in hunks] == [("RefEngine.step", True, 2)]
    assert hunks[0].excerpt[0] == "-" + FALLBACK_LINES[1].splitlines()[0].rstrip()
    config = tomllib.loads((repo / "guard.toml").read_text())
    workload = config["workload"]
    assert workload["options"]["capture_batch_sizes"] == [1, 2, 4, 8] and workload["options"]["fallback"] is True
    assert abs(sum(workload["batch_mix"].values()) - 1) < 1e-9
    assert "arms" not in config
    if scenario == "fallback":
        assert workload["options"]["moe_experts"] > 0 and max(map(int, workload["batch_mix"])) > 8
        assert 6 in workload["batch_sizes"]  # a size between the captured ones decides the verdict
    else:
        assert "moe_experts" not in workload["options"]
        assert set(workload["batch_sizes"]) <= {1, 2, 4, 8}  # the captured sizes that carry the traffic
        captured = sum(share for size, share in workload["batch_mix"].items() if int(size) in (1, 2, 4, 8))
        assert captured >= 0.9


def test_options_given_replace_the_scenarios_own(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_demo_repo(repo, scenario="fallback", options_toml="moe_experts = 8, max_len = 96")
    options = tomllib.loads((repo / "guard.toml").read_text())["workload"]["options"]
    assert options["moe_experts"] == 8 and options["max_len"] == 96 and options["moe_top_k"] == 2


def test_the_default_scenario_is_the_piecewise_one(tmp_path: Path) -> None:
    _, head = make_demo_repo(tmp_path / "a")
    _, named = make_demo_repo(tmp_path / "b", scenario="piecewise")
    assert head == named == "piecewise-capture"
    assert (tmp_path / "a" / "guard.toml").read_text() == (tmp_path / "b" / "guard.toml").read_text()


@pytest.mark.parametrize("args,said", [
    (["--scenario", "fallbak"], "--scenario: there is no scenario 'fallbak'; choose one of piecewise, fallback, "
                                "fallback-win"),
    (["--scenario", "fallback", "--options", "layers = "], "--options: not valid TOML"),
])
def test_a_bad_scenario_or_options_is_one_line_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    work = tmp_path / "work"
    proc = subprocess.run([sys.executable, "-m", "guard", "demo", "--out", str(tmp_path / "out"), "--workdir",
                           str(work), *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and said in proc.stderr and "Traceback" not in proc.stderr
    assert not (work / "engine-repo").exists()  # nothing was made


def _timed_sizes(out: Path, arm: str) -> list[int]:
    """The batch sizes a process's timed mix steps decoded, from the rows it wrote (a CPU times
    its end-to-end pass, after the lead step and the warmup)."""
    result = json.loads((out / "runs" / f"{arm}-0.json").read_text())
    mix = result["mix"]
    return [len(row) for row in mix["tokens"][1 + mix["warmup_steps"]: 1 + mix["warmup_steps"] + mix["steps"]]]


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["fallback", "fallback-win"])
def test_a_fallback_scenario_end_to_end_on_cpu(tmp_path: Path, scenario: str) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "demo", "--scenario", scenario, "--out", str(out), "--workdir",
         str(tmp_path / "work"), "--steps", "20", "--warmup-steps", "2", "--repeats", "2", "--max-rounds", "1",
         "--tok-per-s-min-s", "0", "--warmup-max-s", "0", "--options", CPU_OPTIONS[scenario]],
        capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode in (0, 1, 4), proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert (report["verdict"] == "regression") == (proc.returncode == 1)
    assert (report["verdict"] in ("at_threshold", "inconclusive")) == (proc.returncode == 4)
    mix = report["mix"]
    base, head = (next(a for a in mix["arms"] if a["arm"] == name) for name in ("base", "head"))
    sizes = _timed_sizes(out, "head")
    assert sizes == _timed_sizes(out, "base") and len(sizes) == 20
    real, computed = sum(sizes), sum(HEAD_ROWS[s] for s in sizes)
    # base runs every size at its own shape (the fallback), head pads between the captured sizes
    assert base["padding_waste"] == 0 and base["useful_work_coverage"] == 1
    assert head["useful_work_coverage"] == pytest.approx(real / computed)
    assert head["padding_waste"] == pytest.approx(1 - real / computed)
    assert {s["batch_size"]: s["padded_to"] for s in head["sizes"]} == {s: HEAD_ROWS[s] for s in set(sizes)}
    assert {s["batch_size"]: s["share"] for s in head["sizes"]} == {s: n / 20 for s, n in Counter(sizes).items()}
    # a CPU replays no graph: the coverage says so on both sides (the H200 run shows it rise)
    assert base["capture_coverage"] == head["capture_coverage"] == 0
    assert report["mix_traces"] is None  # no profiled pass on a CPU
    captured_share = sum(n for s, n in Counter(sizes).items() if s in (1, 2, 4, 8)) / 20
    if scenario == "fallback":
        assert head["padding_waste"] > 0.05 and captured_share < 0.8
        assert head["imbalance"] is not None and base["imbalance"]["steps"] == head["imbalance"]["steps"]
        assert "rows not in self.capture_batch_sizes" in (out / "comment.md").read_text()  # the Cause section
    else:
        # the traffic sits at the captured sizes: little padding, and no MoE to pad to capacity
        assert 0 < head["padding_waste"] < 0.05 and captured_share >= 0.9
        assert head["imbalance"] is None


def _gpu_demo(tmp_path: Path, scenario: str) -> tuple[subprocess.CompletedProcess[str], dict, str]:  # type: ignore[type-arg]
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "demo", "--scenario", scenario, "--out", str(out),
                           "--workdir", str(tmp_path / "work")], capture_output=True, text=True, timeout=1200)
    (out / "progress.log").write_text(proc.stderr)  # kept beside the report, for the run's record
    assert proc.returncode in (0, 1, 4), proc.stderr
    return proc, json.loads((out / "report.json").read_text()), (out / "comment.md").read_text()


def _mix_arms(report: dict) -> tuple[dict, dict]:  # type: ignore[type-arg]
    arms = {a["arm"]: a for a in report["mix"]["arms"]}
    return arms["base"], arms["head"]


@pytest.mark.gpu
@pytest.mark.slow
def test_removing_the_fallback_is_a_regression_named_padding_on_gpu(tmp_path: Path) -> None:
    proc, report, comment = _gpu_demo(tmp_path, "fallback")
    assert report["verdict"] == "regression" and proc.returncode == 1
    six = next(b for b in report["batch_sizes"] if b["batch_size"] == 6)
    assert six["verdict"] == "regression"
    base, head = _mix_arms(report)
    # graphs for more of the steps, less of the work useful: the note's two coverages part ways
    assert head["capture_coverage"] > base["capture_coverage"] > 0
    assert head["useful_work_coverage"] < base["useful_work_coverage"] == 1
    assert head["gpu_ms_per_real_token"] > base["gpu_ms_per_real_token"]
    sizes = {s["batch_size"]: s for s in head["sizes"]}
    assert sizes[3]["path"] == "graph" and sizes[3]["padded_to"] == 4 and sizes[9]["path"] == "eager"
    traces = report["mix_traces"]
    assert traces is not None and {a["arm"] for a in traces["arms"]} == {"base", "head"}
    assert all(a["figures"] is not None for a in traces["arms"]) and traces["diff"] is not None
    # the cause named: padding, for a fixed size or over the mix (its cause, or a candidate kept
    # beside capacity waste under imbalance)
    explanation = report["explanation"]
    named = {c["kind"] for c in explanation["causes"]}
    mix_cause = explanation.get("mix") or {}
    named |= {mix_cause.get("cause"), *mix_cause.get("candidates", [])}
    assert "padding" in named, explanation
    assert "RefEngine.step" in comment and "rows not in self.capture_batch_sizes" in comment


@pytest.mark.gpu
@pytest.mark.slow
def test_removing_the_fallback_where_traffic_is_captured_is_not_flagged_on_gpu(tmp_path: Path) -> None:
    proc, report, _ = _gpu_demo(tmp_path, "fallback-win")
    assert report["verdict"] != "regression", report["verdict"]
    assert proc.returncode == (0 if report["verdict"] in ("pass", "improvement") else 4)  # undecided: exit 4
    base, head = _mix_arms(report)
    assert head["capture_coverage"] > base["capture_coverage"] >= 0.9
    assert head["padding_waste"] < 0.05
    assert report["mix_traces"] is not None


def test_max_rounds_under_one_is_refused_by_name_before_anything_is_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    from guard.cli import main

    with pytest.raises(SystemExit) as stopped:
        main(["demo", "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "work"), "--max-rounds", "0"])
    assert stopped.value.code == 2
    assert "argument --max-rounds: expected a whole number of 1 or more, got '0'" in capsys.readouterr().err
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()
