"""The analysis across ranks wired into the run: `guard run` on two gloo ranks of this CPU
profiles every rank, analyses each profiled process's traces together, diffs base's with
head's, and the explain stage and the comment say what the ranks found; a report read back
makes that diff again from the per-rank figures it keeps, and one whose findings were edited
is refused.

The head's rank 1 sleeps at the end of every step (the others wait for it in the next step's
first collective): the timed steps end last on it, and its profiled pass shows the others
waiting for it. Communication that no longer overlaps cannot be made on two shared CPU cores
(gloo's thread and the compute it would hide behind share them), so that finding is carried
through the same stages from synthetic GPU traces of two ranks."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from guard.explain import RankCause
from guard.report import Report, read_report, render_comment
from guard.report.fold import above_the_fold
from guard.trace import rank_section_diff, rank_trace_sections
from tests.conftest import commit_all, git
from tests.report_fixtures import explained
from tests.test_ranks import SPEC, WORKLOAD
from tests.test_trace_ranks import CLOCK_NS, OVERLAPPED, SERIAL, STEPS, rank_trace

LAG_S = 0.02  # rank 1's sleep after each of head's steps: about three times base's step or more
TIMED_STEPS = 36  # a timed straggler needs 32 steps or more
PROFILED_STEPS = 12

CONFIG = f"""
[workload]
entry = "wl.py:make"
options = {{ {", ".join(f"{k} = {v}" for k, v in SPEC.items())} }}
batch_sizes = [2]
steps = {TIMED_STEPS}
warmup_steps = 2
tok_per_s_min_s = 0
warmup_max_s = 0
profile_steps = {PROFILED_STEPS}
world_size = 2
[build]
method = "none"
[measure]
repeats = 4
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
alpha = 0.4
"""
# alpha: this CPU is shared with other work, and base's processes spread over a factor of 4
# there; the lag's effect is far larger, and what is tested is what the ranks say of it


@pytest.fixture(scope="module")
def lagging_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The out folder of `guard run` whose head's rank 1 lags every step."""
    tmp = tmp_path_factory.mktemp("rank-findings")
    repo = tmp / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(CONFIG)
    (repo / "wl.py").write_text(WORKLOAD.format(lag_s=0.0, fail_rank=-1))
    commit_all(repo, "base")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "wl.py").write_text(WORKLOAD.format(lag_s=LAG_S, fail_rank=-1))
    commit_all(repo, "rank 1 lags")
    out = tmp / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    return out


