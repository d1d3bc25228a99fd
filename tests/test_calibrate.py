"""guard calibrate: its gap figures, from traces recorded on an H200 through the harness; and
the A/A on a CPU in real subprocesses and git repositories: slow processes named and left out
of the spread, and a runner too noisy to guard refused."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from guard._errors import GuardError
from guard.calibrate import (NoiseFloor, RunnerTooNoisy, calibrate, calibration_path, gap_noise, gap_noise_line,
                             rule_level)
from guard.compare import FAMILIES_PER_LOOK, agreement, spent
from guard.compare import disagreement_noise as noise_of
from guard.config import load_thresholds, parse_config
from guard.measure import PASS_RATE, RunnerNoise, relative_change, runner_noise
from tests.conftest import commit_all
from tests.standin import Process, StandIn, steady
from tests.test_forcing import CONFIG as FORCED_CONFIG
from tests.test_forcing import forced_runs, noisy_model
from tests.test_pipeline import CONFIG, SLEEPY_STEPS, guard_run, make_repo

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"
ONE_GRAPH = FIXTURES / "h200-harness-guard-step-one-graph.json.gz"
PIECEWISE = FIXTURES / "h200-harness-guard-step-piecewise.json.gz"


def _noise(**update: object) -> NoiseFloor:
    metric = RunnerNoise(processes=10, degrees_of_freedom=8, sd_pct=0.1, sd_limit_pct=0.2, repeats=5, supported_pct=0.5)
    return NoiseFloor(batch_size=1, gpu_ms_per_step=1.0, gpu_ms_spread_pct=0.1, tok_per_s_spread_pct=1.0,
                      gpu_ms_aa_ci_pct=(0.0, 0.0), tok_per_s_aa_ci_pct=(0.0, 0.0), gpu_ms=metric,
                      tok_per_s=metric).model_copy(update=update)


def test_gap_figures_of_every_profiled_process_and_their_range() -> None:
    gaps = gap_noise([ONE_GRAPH, ONE_GRAPH, PIECEWISE])
    assert gaps is not None and gaps.traces == 3
    one, _, piecewise = gaps.idle_ms_per_step
    assert gaps.idle_ms_per_step[0] == gaps.idle_ms_per_step[1]  # the same trace twice: no spread
    assert piecewise > one  # one graph per layer and an eager kernel after each: more idle per step
    line = gap_noise_line(_noise(gaps=gaps))
    assert line.startswith("bs 1: over 3 profiled processes, median gap ")
    assert f"idle {min(gaps.idle_ms_per_step):.4f}-{max(gaps.idle_ms_per_step):.4f} ms per step" in line


def test_without_traces_there_are_no_gap_figures() -> None:
    assert gap_noise([]) is None
    assert gap_noise_line(_noise()) == (
        "bs 1: no profiled pass (no GPU, or workload.profile_steps = 0): no gap figures.")


def test_a_trace_that_cannot_be_read_is_named_and_skipped(tmp_path: Path) -> None:
    broken = tmp_path / "a-0-bs1.trace.json.gz"
    broken.write_bytes(b"not a trace")
    gaps = gap_noise([ONE_GRAPH, broken])
    assert gaps is not None and gaps.traces == 1 and len(gaps.median_gap_us) == 1
    (why,) = gaps.unreadable
    assert why.startswith("a-0-bs1.trace.json.gz: ")
    assert "1 trace(s) could not be read: a-0-bs1.trace.json.gz: " in gap_noise_line(_noise(gaps=gaps))


def _welch_upper_quantile(repeats: int, level: float, draws: int = 6000) -> float:
    """PASS_RATE's quantile of an unchanged pair's upper bound, in sds of a process, from scipy's
    own Welch interval of draws at sd 1."""
    rng = np.random.default_rng(11)
    base, head = rng.standard_normal((2, draws, repeats))
    interval = stats.ttest_ind(head, base, axis=1, equal_var=False).confidence_interval(confidence_level=level)
    return float(np.quantile(interval.high, PASS_RATE))


def _borrowed_upper_quantile(repeats: int, level: float, dof: int, sd_share: float, draws: int = 6000) -> float:
    """The same for a run that borrows a calibrated spread of `dof` degrees of freedom, at sd 1
    its upper limit and `sd_share` its estimate: each pair whose own spread is not past the
    estimate's F quantile at 1% pools the limit in (Student's t); the others are Welch's."""
    rng = np.random.default_rng(12)
    base, head = rng.standard_normal((2, draws, repeats))
    run_var = (base.var(axis=1, ddof=1) + head.var(axis=1, ddof=1)) / 2
    run_dof = 2 * repeats - 2
    pooled = (dof + run_dof * run_var) / (dof + run_dof)
    student = head.mean(axis=1) - base.mean(axis=1) + stats.t.ppf(0.5 + level / 2, dof + run_dof) * np.sqrt(
        2 * pooled / repeats)
    welch = stats.ttest_ind(head, base, axis=1, equal_var=False).confidence_interval(confidence_level=level).high
    passes = run_var <= sd_share**2 * stats.f.ppf(0.99, run_dof, dof)
    return float(np.quantile(np.where(passes, student, welch), PASS_RATE))


