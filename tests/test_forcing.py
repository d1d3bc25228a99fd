"""Teacher forcing: the reference process, forced measured processes, and the agreement rule,
from the harness subprocess up to whole `guard run` pipelines on real git repositories."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from guard.compare import agreement, false_alarm_bound
from guard.measure import REFERENCE_FORMAT, BatchRun, TokenMismatch
from guard.measure._disagreements import count_disagreements
from tests.conftest import commit_all, git, writable_by_all
from tests.standin import Process, Run, StandIn, run_in_process
from tests.test_harness import engine_spec, run_harness

STEPS, WARMUP = 8, 3


# -- the harness ----------------------------------------------------------------------------


def write_reference(path: Path, rows_by_size: dict[int, list[list[int]]]) -> Path:
    path.write_text(json.dumps({"format": REFERENCE_FORMAT, "source": "test",
                                "batch_sizes": {str(k): v for k, v in rows_by_size.items()}}))
    return path


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("reference")
    rc, result, stderr = run_harness(tmp, engine_spec(mode="reference", steps=STEPS, warmup_steps=WARMUP), "ref")
    assert rc == 0, stderr
    return result


def test_reference_process_decodes_free_running_as_long_as_a_measured_one(reference_run: dict[str, Any]) -> None:
    assert reference_run["accepts_tokens"] is True
    assert [r["batch_size"] for r in reference_run["runs"]] == [1, 2]
    for run in reference_run["runs"]:
        # on a CPU a measured process decodes warmup + one timed pass after each setup
        assert len(run["tokens"]) == WARMUP + STEPS
        assert all(len(row) == run["batch_size"] for row in run["tokens"])
        assert "step_ms" not in run  # untimed


def test_forced_with_its_own_reference_a_process_reproduces_it(
    tmp_path: Path, reference_run: dict[str, Any]
) -> None:
    rows = {r["batch_size"]: r["tokens"] for r in reference_run["runs"]}
    spec = engine_spec(steps=STEPS, warmup_steps=WARMUP, reference=str(write_reference(tmp_path / "r.json", rows)))
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, stderr
    for run in result["runs"]:
        assert run["forced"] is True
        assert run["tokens"] == rows[run["batch_size"]]
        assert "disagreements" not in run  # the guard counts them, not the process
        assert count_disagreements(run["tokens"], rows[run["batch_size"]]) == (
            0, (WARMUP + STEPS) * run["batch_size"], None)
    assert "inputs forced" in stderr


def test_forced_inputs_steer_the_decode(tmp_path: Path, reference_run: dict[str, Any]) -> None:
    """Other ids forced at one step: the outputs up to it are the reference's, the next one
    follows the forced id, so it disagrees, and the forcing from then on keeps the rest close."""
    rows = {r["batch_size"]: [list(row) for row in r["tokens"]] for r in reference_run["runs"]}
    planted = {size: [list(row) for row in tokens] for size, tokens in rows.items()}
    k = 5  # the reference output of step k + 1 (1-based) is the input of step k + 2
    planted[1][k] = [(planted[1][k][0] + 17) % 8192]
    spec = engine_spec(steps=STEPS, warmup_steps=WARMUP, batch_sizes=[1],
                       reference=str(write_reference(tmp_path / "r.json", planted)))
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, stderr
    run = result["runs"][0]
    count, _, first = count_disagreements(run["tokens"], planted[1])
    # step k+1 itself was not steered: its output is the reference's true id, not the planted one
    assert first == TokenMismatch(step=k + 1, sequence=0, expected=planted[1][k][0], found=rows[1][k][0])
    assert run["tokens"][:k] == rows[1][:k]
    assert run["tokens"][k + 1] != rows[1][k + 1]  # step k+2 decoded from the planted id
    assert count >= 2


def test_a_workload_without_step_tokens_runs_free(tmp_path: Path) -> None:
    (tmp_path / "wl.py").write_text(
        "class W:\n"
        "    def setup(self, b): self.b, self.t = b, 0\n"
        "    def step(self):\n"
        "        self.t += 1\n"
        "        return [self.t % 7] * self.b\n"
        "def make(): return W()\n"
    )
    base = {"entry": "wl.py:make", "root": str(tmp_path), "options": {}, "batch_sizes": [1], "steps": 3,
            "warmup_steps": 1, "arm": "base", "repeat": 0}
    rc, ref, stderr = run_harness(tmp_path, base | {"mode": "reference"}, "ref")
    assert rc == 0, stderr
    assert ref["accepts_tokens"] is False and ref["runs"] == []  # nothing to force it with: no passes
    reference = write_reference(tmp_path / "r.json", {1: [[1], [2], [3], [4]]})
    rc, result, stderr = run_harness(tmp_path, base | {"reference": str(reference)})
    assert rc == 0, stderr
    assert result["runs"][0]["forced"] is False


def test_a_reference_too_short_for_the_pass_is_a_clear_failure(tmp_path: Path) -> None:
    spec = engine_spec(steps=STEPS, warmup_steps=WARMUP, batch_sizes=[1],
                       reference=str(write_reference(tmp_path / "r.json", {1: [[3]] * 4})))
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 3
    assert "the reference tokens hold 4 steps, fewer than this pass needs" in result["error"]["message"]


def test_the_guard_counts_disagreements_whatever_the_process_claims() -> None:
    """A measured process runs the head's code: a count it reports is replaced by the guard's."""
    from guard.measure import ReferenceTokens, RepeatResult
    from guard.measure._disagreements import with_disagreements

    run = BatchRun(batch_size=2, steps=2, warmup_steps=1, timer="perf_counter", setup_s=0, wall_s=1, tok_per_s=1,
                   gpu_ms_per_step=1, step_ms=[1.0], tokens=[[5, 6], [7, 9], [1, 2]], sha256="x", forced=True,
                   disagreements=0, compared=6)  # claims a clean run
    result = RepeatResult(arm="head", repeat=0, environment={}, runs=[run])
    reference = ReferenceTokens(source="t", batch_sizes={2: [[5, 6], [7, 8], [1, 3], [4, 4]]})
    (counted,) = with_disagreements(result, reference).runs
    assert (counted.disagreements, counted.compared) == (2, 6)
    assert counted.first_disagreement == TokenMismatch(step=2, sequence=1, expected=8, found=9)


@pytest.mark.slow
def test_a_reference_file_changed_since_the_guard_wrote_it_is_refused(tmp_path: Path, reference_run) -> None:
    rows = {r["batch_size"]: r["tokens"] for r in reference_run["runs"]}
    path = write_reference(tmp_path / "r.json", rows)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    spec = engine_spec(steps=STEPS, warmup_steps=WARMUP, reference=str(path), reference_sha256=digest)
    rc, _, stderr = run_harness(tmp_path, spec, "good")
    assert rc == 0, stderr
    rows[1][3] = [(rows[1][3][0] + 1) % 8192]  # what an earlier process of the arm's code could write
    write_reference(path, rows)
    rc, result, _ = run_harness(tmp_path, spec, "changed")
    assert rc == 3 and "is not the reference the guard wrote" in result["error"]["message"]


# -- the rule -------------------------------------------------------------------------------


def forced_runs(counts: list[int], compared: int = 400) -> list[BatchRun]:
    return [
        BatchRun(batch_size=1, steps=8, warmup_steps=2, timer="perf_counter", setup_s=0, wall_s=1, tok_per_s=1,
                 gpu_ms_per_step=1, step_ms=[1.0], tokens=[[0]], sha256=str(i), forced=True, disagreements=d,
                 compared=compared,
                 first_disagreement=TokenMismatch(step=3, sequence=0, expected=1, found=2) if d else None)
        for i, d in enumerate(counts)
    ]


def test_an_exact_base_calls_a_head_changed_only_past_a_quarter_of_the_outputs() -> None:
    found = agreement({"base": forced_runs([0, 0, 0]), "head": forced_runs([101, 120, 150])}, "base", "ref")
    assert found.exact is True
    head = found.arm("head")
    assert head is not None and head.output_changed is True and head.min_excess == 100  # a quarter of 400
    assert head.first_disagreement == TokenMismatch(step=3, sequence=0, expected=1, found=2)
    # one token in every process: the arithmetic changed, not what it computes
    small = agreement({"base": forced_runs([0, 0, 0]), "head": forced_runs([1, 1, 2])}, "base", "ref").arm("head")
    assert small is not None and (small.output_changed, small.numerics_changed) == (False, True)
    # a near-tie in one process is neither, but is kept for the comment
    rare = agreement({"base": forced_runs([0, 0, 0]), "head": forced_runs([0, 1, 0])}, "base", "ref").arm("head")
    assert rare is not None and (rare.output_changed, rare.numerics_changed, rare.some_disagree) == (False, False, True)
    same = agreement({"base": forced_runs([0, 0]), "head": forced_runs([0, 0])}, "base", "ref").arm("head")
    assert same is not None and not (same.output_changed or same.numerics_changed or same.some_disagree)


def test_a_noisy_base_needs_every_head_process_above_and_a_quarter_of_the_outputs() -> None:
    base = forced_runs([4, 5, 5])  # max 5, mean 4.67; of 400 outputs the rule asks 100 more on average
    cases = {  # counts: (output changed, numerics changed)
        (6, 6, 6): (False, True),  # every one above, by 1.33 on average: rounding
        (50, 50, 45): (False, True),  # every one above, by 43.7: under a quarter of the outputs
        (110, 120, 105): (True, False),  # every one above, by 107.7
        (5, 20, 20): (False, False),  # one head process at base's highest: not above it
        (90, 200, 120): (True, False),
    }
    for counts, (changed, numerics) in cases.items():
        head = agreement({"base": base, "head": forced_runs(list(counts))}, "base", "ref").arm("head")
        assert head is not None
        assert (head.output_changed, head.numerics_changed) == (changed, numerics), counts
        assert head.excess == pytest.approx(sum(counts) / 3 - 14 / 3)
        assert head.min_excess == 100
    # with few outputs the floor is 2 disagreements
    few = agreement({"base": forced_runs([0, 1], 8), "head": forced_runs([3, 4], 8)}, "base", "ref").arm("head")
    assert few is not None and few.min_excess == 2 and few.output_changed is True


def test_arms_that_ran_free_are_named_not_judged() -> None:
    free = [r.model_copy(update={"forced": False, "disagreements": None}) for r in forced_runs([0, 0])]
    found = agreement({"base": forced_runs([1, 2]), "head": free}, "base", "ref")
    assert found.unforced == ["head"] and found.arm("head") is None


@pytest.mark.slow
def test_the_false_alarm_bound_is_what_a_simulation_of_alike_arms_gives() -> None:
    """Alike arms (D drawn from one distribution, here rare: 1% per output of 100, so that a
    base of 5 clean processes happens), 5 processes each: 'every head above every base' calls a
    change at most 1/252 of the time, whether base came out exact or not."""
    rng = random.Random(7)
    trials, calls, above = 20000, 0, 0
    for _ in range(trials):
        base_d = [sum(rng.random() < 0.01 for _ in range(100)) for _ in range(5)]
        head_d = [sum(rng.random() < 0.01 for _ in range(100)) for _ in range(5)]
        above += min(head_d) > max(base_d)
        found = agreement({"base": forced_runs(base_d, 100), "head": forced_runs(head_d, 100)}, "base", "ref")
        calls += found.arm("head").output_changed  # type: ignore[union-attr]
    bound = false_alarm_bound(5, 5)
    assert bound == pytest.approx(1 / 252)
    assert above / trials <= bound * 1.5  # ties make it rarer than the bound; 1.5: room for the draw
    assert calls <= above


# -- whole pipelines ------------------------------------------------------------------------

# Greedy decode whose argmax breaks near-ties differently in every process (as bf16 does on a
# GPU, where each process picks its own kernels): with FLIP, an output is the runner-up. The
# per-process seed comes from a counter file, so the test's processes differ from one another
# while every run of the test is the same.
NOISY = '''
import os
import random

FLIP = {flip}
SHIFT = {shift}
WORK = {work}
AT = {at}  # the one step (from 1) whose output is another token; 0: none


def _process_seed():
    path = os.environ["NOISY_COUNTER"]
    n = int(open(path).read()) if os.path.exists(path) else 0
    with open(path, "w") as f:
        f.write(str(n + 1))
    return n


class Workload:
    def __init__(self):
        self.rng = random.Random(1000 + _process_seed())

    def setup(self, batch_size):
        self.last = [row + 1 for row in range(batch_size)]
        self.t = 0

    def step({params}):
        {force}
        acc = 0
        for i in range(WORK):
            acc += i * i
        self.t += 1
        out = []
        for t in self.last:
            best = (t * 7 + 3 + SHIFT + (self.t == AT)) % 101
            if self.rng.random() < FLIP:
                best = (best + 1) % 101
            out.append(best)
        self.last = out
        return out


def make():
    return Workload()
'''

CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 40
warmup_steps = 4
# no timed warmup: the recorded pass is then each process's first draws of its seeded flips
warmup_max_s = 0
tok_per_s_min_s = 0.2
[build]
method = "none"
install = ""
pass_env = ["NOISY_COUNTER"]
[measure]
repeats = 4
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
"""


