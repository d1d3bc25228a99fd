"""tok/s from windows over repeated passes, the warmup, the garbage collector and what the host
did: the pieces of guard/harness/run.py, and the harness as a real subprocess."""

from __future__ import annotations

import io
import json
import os
import statistics
import tarfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from guard.harness._host import settled, window_rates, windows
from guard.harness import Spec
from guard.harness._passes import Process, run_batch
from guard.harness._protocol import wire
from guard.measure import HostUsage, RepeatResult
from tests.step_clock import Clock, installed
from tests.test_harness import REPO_ROOT, engine_spec, file_spec, run_harness

EXAMPLE_RUNS = REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "runs.tar.gz"


# -- windows, a diagnostic: tok/s is tokens over the whole decode ----------------------------


def test_steps_are_grouped_into_windows_of_at_least_the_window() -> None:
    steps = [0.04] * 10  # 0.4 s: a window closes on its third step (0.12 s)
    assert windows(steps, 0.1) == [(3, pytest.approx(0.12)), (3, pytest.approx(0.12)), (4, pytest.approx(0.16))]
    # the remainder (one step, 0.04 s) joined the last window: no window is shorter than 0.1 s
    assert all(seconds >= 0.1 for _, seconds in windows([0.03] * 17, 0.1))
    assert sum(count for count, _ in windows([0.03] * 17, 0.1)) == 17  # every step in one window


def test_a_step_longer_than_a_window_is_a_window_and_too_few_steps_make_one() -> None:
    assert windows([0.25, 0.3, 0.01], 0.1) == [(1, 0.25), (2, pytest.approx(0.31))]
    assert windows([0.01, 0.02], 0.1) == [(2, pytest.approx(0.03))]
    assert windows([], 0.1) == []


def test_window_rates_are_tokens_over_seconds_and_their_median_hides_a_pause() -> None:
    # batch size 2; windows of 0.12 s (3 steps), 0.12 s, and 0.1 + 0.3 s (a pause in the last)
    steps = [0.04, 0.04, 0.04, 0.04, 0.04, 0.04, 0.1, 0.3]
    rates = window_rates(steps, 2, 0.1)
    assert rates == [pytest.approx(6 / 0.12), pytest.approx(6 / 0.12), pytest.approx(2 / 0.1), pytest.approx(2 / 0.3)]
    # the pause moves the pass's own rate, the decided tok/s, by far more than it moves the median
    # of windows: why that median is no figure the guard decides on
    whole_pass = 2 * len(steps) / sum(steps)
    assert statistics.median(rates) == pytest.approx((6 / 0.12 + 2 / 0.1) / 2)
    assert whole_pass < 0.6 * 6 / 0.12


def test_the_warmup_settles_when_its_rolling_median_stops_moving() -> None:
    assert not settled([100.0, 100.0, 100.0])  # three windows: no earlier median to compare with
    assert settled([100.0, 100.0, 100.0, 100.5], width=3, pct=1.0)
    # a cold start: the median of the last three still climbs by more than 1%
    assert not settled([50.0, 80.0, 95.0, 99.0], width=3, pct=1.0)
    assert settled([50.0, 80.0, 95.0, 99.0, 99.5, 99.4], width=3, pct=1.0)
    # one outlier window does not unsettle a median of three
    assert settled([100.0, 100.0, 100.0, 100.0, 40.0], width=3, pct=1.0)


# -- the harness: like-for-like passes ------------------------------------------------------

# Records every setup and every step's input, and spins a fixed time per step. Tokens depend on
# the step's position after setup and on its input, so a pass that did not start over shows.
RECORDING = """
import json
import time


class W:
    def __init__(self, log, step_s):
        self.log, self.step_s = log, step_s
        self.position = 0

    def _note(self, entry):
        with open(self.log, "a") as f:
            f.write(json.dumps(entry) + "\\n")

    def setup(self, batch_size):
        self.batch, self.position = batch_size, 0
        self._note({"setup": batch_size})

    def step(self, tokens=None):
        given = None if tokens is None else [int(t) for t in tokens]
        end = time.perf_counter() + self.step_s
        while time.perf_counter() < end:
            pass
        self.position += 1
        self._note({"position": self.position, "input": given})
        return [(self.position * 5 + row + (given[row] if given else 0)) % 97 for row in range(self.batch)]


def make(log, step_s):
    return W(log, step_s)
"""