def test_the_suggestion_holds_at_the_rules_level_not_at_the_shown_95_percent() -> None:
    """The smallest threshold an A/A supports is the one an unchanged commit passes PASS_RATE of
    the time under the bounds `guard run` decides by (alpha spent over 4 rounds, split over the families and 2
    batch sizes), checked against scipy and by drawing unchanged pairs; at the 95% the intervals
    are shown at, an unchanged commit would fail it far more often than promised."""
    config = parse_config({"measure": {"alpha": 0.01, "max_rounds": 4}})
    each = spent(0.01, 4, 1) / (FAMILIES_PER_LOOK * 2)  # the first look's share of alpha
    level = rule_level(config, 2)
    assert level == pytest.approx(1 - 2 * each)
    rng = np.random.default_rng(7)
    sigma = 0.003
    sides = [list(10 * np.exp(rng.normal(0, sigma, 5))), list(10 * np.exp(rng.normal(0, sigma, 5)))]
    logs = [np.log(side) for side in sides]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in logs) / 8
    limit = 8 * pooled / stats.chi2.ppf(0.05, 8)
    expected = math.expm1(math.sqrt(limit) * _welch_upper_quantile(5, level)) * 100
    at_rule = runner_noise(sides, 5, level, []).supported_pct
    at_shown = runner_noise(sides, 5, 0.95, []).supported_pct
    assert at_rule == pytest.approx(expected, rel=0.03)
    assert at_shown < 0.7 * at_rule

    def passes(threshold: float) -> float:
        """How often an unchanged pair at the limit's spread has its upper bound, at the rule's level, under it."""
        draws = (relative_change(list(np.exp(rng.normal(0, math.sqrt(limit), 5))),
                                 list(np.exp(rng.normal(0, math.sqrt(limit), 5))), level) for _ in range(1500))
        return float(np.mean([change.ci_high_pct < threshold for change in draws]))

    assert passes(at_rule) >= PASS_RATE - 0.015  # 1500 draws: about 0.6% of standard error
    assert passes(at_shown) < 0.75


# --- the A/A, in-process: its processes answered by a model (tests/standin.py) -------------------

# batch size 1, no confirmation round
AA_CONFIG = CONFIG.format(method="none", install="", repeats=4).replace("[1, 2]", "[1]").replace(
    "[measure]", "[measure]\nconfirm = false")
SLEEPY_CONFIG = AA_CONFIG.replace("steps = 12", SLEEPY_STEPS)
STAND_IN_WORKLOAD = "# answered by the stand-in\n"


def _calibrate(repo: Path, out: Path, standin: StandIn, thresholds_pct: list[float] | None = None) -> list[str]:
    """`guard calibrate --repo REPO --ref main --out OUT` in this process; its progress lines."""
    lines: list[str] = []
    calibrate(repo, "main", None, out, lines.append, thresholds_pct=thresholds_pct, harness=standin)
    return lines


def _process_figures(runs: Path) -> dict[tuple[str, int], tuple[float, float]]:
    """(side, 1-based repeat) -> (GPU ms per step, tok/s) at batch size 1, as each process wrote them."""
    figures = {}
    for path in runs.glob("[ab]-*.json"):
        if path.name.endswith(".spec.json"):
            continue
        side, repeat = path.stem.split("-")
        (run,) = json.loads(path.read_text())["runs"]
        figures[(side, int(repeat) + 1)] = (run["gpu_ms_per_step"], run["tok_per_s"])
    return figures