def write_noisy(repo: Path, flip: float, shift: int = 0, work: int = 2000, forcing: bool = True, at: int = 0) -> None:
    params, force = ("self, tokens=None", "if tokens is not None: self.last = [int(t) for t in tokens]") if forcing \
        else ("self", "pass")
    (repo / "wl.py").write_text(NOISY.format(flip=flip, shift=shift, work=work, at=at, params=params, force=force))


def noisy_repo(tmp_path: Path, flip: float, forcing: bool = True, config: str = CONFIG) -> Path:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(config)
    write_noisy(repo, flip, forcing=forcing)
    commit_all(repo, "noisy engine")
    git(repo, "checkout", "--quiet", "-b", "feature")
    return repo


def _counter(tmp_path: Path) -> Path:
    """Where the workload counts its processes: a folder it may write, whoever it runs as."""
    return writable_by_all(tmp_path / "notes") / "count"


def run_guard(repo: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, Any], str]:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=os.environ | {"NOISY_COUNTER": str(_counter(tmp_path))},
    )
    assert (out / "report.json").exists(), proc.stderr
    return proc, json.loads((out / "report.json").read_text()), (out / "comment.md").read_text()


# The pipeline's reading of forced processes, in-process: each process's ids come from a model
# of a greedy decode whose argmax breaks near-ties its own way in every process (as bf16 does on
# a GPU, where each process picks its own kernels). A clean step's id is `_clean`; with rate
# `flip` a process's output there is the runner-up instead, drawn from a seed of the process and
# the position, so every run of a test is the same. Forced from the reference (base's untimed
# process), a process disagrees with it where one of the two flipped and the other did not.
FORCED_STEPS, FORCED_WARMUP = 40, 4
FORCED_CONFIG = CONFIG.replace('pass_env = ["NOISY_COUNTER"]\n', "")


