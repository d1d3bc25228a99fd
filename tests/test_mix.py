"""The batch-size mix: its config, its seeded schedule (one in every process and arm), the mix
pass of real harness processes, and the figures the guard computes from their step records."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import pytest

from guard._errors import ConfigError
from guard.config import CommitFiles, parse_config
from guard.harness import Spec, draw_schedule
from guard.measure import (
    ArmTarget, HarnessSpec, MixRun, StepInfo, imbalance_of, make_reference, mix_report, parse_mix_file,
    run_interleaved, with_mix_file,
)
from guard.measure._mix import arm_mix, nearest_rank
from guard.measure._reference import forced_spec
from guard.sandbox import choose_box
from tests.conftest import git

REPO_ROOT = Path(__file__).resolve().parents[1]
MIX = {1: 0.4, 2: 0.25, 3: 0.15, 6: 0.1, 9: 0.1}


# -- config -------------------------------------------------------------------------------

def test_the_issues_mix_is_read_from_toml_keys() -> None:
    config = parse_config({"workload": {"batch_mix": {str(k): v for k, v in MIX.items()}}})
    assert config.workload.batch_mix == MIX


@pytest.mark.parametrize("mix,said", [
    ({"1": 0.5, "2": 0.4}, "sum to 1 (these sum to 0.9)"),
    ({"0": 1.0}, "batch sizes from 1 to 4096, not 0"),
    ({"1": 1.5, "2": -0.5}, "every share above 0 (batch size 2 has -0.5)"),
    ({}, "at least one batch size"),
    ({"two": 1.0}, "valid integer"),
])
def test_a_bad_mix_is_one_message(mix: dict[str, float], said: str) -> None:
    with pytest.raises(ConfigError, match="workload.batch_mix") as info:
        parse_config({"workload": {"batch_mix": mix}})
    assert said in str(info.value)


def test_shares_within_a_millionth_of_one_are_accepted_and_both_sources_are_refused() -> None:
    near = {"1": 0.3333333, "2": 0.3333333, "3": 0.3333334}
    assert parse_config({"workload": {"batch_mix": near}}).workload.batch_mix is not None
    with pytest.raises(ConfigError, match="sum to 1"):
        parse_config({"workload": {"batch_mix": {"1": 0.5, "2": 0.49999}}})
    with pytest.raises(ConfigError, match="one of them"):
        parse_config({"workload": {"batch_mix": {"1": 1.0}, "batch_mix_file": "bench/sizes.txt"}})
    with pytest.raises(ConfigError, match="batch_mix_file"):
        parse_config({"workload": {"batch_mix_file": "../outside.txt"}})


def test_cli_bad_mix_exits_2_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "guard.toml"
    config.write_text("[workload]\nbatch_mix = { 1 = 0.5, 2 = 0.25 }\n")
    (tmp_path / "repo").mkdir()
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(tmp_path / "repo"), "--config",
                           str(config)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "workload.batch_mix" in proc.stderr and proc.stderr.count("\n") == 1


def test_the_mix_file_is_read_from_the_base_commit_and_checked(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "bench").mkdir()
    (repo / "bench" / "sizes.txt").write_text("# from production\n3\n1\n\n9  # a burst\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "sizes")
    sha = git(repo, "rev-parse", "HEAD").strip()
    (repo / "bench" / "sizes.txt").write_text("1\n")  # the work tree is not what is read
    spec = HarnessSpec(batch_mix_file="bench/sizes.txt", warmup_steps=1, steps=3, profile_steps=0)
    read = with_mix_file(spec, CommitFiles(repo=repo, sha=sha))
    assert read.batch_mix_steps == [3, 1, 9]
    assert read.mix_schedule() == [3, 1, 9, 3, 1, 9, 3]  # production order, repeated from its start
    # a profiled pass longer than the two timed ones goes on past them, changing none of their steps
    longer = read.model_copy(update={"profile_steps": 8}).mix_schedule()
    assert longer == [3, 1, 9, 3, 1, 9, 3, 1, 9]
    with pytest.raises(ConfigError, match="not found"):
        with_mix_file(spec.model_copy(update={"batch_mix_file": "bench/none.txt"}), CommitFiles(repo=repo, sha=sha))
    with pytest.raises(ConfigError, match="line 2: '0' is not a batch size"):
        parse_mix_file(b"1\n0\n", "s.txt")
    with pytest.raises(ConfigError, match="line 1: 'x2'"):
        parse_mix_file(b"x2\n", "s.txt")
    with pytest.raises(ConfigError, match="holds no batch size"):
        parse_mix_file(b"# nothing\n", "s.txt")
    with pytest.raises(ConfigError, match="65 distinct"):
        parse_mix_file("\n".join(str(n) for n in range(1, 66)).encode(), "s.txt")


# -- the schedule -------------------------------------------------------------------------

def test_each_pass_holds_every_size_in_its_share_in_a_seeded_order() -> None:
    lengths = [32, 256, 256]
    schedule = draw_schedule(lengths, seed=7, mix=MIX)
    assert len(schedule) == sum(lengths)
    start = 0
    for length in lengths:
        counts = Counter(schedule[start: start + length])
        start += length
        assert sum(counts.values()) == length
        for size, share in MIX.items():
            assert abs(counts[size] - share * length) < 1  # exact to one step
    assert draw_schedule(lengths, seed=7, mix=MIX) == schedule
    assert draw_schedule(lengths, seed=8, mix=MIX) != schedule
    # a shuffle, not blocks: sizes change from step to step
    assert sum(a != b for a, b in zip(schedule, schedule[1:])) > 100


def test_two_processes_draw_one_schedule(tmp_path: Path) -> None:
    """The harness draws it in the arm's process from its spec; the guard again in its own."""
    spec = HarnessSpec(batch_mix=MIX, batch_mix_seed=3, warmup_steps=4, steps=40)
    # run.py as the arm's process loads it: by path, isolated (-I), drawing from the JSON spec
    code = ("import importlib.util, json, sys; s = importlib.util.spec_from_file_location('r', sys.argv[1]); "
            "r = importlib.util.module_from_spec(s); s.loader.exec_module(r); "
            "from _guard_harness._mix_passes import mix_schedule; from _guard_harness._protocol import read_spec; "
            "print(json.dumps(mix_schedule(read_spec(sys.argv[2]))))")
    fields = {"batch_mix", "batch_mix_seed", "warmup_steps", "steps", "batch_sizes", "entry", "profile_steps"}
    wired = json.dumps(asdict(Spec(root=".", **spec.model_dump(include=fields))))
    drawn = [
        json.loads(subprocess.run([sys.executable, "-I", "-c", code, str(REPO_ROOT / "guard/harness/run.py"),
                                   wired], capture_output=True, text=True, check=True).stdout)
        for _ in range(2)
    ]
    assert drawn[0] == drawn[1] == spec.mix_schedule()