@pytest.mark.slow
def test_guard_run_on_two_ranks_names_the_rank_that_held_the_others_back(lagging_run: Path) -> None:
    report = read_report(lagging_run / "report.json")  # its diff across the ranks made again as it is read
    assert report.verdict == "regression", [(a.arm, a.gpu_ms_per_step.values) for a in report.batch_sizes[0].arms]
    assert report.traces == []  # a CPU's traces hold no kernels: the single-trace analysis reads none
    (section,) = report.rank_traces
    assert section.batch_size == 2 and section.profile_steps == PROFILED_STEPS
    arms = {a.arm: a for a in section.arms}
    for name in ("base", "head"):
        assert arms[name].error is None and arms[name].repeats == [0]  # profile_repeats: the first one
        for repeat, paths in zip(arms[name].repeats, arms[name].traces):
            assert [Path(p).name for p in paths] == [f"{name}-{repeat}-rank{r}-bs2.trace.json.gz" for r in range(2)]
            assert all((lagging_run / p).is_file() for p in paths)
        for found in arms[name].passes:
            assert found.steps == PROFILED_STEPS
            assert all(r.activities == "host_ops" and r.communication_per_step.get("gloo:all_reduce", 0) >= 4
                       for r in found.ranks)  # two layers, two all-reduces each, per step
    change = section.diff
    assert change is not None
    # what rank 0 waited in its collectives for rank 1, in head's passes: most of the sleep
    waited_ms = [p.ranks[0].wait_ms_per_step for p in arms["head"].passes]
    assert min(waited_ms) > 0.5 * LAG_S * 1e3, waited_ms
    held = [f for f in change.findings if f.kind == "rank_held_back"]
    assert len(held) == 1 and held[0].rank == 1 and change.head.straggler == 1
    assert held[0].wait_ms_per_step.after == pytest.approx(statistics.median(p.wait_ms_per_step
                                                                          for p in arms["head"].passes), rel=1e-12)

    timed = next(a for a in report.batch_sizes[0].arms if a.arm == "head").ranks
    assert timed is not None and timed.straggler == 1  # the timed steps' ends name rank 1 too
    # One cause per finding, and the rank held back is always one of them. Base's communication
    # overlaps compute only where the shared CPU runs gloo's thread beside the main one; when it
    # did so in most of base's few profiled steps and head's exposed communication grew (noise
    # too, on a CPU), the diff names communication no longer overlapped as well, as its rule says.
    assert [c.kind for c in report.explanation.ranks] == [f.kind for f in change.findings]
    (cause,) = [c for c in report.explanation.ranks if c.kind == "rank_held_back"]
    assert (cause.batch_size, cause.rank, cause.timed_straggler, cause.agreement) == (2, 1, 1, "same_rank")
    # the headline's is the cause grown most against base's step: the wait, most of the 20 ms lag
    assert report.explanation.headline.rank_cause == "rank_held_back"

    comment = (lagging_run / "comment.md").read_text()
    top = above_the_fold(comment)
    share = round(held[0].straggler_share * 100)
    assert (f"One rank held back the others: rank 1 joined the collectives last in {share}% of head's profiled "
            "steps") in top
    assert "the timed steps end last on it too." in top
    assert "<summary>Communication and ranks</summary>" in comment
    fold = comment.split("<summary>Communication and ranks</summary>", 1)[1].split("</details>", 1)[0]
    # base's ranks may have one last to join in most of its steps too: gloo's timing on a shared CPU
    assert re.search(r"Longest wait for the slowest rank: [0-9.]+ -> [0-9.]+ ms per step; last to join in most "
                     r"steps: (base rank [01], )?head rank 1\.", fold)
    assert "| rank | span ms |" in fold  # the ranks differ: a straggler in head
    assert comment.splitlines()[1].endswith(": one rank held back the others**")  # the title