def _clean(step: int, row: int) -> int:
    return (step * 7 + row * 13 + 3) % 101


def _flipped(process: Process, step: int, row: int, rate: float) -> bool:
    return rate > 0 and random.Random(f"{process.number}/{step}/{row}").random() < rate


def noisy_model(flip: float, head_flip: float | None = None, shift: int = 0, at: int = 0,
                head_ms: float = 1.0) -> StandIn:
    """Base (and the reference) flip at `flip`, head at `head_flip` (default `flip`); head's ids are
    `shift` higher, and at step `at` one higher; head's steps take `head_ms`, base's 1 ms (each
    process a thousandth apart)."""
    def token(process: Process, _size: int, step: int, row: int) -> int:
        head = process.arm == "head"
        best = (_clean(step, row) + (shift + (step == at) if head else 0)) % 101
        return (best + _flipped(process, step, row, head_flip if head and head_flip is not None else flip)) % 101

    def step_ms(process: Process, _size: int) -> float:
        return (head_ms if process.arm == "head" else 1.0) * (1 + 0.001 * (process.number % 3))

    return StandIn(step_ms=step_ms, token=token, accepts_tokens=True)


def _expected_disagreements(standin: StandIn, arm: str) -> list[int]:
    """Per measured process of `arm`, the outputs the model says differ from the reference's."""
    reference = next(p for p in standin.asked if p.mode == "reference")
    total = FORCED_WARMUP + FORCED_STEPS
    return [sum(standin.token(p, 1, step, 0) != standin.token(reference, 1, step, 0) for step in range(1, total + 1))
            for p in standin.asked if p.mode == "measure" and p.arm == arm]


