"""A workload of several ranks: the runner starts a harness per rank (real processes, joined
over gloo on this CPU), a step's time is the slowest rank's, each rank's figures are kept, a
rank that fails fails the process, and compare names a straggler or a rank on another path."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from guard._errors import ConfigError
from guard.compare import STRAGGLER_MIN_STEPS, arm_ranks, compare, straggler_of
from guard.config import GuardConfig, Workload, parse_config
from guard.measure import (
    ArmTarget, BatchRun, HarnessSpec, RanksDiffer, RepeatResult, merge_ranks, rank_trace_paths, run_interleaved,
)
from guard.measure._runner import NO_MULTICAST, split_cpus
from guard.sandbox import Launch, choose_box, launch
from tests.rules import rule_at

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC = {"layers": 2, "d_model": 64, "n_heads": 4, "ffn": 96, "shared_ffn": 40, "vocab": 512, "max_len": 96,
        "prompt_len": 8}
STEPS = 40  # past STRAGGLER_MIN_STEPS in one process

# The reference engine, tensor parallel over the ranks, saying what its process was given;
# LAG_S holds rank LAG_RANK back at the end of every step, FAIL_RANK fails its setup.
WORKLOAD = '''
import os
import time

import torch.distributed as dist
from guard.engine import RefEngine

LAG_S = {lag_s}
LAG_RANK = 1
FAIL_RANK = {fail_rank}
SEEN = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "NCCL_NVLS_ENABLE",
        "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS")


class Workload(RefEngine):
    def setup(self, batch_size):
        if dist.get_rank() == FAIL_RANK:
            raise RuntimeError("rank setup broke")
        super().setup(batch_size)

    def step(self, tokens=None):
        out = super().step(tokens)
        if LAG_S and dist.get_rank() == LAG_RANK:
            time.sleep(LAG_S)  # after the step's last collective: the others wait for it in the next
        return out

    def describe(self):
        return super().describe() | {{"env": {{name: os.environ.get(name) for name in SEEN}},
                                      "backend": dist.get_backend()}}


def make(**options):
    return Workload(**options)
'''


def _worktree(tmp_path: Path, lag_s: float = 0.0, fail_rank: int = -1) -> Path:
    worktree = tmp_path / "arm"
    worktree.mkdir()
    worktree.chmod(0o755)
    (worktree / "wl.py").write_text(WORKLOAD.format(lag_s=lag_s, fail_rank=fail_rank))
    return worktree


def _spec(**over: Any) -> HarnessSpec:
    fields = {"entry": "wl.py:make", "options": SPEC, "batch_sizes": [2], "steps": STEPS, "warmup_steps": 2,
              "tok_per_s_min_s": 0.0, "warmup_max_s": 0.0, "world_size": 2} | over
    return HarnessSpec.of(Workload(**fields))


def _rank_results(run_dir: Path, stem: str, world: int) -> list[dict[str, Any]]:
    return [json.loads((run_dir / f"{stem}.rank{rank}.json").read_text()) for rank in range(world)]


@pytest.fixture(scope="module")
def lagging(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RepeatResult]:
    """One process of two ranks whose rank 1 finishes every step 3 ms after rank 0."""
    tmp = tmp_path_factory.mktemp("lagging")
    target = ArmTarget(box=choose_box(), name="head", python=Path(sys.executable), worktree=_worktree(tmp, lag_s=0.003))
    found = run_interleaved([target], _spec(), 1, tmp / "runs", timeout_s=120)["head"]
    assert found.error is None, found.log_tail
    return tmp / "runs", found.repeats[0]


@pytest.mark.slow
def test_every_rank_is_a_process_of_its_own_with_the_rendezvous_and_multicast_off(
    lagging: tuple[Path, RepeatResult],
) -> None:
    run_dir, result = lagging
    raw = _rank_results(run_dir, "head-0", 2)
    assert [r["rank"] for r in raw] == [0, 1] and len({r["pid"] for r in raw}) == 2
    seen = [r["runs"][0]["workload"]["env"] for r in raw]
    assert [s["RANK"] for s in seen] == [s["LOCAL_RANK"] for s in seen] == ["0", "1"]
    assert {s["WORLD_SIZE"] for s in seen} == {"2"} and {s["MASTER_ADDR"] for s in seen} == {"127.0.0.1"}
    assert len({s["MASTER_PORT"] for s in seen}) == 1 and int(seen[0]["MASTER_PORT"]) > 0
    assert all({name: s[name] for name in NO_MULTICAST} == NO_MULTICAST for s in seen)
    assert {r["runs"][0]["workload"]["backend"] for r in raw} == {"gloo"}  # a CPU: gloo
    assert result.world_size == 2
    spec_files = sorted(p.name for p in run_dir.glob("head-0*.spec.json"))
    assert spec_files == ["head-0.rank0.spec.json", "head-0.rank1.spec.json"]


@pytest.mark.slow
def test_a_step_takes_as_long_as_its_slowest_rank(lagging: tuple[Path, RepeatResult]) -> None:
    run_dir, result = lagging
    raw = [r["runs"][0] for r in _rank_results(run_dir, "head-0", 2)]
    run = result.run_for(2)
    slowest = [max(a, b) for a, b in zip(raw[0]["step_ms"], raw[1]["step_ms"])]
    assert run.step_ms == slowest and len(slowest) == STEPS
    assert run.gpu_ms_per_step == pytest.approx(sum(slowest) / STEPS)  # the mean: what the steps took
    # the slowest rank's tokens over its decode time
    passes = [r["end_to_end_pass_ms"] for r in raw]
    assert run.tok_per_s == pytest.approx(min(2 * STEPS * len(p) / (sum(p) / 1e3) for p in passes))
    # each rank's own figures are kept, and rank 0's tokens are the process's, as every rank's
    assert [r.step_ms for r in run.ranks] == [r["step_ms"] for r in raw]
    assert [r.gpu_ms_per_step for r in run.ranks] == [r["gpu_ms_per_step"] for r in raw]
    assert run.tokens == raw[0]["tokens"] == raw[1]["tokens"] and [r.disagreements for r in run.ranks] == [0, 0]
    # the rank that finished each step last, from the host clock every rank stamped its steps on
    last = [int(b > a) for a, b in zip(raw[0]["step_done_ns"], raw[1]["step_done_ns"])]
    assert run.slowest_steps == [STEPS - sum(last), sum(last)]
    assert sum(last) >= 0.9 * STEPS  # rank 1 sleeps 3 ms after every step: it is last nearly always
    assert run.ranks[1].finish_lag_us is not None and run.ranks[1].finish_lag_us > 2000


@pytest.mark.slow
def test_compare_names_the_rank_that_held_the_others_back(lagging: tuple[Path, RepeatResult]) -> None:
    _, result = lagging
    found = arm_ranks([result.run_for(2)])
    assert found is not None and found.world_size == 2 and found.steps == STEPS
    assert found.straggler == 1 and found.straggler_share >= 0.9
    assert [r.slowest_steps for r in found.ranks] == result.run_for(2).slowest_steps
    assert not found.disagree
    assert [p.field for p in found.paths] == ["env"]  # this workload's describe() holds its own RANK


@pytest.mark.slow
def test_a_rank_that_fails_fails_the_process_and_ends_the_others(tmp_path: Path) -> None:
    target = ArmTarget(name="base", python=Path(sys.executable),
                       box=choose_box(), worktree=_worktree(tmp_path, fail_rank=1))
    started = time.perf_counter()
    found = run_interleaved([target], _spec(), 2, tmp_path / "runs", timeout_s=120)["base"]
    assert time.perf_counter() - started < 60  # rank 0 waited on rank 1 for ever: it was ended, not timed out
    assert found.repeats == [] and found.error is not None
    assert found.error.startswith("rank 1 of 2: RuntimeError at batch size 2: rank setup broke"), found.error
    assert not (tmp_path / "runs" / "base-1.rank0.json").exists()  # the arm stops being scheduled, as today


def test_the_guard_s_own_sandbox_ends_a_group_at_its_first_failure(tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    failing = [sys.executable, "-c", "import sys, time; time.sleep(0.2); sys.exit(5)"]
    box = choose_box()
    with (tmp_path / "log").open("w") as log:
        started = time.perf_counter()
        ended = launch(box, [Launch(sleeper, log), Launch(failing, log), Launch(sleeper, log)], timeout_s=30)
    assert time.perf_counter() - started < 10
    assert ended.failed == 1 and ended.codes == [None, 5, None]
    with (tmp_path / "log").open("w") as log:
        ok = launch(box, [Launch([sys.executable, "-c", "pass"], log)] * 2, timeout_s=30)
        late = launch(box, [Launch(sleeper, log)], timeout_s=0.5)
    assert ok.codes == [0, 0] and ok.failed is None
    assert late.codes == [None] and late.failed is None


@pytest.mark.slow
def test_forced_ranks_read_one_reference_and_agree(tmp_path: Path) -> None:
    from guard.measure import prepare_reference

    target = ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=_worktree(tmp_path))
    spec, outcome = prepare_reference(target, _spec(steps=8), tmp_path / "runs", 120, None, "base 00000000",
                                      lambda _: None)
    assert outcome.tokens is not None and spec.reference is not None, outcome.error
    assert (tmp_path / "runs" / "reference.rank1.json").is_file()  # every rank ran the reference pass
    found = run_interleaved([target], spec, 1, tmp_path / "runs", timeout_s=120, reference=outcome.tokens)["base"]
    assert found.error is None, found.log_tail
    run = found.repeats[0].run_for(2)
    assert run.forced and run.disagreements == 0 and run.compared > 0
    passes = [r["runs"][0]["tokens"] for r in _rank_results(tmp_path / "runs", "reference", 2)]
    assert outcome.tokens.rows_for(2) == passes[0] == passes[1]  # rank 0's ids, which rank 1 generated too


@pytest.mark.slow
def test_expert_parallel_ranks_decode_a_forced_batch_size_mix_together(tmp_path: Path) -> None:
    from guard.measure import prepare_reference

    target = ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=REPO_ROOT)
    options = SPEC | {"max_len": 128, "moe_experts": 4, "moe_ffn": 48, "parallel": "ep"}
    mixed = _spec(entry="guard.engine:make", options=options, batch_sizes=[3], steps=12, warmup_max_s=0.1,
                  batch_mix={1: 0.5, 3: 0.5})
    spec, outcome = prepare_reference(target, mixed, tmp_path / "runs", 120, None, "base 00000000", lambda _: None)
    assert outcome.tokens is not None and outcome.tokens.mix, outcome.error
    found = run_interleaved([target], spec, 1, tmp_path / "runs", timeout_s=120, reference=outcome.tokens)["base"]
    assert found.error is None, found.log_tail
    result = found.repeats[0]
    mix = result.mix
    assert mix is not None and mix.disagreements == 0 and [r.disagreements for r in mix.ranks] == [0, 0]
    assert mix.step_ms == [max(a, b) for a, b in zip(mix.ranks[0].step_ms, mix.ranks[1].step_ms)]
    assert sum(mix.slowest_steps) == 12 and result.run_for(3).disagreements == 0
    assert [r.workload["parallel"] for r in result.run_for(3).ranks] == ["ep", "ep"]


# --- merging and comparing, from results as the harness writes them -----------------------

def _batch(step_ms: list[float], done_ns: list[int] | None = None, tokens: list[list[int]] | None = None,
           trace: str | None = None, workload: dict[str, Any] | None = None) -> BatchRun:
    rows = tokens or [[1, 2]] * len(step_ms)
    return BatchRun(batch_size=2, steps=len(step_ms), warmup_steps=0, timer="perf_counter", setup_s=0.1,
                    wall_s=sum(step_ms) / 1e3, tok_per_s=2 * len(step_ms) / (sum(step_ms) / 1e3),
                    gpu_ms_per_step=sum(step_ms) / len(step_ms), step_ms=step_ms, end_to_end_pass_ms=[sum(step_ms)],
                    tokens=rows, sha256="x", step_done_ns=done_ns or [], trace=trace, workload=workload or {})


def _process(*runs: BatchRun, repeat: int = 0) -> list[RepeatResult]:
    return [RepeatResult(arm="head", repeat=repeat, environment={}, runs=[run]) for run in runs]


def test_merging_takes_each_step_from_its_slowest_rank_and_counts_who_finished_last() -> None:
    ranks = [_batch([1.0, 5.0, 2.0], done_ns=[10, 30, 55]), _batch([4.0, 1.0, 2.5], done_ns=[12, 20, 60])]
    merged = merge_ranks(_process(*ranks)).run_for(2)
    assert merged.step_ms == [4.0, 5.0, 2.5] and merged.gpu_ms_per_step == pytest.approx(11.5 / 3)  # their mean
    assert merged.gpu_ms_median_per_step == 4.0  # beside it, a diagnostic
    # tok/s is the slowest rank's: rank 1's 7.5 ms of decode against rank 0's 8 ms, so rank 0's 6 tokens in 8 ms
    assert merged.tok_per_s == pytest.approx(6 / 0.008) and merged.end_to_end_pass_ms == [8.0]
    assert merged.slowest_steps == [1, 2]  # last to finish: rank 1, rank 0, rank 1
    assert [r.finish_lag_us for r in merged.ranks] == [0.0, 0.002]  # medians of (0, 10, 0) ns and (2, 0, 5) ns
    unstamped = merge_ranks(_process(_batch([1.0, 5.0, 2.0]), _batch([4.0, 1.0, 2.5]))).run_for(2)
    assert unstamped.slowest_steps == [1, 2] and unstamped.ranks[0].finish_lag_us is None  # by step time then


def test_a_rank_with_other_tokens_or_other_steps_is_found() -> None:
    other = merge_ranks(_process(_batch([1.0, 1.0]), _batch([1.0, 1.0], tokens=[[1, 2], [1, 3]]))).run_for(2)
    assert [r.disagreements for r in other.ranks] == [0, 1]
    first = other.ranks[1].first_disagreement
    assert first is not None and (first.step, first.sequence, first.expected, first.found) == (2, 1, 2, 3)
    with pytest.raises(RanksDiffer, match=r"different numbers of steps \(2, 3\)"):
        merge_ranks(_process(_batch([1.0, 1.0]), _batch([1.0, 1.0, 1.0])))


def test_a_rank_that_disagrees_makes_the_batch_size_invalid() -> None:
    from guard.measure import ArmMeasurement

    def arm(name: str, tokens: list[list[int]], base: float) -> ArmMeasurement:
        repeats = []
        for repeat in range(3):
            runs = [_batch([base + repeat * 0.01] * 4), _batch([base + repeat * 0.01] * 4, tokens=tokens)]
            repeats.append(merge_ranks([r.model_copy(update={"arm": name, "repeat": repeat}) for r in _process(*runs)]))
        return ArmMeasurement(arm=name, repeats=repeats)

    same = [[1, 2]] * 4
    good = compare({"base": arm("base", same, 1.0), "head": arm("head", same, 1.0)}, "base", "head", [2], rule_at(1.0))
    assert good.verdict != "invalid"
    split = compare({"base": arm("base", same, 1.0), "head": arm("head", [[1, 2], [1, 2], [9, 2], [1, 2]], 1.0)},
                    "base", "head", [2], rule_at(1.0))
    assert split.verdict == "invalid"
    (reason,) = split.reasons
    assert (reason.kind, reason.arm, reason.rank, reason.step, reason.sequence) == ("ranks_disagree", "head", 1, 3, 0)


def test_a_straggler_is_most_steps_past_chance_and_more_than_a_hair_behind() -> None:
    steps = STRAGGLER_MIN_STEPS
    assert straggler_of([steps - 8, 8], steps) == 0  # 75%
    assert straggler_of([steps - 9, 9], steps) is None
    assert straggler_of([steps - 1, 1], steps - 1) is None  # too few steps to tell from chance
    assert straggler_of([1, steps - 1], steps, [0.0, 150.0], step_ms=10.0) == 1  # 0.15 ms behind, of 10 ms
    assert straggler_of([1, steps - 1], steps, [0.0, 99.0], step_ms=10.0) is None  # under 1% of a step
    assert straggler_of([1, steps - 1], steps, [0.0, None], step_ms=10.0) == 1  # unstamped: the share alone


def test_a_rank_whose_description_differs_is_named_with_its_values() -> None:
    lead = {"engine": "reference", "capture_mode": "step", "rank": 0, "device": "cuda:0", "bad key!": 1}
    other = lead | {"capture_mode": "eager", "rank": 1, "device": "cuda:1", "graphs_per_step": 0, "bad key!": 2}
    run = merge_ranks(_process(_batch([1.0] * 4, workload=lead), _batch([1.0] * 4, workload=other))).run_for(2)
    found = arm_ranks([run])
    assert found is not None
    assert [(p.rank, p.field, p.value, p.rank0_value) for p in found.paths] == [
        (1, "capture_mode", "eager", "step"), (1, "graphs_per_step", "0", "-")]  # rank and device differ by nature


def test_each_rank_s_trace_is_kept_under_its_rank(tmp_path: Path) -> None:
    traces = [str(tmp_path / f"head-0-rank{rank}-bs2.trace.json.gz") for rank in range(2)]
    merged = merge_ranks(_process(*(_batch([1.0], trace=t) for t in traces)))
    assert merged.run_for(2).trace == traces[0]  # the single-trace analysis reads rank 0's
    assert [r.trace for r in merged.run_for(2).ranks] == traces
    from guard.measure import ArmMeasurement

    found = rank_trace_paths({"head": ArmMeasurement(arm="head", repeats=[merged])})
    assert found == {"head": {2: [(0, [Path(t) for t in traces])]}}


def test_the_harness_names_each_rank_s_trace() -> None:
    from guard.harness import Spec
    from guard.harness._profile import trace_name
    from guard.harness._ranks import ALONE, Peers

    given = Spec(entry="wl.py:make", root=".", batch_sizes=[2], steps=4, warmup_steps=0, arm="head", repeat=3)
    assert trace_name(given, ALONE, "bs2") == "head-3-bs2.trace.json.gz"  # as before
    assert trace_name(given, Peers(rank=1, world_size=2), "mix") == "head-3-rank1-mix.trace.json.gz"


# --- the setting ------------------------------------------------------------------------

def test_world_size_is_a_workload_setting_with_clear_limits() -> None:
    assert GuardConfig().workload.world_size == 1
    assert parse_config({"workload": {"world_size": 4}}).workload.world_size == 4
    with pytest.raises(ConfigError, match=r"'workload.world_size': 0"):
        parse_config({"workload": {"world_size": 0}})
    with pytest.raises(ConfigError, match="use build.method 'venv' or 'none'") as docker:
        parse_config({"workload": {"world_size": 2}, "build": {"method": "docker"}})
    assert str(docker.value).count("\n") == 0 and str(docker.value).startswith("config: workload.world_size 2")
    with pytest.raises(ConfigError, match="list at least one per rank"):
        parse_config({"workload": {"world_size": 4}, "measure": {"cpus": [0, 1]}})


def test_pinned_cpus_are_shared_out_among_the_ranks() -> None:
    assert split_cpus([], 2) == [[], []]
    assert split_cpus([0, 1, 2, 3, 4], 2) == [[0, 1], [2, 3, 4]]
    assert split_cpus([8, 9], 2) == [[8], [9]]


# --- the whole run ------------------------------------------------------------------------

PIPELINE_CONFIG = """
[workload]
entry = "wl.py:make"
options = {options}
batch_sizes = [2]
steps = 40
warmup_steps = 2
tok_per_s_min_s = 0
warmup_max_s = 0
world_size = 2
[build]
method = "none"
[measure]
repeats = 2
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
"""


@pytest.mark.slow
def test_guard_run_on_two_ranks_names_the_head_s_straggler_and_its_other_path(tmp_path: Path) -> None:
    import subprocess

    from guard.report import SCHEMA_VERSION, read_report
    from tests.conftest import commit_all, git

    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(PIPELINE_CONFIG.format(options=json.dumps(SPEC).replace(":", " =")
                                                            .replace('"', "").replace("{", "{ ").replace("}", " }")))
    (repo / "wl.py").write_text(WORKLOAD.format(lag_s=0.0, fail_rank=-1))
    commit_all(repo, "base")
    git(repo, "checkout", "--quiet", "-b", "feature")
    head = WORKLOAD.format(lag_s=0.003, fail_rank=-1).replace("return Workload(**options)",
                                                              "return Workload(eager_rank=1, **options)")
    (repo / "wl.py").write_text(head)
    commit_all(repo, "rank 1 lags and falls out of its graphs")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out",
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    report = read_report(out / "report.json")  # decided again from its own numbers, ranks included
    assert report.schema_version == SCHEMA_VERSION and report.workload.world_size == 2
    arms = {a.arm: a for a in report.batch_sizes[0].arms}
    head = arms["head"].ranks
    assert head is not None and head.world_size == 2 and head.straggler == 1 and not head.disagree
    assert ("eager_injected", "True", "False") in [(p.field, p.value, p.rank0_value) for p in head.paths]
    assert arms["base"].ranks is not None and not [p for p in arms["base"].ranks.paths if p.field == "eager_injected"]
    change = report.batch_sizes[0].rank_change
    assert change is not None and change.straggler == 1 and [p.field for p in change.paths] == ["eager_injected"]
    comment = (out / "comment.md").read_text()
    lag_ms = head.ranks[1].finish_lag_us.median / 1e3 if head.ranks[1].finish_lag_us else 0.0
    assert lag_ms > 2.5  # it sleeps 3 ms after each step
    assert (f"rank 1 of 2 finished {round(head.straggler_share * 100)}% of head's timed steps last, {lag_ms:.3f} ms "
            "behind the first at the median, the others waiting for it") in comment
    assert "rank 1 of head decoded another way than its rank 0: `eager_injected` `True` (rank 0: `False`)" in comment
    assert "<summary>Every rank, on 2 ranks</summary>" in comment
    assert "On 2 ranks, a process each" in comment
    runs = out / "runs"
    assert all((runs / f"{arm}-{repeat}.rank{rank}.json").is_file() for arm in ("base", "head") for repeat in (0, 1)
               for rank in (0, 1))


def test_a_report_of_one_process_per_arm_keeps_no_rank_keys_and_reads_as_written() -> None:
    from guard.report import read_report, render_comment
    from guard.report._migrate import current_shape

    example = REPO_ROOT / "docs" / "examples" / "cpu-demo"  # schema 5, written before ranks existed
    text = (example / "report.json").read_text()
    assert json.loads(text)["schema_version"] == 5 and '"ranks"' not in text and '"world_size"' not in text
    report = read_report(example / "report.json")
    assert report.workload.world_size == 1 and all(a.ranks is None for b in report.batch_sizes for a in b.arms)
    # no key appears for what one process has not: every key as written, the rule kept whole
    assert json.loads(report.model_dump_json()) == current_shape(json.loads(text)) | {
        "rule": report.rule.model_dump(mode="json")}
    assert render_comment(report) == (example / "comment.md").read_text(encoding="utf-8")
