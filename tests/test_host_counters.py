"""The harness's host cost the machine's state does not move (user-mode instructions per step,
perf_event_open) and each tok/s window's host state (CPU, clock, steal); base vs head."""

from __future__ import annotations

import ctypes
import os
import platform
import statistics
import sys
from pathlib import Path

import pytest

from guard.compare import compare
from guard.harness._host import WindowSampler, windows
from guard.harness._perf import InstructionCounter
from guard.measure import ArmMeasurement, BatchRun, HostUsage, RepeatResult
from tests.rules import rule_at
from tests.test_harness import file_spec, run_harness

PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")


def _attr_bytes() -> bytes:
    """perf_event_attr (64 bytes, version 0) for user-mode instructions, written here field by
    field rather than through the harness's structure: hardware type 0, config 1, disabled,
    exclude_kernel, exclude_hv."""
    import struct
    flags = (1 << 0) | (1 << 5) | (1 << 6)
    return struct.pack("IIQQQQQIIQ", 0, 64, 1, 0, 0, 0, flags, 0, 0, 0)


def _syscall_opens() -> tuple[bool, int]:
    """Whether this process may open the counter itself, and the errno if not."""
    numbers = {"x86_64": 298, "aarch64": 241}
    if not sys.platform.startswith("linux") or platform.machine() not in numbers:
        return False, 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(_attr_bytes(), 64)
    fd = libc.syscall(ctypes.c_long(numbers[platform.machine()]), attr, ctypes.c_int(0), ctypes.c_int(-1),
                      ctypes.c_int(-1), ctypes.c_ulong(0))
    if fd < 0:
        return False, ctypes.get_errno()
    os.close(fd)
    return True, 0


OPENS, ERRNO = _syscall_opens()
NO_COUNTER = "" if OPENS else f"no user-mode instruction counter here (perf_event_open errno {ERRNO})"


def test_the_counter_works_where_the_syscall_does_and_says_why_where_not() -> None:
    counter = InstructionCounter()
    assert counter.available == OPENS
    paranoid = int(PARANOID.read_text()) if PARANOID.exists() else None
    if paranoid is None or (paranoid >= 3 and os.geteuid() != 0):  # Debian's level 3: no events unprivileged
        assert not counter.available
    if not counter.available:
        assert counter.unavailable and f"errno {ERRNO}" in counter.unavailable
        assert f"perf_event_paranoid {paranoid}" in counter.unavailable
        counter.start()
        counter.stop()  # harmless without a counter
        assert counter.instructions == 0
        return
    assert counter.unavailable is None
    counts = []
    for n in (200_000, 400_000):
        before = counter.instructions
        counter.start()
        total = 0
        for i in range(n):
            total += i
        counter.stop()
        counts.append(counter.instructions - before)
    assert counts[0] > 200_000  # a Python loop iteration is many instructions
    assert 1.6 < counts[1] / counts[0] < 2.4
    counter.close()


# step() does `work` iterations of a Python loop: a head that does twice the Python work
LOOPING = """
class W:
    def __init__(self, work):
        self.work = work

    def setup(self, batch_size):
        self.batch = batch_size

    def step(self):
        total = 0
        for i in range(self.work):
            total += i
        return [total % 97] * self.batch


def make(work):
    return W(work)
"""


def _host_of(tmp_path: Path, work: int, **over: object) -> tuple[dict, dict]:
    folder = tmp_path / f"work-{work}"
    folder.mkdir()
    spec = file_spec(folder, LOOPING, options={"work": work}, batch_sizes=[1], steps=20, warmup_steps=2,
                     **over)
    rc, result, stderr = run_harness(folder, spec)
    assert rc == 0, result.get("error", stderr)
    run = result["runs"][0]
    return run, run["host"]


def test_instructions_per_step_rise_with_twice_the_python_work(tmp_path: Path) -> None:
    runs = {work: _host_of(tmp_path, work) for work in (20_000, 40_000)}
    for _, host in runs.values():
        HostUsage.model_validate(host)  # what the guard reads
        if not OPENS:
            assert "instructions_per_step" not in host
            assert host["instructions_unavailable"].startswith(("not permitted", "no hardware", "perf_event_open"))
    if not OPENS:
        pytest.skip(NO_COUNTER)
    base, head = (runs[w][1]["instructions_per_step"] for w in (20_000, 40_000))
    assert base > 20_000 * 10  # some ten instructions an iteration at the least
    assert 1.7 < head / base < 2.3  # the harness's own work per step is small beside the loop's
    assert all(len(h["instructions_per_step_passes"]) == r["timed_passes"] for r, h in runs.values())