def forced_run(tmp_path: Path, standin: StandIn, note: str = "a change") -> Run:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text(FORCED_CONFIG)
    (repo / "wl.py").write_text("def make(**_options):  # answered by the stand-in\n    raise NotImplementedError\n")
    commit_all(repo, "engine")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "note.txt").write_text(note + "\n")
    commit_all(repo, note)
    return run_in_process(repo, tmp_path / "out", standin)


def test_noisy_argmax_a_a_is_judged_not_invalid(tmp_path: Path) -> None:
    run = forced_run(tmp_path, noisy_model(flip=0.05))
    report = run.report.model_dump(mode="json")
    assert report["verdict"] in ("pass", "at_threshold", "inconclusive"), report["reasons"]
    assert run.exit_code == (0 if report["verdict"] == "pass" else 4), run.text
    found = report["batch_sizes"][0]["agreement"]
    assert found["exact"] is False
    assert all(any(d > 0 for d in arm["disagreements"]) for arm in found["arms"])  # every arm is noisy
    assert found["arms"][1]["output_changed"] is False
    assert "numerical noise" in run.comment and "like for like" in run.comment


def test_noisy_argmax_with_another_output_is_invalid(tmp_path: Path) -> None:
    run = forced_run(tmp_path, noisy_model(flip=0.05, shift=1))  # the next token is another one: the model changed
    report = run.report.model_dump(mode="json")
    assert run.exit_code == 3 and report["verdict"] == "invalid"
    head = report["batch_sizes"][0]["agreement"]["arms"][1]
    assert head["arm"] == "head" and head["output_changed"] is True
    assert min(head["disagreements"]) > 0.8 * head["compared"]
    assert "the output of head changed" in run.comment
    assert "the head's output changed at batch size 1, first at step 1" in run.comment.splitlines()[1]


