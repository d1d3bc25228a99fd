"""Slow processes (measure/_slow.py): which are named, how far off, and their rate's interval,
checked against figures computed here with numpy and scipy; and a report that names slow
processes its own figures do not give is refused when read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from guard.measure import SLOW_MIN_PCT, SlowProcess, find_slow_processes, slow_in
from guard.report import UnfoundedReport, read_report, slow_processes_sentence
from tests.report_fixtures import committed, current_file

REPO_ROOT = Path(__file__).resolve().parents[1]
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")


def _quiet(rng: np.random.Generator, level: float = 2.4266, n: int = 10) -> list[float]:
    return list(level * np.exp(rng.normal(0, 2e-4, n)))  # 0.02% between processes, as GPU ms on an H200


def test_a_slow_process_is_named_with_its_distance_from_its_arms_median() -> None:
    rng = np.random.default_rng(7)
    quiet = {side: _quiet(rng) for side in "ab"}
    assert slow_in(quiet, slower_is_higher=True) == []  # nothing stands out
    slow = {"a": quiet["a"][:7] + [2.4440] + quiet["a"][8:], "b": quiet["b"]}
    ((arm, position, off_pct),) = slow_in(slow, slower_is_higher=True)
    assert (arm, position) == ("a", 8)
    assert off_pct == pytest.approx((2.4440 / np.median(slow["a"]) - 1) * 100)


def test_only_the_slow_side_counts() -> None:
    rng = np.random.default_rng(3)
    fast = {"a": _quiet(rng)[:9] + [2.40], "b": _quiet(rng)}  # 1% faster: no interference makes a process faster
    assert slow_in(fast, slower_is_higher=True) == []
    # tok/s: slower is lower
    tok = {"a": [1000 * v for v in _quiet(rng)[:9]] + [2400.0], "b": [1000 * v for v in _quiet(rng)]}
    ((arm, position, off_pct),) = slow_in(tok, slower_is_higher=False)
    assert (arm, position) == ("a", 10) and off_pct == pytest.approx((2400.0 / np.median(tok["a"]) - 1) * 100)
    assert slow_in(tok, slower_is_higher=True) == []


def test_each_arm_is_read_against_its_own_median() -> None:
    """A head twice as slow as its base is a change, not a slow process; a slow one of the head's still is."""
    rng = np.random.default_rng(5)
    arms = {"base": _quiet(rng, 1.0), "head": _quiet(rng, 2.0)}
    assert slow_in(arms, slower_is_higher=True) == []
    arms["head"][2] *= 1.01
    assert [(a, p) for a, p, _ in slow_in(arms, slower_is_higher=True)] == [("head", 3)]


def test_spread_out_processes_or_a_tiny_difference_are_not_slow() -> None:
    spread = {"a": [1.0, 1.02, 0.98, 1.01], "b": [0.99, 1.03, 0.97, 1.0]}
    assert slow_in(spread, slower_is_higher=True) == []
    # a floor: SLOW_MIN_PCT / 2 off is never slow, however quiet the rest
    flat = {"a": [2.0] * 9 + [2.0 * (1 + SLOW_MIN_PCT / 200)], "b": [2.0] * 10}
    assert slow_in(flat, slower_is_higher=True) == []
    assert slow_in({"a": [1.0, 5.0]}, slower_is_higher=True) == []  # two values: neither is far from "the rest"


@pytest.mark.parametrize(("slow_count", "processes"), [(0, 10), (1, 20), (3, 12)])
def test_the_rate_is_a_clopper_pearson_interval(slow_count: int, processes: int) -> None:
    per_arm = processes // 2
    rng = np.random.default_rng(slow_count)
    values = {side: _quiet(rng, n=per_arm) for side in "ab"}
    for i in range(slow_count):  # distinct processes, each 5% slow in GPU ms
        values["a" if i % 2 == 0 else "b"][i // 2] *= 1.05
    found = find_slow_processes({(1, "gpu_ms"): values}, processes)
    assert found.count == slow_count and found.processes == processes
    low = 0.0 if slow_count == 0 else stats.beta.ppf(0.025, slow_count, processes - slow_count + 1)
    high = stats.beta.ppf(0.975, slow_count + 1, processes - slow_count)
    assert (found.rate_low, found.rate_high) == (pytest.approx(low), pytest.approx(high))


def test_a_process_slow_in_two_metrics_counts_once() -> None:
    rng = np.random.default_rng(11)
    gpu = {side: _quiet(rng, n=5) for side in "ab"}
    gpu["b"][1] *= 1.2
    tok = {side: [100 / v for v in values] for side, values in gpu.items()}
    found = find_slow_processes({(1, "gpu_ms"): gpu, (1, "tok_per_s"): tok, (2, "gpu_ms"): gpu}, 10)
    assert sorted((s.metric, s.batch_size) for s in found.slow) == [("gpu_ms", 1), ("gpu_ms", 2), ("tok_per_s", 1)]
    assert {(s.arm, s.repeat) for s in found.slow} == {("b", 2)} and found.count == 1
    sentence = slow_processes_sentence(found)
    assert sentence.startswith("Slow processes: 1 of 10 (10%; 95% interval ")
    off = gpu["b"][1] / np.median(gpu["b"]) - 1
    assert f"b repeat 2 at batch size 1, GPU ms per step {off * 100:+.2f}% from its arm's median" in sentence
    assert f"b repeat 2 at batch size 1, tokens per second {(1 / (1 + off) - 1) * 100:+.2f}% from its arm's median" \
        in sentence


def test_a_report_naming_slow_processes_its_figures_do_not_give_is_refused(tmp_path: Path) -> None:
    report = committed(RICH)
    values = {}
    for batch in report.batch_sizes:
        values[(batch.batch_size, "gpu_ms")] = {a.arm: a.gpu_ms_per_step.values for a in batch.arms}
        values[(batch.batch_size, "tok_per_s")] = {a.arm: a.tok_per_s.values for a in batch.arms}
    processes = sum(a.repeats for a in report.batch_sizes[0].arms)
    honest = report.model_copy(update={"slow_processes": find_slow_processes(values, processes)})
    path = tmp_path / "report.json"
    path.write_text(honest.model_dump_json())
    assert read_report(path).slow_processes == honest.slow_processes  # holds up

    made_up = SlowProcess(arm=report.head, repeat=1, batch_size=report.batch_sizes[0].batch_size, metric="gpu_ms",
                          value=9.0, off_pct=50.0)
    forged = honest.slow_processes.model_copy(update={"slow": [*honest.slow_processes.slow, made_up]})
    path.write_text(honest.model_copy(update={"slow_processes": forged}).model_dump_json())
    with pytest.raises(UnfoundedReport, match="slow_processes"):
        read_report(path)