def test_what_the_user_feels_is_calibrated_at_its_own_level(tmp_path: Path) -> None:
    """Rule 5 splits the host family's share of alpha over its metrics: on a CPU, tok/s (the host
    family alone) is decided at GPU ms's level, as before, and on a GPU, end-to-end ms and tok/s
    each at half that share; calibration states what each resolves at the level a run decides it."""
    repo = make_repo(tmp_path, config=SLEEPY_CONFIG, files={"wl.py": STAND_IN_WORKLOAD})
    out = tmp_path / "thr.toml"
    _calibrate(repo, out, StandIn(step_ms=lambda p, _bs: 4.0 * (1 + 0.004 * ((p.number * 3) % 5 - 2))))
    (noise,) = json.loads(calibration_path(out).read_text())["noise"]
    figures = _process_figures(tmp_path / "thr-runs")
    sides = [[figures[(side, r)][1] for r in range(1, 5)] for side in "ab"]
    level = rule_level(parse_config({"measure": {"confirm": False}}), 1)  # one look: alpha 0.01 over 2 families
    assert level == pytest.approx(1 - 2 * 0.01 / 2)
    assert noise["tok_per_s"]["supported_pct"] == pytest.approx(
        runner_noise(sides, 4, level, [], borrowed=True).supported_pct)
    from guard.config import Rule
    rule = Rule.of_config(parse_config({"measure": {"confirm": False}}).measure)
    gpu_felt = rule.bound_level("tok_per_s", ("gpu_ms", "end_to_end_ms", "tok_per_s"))
    assert gpu_felt == pytest.approx(1 - 2 * 0.01 / 4)  # on a GPU: half the host family's share


def test_a_slow_process_is_named_counted_and_left_out_of_the_spread(tmp_path: Path) -> None:
    """Steps of 4 ms, a few tenths of a percent apart between processes, and one process (the
    5th of the A/A) three times as slow: it is named with how far off it was, counted, and kept
    out of the spread the thresholds come from."""
    repo = make_repo(tmp_path, config=SLEEPY_CONFIG, files={"wl.py": STAND_IN_WORKLOAD})
    out = tmp_path / "thr.toml"
    _calibrate(repo, out, StandIn(
        step_ms=lambda p, _bs: 4.0 * (1 + 0.002 * ((p.number * 7) % 5 - 2)) * (3.0 if p.number == 5 else 1.0)))
    text = out.read_text()
    # its step() takes no ids: nothing to count disagreements of, and the file says so
    assert "bs 1: the workload ran free (its step() takes no input ids): no disagreement figures." in text
    calibration = json.loads(calibration_path(out).read_text())
    assert calibration["noise"][0]["disagreement"] is None
    figures = _process_figures(tmp_path / "thr-runs")
    assert len(figures) == 8
    slow_key = max(figures, key=lambda k: figures[k][0])
    others = [ms for key, (ms, _) in figures.items() if key != slow_key]
    assert figures[slow_key][0] > 2.5 * max(others)  # the injected one, as the processes measured it

    side, repeat = slow_key
    by_side = {s: [figures[(s, r)] for r in range(1, 5)] for s in "ab"}
    # from the side's median on the log scale (of 4, the geometric mean of the middle two)
    gpu_off = (figures[slow_key][0] / np.exp(np.median(np.log([ms for ms, _ in by_side[side]]))) - 1) * 100
    tok_off = (figures[slow_key][1] / np.exp(np.median(np.log([tok for _, tok in by_side[side]]))) - 1) * 100
    where = f"side {side} repeat {repeat} at batch size 1"
    assert f"{where}, GPU ms per step {gpu_off:+.2f}% from its side's median" in text
    assert f"{where}, tokens per second {tok_off:+.2f}% from its side's median" in text
    named = re.search(r"Slow processes: (\d+) of 8 \((\d+)%; 95% interval ([\d.]+)% to (\d+)%\)", text)
    assert named, text
    count = int(named.group(1))
    assert count >= 1 and int(named.group(2)) == round(count / 8 * 100)
    high = stats.beta.ppf(0.975, count + 1, 8 - count) * 100
    assert int(named.group(4)) == round(high)

    # the spread, computed here from the processes' own figures, leaving out those the file names
    left_out = {(m.group(1), int(m.group(2)))
                for m in re.finditer(r"side ([ab]) repeat (\d+) at batch size 1, GPU ms per step", text)}
    kept = [np.log([figures[(s, r)][0] for r in range(1, 5) if (s, r) not in left_out]) for s in "ab"]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in kept) / sum(len(x) - 1 for x in kept)
    line = re.search(r"bs 1, GPU ms per step: within-side sd ([\d.]+)% \(upper 95% limit [\d.]+%, (\d+) processes",
                     text)
    assert line, text
    assert float(line.group(1)) == pytest.approx(math.sqrt(pooled) * 100, abs=0.0006)
    assert int(line.group(2)) == 8 - len(left_out)
    # the threshold it supports, at the rule's own level: alpha 0.01 over 1 look (no confirmation
    # round), the metrics and 1 batch size, at 4 per side for a run that borrows this spread (the
    # suggestion's), and Welch's bound on a run's own processes alone
    each = spent(0.01, 1, 1) / (FAMILIES_PER_LOOK * 1)
    dof = sum(len(x) - 1 for x in kept)
    limit = dof * pooled / stats.chi2.ppf(0.05, dof)
    level = 1 - 2 * each
    supported = math.expm1(math.sqrt(limit) * _borrowed_upper_quantile(4, level, dof, math.sqrt(pooled / limit))) * 100
    alone = math.expm1(math.sqrt(limit) * _welch_upper_quantile(4, level)) * 100
    assert calibration["bounds_level"] == pytest.approx(level)
    assert calibration["gpu_ms_supported_pct"] == pytest.approx(supported, rel=0.03)
    assert calibration["noise"][0]["gpu_ms"]["alone_pct"] == pytest.approx(alone, rel=0.03)
    assert calibration["noise"][0]["gpu_ms"]["borrowed"] is True
    with_it = [np.log([figures[(s, r)][0] for r in range(1, 5)]) for s in "ab"]
    pooled_with_it = sum(((x - x.mean()) ** 2).sum() for x in with_it) / 6
    assert math.sqrt(pooled_with_it) > 20 * math.sqrt(pooled)  # what one slow process does to the spread
    # so the threshold stays that of the steady processes: a few of their sds, below the one
    # sd the slow process alone would give (a threshold is several sds; on a loaded CPU the
    # steady processes' sleep jitters, so no fixed figure holds)
    assert load_thresholds(out).gpu_ms_pct < 100 * math.sqrt(pooled_with_it)