# -- the mix pass in real harness processes -----------------------------------------------

ENGINE = {"layers": 2, "max_len": 160, "capture_batch_sizes": [1, 2, 4, 8], "moe_experts": 4, "moe_top_k": 2,
          "moe_ffn": 32}


def _padded(size: int) -> int:
    """The head's policy, worked out by hand: the next of 1, 2, 4, 8; 9, the set-up size, as it is."""
    return next((c for c in (1, 2, 4, 8) if c >= size), size)


@pytest.fixture(scope="module")
def mixed_arms(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Base keeps the fallback (other sizes eager at their shape); head pads them up."""
    tmp = tmp_path_factory.mktemp("mix")
    spec = HarnessSpec(entry="guard.engine:make", options=ENGINE, batch_sizes=[1], steps=24, warmup_steps=2,
                       tok_per_s_min_s=0, warmup_max_s=0, profile_steps=0, batch_mix=MIX, batch_mix_seed=5)
    targets = [ArmTarget(box=choose_box(), name=name, python=Path(sys.executable), worktree=REPO_ROOT,
                         env={"REFENGINE_FALLBACK": fallback}) for name, fallback in (("base", "1"), ("head", "0"))]
    outcome = make_reference(targets[0], spec, tmp / "runs", 300, "base test")
    assert outcome.error is None and outcome.tokens is not None and outcome.path is not None
    forced = forced_spec(spec, outcome.tokens, outcome.path)
    results = run_interleaved(targets, forced, 2, tmp / "runs", 300, reference=outcome.tokens)
    return spec, outcome.tokens, results


@pytest.mark.slow
def test_every_process_decodes_the_schedule_like_for_like(mixed_arms) -> None:  # type: ignore[no-untyped-def]
    spec, reference, results = mixed_arms
    schedule = spec.mix_schedule()
    assert reference.mix is not None
    assert [len(row) for row in reference.mix] == [max(MIX), *schedule[: spec.warmup_steps + spec.steps]]
    for name in ("base", "head"):
        assert results[name].error is None, results[name].error
        for repeat in results[name].repeats:
            mix = repeat.mix
            assert mix is not None and mix.forced
            assert [len(row) for row in mix.tokens] == [max(MIX), *schedule[: spec.warmup_steps + spec.steps]]
            # padding and the capacity dispatch change no real row's output
            assert mix.disagreements == 0 and mix.compared == sum(len(r) for r in reference.mix)


@pytest.mark.slow
def test_the_report_figures_follow_the_policy(mixed_arms) -> None:  # type: ignore[no-untyped-def]
    spec, _, results = mixed_arms
    schedule = spec.mix_schedule()
    report = mix_report(schedule, "batch_mix", spec.batch_mix_seed, spec.steps, results, ["base", "head"])
    assert report is not None and [a.arm for a in report.arms] == ["base", "head"]
    base, head = report.arms
    timed = schedule[spec.warmup_steps: spec.warmup_steps + spec.steps]  # a CPU times the end-to-end pass
    real, computed = sum(timed), sum(_padded(b) for b in timed)
    assert base.padding_waste == 0 and base.useful_work_coverage == 1
    assert base.disagreements == head.disagreements == [0, 0] and head.compared > spec.steps
    assert head.useful_work_coverage == pytest.approx(real / computed)
    assert head.padding_waste == pytest.approx((computed - real) / computed)
    assert head.padding_waste > 0
    assert base.capture_coverage == head.capture_coverage == 0  # no graph on a CPU: said, not assumed
    counts = Counter(timed)
    assert {s.batch_size: s.share for s in head.sizes} == {b: n / len(timed) for b, n in counts.items()}
    assert {s.batch_size: s.padded_to for s in head.sizes} == {b: _padded(b) for b in counts}
    assert {s.batch_size: s.padded_to for s in base.sizes} == {b: b for b in counts}
    # MoE: every real row reached top_k experts in each of the 2 layers
    assert base.imbalance is not None and base.imbalance.steps == 2 * spec.steps
    for repeat in results["head"].repeats:
        assert repeat.mix is not None and repeat.mix.step_info is not None
        for size, info in zip(timed, repeat.mix.step_info):
            assert info.expert_tokens is not None and sum(info.expert_tokens) == size * 2 * 2
    assert 1 <= base.imbalance.median <= base.imbalance.p90 <= base.imbalance.max <= 4


# -- the figures from known records -------------------------------------------------------

def _run(step_ms: list[float], infos: list[StepInfo] | None, schedule: list[int], warmup: int = 0) -> MixRun:
    """A CPU's mix pass of known step times over `schedule`, its rows as wide as the schedule says."""
    rows = [[0] * max(schedule)] + [[0] * size for size in schedule[: warmup + len(step_ms)]]
    return MixRun(max_batch_size=max(schedule), steps=len(step_ms), warmup_steps=warmup, timer="perf_counter",
                  setup_s=0.0, tok_per_s=100.0, step_ms=step_ms, step_info=infos, tokens=rows)


def test_coverages_padding_and_step_times_from_known_records() -> None:
    schedule = [9, 1, 3, 1, 4]  # a warmup step, then 4 timed ones (a CPU times the first pass)
    infos = [StepInfo(path="graph", padded_to=1), StepInfo(path="graph", padded_to=4),
             StepInfo(path="graph", padded_to=1), StepInfo(path="eager", padded_to=4)]
    first = _run([1.0, 3.0, 2.0, 4.0], infos, schedule, warmup=1)
    second = _run([2.0, 5.0, 2.0, 6.0], infos, schedule, warmup=1)
    figures = arm_mix("head", [first, second], schedule)
    assert figures is not None
    assert figures.capture_coverage == 3 / 4
    assert figures.useful_work_coverage == (1 + 3 + 1 + 4) / (1 + 4 + 1 + 4)
    assert figures.padding_waste == pytest.approx(1 / 10)
    sizes = {s.batch_size: s for s in figures.sizes}
    assert sizes[1].share == 0.5 and sizes[3].share == sizes[4].share == 0.25
    assert sizes[1].path == "graph" and sizes[4].path == "eager" and sizes[3].padded_to == 4
    assert sizes[3].padding_waste == 0.25 and sizes[1].padding_waste == sizes[4].padding_waste == 0
    # per process: size 1's mean 1.5 and 2.0; their median 1.75
    assert sizes[1].gpu_ms_per_step == 1.75
    assert sizes[3].gpu_ms_per_real_token == pytest.approx((1.0 + 5 / 3) / 2)
    assert figures.gpu_ms_per_step == pytest.approx((2.5 + 3.75) / 2)
    assert figures.gpu_ms_per_real_token == pytest.approx((10 / 9 + 15 / 9) / 2)
    assert figures.imbalance is None
    # a process that decoded another schedule is left out, not read against this one
    assert arm_mix("head", [first, _run([2.0, 5.0, 2.0, 6.0], infos, [9, 1, 1, 3, 4], warmup=1)],
                   schedule).processes == 1


def test_a_sizes_step_time_is_its_mean_so_the_sizes_add_up_to_the_whole() -> None:
    """A stall on one step of size 1 counts in that size's figure, as in the whole mix's: each
    size's mean times its share adds up to the process's mean over every timed step."""
    schedule = [1, 1, 1, 2]
    figures = arm_mix("head", [_run([1.0, 1.0, 4.0, 3.0], None, schedule)], schedule)
    assert figures is not None
    sizes = {s.batch_size: s for s in figures.sizes}
    assert sizes[1].gpu_ms_per_step == pytest.approx((1.0 + 1.0 + 4.0) / 3)  # its median would say 1.0
    assert sizes[2].gpu_ms_per_step == 3.0
    assert sum(s.share * s.gpu_ms_per_step for s in figures.sizes) == pytest.approx(figures.gpu_ms_per_step)
    assert figures.gpu_ms_per_step == pytest.approx(9.0 / 4)


def test_unknown_without_step_info_and_a_contradicting_record_is_not_taken() -> None:
    figures = arm_mix("base", [_run([1.0, 2.0], None, [2, 1])], [2, 1])
    assert figures is not None
    assert figures.capture_coverage is figures.useful_work_coverage is figures.padding_waste is None
    assert all(s.path is None and s.padded_to is None for s in figures.sizes)
    # padded_to under the step's batch contradicts the schedule: that step is unknown, and counted
    lying = arm_mix("head", [_run([1.0, 2.0], [StepInfo(path="graph", padded_to=1),
                                               StepInfo(path="graph", padded_to=1)], [2, 1])], [2, 1])
    assert lying is not None and lying.inconsistent_steps == 1 and lying.padding_waste is None
    with pytest.raises(ValueError):
        StepInfo.model_validate({"path": "replayed"})
    with pytest.raises(ValueError):
        StepInfo.model_validate({"expert_tokens": [1, -2]})


def test_imbalance_from_known_loads() -> None:
    assert imbalance_of([4, 4, 4, 4]) == 1.0
    assert imbalance_of([8, 0, 0, 0]) == 4.0
    assert imbalance_of([6, 2, 2, 2]) == 2.0
    assert imbalance_of([0, 0]) is None
    loads = [[4, 4, 4, 4], [5, 3, 4, 4], [6, 2, 2, 6], [8, 0, 0, 8], [12, 2, 1, 1]]
    levels = [1.0, 1.25, 1.5, 2.0, 3.0]
    ms = [1.0, 2.0, 3.0, 4.0, 5.0]
    infos = [StepInfo(path="graph", padded_to=8, expert_tokens=load) for load in loads]
    figures = arm_mix("head", [_run(ms, infos, [8] * 5)], [8] * 5)
    assert figures is not None and figures.imbalance is not None
    imbalance = figures.imbalance
    assert [imbalance_of(load) for load in loads] == levels
    assert imbalance.median == 1.5 and imbalance.max == 3.0 and imbalance.p90 == nearest_rank(levels, 0.9) == 3.0
    # one step per bucket, each bucket from its lower edge: I = 1.25 is in [1.25, 1.5)
    assert [(b.i_from, b.i_to, b.steps, b.gpu_ms_per_step) for b in imbalance.buckets] == [
        (1.0, 1.25, 1, 1.0), (1.25, 1.5, 1, 2.0), (1.5, 2.0, 1, 3.0), (2.0, 3.0, 1, 4.0), (3.0, None, 1, 5.0)]
    assert imbalance.buckets[4].gpu_ms_per_real_token == 5.0 / 8
    assert not any(math.isnan(b.gpu_ms_per_step) for b in imbalance.buckets)


# -- the whole run ------------------------------------------------------------------------

MIX_WORKLOAD = '''
CAPTURED = (1, 2, 4)
FALLBACK = {fallback}


class Workload:
    def setup(self, batch_size):
        self.rows = self.padded = batch_size

    def step(self, tokens=None):
        ids = list(range(self.rows)) if tokens is None else [int(t) for t in tokens]
        self.rows = len(ids)
        up = [c for c in CAPTURED if c >= self.rows]
        self.padded = self.rows if (FALLBACK or not up) and self.rows not in CAPTURED else up[0]
        sum(i * i for i in range(200 * self.padded))  # work grows with the rows computed
        return [(t * 7 + 3) % 101 for t in ids]

    def step_info(self):
        return {{"path": "graph" if self.padded in CAPTURED else "eager", "padded_to": self.padded}}

    def describe(self):
        return {{"model": "toy", "dtype": "float32", "captured_sizes": list(CAPTURED), "fallback": FALLBACK}}


def make(**options):
    return Workload()
'''

MIX_CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 16
warmup_steps = 2
tok_per_s_min_s = 0
warmup_max_s = 0
batch_mix_file = "bench/sizes.txt"
[build]
method = "none"
[measure]
repeats = 2
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
threshold_pct = 20
"""


@pytest.mark.slow
def test_guard_run_reports_the_mix_per_arm(tmp_path: Path) -> None:
    from tests.conftest import commit_all

    repo = tmp_path / "engine"
    (repo / "bench").mkdir(parents=True)
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(MIX_CONFIG)
    (repo / "wl.py").write_text(MIX_WORKLOAD.format(fallback=True))
    (repo / "bench" / "sizes.txt").write_text("3\n1\n6\n2\n3\n")
    commit_all(repo, "base: sizes between the captured ones run eagerly")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "wl.py").write_text(MIX_WORKLOAD.format(fallback=False))
    (repo / "bench" / "sizes.txt").write_text("1\n")  # the head's file is not used
    commit_all(repo, "head: remove the fallback")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature",
                           "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    report = json.loads((out / "report.json").read_text())
    mix = report["mix"]
    assert mix["source"] == "bench/sizes.txt" and mix["max_batch_size"] == 6
    sequence = [3, 1, 6, 2, 3]
    timed = [sequence[k % 5] for k in range(2, 2 + 16)]  # after the warmup, on a CPU
    head_rows = {1: 1, 2: 2, 3: 4, 6: 6}
    base, head = (next(a for a in mix["arms"] if a["arm"] == name) for name in ("base", "head"))
    assert base["padding_waste"] == 0 and base["useful_work_coverage"] == 1
    assert head["useful_work_coverage"] == pytest.approx(sum(timed) / sum(head_rows[b] for b in timed))
    graph_steps = {"base": sum(b in (1, 2) for b in timed), "head": sum(b in (1, 2, 3) for b in timed)}
    assert base["capture_coverage"] == pytest.approx(graph_steps["base"] / 16)
    assert head["capture_coverage"] == pytest.approx(graph_steps["head"] / 16)
    shares = {s["batch_size"]: s["share"] for s in head["sizes"]}
    assert shares == {b: n / 16 for b, n in Counter(timed).items()}
    assert {s["batch_size"]: (s["path"], s["padded_to"]) for s in head["sizes"]} == {
        1: ("graph", 1), 2: ("graph", 2), 3: ("graph", 4), 6: ("eager", 6)}
    assert {s["batch_size"]: s["path"] for s in base["sizes"]}[3] == "eager"
    # like for like: forced from the base's free-running pass of the same schedule
    for arm in ("base", "head"):
        result = json.loads((out / "runs" / f"{arm}-0.json").read_text())
        assert [len(row) for row in result["mix"]["tokens"]] == [6, *[sequence[k % 5] for k in range(18)]]
        assert result["mix"]["forced"] is True
    assert report["config_change"] is not None  # the head's sizes file was seen, and not used
    # the head's change split per size by what each arm computed, and the run's record
    split = {s["batch_size"]: (s["path"], s["padded_to"]) for s in report["explanation"]["mix"]["sizes"]}
    assert split == {1: (["graph", "graph"], [1, 1]), 2: (["graph", "graph"], [2, 2]),
                     3: (["eager", "graph"], [3, 4]), 6: (["eager", "eager"], [6, 6])}
    record = report["record"]
    assert (record["model"], record["precision"]) == ("toy", "float32")
    assert [(p["arm"], p["fallback"], p["captured_sizes"]) for p in record["capture"]] == [
        ("base", True, [1, 2, 4]), ("head", False, [1, 2, 4])]
    assert {b["batch_size"]: b["share"] for b in record["batch_distribution"]} == shares


BAD_INFO_WORKLOAD = '''
class Workload:
    def setup(self, batch_size):
        self.rows = batch_size

    def step(self, tokens=None):
        self.rows = self.rows if tokens is None else len(tokens)
        return [1] * self.rows

    def step_info(self):
        return {answer}


def make():
    return Workload()
'''


@pytest.mark.parametrize("answer,said", [
    ('{"path": "replayed"}', "path must be 'graph' or 'eager'"),
    ('{"padded_to": 0}', "padded_to must be a whole number"),
    ('{"expert_tokens": [1, -1]}', "expert_tokens must be 1 to 4096 whole numbers"),
    ('{"graphs": 1}', "unknown keys ['graphs']"),
    ('[1]', "must return a dict"),
])
def test_a_step_info_that_breaks_the_protocol_fails_its_process_with_a_message(
    tmp_path: Path, answer: str, said: str,
) -> None:
    (tmp_path / "wl.py").write_text(BAD_INFO_WORKLOAD.format(answer=answer))
    spec = {"entry": "wl.py:make", "root": str(tmp_path), "batch_sizes": [1], "steps": 3, "warmup_steps": 1,
            "batch_mix": {"1": 0.5, "2": 0.5}}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "guard/harness/run.py"), str(tmp_path / "spec.json"),
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3
    error = json.loads((tmp_path / "out.json").read_text())["error"]
    assert error["stage"] == "batch-size mix" and said in error["message"]