def _entries(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _passes(entries: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The steps between one setup and the next."""
    passes: list[list[dict[str, Any]]] = []
    for entry in entries:
        if "setup" in entry:
            passes.append([])
        else:
            passes[-1].append(entry)
    return passes


def _reference(path: Path, rows: int) -> Path:
    data = {"format": "regression-guard reference tokens", "source": "test",
            "batch_sizes": {"1": [[(11 * k + 3) % 97] for k in range(rows)]}}
    path.write_text(json.dumps(data))
    return path


def test_repeated_passes_do_the_same_work_and_only_the_first_is_compared(tmp_path: Path) -> None:
    steps, lead_in = 6, 2
    log = tmp_path / "calls.log"
    reference = _reference(tmp_path / "reference.json", lead_in + steps)
    spec = file_spec(tmp_path, RECORDING, options={"log": str(log), "step_s": 0.004}, batch_sizes=[1],
                     steps=steps, warmup_steps=lead_in, tok_per_s_min_s=0.3, warmup_max_s=0.0,
                     reference=str(reference))
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, result.get("error", stderr)
    run = result["runs"][0]
    passes = _passes(_entries(log))
    # the first setup, then one per pass after the first: each pass is lead-in + steps from position 1
    assert len(passes) == run["timed_passes"]
    # a pass times 24 ms of steps at the least: 0.3 s took several, and no more than it needed
    assert 2 <= run["timed_passes"] <= 0.3 / (steps * 0.004) + 1
    assert all([e["position"] for e in p] == list(range(1, lead_in + steps + 1)) for p in passes)
    # every pass was forced with the same inputs: none on its first step, then the reference's ids
    inputs = [[e["input"] for e in p] for p in passes]
    assert all(i == inputs[0] for i in inputs)
    assert inputs[0] == [None] + [[(11 * k + 3) % 97] for k in range(lead_in + steps - 1)]
    # the tokens compared are those of one pass, however many passes a process made
    assert len(run["tokens"]) == lead_in + steps
    assert run["passes_differing"] == 0
    assert run["timed_s"] >= 0.3


def test_tok_per_s_is_the_tokens_of_every_timed_pass_over_their_time(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    spec = file_spec(tmp_path, RECORDING, options={"log": str(log), "step_s": 0.005}, batch_sizes=[1, 2],
                     steps=10, warmup_steps=1, tok_per_s_min_s=0.5, tok_per_s_window_s=0.1, warmup_max_s=0.0)
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, result.get("error", stderr)
    for run in result["runs"]:
        passes = run["end_to_end_pass_ms"]
        assert len(passes) == run["timed_passes"] >= 2 and sum(passes) == pytest.approx(run["timed_s"] * 1e3)
        assert run["tok_per_s"] == pytest.approx(run["batch_size"] * 10 * len(passes) / run["timed_s"])
        # the windows' rates stay beside it, a diagnostic
        rates = run["tok_per_s_windows"]
        assert run["window_s"] == 0.1
        # windows of 0.1 s or more: no more of them than the decode holds, and each step's
        # spin caps every window's rate
        assert 1 <= len(rates) <= run["timed_s"] / 0.1
        assert max(rates) <= run["batch_size"] / 0.005 and run["tok_per_s"] <= run["batch_size"] / 0.005
        # the per-step figure still comes from the first pass alone
        assert len(run["step_ms"]) == run["steps"] == 10


def test_one_pass_without_a_minimum_is_the_old_measurement(tmp_path: Path) -> None:
    rc, result, stderr = run_harness(tmp_path, engine_spec(batch_sizes=[1], tok_per_s_min_s=0, warmup_max_s=0))
    assert rc == 0, stderr
    run = result["runs"][0]
    assert run["timed_passes"] == 1 and run["warmup_s"] == 0.0 and run["warmup_settled"] is None


class Steady:
    """Steps of 5 ms on the step clock, after a setup that takes 20 ms of it."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock

    def setup(self, batch_size: int) -> None:
        self.batch = batch_size
        self.clock.sleep(0.02)

    def step(self) -> list[int]:
        self.clock.sleep(0.005)
        return [1] * self.batch


def one_batch(workload: Any, batch_size: int, steps: int, warmup_steps: int, **given: Any) -> dict[str, Any]:
    """`run_batch` in this process (no torch), its record as the result file holds it."""
    spec = Spec(entry="wl.py:make", root=".", batch_sizes=[batch_size], steps=steps, warmup_steps=warmup_steps,
                **given)
    return wire(run_batch(Process(workload, None, spec), batch_size))


def test_tok_per_s_is_the_timed_steps_rate_and_a_pass_under_a_window_is_one_window(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process on the step clock, exact where the tests above, in a process of its own, hold
    only what the host cannot spoil: 5 ms steps give the rate of 5 ms steps, not off by a pass,
    a setup or a lead-in step."""
    clock = installed(monkeypatch)
    for batch_size in (1, 2):
        run = one_batch(Steady(clock), batch_size, 10, 1, tok_per_s_min_s=0.5, tok_per_s_window_s=0.1)
        assert run["timed_passes"] == 10  # 50 ms a pass, until 0.5 s
        assert run["tok_per_s"] == pytest.approx(batch_size / 0.005, rel=1e-9)
        rates = run["tok_per_s_windows"]  # of 0.1 s or more each, all alike
        assert len(rates) >= 4 and rates == [pytest.approx(batch_size / 0.005, rel=1e-9)] * len(rates)
        # one pass of 50 ms: a pass shorter than a window is one window, its tok/s over its own time
        run = one_batch(Steady(clock), batch_size, 10, 0)
        assert run["timed_passes"] == 1
        assert run["tok_per_s_windows"] == [pytest.approx(batch_size * 10 / 0.05, rel=1e-9)]


# -- the warmup -------------------------------------------------------------------------------

# A cold start that warms gradually: a step spins 6 ms at first, 0.05 ms less each call of the
# process, down to 1 ms after `ramp` calls (0.35 s of them for ramp = 100).
RAMP = """
import time


class W:
    def __init__(self, ramp):
        self.ramp, self.calls = ramp, 0

    def setup(self, batch_size):
        self.batch = batch_size

    def step(self):
        self.calls += 1
        spin_ms = max(1.0, 6.0 - 5.0 * self.calls / self.ramp) if self.ramp else 1.0
        end = time.perf_counter() + spin_ms / 1e3
        while time.perf_counter() < end:
            pass
        return [self.calls] * self.batch  # which call of the process made it


def make(ramp):
    return W(ramp)
"""


class Ramp:
    """RAMP's workload on the step clock: each step lasts what RAMP's spins, and no more."""

    def __init__(self, ramp: int, clock: Clock) -> None:
        self.ramp, self.clock, self.calls = ramp, clock, 0

    def setup(self, batch_size: int) -> None:
        self.batch = batch_size

    def step(self) -> list[int]:
        self.calls += 1
        self.clock.sleep(max(1.0, 6.0 - 5.0 * self.calls / self.ramp) / 1e3 if self.ramp else 1e-3)
        return [self.calls] * self.batch  # which call of the process made it


# In-process on the step clock: whether a window of the ramp looks faster than the last is the
# steps' to say, not the host's (beside another run's processes one preempted window made the
# ramp look settled: a fast-tier run of c67b908 failed so, 1 in 3, while it spun for real).
@pytest.mark.parametrize(("ramp", "tok_per_s_min_s", "warmup_max_s", "warmup_s", "is_settled", "first_call"), [
    # while the steps speed up, each window is faster than the last: the warmup outlasts the
    # ramp, so every timed step (its token is the call's number) came after it
    (100, 0.2, 3.0, (0.35, 3.0 + 0.05), True, 101),
    # two windows in 0.25 s, too few for a rolling median of three to be compared: the limit ends it
    (0, 0.0, 0.25, (0.25, 0.25 + 0.05), False, 2),
], ids=["until a gradual cold start is over", "until its limit"])
def test_the_warmup_lasts(monkeypatch: pytest.MonkeyPatch, ramp: int, tok_per_s_min_s: float, warmup_max_s: float,
                          warmup_s: tuple[float, float], is_settled: bool, first_call: int) -> None:
    clock = installed(monkeypatch)
    run = one_batch(Ramp(ramp, clock), 1, 20, 0, tok_per_s_min_s=tok_per_s_min_s, warmup_max_s=warmup_max_s)
    assert warmup_s[0] <= run["warmup_s"] <= warmup_s[1]
    assert run["warmup_settled"] is is_settled
    assert min(row[0] for row in run["tokens"]) >= first_call


# -- the garbage collector ----------------------------------------------------------------------

# Makes cyclic garbage every step and notes, per step, whether the collector is on and how many
# collections ran since the last step: with the collector on, this much garbage triggers them.
GARBAGE = """
import gc
import json

COLLECTIONS = [0]
gc.callbacks.append(lambda phase, info: COLLECTIONS.__setitem__(0, COLLECTIONS[0] + (phase == "start")))


class W:
    def __init__(self, log):
        self.log = log
        self.notes = []

    def setup(self, batch_size):
        self.batch = batch_size

    def step(self):
        before = COLLECTIONS[0]
        for _ in range(3000):
            a = []
            a.append(a)
        self.notes.append({"enabled": gc.isenabled(), "collections": COLLECTIONS[0] - before,
                           "frozen": gc.get_freeze_count()})
        return [1] * self.batch

    def teardown(self):
        self.notes.append({"teardown": True, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()})
        with open(self.log, "w") as f:
            json.dump(self.notes, f)


def make(log):
    return W(log)
"""


def test_the_collector_is_off_during_the_timed_passes_and_on_again_after(tmp_path: Path) -> None:
    steps, lead_in = 5, 3
    log = tmp_path / "gc.json"
    spec = file_spec(tmp_path, GARBAGE, options={"log": str(log)}, batch_sizes=[1], steps=steps,
                     warmup_steps=lead_in, tok_per_s_min_s=0, warmup_max_s=0)
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, result.get("error", stderr)
    notes = json.loads(log.read_text())
    lead, timed, end = notes[:lead_in], notes[lead_in:lead_in + steps], notes[-1]
    assert all(n["enabled"] for n in lead) and sum(n["collections"] for n in lead) > 0  # the garbage does collect
    assert not any(n["enabled"] for n in timed) and sum(n["collections"] for n in timed) == 0
    assert all(n["frozen"] > 0 for n in timed)  # gc.freeze() ran before them
    assert end == {"teardown": True, "enabled": True, "frozen": 0}
    assert result["runs"][0]["gc_disabled"] is True


# -- what the host did ----------------------------------------------------------------------------


def test_context_switches_cpu_time_and_cpus_are_recorded_for_the_timed_passes(tmp_path: Path) -> None:
    cpu = sorted(os.sched_getaffinity(0))[-1]
    spec = file_spec(tmp_path, RAMP, options={"ramp": 0}, batch_sizes=[1], steps=20, warmup_steps=0,
                     tok_per_s_min_s=0.3, warmup_max_s=0, cpus=[cpu])
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, result.get("error", stderr)
    run = result["runs"][0]
    host = HostUsage.model_validate(run["host"])
    assert host.cpus == [cpu]  # pinned: the only CPU it could be seen on
    # one thread spins through the timed passes: CPU time, but no more than their wall time (the
    # process's import and setup, a second or more, are not counted)
    assert 0 < host.user_s + host.sys_s <= 1.1 * run["timed_s"] + 0.02
    assert host.voluntary_switches >= 0 and host.involuntary_switches >= 0


# -- the results, written and read back -------------------------------------------------------


@pytest.mark.slow
def test_the_new_fields_are_read_back_and_results_without_them_still_load(tmp_path: Path) -> None:
    rc, result, stderr = run_harness(tmp_path, engine_spec(tok_per_s_min_s=0.2, warmup_max_s=0.2))
    assert rc == 0, stderr
    loaded = RepeatResult.model_validate(result)
    for run, raw in zip(loaded.runs, result["runs"]):
        assert run.timed_passes == raw["timed_passes"] > 1
        assert run.tok_per_s_windows == raw["tok_per_s_windows"] and run.tok_per_s == raw["tok_per_s"]
        assert run.host is not None and run.host.cpus == raw["host"]["cpus"]
        assert run.warmup_s == raw["warmup_s"] > 0 and run.gc_disabled
    assert RepeatResult.model_validate_json(loaded.model_dump_json()) == loaded

    # results an earlier harness wrote (the committed H200 demo): one pass, no window, no host figures
    with tarfile.open(EXAMPLE_RUNS) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("base-0.json"))
        data = json.load(io.TextIOWrapper(archive.extractfile(member)))  # type: ignore[arg-type]
    old = RepeatResult.model_validate(data)
    assert "timed_passes" not in data["runs"][0]
    assert old.runs[0].timed_passes == 1 and old.runs[0].host is None and old.runs[0].tok_per_s_windows == []
    assert old.runs[0].tok_per_s == data["runs"][0]["tok_per_s"]


def test_a_slow_setup_ends_the_passes_at_their_budget_and_says_why(tmp_path: Path) -> None:
    slow_setup = textwrap.dedent("""
        import time


        class W:
            def setup(self, batch_size):
                self.batch = batch_size
                time.sleep(0.3)

            def step(self):
                return [1] * self.batch


        def make():
            return W()
        """)
    spec = file_spec(tmp_path, slow_setup, batch_sizes=[1], steps=2, warmup_steps=0, tok_per_s_min_s=0.1,
                     warmup_max_s=0)
    rc, result, stderr = run_harness(tmp_path, spec)
    assert rc == 0, result.get("error", stderr)
    run = result["runs"][0]
    # passes of microseconds behind setups of 0.3 s: the budget (4 x 0.1 s) ends them after a few
    assert 1 < run["timed_passes"] <= 3 and run["timed_s"] < 0.1
    assert "tok/s from" in stderr and "setup() is slow" in stderr