def test_noisy_argmax_slower_head_is_a_regression(tmp_path: Path) -> None:
    run = forced_run(tmp_path, noisy_model(flip=0.05, head_ms=10.0))  # ten times the time per step, the same ids
    report = run.report.model_dump(mode="json")
    assert report["verdict"] == "regression", report["reasons"]
    assert run.exit_code == 1
    assert report["batch_sizes"][0]["gpu_ms_change"]["pct"] > 100
    assert "numerical noise" in run.comment


def test_an_exact_engine_whose_head_changes_one_token_is_judged_and_says_its_arithmetic_changed(
    tmp_path: Path,
) -> None:
    # one other id, at step 20, in every process of head; and head is slower
    run = forced_run(tmp_path, noisy_model(flip=0.0, at=20, head_ms=10.0))
    report = run.report.model_dump(mode="json")
    assert report["verdict"] == "regression", report["reasons"]
    found = report["batch_sizes"][0]["agreement"]
    assert found["exact"] is True
    head = found["arms"][1]
    assert head["disagreements"] == [1, 1, 1, 1] and head["first_disagreement"]["step"] == 20
    assert (head["output_changed"], head["numerics_changed"]) == (False, True)
    total = FORCED_WARMUP + FORCED_STEPS
    assert "The head's arithmetic changed" in run.comment and f"1, 1, 1, 1 of {total} outputs" in run.comment


def test_an_exact_base_and_a_head_with_rare_flips_is_judged_and_the_flips_reported(tmp_path: Path) -> None:
    standin = noisy_model(flip=0.0, head_flip=0.01)  # near-ties in some processes, not all: not a change
    run = forced_run(tmp_path, standin, "a rounding change")
    report = run.report.model_dump(mode="json")
    head = report["batch_sizes"][0]["agreement"]["arms"][1]
    expected = _expected_disagreements(standin, "head")
    assert min(expected) == 0 < max(expected)  # the model's seeds give this mix, which the test is about
    assert head["disagreements"] == expected
    assert head["output_changed"] is False and head["some_disagree"] is True
    assert report["verdict"] != "invalid", report["reasons"]
    assert "not in every process" in run.comment


def test_a_free_running_noisy_workload_is_told_how_to_support_forcing(tmp_path: Path) -> None:
    standin = noisy_model(flip=0.05)
    standin.accepts_tokens = False  # its step() takes no ids: every process runs free, flips and all
    run = forced_run(tmp_path, standin)
    report = run.report.model_dump(mode="json")
    assert report["verdict"] == "invalid"
    assert report["batch_sizes"][0]["agreement"] is None
    assert "is not deterministic" in run.comment
    assert "`def step(self, tokens=None):`" in run.comment and "self.input_ids.copy_(tokens)" in run.comment


