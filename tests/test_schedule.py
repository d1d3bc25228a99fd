"""interleave() order, and run_interleaved() with real harness subprocesses."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from guard._errors import ConfigError
from guard.measure import ArmTarget, HarnessSpec, check_cpus, interleave, run_interleaved
from guard.sandbox import choose_box
from tests.conftest import writable_by_all

WORKLOAD = textwrap.dedent(
    """
    import os
    import uuid

    ME = uuid.uuid4().hex[:12]  # this process, whatever PID namespace it runs in


    class Workload:
        def __init__(self, log):
            self.log = log
            self.batch = 0

        def _note(self):
            with open(self.log, "a") as f:
                f.write(f"{os.environ['ARM']} {ME}\\n")

        def setup(self, batch_size):
            if os.environ.get("FAIL_SETUP"):
                self._note()
                raise RuntimeError(f"setup refused for arm {os.environ['ARM']}")
            self.batch = batch_size

        def step(self):
            self._note()
            return [7] * self.batch


    def make(log):
        return Workload(log)
    """
)


def test_interleave_mirrors_every_other_round() -> None:
    assert interleave(["base", "head"], 3) == [
        ("base", 0), ("head", 0), ("head", 1), ("base", 1), ("base", 2), ("head", 2),
    ]


def test_interleave_puts_each_arm_first_as_often_over_even_rounds() -> None:
    order = interleave(["base", "head"], 6)
    pairs = [order[i:i + 2] for i in range(0, len(order), 2)]
    firsts = [pair[0][0] for pair in pairs]
    assert firsts.count("base") == firsts.count("head") == 3
    # every arm's mean position in the whole sequence is the same: linear drift cancels
    positions = {arm: [i for i, (a, _) in enumerate(order) if a == arm] for arm in ("base", "head")}
    assert sum(positions["base"]) == sum(positions["head"])


def test_a_confirmation_round_continues_the_pattern() -> None:
    first, second = interleave(["base", "head"], 3), interleave(["base", "head"], 3, first_repeat=3)
    assert first + second == interleave(["base", "head"], 6)
    assert second[0] == ("head", 3)


def test_interleave_edge_cases() -> None:
    assert interleave(["a", "b", "c"], 2) == [("a", 0), ("b", 0), ("c", 0), ("c", 1), ("b", 1), ("a", 1)]
    assert interleave(["base", "head"], 0) == []
    assert interleave(["only"], 2) == [("only", 0), ("only", 1)]


def _setup(tmp_path: Path, head_env: dict[str, str] | None = None) -> tuple[list[ArmTarget], HarnessSpec, Path]:
    worktree = tmp_path / "arm"
    worktree.mkdir()
    (worktree / "wl.py").write_text(WORKLOAD)
    log = writable_by_all(tmp_path / "notes") / "steps.log"  # the workload writes it
    targets = [
        ArmTarget(box=choose_box(), name="base", python=Path(sys.executable), worktree=worktree, env={"ARM": "base"}),
        ArmTarget(name="head", python=Path(sys.executable),
                  box=choose_box(), worktree=worktree, env={"ARM": "head"} | (head_env or {})),
    ]
    # one pass and no timed warmup: the log then counts every step a process made
    spec = HarnessSpec(entry="wl.py:make", options={"log": str(log)}, batch_sizes=[1], steps=2, warmup_steps=1,
                       tok_per_s_min_s=0, warmup_max_s=0)
    return targets, spec, log


def _blocks(log: Path) -> list[tuple[str, str]]:
    """The log's lines as (arm, process) runs: consecutive equal lines collapsed."""
    blocks: list[tuple[str, str]] = []
    for line in log.read_text().splitlines():
        name, me = line.split()
        entry = (name, me)
        if not blocks or blocks[-1] != entry:
            blocks.append(entry)
    return blocks