def _jitter(process: Process, _batch_size: int) -> float:
    """1, 2 or 3 ms a step by the pair of processes (the A/A's two sides take turns, in either
    order), so each side runs at all three."""
    return float(1 + (process.number - 1) // 2 % 3)


@pytest.mark.slow
def test_a_runner_too_noisy_to_guard_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """Steps of 1, 2 or 3 ms per process on both sides: a noisy CPU, which once had a
    calibration write gpu_ms_pct = 279.4 and tok_per_s_pct = 1901.8. Now refused (exit 2 from
    the CLI, as every GuardError), one line that says what to do, and the thresholds file
    already there is left as it was."""
    config = AA_CONFIG.replace("repeats = 4", "repeats = 3")
    repo = make_repo(tmp_path, config=config, files={"wl.py": STAND_IN_WORKLOAD})
    out = tmp_path / "thr.toml"
    out.write_text("[thresholds]\ngpu_ms_pct = 1\ntok_per_s_pct = 2\n")
    lines: list[str] = []
    with pytest.raises(RunnerTooNoisy) as refused:
        calibrate(repo, "main", None, out, lines.append, thresholds_pct=[5],
                  harness=StandIn(step_ms=_jitter))
    assert isinstance(refused.value, GuardError)
    message = str(refused.value)
    assert "\n" not in message
    asked = re.search(r"at 3 repeats per side an unchanged commit would need a threshold of (over 1,000|[\d.]+)% in "
                      r"GPU ms per step \(refused at 25% or more: a decode a quarter slower would pass\)", message)
    assert asked and (asked.group(1) == "over 1,000" or 25 <= float(asked.group(1)) < 1000), message
    assert "no thresholds file was written" in message
    for advice in ("quiet the runner", "measure.cpus", "measure.repeats", "workload.steps", "calibrate again"):
        assert advice in message
    assert out.read_text() == "[thresholds]\ngpu_ms_pct = 1\ntok_per_s_pct = 2\n"
    assert not calibration_path(out).exists()
    # what it saw went to the progress output, the thresholds asked about with it
    progress = "\n".join(lines)
    assert "bs 1, GPU ms per step: within-side sd " in progress
    assert "repeats per arm for 5%." in progress


@pytest.mark.slow
def test_two_processes_a_side_state_their_unbounded_figures_by_order_not_as_an_overflow(tmp_path: Path) -> None:
    """At 2 processes a side the rule's quantile sits on about 1 degree of freedom: steps of 1 ms
    in one pair of processes and 1 s in the other put the smallest threshold past e^700, which
    raised OverflowError out of `runner_noise` (and at 1 to 3 ms spelled out 74 digits). Now it is
    the cap, refused as any runner too noisy to guard, and every figure past 1,000% reads as its order."""
    config = AA_CONFIG.replace("repeats = 4", "repeats = 2")
    repo = make_repo(tmp_path, config=config, files={"wl.py": STAND_IN_WORKLOAD})
    lines: list[str] = []
    with pytest.raises(RunnerTooNoisy, match=r"would need a threshold of over 1,000% in GPU ms per step"):
        calibrate(repo, "main", None, tmp_path / "thr.toml", lines.append,
                  harness=StandIn(step_ms=lambda process, _: 1000.0 ** ((process.number - 1) // 2 % 2)))
    progress = "\n".join(lines)
    assert "smallest threshold at 2 repeats per arm over 1,000% (a run borrowing this spread; over 1,000% on its " \
           "own processes alone)" in progress, progress
    assert not re.search(r"\d{5}[\d.]*%", progress), progress  # no figure of 10,000% or more spelled out


@pytest.mark.slow
@pytest.mark.parametrize(("thresholds", "expected"), [
    ("gpu_ms_pct = 25\ntok_per_s_pct = 2", "'thresholds.gpu_ms_pct': a threshold under 25% in GPU ms per step"),
    ("gpu_ms_pct = 1\ntok_per_s_pct = 1901.8", "'thresholds.tok_per_s_pct': at most 90.91% (tok/s at one eleventh"),
])
def test_a_thresholds_file_that_switches_the_guard_off_is_refused(
    tmp_path: Path, thresholds: str, expected: str
) -> None:
    config = CONFIG.format(method="none", install="", repeats=2) + 'thresholds_file = "thr.toml"\n'
    repo = make_repo(tmp_path, config=config, files={"thr.toml": f"[thresholds]\n{thresholds}\n"})
    (repo / "note.txt").write_text("a head that is not its base\n")
    commit_all(repo, "note")
    proc = guard_run(repo, tmp_path / "out")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    (error,) = [line for line in proc.stderr.splitlines() if line.startswith("guard: error: ")]
    assert expected in error and "thr.toml (commit " in error and "guard calibrate" in error
    assert not (tmp_path / "out" / "report.json").exists()  # refused before anything was measured


# --- disagreements with the reference, when the workload is forced ------------------------------


def _interval(count: int, outputs: int) -> tuple[float, float]:
    """Clopper-Pearson at 95%, from the beta distribution's quantiles."""
    low = stats.beta.ppf(0.025, count, outputs - count + 1) if count else 0.0
    high = stats.beta.ppf(0.975, count + 1, outputs - count) if count < outputs else 1.0
    return low, high


def _counted(runs: Path, side: str, repeats: int) -> tuple[list[int], int]:
    """Each process's (step, sequence) outputs that differ from the reference, counted here from
    the tokens it wrote; and the outputs compared per process."""
    (rows,) = json.loads((runs / "reference-tokens.json").read_text())["batch_sizes"].values()
    counts = []
    for repeat in range(repeats):
        (run,) = json.loads((runs / f"{side}-{repeat}.json").read_text())["runs"]
        counts.append(sum(found != expected for row, ref in zip(run["tokens"], rows)
                          for found, expected in zip(row, ref)))
    return counts, len(rows)


@pytest.mark.parametrize(("flip", "room"), [(0.05, True), (0.4, False)])
def test_a_forced_workloads_disagreements_are_counted_per_side_against_the_rules_floor(
    tmp_path: Path, flip: float, room: bool
) -> None:
    """A teacher-forced decode whose argmax takes the runner-up in `flip` of its outputs, its
    own way in every process (test_forcing's model), steps of 2 ms a few tenths of a percent
    apart: each side's D per process are those its tokens give against the reference, its rate
    has its Clopper-Pearson interval, and the file says whether that noise stays under the share
    of outputs the agreement rule calls a change of output."""
    config = FORCED_CONFIG.replace("steps = 40", "steps = 96").replace('pass_env = ["NOISY_COUNTER"]\n', "")
    repo = make_repo(tmp_path, config=config, files={"wl.py": STAND_IN_WORKLOAD})
    out = tmp_path / "thr.toml"
    standin = noisy_model(flip=flip)
    standin.step_ms = lambda p, _bs: 2.0 * (1 + 0.002 * ((p.number * 7) % 5 - 2))
    _calibrate(repo, out, standin)
    text = out.read_text()
    (noise,) = json.loads(calibration_path(out).read_text())["noise"]
    found = noise["disagreement"]
    highs = []
    for side, stated in zip("ab", found["sides"], strict=True):
        counts, compared = _counted(tmp_path / "thr-runs", side, 4)
        assert all(counts) and max(counts) < compared  # every process is noisy, none is another function
        low, high = _interval(sum(counts), 4 * compared)
        assert stated["side"] == side and stated["disagreements"] == counts and stated["compared"] == compared
        assert stated["rate"] == pytest.approx(sum(counts) / (4 * compared))
        assert (stated["rate_low"], stated["rate_high"]) == (pytest.approx(low), pytest.approx(high))
        assert (f"side {side} {', '.join(map(str, counts))} of {compared} outputs per process, "
                f"{sum(counts) / (4 * compared) * 100:.1f}% (95% interval {low * 100:.1f}% to {high * 100:.1f}%)"
                in text)
        highs.append(high)
    floor = max(2, compared / 4)  # a quarter of the outputs, 2 at the least
    assert found["floor_outputs"] == floor and found["floor_share"] == pytest.approx(floor / compared)
    assert found["leaves_room"] is bool(max(highs) < floor / compared) is room
    assert found["room_share"] == pytest.approx(floor / compared - max(highs))
    said = (f"leaves {(floor / compared - max(highs)) * 100:.1f} points under it" if room
            else f"the upper limit {max(highs) * 100:.1f}% is not under it")
    assert f"at least {floor / compared * 100:.1f}% of the outputs on average ({floor:g} of {compared})" in text
    assert said in text


def test_an_exact_side_has_a_rate_of_none_and_the_interval_of_none_seen() -> None:
    """Clean processes: rate 0, its upper limit 1 - 0.025^(1/n); a free-running workload has no figures."""
    noise = noise_of(agreement({"a": forced_runs([0, 0, 0], 4), "b": forced_runs([0, 1, 0], 4)}, "a", "reference"))
    assert noise is not None
    clean, noisy = noise.sides
    assert (clean.rate, clean.rate_low) == (0.0, 0.0)
    assert clean.rate_high == pytest.approx(1 - 0.025 ** (1 / 12))
    assert noisy.rate == pytest.approx(1 / 12) and noisy.rate_high == pytest.approx(_interval(1, 12)[1])
    # 4 outputs per process: the rule asks 2 of them, not a quarter; the upper limit 0.385 is under 0.5
    assert noise.floor_outputs == 2 and noise.floor_share == 0.5 and noise.leaves_room is True
    free = [run.model_copy(update={"forced": False}) for run in forced_runs([0, 0], 4)]
    assert noise_of(agreement({"a": free, "b": free}, "a", "reference")) is None
    assert noise_of(None) is None


def test_what_the_user_feels_is_written_at_what_the_runner_resolves_and_a_run_holds_it_there(tmp_path: Path) -> None:
    """A compiled engine's tok/s moves by tens of percent between processes while its GPU ms holds
    to 0.1%: calibration writes what the runner resolves in tok/s, however coarse (GPU ms still
    guards at its own), and none only where it tells no change at all; a run holds each felt
    metric to the larger of that and measure.threshold_pct (rule 5), and says where each came from."""
    from guard.calibrate import _gating_suggestion, suggested_text
    from guard.config import FolderFiles, Threshold, Thresholds, write_thresholds
    from guard.pipeline import _rule

    assert _gating_suggestion("tok_per_s", 89.9) == pytest.approx(89.9)  # rule 4 refused it at 50%
    assert _gating_suggestion("tok_per_s", 3.21) == pytest.approx(3.3)
    # tok/s's is a fall: past one eleventh of itself (a step eleven times as long) it tells nothing, and a
    # rule cannot hold tok/s to a fall of 100% or more
    assert _gating_suggestion("tok_per_s", 91.0) is None
    assert _gating_suggestion("end_to_end_ms", 999.9) == pytest.approx(999.9)
    assert _gating_suggestion("end_to_end_ms", 1000.05) is None
    assert _gating_suggestion("end_to_end_ms", None) is None
    path = tmp_path / "thr.toml"
    written = Thresholds(gpu_ms_pct=0.5, end_to_end_ms_pct=4.0)
    write_thresholds(path, written, "calibrated")
    assert "tok_per_s_pct" not in path.read_text()
    assert load_thresholds(path) == written and written.tok_per_s_pct is None
    assert suggested_text(written) == ("GPU ms per step 0.5%, tok/s none (held to measure.threshold_pct), "
                                       "end-to-end ms per step 4%")
    assert suggested_text(written.model_copy(update={"tok_per_s_pct": 3.3, "end_to_end_ms_pct": None})) == (
        "GPU ms per step 0.5%, tok/s 3.3%, end-to-end ms per step none written (held to measure.threshold_pct)")

    config = parse_config({"measure": {"thresholds_file": "thr.toml"}})
    read = _rule(config, FolderFiles(folder=tmp_path))
    assert read.pcts() == {"gpu_ms": 0.5, "end_to_end_ms": 4.0, "tok_per_s": 1.0, "instructions": 2.0}
    assert read.spreads == ()
    assert read.sources() == _sources(tok_per_s="configured") | {"instructions": "configured"}
    path.write_text(path.read_text().replace("gpu_ms_pct = 0.500", "gpu_ms_pct = 0.500\ntok_per_s_pct = 70.000"))
    read = _rule(config, FolderFiles(folder=tmp_path))
    assert read.tok_per_s == Threshold(pct=70.0, source="calibrated")
    # a file without end-to-end ms's threshold holds it to the config's; without a file, each is the config's
    path.write_text(path.read_text().replace("end_to_end_ms_pct = 4.000", ""))
    read = _rule(config, FolderFiles(folder=tmp_path))
    assert read.end_to_end_ms == Threshold(pct=1.0, source="configured")
    configured = _rule(parse_config({"measure": {"threshold_pct": 2.0}}), FolderFiles(folder=tmp_path))
    assert configured.pcts() == {"gpu_ms": 2.0, "end_to_end_ms": 2.0, "tok_per_s": 2.0, "instructions": 2.0}
    assert configured.spreads == ()
    assert configured.sources() == _sources("configured", "configured", "configured") | {"instructions": "configured"}


# ---- in a report: where each threshold came from, worded in the comment, checked when read back -------------

REPORTS = Path(__file__).resolve().parents[1] / "docs"
INFORMING = REPORTS / "validation" / "h200-engines" / "pairs" / "ref-bf16-aa" / "report.json"  # tok/s informs
DEMO = REPORTS / "examples" / "h200-demo-b31932f" / "report.json"


def _sources(gpu_ms: str = "calibrated", tok_per_s: str = "gpu_ms_fallback", end_to_end_ms: str = "calibrated"):  # type: ignore[no-untyped-def]
    """Where a report says each threshold came from (`Threshold.source`), for the metrics it decides."""
    return {"gpu_ms": gpu_ms, "tok_per_s": tok_per_s, "end_to_end_ms": end_to_end_ms}


def test_a_tok_per_s_held_to_gpu_ms_threshold_is_worded_so(tmp_path: Path) -> None:
    """A run whose thresholds file wrote no tok/s threshold: its report keeps that, and the comment
    says tok/s is held to GPU ms's threshold because the calibration found it too noisy, instead of
    naming a 1% tok/s threshold; with a calibrated tok/s threshold, or none said (older reports), it
    names the tok/s threshold as before."""
    from guard.report import read_report, render_comment
    from tests.report_fixtures import committed, sourced

    path = tmp_path / "report.json"
    path.write_text(sourced(committed(INFORMING), _sources()).model_dump_json())
    report = read_report(path)  # it holds up: tok/s's threshold is GPU ms's
    said = report.rule.sources()
    assert said is not None and said.items() <= _sources().items()
    assert report.rule.tok_per_s.pct == report.rule.gpu_ms.pct == 1.0
    comment = render_comment(report)
    assert ("Tokens per second is held to GPU ms per step's 1% threshold: the calibration found tokens per second too "
            "noisy to gate on this runner and wrote it no threshold of its own.") in comment
    assert "(1% in GPU ms per step, GPU ms per step's 1% in tokens per second)" in comment
    assert "detect only a change of 11.7% at batch size 1, not GPU ms per step's 1% threshold;" in comment
    for sources in (_sources(tok_per_s="calibrated"), None):
        plain = render_comment(sourced(report, sources))
        assert "(1% in GPU ms per step, 1% in tokens per second)" in plain and "not its 1% threshold;" in plain
        assert "GPU ms per step's 1%" not in plain and "too noisy to gate" not in plain


COMPILE_MODE = REPORTS / "examples" / "h200-compile-mode-7c9b5e7" / "report.json"  # end-to-end decided


def test_an_end_to_end_time_held_to_gpu_ms_threshold_decides_and_is_worded_so(tmp_path: Path) -> None:
    """The H200's compile-mode pair: its thresholds file wrote GPU ms 1.1% and nothing for tok/s or
    end-to-end time. End-to-end time still titled the comment, at GPU ms's threshold; the comment
    names that threshold as GPU ms's and says why, and does not call a deciding metric one that informs."""
    from guard.report import read_report, render_comment
    from tests.report_fixtures import committed, sourced

    held = _sources(end_to_end_ms="gpu_ms_fallback")
    path = tmp_path / "report.json"
    path.write_text(sourced(committed(COMPILE_MODE), held).model_dump_json())
    report = read_report(path)
    assert report.rule.pct("end_to_end_ms") == report.rule.gpu_ms.pct == 1.1
    comment = render_comment(report)
    assert comment.splitlines()[1].startswith("**Decode 4.5x slower at batch size 1")
    assert "end-to-end ms per step rose 353.45% (+137.93% to +764.20%), its whole interval past GPU ms per " \
           "step's 1.1% threshold." in comment
    assert ("End-to-end ms per step is held to GPU ms per step's 1.1% threshold: the thresholds file wrote it "
            "none of its own") in comment
    assert "End-to-end ms per step informs" not in comment
    calibrated = render_comment(sourced(report, _sources()))
    assert "+764.20%), its whole interval past the 1.1% threshold." in calibrated
    assert "End-to-end ms per step is held" not in calibrated


@pytest.mark.parametrize(("sources", "tok_pct", "overridden", "refused"), [
    (_sources(tok_per_s="calibrated"), 5.0, False, None),  # honest: the file gave tok/s 5%
    # rule 5 holds no metric to GPU ms's threshold
    (_sources(), 5.0, False, r"rule\.tok_per_s\.source is gpu_ms_fallback, where configured or calibrated "
                              r"\(rule 5 holds no metric to GPU ms's threshold\) is due"),
    (_sources("configured", "configured", "configured"), 5.0, False, r"rule\.tok_per_s\.pct is 5\.0, where 1\.0 "
                                                                     r"\(GPU ms's, from the config\) is due"),
    (_sources("configured", "gpu_ms_fallback", "configured"), 1.0, False,
     r"rule\.tok_per_s\.source is gpu_ms_fallback, where configured, like GPU ms's, is due"),
    # a file beside the config's threshold: what the user feels may be held to the config's (the larger)
    (_sources(tok_per_s="configured"), 1.0, False, None),
    (_sources(tok_per_s="calibrated"), 1.0, True,
     r"rule\.gpu_ms\.source is calibrated, where configured \(the command line gave the threshold\) is due"),
])
def test_a_report_whose_threshold_sources_do_not_fit_its_thresholds_is_refused(
    tmp_path: Path, sources, tok_pct: float, overridden: bool, refused: str | None,  # type: ignore[no-untyped-def]
) -> None:
    """A report says where each threshold came from; read back, that must fit the thresholds it
    states: a tok/s held to GPU ms's threshold (or the config's) has GPU ms's, and a thresholds
    file, the config and the command line's threshold are not mixed."""
    from guard.config import ConfigOverrides
    from guard.report import UnfoundedReport, read_report
    from tests.report_fixtures import committed, remeasured, ruled, sourced

    demo = committed(DEMO)
    overrides = ConfigOverrides(threshold_pct=demo.rule.gpu_ms.pct) if overridden else None
    report = remeasured(ruled(demo, tok_per_s=tok_pct).model_copy(update={"overrides": overrides}), 1.0)
    path = tmp_path / "report.json"
    path.write_text(sourced(report, sources).model_dump_json())
    if refused is None:
        assert read_report(path).rule == sourced(report, sources).rule
        return
    with pytest.raises(UnfoundedReport, match=refused):
        read_report(path)
    path.write_text(report.model_dump_json())  # the same numbers, without the sources: an older report holds
    assert read_report(path).rule.sources() is None


def test_host_instructions_spread_is_measured_and_their_threshold_left_to_the_config(tmp_path: Path) -> None:
    """Every process counted its instructions, a few hundredths of a percent apart: the file
    gives their spread, computed here from the processes' own counts, and writes no threshold
    for them; without a counter in one process there is no such line."""
    repo = make_repo(tmp_path, config=SLEEPY_CONFIG, files={"wl.py": STAND_IN_WORKLOAD})
    out = tmp_path / "thr.toml"

    def count(process: Process, _batch_size: int) -> float:
        return 1.5e6 * (1 + 0.0003 * ((process.number * 3) % 5 - 2))

    standin = StandIn(step_ms=steady(4.0), instructions=count)
    _calibrate(repo, out, standin)
    text = out.read_text()
    measured = [p for p in standin.asked if p.mode == "measure"]
    sides = [np.log([count(p, 1) for p in measured if p.arm == side]) for side in "ab"]
    pooled = sum(((x - x.mean()) ** 2).sum() for x in sides) / sum(len(x) - 1 for x in sides)
    line = re.search(r"bs 1, host instructions per step: within-side sd ([\d.]+)% \(upper 95% limit [\d.]+%, "
                     r"(\d+) processes", text)
    assert line, text
    assert float(line.group(1)) == pytest.approx(math.sqrt(pooled) * 100, abs=0.0006)
    assert int(line.group(2)) == len(measured)
    assert "(measure.instructions_threshold_pct, not calibrated: set by what a user feels)." in text
    assert "instructions" not in out.read_text().split("[thresholds]")[1]
    assert json.loads(calibration_path(out).read_text())["noise"][0]["instructions"]["sd_pct"] > 0

    uncounted = StandIn(step_ms=steady(4.0), instructions=lambda p, size: None if p.number == 3 else count(p, size))
    _calibrate(repo, out, uncounted)
    assert "host instructions per step" not in out.read_text()