def test_a_reference_name_that_carries_markdown_does_not_load_from_a_report() -> None:
    """A report read back (by the commenter) is data: its reference name cannot be a link."""
    from pydantic import ValidationError

    from validation._older import current_report

    report = json.loads((Path(__file__).resolve().parents[1] / "docs" / "validation" / "h200-engines" / "pairs"
                         / "compiled-graph-break" / "report.json").read_text())
    assert report["workload"]["reference"].startswith("base ")
    current_report(report)  # schema 1, read as data
    report["workload"]["reference"] = "base [click](https://e.invalid)"
    with pytest.raises(ValidationError, match="reference"):
        current_report(report)


@pytest.mark.slow
def test_a_committed_reference_file_forces_every_process_and_a_bad_one_is_one_message(tmp_path: Path) -> None:
    """The reference the guard wrote in one run, committed to base, forces the next run; no
    reference process runs then. One too short for the run is refused with exit code 2."""
    repo = noisy_repo(tmp_path, flip=0.0)
    (repo / "note.txt").write_text("no code change\n")
    commit_all(repo, "a change that cannot matter")
    first, _, _ = run_guard(repo, tmp_path)
    written = tmp_path / "out" / "runs" / "reference-tokens.json"
    assert json.loads(written.read_text())["format"] == REFERENCE_FORMAT

    git(repo, "checkout", "--quiet", "main")
    (repo / "bench").mkdir()
    (repo / "bench" / "reference.json").write_text(written.read_text())
    (repo / "guard.toml").write_text(CONFIG.replace("[build]", 'reference_file = "bench/reference.json"\n[build]'))
    commit_all(repo, "commit the reference tokens")
    git(repo, "checkout", "--quiet", "feature")
    git(repo, "merge", "--quiet", "main")
    proc, report, comment = run_guard(repo, tmp_path / "again")
    assert report["workload"]["reference"] == "bench/reference.json"
    assert "free-running greedy pass" not in proc.stderr and "bench/reference.json from the base commit" in proc.stderr
    assert report["batch_sizes"][0]["agreement"]["exact"] is True
    assert "forced from bench/reference.json" in comment

    git(repo, "checkout", "--quiet", "main")
    data = json.loads(written.read_text())
    data["batch_sizes"]["1"] = data["batch_sizes"]["1"][:10]
    (repo / "bench" / "reference.json").write_text(json.dumps(data))
    commit_all(repo, "a reference too short")
    git(repo, "checkout", "--quiet", "feature")
    git(repo, "merge", "--quiet", "main")
    out = tmp_path / "short"
    short = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=os.environ | {"NOISY_COUNTER": str(_counter(tmp_path))},
    )
    assert short.returncode == 2
    assert "workload.reference_file: bench/reference.json holds 10 steps at batch size 1, fewer than the 44" in (
        short.stderr)
    assert "Traceback" not in short.stderr


@pytest.mark.slow
def test_a_head_that_rewrites_the_reference_does_not_change_what_base_is_forced_with(tmp_path: Path) -> None:
    """The arm's code can write where its process runs when it runs as the guard's user (a
    runner that is not root; build.user = "" here); the guard writes the reference again
    before every process and counts from its own copy, so base stays clean. (As the second
    user it cannot write the reference at all: tests/test_attack_secrets.py.)"""
    repo = noisy_repo(tmp_path, flip=0.0, config=CONFIG.replace("[build]", '[build]\nuser = ""'))
    source = (repo / "wl.py").read_text()
    poison = (
        "\n    def teardown(self):\n"
        "        import json, sys\n"
        "        spec = json.load(open(sys.argv[1]))\n"
        "        data = json.load(open(spec['reference']))\n"
        "        data['batch_sizes'] = {k: [[(t + 1) % 101 for t in row] for row in rows]\n"
        "                               for k, rows in data['batch_sizes'].items()}\n"
        "        json.dump(data, open(spec['reference'], 'w'))\n"
    )
    (repo / "wl.py").write_text(source.replace("\n\ndef make():", poison + "\n\ndef make():"))
    commit_all(repo, "a head that rewrites the reference after each process")
    proc, report, comment = run_guard(repo, tmp_path)
    found = report["batch_sizes"][0]["agreement"]
    assert found["exact"] is True, found  # base processes after a head one were forced as before
    assert all(d == 0 for arm in found["arms"] for d in arm["disagreements"])
    assert report["verdict"] != "invalid", report["reasons"]