def test_run_interleaved_alternates_fresh_processes(tmp_path: Path) -> None:
    targets, spec, log = _setup(tmp_path)
    messages: list[str] = []
    results = run_interleaved(targets, spec, 3, tmp_path / "runs", timeout_s=120, progress=messages.append)

    blocks = _blocks(log)
    assert [name for name, _ in blocks] == ["base", "head", "head", "base", "base", "head"]
    pids = [pid for _, pid in blocks]
    assert len(set(pids)) == 6  # a fresh process per (arm, repeat), none reused
    # every process ran 1 warmup + 2 timed steps, all in one contiguous block
    lines = log.read_text().splitlines()
    assert len(lines) == 6 * 3
    for pid in pids:
        assert sum(line.endswith(f" {pid}") for line in lines) == 3

    assert set(results) == {"base", "head"}
    for name in ("base", "head"):
        m = results[name]
        assert m.error is None
        assert m.arm == name
        assert [r.repeat for r in m.repeats] == [0, 1, 2]
        assert all(r.arm == name for r in m.repeats)
        for r in m.repeats:
            run = r.run_for(1)
            assert run.tokens == [[7], [7], [7]]
            assert run.timer == "perf_counter"
            assert len(run.step_ms) == 2
            # the process's seconds by phase: inside the process, then what the runner saw
            assert {"import", "fingerprint", "engine", "timed passes"} <= set(r.timings_s)
            assert r.process_s is not None and 0 < sum(r.timings_s.values()) < r.process_s
    assert len(messages) == 6
    ran = [results[name].repeats[repeat] for name, repeat in interleave(["base", "head"], 3)]
    for message, repeat in zip(messages, ran):
        assert f"({repeat.process_s:.1f} s" in message
        shown = [(name, s) for name, s in repeat.timings_s.items() if s >= 0.1]
        for name, seconds in shown:
            assert f"{name} {seconds:.1f}" in message


def test_failing_arm_is_reported_and_other_arm_kept(tmp_path: Path) -> None:
    targets, spec, log = _setup(tmp_path, head_env={"FAIL_SETUP": "1"})
    results = run_interleaved(targets, spec, 3, tmp_path / "runs", timeout_s=120)

    head = results["head"]
    assert head.repeats == []
    assert head.error is not None
    assert "setup refused for arm head" in head.error
    assert "RuntimeError" in head.error
    assert head.log_tail.strip() != ""
    assert "setup refused for arm head" in head.log_tail

    base = results["base"]
    assert base.error is None
    assert [r.repeat for r in base.repeats] == [0, 1, 2]

    blocks = _blocks(log)
    # head ran once, then was no longer scheduled; base ran all three times
    assert [name for name, _ in blocks] == ["base", "head", "base", "base"]
    assert len({pid for _, pid in blocks}) == 4


def test_missing_interpreter_is_an_arm_error(tmp_path: Path) -> None:
    targets, spec, _ = _setup(tmp_path)
    targets[1] = ArmTarget(name="head", python=tmp_path / "no-such-python",
                           box=choose_box(), worktree=targets[0].worktree,
                           env={"ARM": "head"})
    results = run_interleaved(targets, spec, 2, tmp_path / "runs", timeout_s=120)
    assert results["head"].error is not None
    assert "no-such-python" in results["head"].error
    assert results["head"].repeats == []
    assert len(results["base"].repeats) == 2


def test_profile_repeats_profiles_the_first_processes_of_each_arm_and_no_confirmation_round(tmp_path: Path) -> None:
    import json

    targets, spec, _ = _setup(tmp_path)
    spec = spec.model_copy(update={"profile_steps": 8, "profile_repeats": 2})
    run_dir = tmp_path / "runs"
    run_interleaved(targets, spec, 3, run_dir, timeout_s=120)
    run_interleaved(targets, spec, 3, run_dir, timeout_s=120, first_repeat=3)  # a confirmation round

    def profiled(arm: str, repeat: int) -> int:
        return json.loads((run_dir / f"{arm}-{repeat}.spec.json").read_text())["profile_steps"]

    for arm in ("base", "head"):
        assert [profiled(arm, r) for r in range(6)] == [8, 8, 0, 0, 0, 0]
    # asked for more than a round holds, the confirmation round profiles the rest
    many = spec.model_copy(update={"profile_repeats": 4})
    run_interleaved(targets[:1], many, 3, run_dir / "many", timeout_s=120)
    run_interleaved(targets[:1], many, 3, run_dir / "many", timeout_s=120, first_repeat=3)
    assert [json.loads((run_dir / "many" / f"base-{r}.spec.json").read_text())["profile_steps"]
            for r in range(6)] == [8, 8, 8, 8, 0, 0]


def test_a_pinned_arm_runs_on_its_cpus_and_a_bad_cpu_is_a_config_error(tmp_path: Path) -> None:
    usable = sorted(os.sched_getaffinity(0))
    targets, spec, _ = _setup(tmp_path)
    targets[1] = targets[1].model_copy(update={"cpus": usable[-1:]})
    results = run_interleaved(targets, spec, 1, tmp_path / "runs", timeout_s=120)
    assert results["head"].repeats[0].environment["cpus"] == usable[-1:]  # as the process saw itself
    assert results["base"].repeats[0].environment["cpus"] == usable
    check_cpus(usable[:1])  # allowed: no error
    with pytest.raises(ConfigError, match=rf"measure.cpus lists CPU\(s\) {max(usable) + 1000}, but the guard may only"):
        check_cpus([usable[0], max(usable) + 1000])