@pytest.mark.slow
def test_a_report_whose_rank_findings_were_edited_is_refused(lagging_run: Path, tmp_path: Path) -> None:
    data = json.loads((lagging_run / "report.json").read_text())
    (data["rank_traces"][0]["diff"]["findings"]) = [f for f in data["rank_traces"][0]["diff"]["findings"]
                                                    if f["kind"] != "rank_held_back"]
    data["explanation"].pop("ranks")  # and the facts it made: the figures still give the finding
    edited = tmp_path / "report.json"
    edited.write_text(json.dumps(data))
    env = os.environ | {"GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
                        "GITHUB_OUTPUT": str(tmp_path / "outputs.txt")}
    proc = subprocess.run([sys.executable, "-m", "guard", "summary", "--report", str(edited)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "batch size 2: rank_traces.diff findings [" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.strip().count("\n") == 0  # one message
    assert not (tmp_path / "summary.md").exists()

    # the per-rank figures moved instead: the same findings, other figures, refused as well
    data = json.loads((lagging_run / "report.json").read_text())
    data["rank_traces"][0]["arms"][1]["passes"][0]["wait_ms_per_step"] *= 3
    edited.write_text(json.dumps(data))
    proc = subprocess.run([sys.executable, "-m", "guard", "summary", "--report", str(edited)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and "rank_traces.diff" in proc.stderr, proc.stderr


def _serialized_section(tmp_path: Path) -> list:
    """Two repeats per arm of two ranks' GPU traces: base's all-reduce inside its GEMM, head's after it."""
    paths: dict[str, dict[int, list[tuple[int, list[Path]]]]] = {}
    for arm, kernels in (("base", OVERLAPPED), ("head", SERIAL)):
        for repeat in range(2):
            traces = [rank_trace(tmp_path / f"{arm}-{repeat}-rank{r}-bs2.trace.json.gz", kernels,
                                 CLOCK_NS[r] + 7_919 * repeat) for r in range(2)]
            paths.setdefault(arm, {}).setdefault(2, []).append((repeat, traces))
    return rank_trace_sections(paths, "base", "head", [2], {2: STEPS}, tmp_path)


@pytest.mark.slow
def test_communication_no_longer_overlapped_explains_a_regression(lagging_run: Path, tmp_path: Path) -> None:
    (section,) = _serialized_section(tmp_path)
    assert section.diff is not None and [f.kind for f in section.diff.findings] == ["communication_not_overlapped"]
    assert section.diff == rank_section_diff(section.arms, "base", "head")
    assert section.arms[0].traces[1] == ["base-1-rank0-bs2.trace.json.gz", "base-1-rank1-bs2.trace.json.gz"]

    run = read_report(lagging_run / "report.json")
    report = explained(run.model_copy(update={"rank_traces": [section]}))
    (cause,) = report.explanation.ranks
    assert cause.share_of_step == pytest.approx(0.060 / 0.140, rel=1e-9)  # 60 us exposed of a 140 us step
    assert cause == RankCause(
        batch_size=2, kind="communication_not_overlapped", share_of_step=cause.share_of_step,
        exposed_communication_ms_per_step=section.diff.exposed_communication_ms_per_step,
        overlap_share=section.diff.overlap_share)
    assert report.explanation.headline.rank_cause == "communication_not_overlapped"
    comment = render_comment(report)
    assert comment.splitlines()[1].endswith(": communication no longer overlapped**")
    top = above_the_fold(comment)
    assert ("Communication no longer overlapped with compute: exposed communication 0.000 -> 0.060 ms per step, up "
            "43% of base's step; overlapped 100% -> 0% of it.") in top
    fold = comment.split("<summary>Communication and ranks</summary>", 1)[1].split("</details>", 1)[0]
    assert "Communication overlapped with compute: 100% -> 0% of its time" in fold
    assert "| rank |" not in fold  # no rank differs from the others: no table
    # kept and read back, it holds: the diff made again from the figures is the one stated
    kept = tmp_path / "kept" / "report.json"
    kept.parent.mkdir()
    kept.write_text(report.model_dump_json(indent=2))
    assert read_report(kept).rank_traces == [section]


def test_a_report_of_one_process_keeps_no_rank_trace_keys() -> None:
    from guard.report._migrate import current_shape
    from tests.test_comment_shape import CPU_DEMO

    text = (CPU_DEMO / "report.json").read_text()
    report = read_report(CPU_DEMO / "report.json")
    assert report.rank_traces == [] and report.explanation.ranks == []
    assert report.explanation.headline.rank_cause is None
    dumped = report.model_dump_json(indent=2)
    assert '"rank_traces"' not in dumped and '"rank_cause"' not in dumped
    assert json.loads(dumped) == current_shape(json.loads(text)) | {"rule": report.rule.model_dump(mode="json")}
    assert isinstance(Report.model_validate_json(dumped), Report)


def test_on_a_cpu_only_processes_of_several_ranks_profile_and_no_longer_than_their_timed_steps() -> None:
    from dataclasses import replace

    from guard.harness import Spec
    from guard.harness._profile import profiled_steps
    from guard.harness._ranks import ALONE, Peers

    given = Spec(entry="wl.py:make", root=".", batch_sizes=[1], steps=40, warmup_steps=0, profile_steps=64,
                 trace_dir="/tmp/traces")
    ranks = Peers(rank=1, world_size=2)
    assert profiled_steps(given, "cuda_event", ALONE) == 64  # a GPU: as before
    assert profiled_steps(given, "cuda_event", ranks) == 64
    assert profiled_steps(given, "perf_counter", ALONE) == 0  # one process on a CPU: none
    assert profiled_steps(given, "perf_counter", ranks) == 40  # what a reference holds past the warmup
    assert profiled_steps(replace(given, profile_steps=12), "perf_counter", ranks) == 12
    assert profiled_steps(replace(given, trace_dir=None), "perf_counter", ranks) == 0  # nowhere to write