def test_each_tok_per_s_window_records_its_cpu_clock_and_steal(tmp_path: Path) -> None:
    def steal_ms() -> float:
        line = Path("/proc/stat").read_text().splitlines()[0].split()  # every CPU together
        return int(line[8]) * 1000 / os.sysconf("SC_CLK_TCK")

    before = steal_ms()
    run, host = _host_of(tmp_path, 20_000, tok_per_s_min_s=0.4, tok_per_s_window_s=0.05, warmup_max_s=0.0)
    stolen = steal_ms() - before
    assert len(host["windows"]) == len(run["tok_per_s_windows"]) >= 2
    for window in host["windows"]:
        cpu = window["cpu"]
        assert 0 <= cpu < os.cpu_count()
        freq = Path(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_cur_freq")
        assert (window["freq_khz"] is not None) == freq.exists()
        if window["freq_khz"] is not None:
            assert window["freq_khz"] > 0
    # a window's steal is its CPU's share of what the machine's CPUs had stolen meanwhile
    assert all(w["steal_ms"] >= 0 for w in host["windows"])
    assert sum(w["steal_ms"] for w in host["windows"]) <= stolen + 1e-9
    usage = HostUsage.model_validate(host)
    assert [w.cpu for w in usage.windows] == [w["cpu"] for w in host["windows"]]


@pytest.mark.parametrize("steps", [[0.03] * 10, [0.2, 0.01, 0.01], [0.01] * 3, [0.04, 0.07, 0.05, 0.09, 0.01]])
def test_one_sample_per_window_as_windows_groups_them(steps: list[float]) -> None:
    sampler = WindowSampler(0.1)
    closed = [sampler.step(s) for s in steps]
    sampler.finish()
    assert len(sampler.samples) == len(windows(steps, 0.1))
    # each window closes on the step that fills it; steps short of one window in all close none
    assert sum(closed) == (len(windows(steps, 0.1)) if sum(steps) >= 0.1 else 0)


def _repeat(arm: str, repeat: int, instructions: float | None) -> RepeatResult:
    host = HostUsage(voluntary_switches=0, involuntary_switches=0, user_s=0.1, sys_s=0.0,
                     instructions_per_step=instructions,
                     instructions_unavailable=None if instructions else "no hardware instruction counter here")
    run = BatchRun(batch_size=1, steps=4, warmup_steps=1, timer="perf_counter", setup_s=0.0, wall_s=0.01,
                   tok_per_s=100.0 + repeat, gpu_ms_per_step=10.0 + 0.01 * repeat, step_ms=[10.0] * 4,
                   tokens=[[1]] * 5, sha256="same", host=host)
    return RepeatResult(arm=arm, repeat=repeat, environment={}, runs=[run])


def _compared(repeats: list[RepeatResult]):  # type: ignore[no-untyped-def]
    arms = {name: ArmMeasurement(arm=name, repeats=[r for r in repeats if r.arm == name]) for name in ("base", "head")}
    return compare(arms, "base", "head", [1], rule_at(5.0)).batch_sizes[0]


def test_instructions_per_step_are_compared_base_vs_head_with_an_interval() -> None:
    base = [1.00e6, 1.01e6, 0.99e6, 1.00e6]
    head = [2.0 * v for v in base]
    repeats = [_repeat("base", i, v) for i, v in enumerate(base)] + [_repeat("head", i, v) for i, v in enumerate(head)]
    batch = _compared(repeats)
    arms = {a.arm: a for a in batch.arms}
    assert arms["head"].instructions_per_step.values == head
    change = batch.instructions_change
    assert change is not None and change.pct == pytest.approx(100.0)  # medians 2e6 over 1e6
    assert change.ci_low_pct < 100.0 < change.ci_high_pct
    # one process without the counter: no figure for its arm and no change, and no key for it
    batch = _compared(repeats[:-1] + [_repeat("head", 3, None)])
    assert batch.instructions_change is None
    head_stats = next(a for a in batch.arms if a.arm == "head")
    assert "instructions_change" not in batch.model_dump() and "instructions_per_step" not in head_stats.model_dump()


# -- tok/s left out of the table where it is not measurable ------------------------------------

PAIRS = Path(__file__).resolve().parents[1] / "docs" / "validation" / "h200-engines" / "pairs"


def _decided_again(pair: str):  # type: ignore[no-untyped-def]
    from guard.compare import decide_again
    from tests.report_fixtures import committed, explained

    report = committed(PAIRS / pair / "report.json")
    again = [decide_again(b, report.base, report.head, report.rule) for b in report.batch_sizes]
    return report, explained(report.model_copy(update={"batch_sizes": again, "traces": []}))


def _detectable_pct(batch, level: float) -> float:  # type: ignore[no-untyped-def]
    """The smallest tok/s change the processes per arm detect PASS_RATE of the time at `level`:
    (t at the level + t at the power) x the standard error of the difference of mean logs."""
    import math

    from scipy import stats

    from guard.measure import PASS_RATE

    # without the processes the decision set aside (rule 3: slow in GPU ms), as it decides
    aside = {(s.arm, s.repeat) for s in batch.set_aside}
    logs = [[math.log(v) for i, v in enumerate(a.tok_per_s.values, 1) if (a.arm, i) not in aside] for a in batch.arms]
    variance = sum(statistics.variance(x) * (len(x) - 1) for x in logs) / sum(len(x) - 1 for x in logs)
    n = min(len(x) for x in logs)
    t = stats.t.ppf(0.5 + level / 2, 2 * n - 2) + stats.t.ppf(PASS_RATE, 2 * n - 2)
    return math.expm1(t * math.sqrt(2 * variance / n)) * 100


@pytest.mark.parametrize("pair", ["hf-aa", "compiled-aa", "ref-bf16-aa"])
def test_tok_per_s_is_left_out_where_it_could_detect_only_twenty_times_its_threshold(pair: str) -> None:
    """The H200 A/A pairs, 3 processes per arm at a 1% threshold: the compiled engines' tok/s
    detects only a change of 150% or more, the reference engine's about 12%. tok/s is
    measurable exactly where that is within 20 times the threshold, and the table shows it
    there alone, with one sentence where it does not."""
    from guard.compare._interval import UNMEASURABLE_FACTOR
    from guard.report import render_comment

    _, report = _decided_again(pair)
    (batch,) = report.batch_sizes
    assert batch.tok_per_s_verdict == "pass"
    detectable = _detectable_pct(batch, 1 - 2 * batch.alpha_per_look)
    assert batch.tok_per_s_detectable_pct == pytest.approx(detectable, rel=1e-9)
    wide = detectable > UNMEASURABLE_FACTOR * report.rule.tok_per_s.pct
    assert wide == (pair != "ref-bf16-aa")
    assert batch.tok_per_s_measurable == (not wide)
    comment = render_comment(report)
    table = [line for line in comment.splitlines() if line.startswith("| ")]
    assert any(line.startswith("| GPU ms per step") for line in table)
    assert any(line.startswith("| tokens per second") for line in table) == (not wide)
    sentence = (f"Tokens per second is not shown, as not measurable here: at its spread, 3 processes per arm detect "
                f"only a change of {detectable:.1f}% at batch size 1, far past its {report.rule.tok_per_s.pct:g}% "
                "threshold.")
    assert (sentence in comment) == wide
    assert ("tok_per_s_measurable" in batch.model_dump()) == wide  # no key where measurable: older reports unchanged


def test_a_tok_per_s_slowdown_past_its_threshold_is_shown_however_wide() -> None:
    """compiled-mode-default: tok/s fell 80%, its whole interval past the threshold, at a
    spread that detects only changes far wider than the threshold: it decided, so it stays."""
    from guard.report import render_comment

    _, report = _decided_again("compiled-mode-default")
    (batch,) = report.batch_sizes
    assert batch.tok_per_s_verdict == "regression"
    assert batch.tok_per_s_measurable
    assert any(line.startswith("| tokens per second") for line in render_comment(report).splitlines())


def test_the_table_shows_instructions_per_step_where_both_arms_counted_them() -> None:
    import math

    from guard.compare import decide_again
    from guard.measure import spread
    from guard.report import render_comment
    from tests.report_fixtures import explained

    _, report = _decided_again("ref-bf16-aa")
    (batch,) = report.batch_sizes
    counts = {"base": [1.20e6, 1.21e6, 1.19e6], "head": [1.80e6, 1.82e6, 1.79e6]}
    arms = [a.model_copy(update={"instructions_per_step": spread(counts[a.arm])}) for a in batch.arms]
    rule = report.rule.model_copy(update={"looks": 1})
    again = decide_again(batch.model_copy(update={"arms": arms}), report.base, report.head, rule)
    change = again.instructions_change
    means = {arm: statistics.fmean(math.log(v) for v in values) for arm, values in counts.items()}
    assert change is not None and change.pct == pytest.approx(math.expm1(means["head"] - means["base"]) * 100)
    assert change.confidence == pytest.approx(1 - 2 * again.alpha_per_look)  # the table's level
    assert again.verdict == batch.verdict  # it informs: the verdict is the one without it
    comment = render_comment(explained(report.model_copy(update={"batch_sizes": [again]})))
    (row,) = [line for line in comment.splitlines() if line.startswith("| host instructions per step")]
    # geometric means, the figures the change is a ratio of; it never decides
    shown = [f"{statistics.geometric_mean(counts[arm]) / 1e6:.2f} M" for arm in ("base", "head")]
    assert row.startswith(f"| host instructions per step | {shown[0]} | {shown[1]} | +{change.pct:.2f}% (")
    assert row.endswith(" | no |")
    assert "| host instructions" not in render_comment(report)


def test_a_counted_pass_gives_its_count_over_its_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counted path through the real syscall, on any Linux: the software task clock
    (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, nanoseconds on the CPU) stands in for the
    hardware counter a VM may lack. A pass's figure is its count over its steps, the process's
    the median over its passes; the window reads are paused out of it."""
    import time

    from guard.harness import _perf
    from guard.harness._host import HostMeter

    monkeypatch.setattr(_perf, "PERF_TYPE_HARDWARE", 1)
    monkeypatch.setattr(_perf, "PERF_COUNT_HW_INSTRUCTIONS", 1)
    counter = _perf.InstructionCounter()
    if not counter.available:
        pytest.skip(f"no software perf event either: {counter.unavailable}")
    meter = HostMeter(counter, window_s=0.02)
    for spin_s in (0.002, 0.004, 0.003):
        meter.start()
        meter.count_start()
        for _ in range(10):
            end = time.perf_counter() + spin_s
            while time.perf_counter() < end:
                pass
            meter.window(spin_s)
        meter.count_stop(10)
        meter.stop()
    result = meter.result()
    assert result is not None
    passes = result["instructions_per_step_passes"]
    assert len(passes) == 3 and result["instructions_per_step"] == statistics.median(passes)
    # nanoseconds on the CPU per step: some, and no more than the spin and the loop around it
    assert all(0 < p < 1.5 * s * 1e9 for p, s in zip(passes, (0.002, 0.004, 0.003)))
    assert len(result["windows"]) == len(windows([0.002] * 10 + [0.004] * 10 + [0.003] * 10, 0.02))
    assert "instructions_unavailable" not in result


def test_a_report_may_not_hide_a_tok_per_s_it_could_show() -> None:
    """The reference engine's tok/s is measurable: a report stating otherwise is caught when
    checked again; the compiled engine's, stated measurable (as reports before the field
    read), is not a discrepancy, since it hides nothing."""
    from guard.compare._recheck import recheck

    for pair, stated in (("ref-bf16-aa", False), ("hf-aa", True)):
        _, report = _decided_again(pair)
        (batch,) = report.batch_sizes
        forged = batch.model_copy(update={"tok_per_s_measurable": stated})
        found = recheck([forged], report.base, report.head, report.rule, verdict=report.verdict,
                        hash_match=report.hash_match, failed_arms=[])
        assert [d.field for d in found] == (["tok_per_s_measurable"] if pair == "ref-bf16-aa" else [])
