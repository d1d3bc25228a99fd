"""guard calibrate's gap figures, from traces recorded on an H200 through the harness."""

from __future__ import annotations

from pathlib import Path

from guard.calibrate import NoiseFloor, gap_noise, gap_noise_line

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"
ONE_GRAPH = FIXTURES / "h200-harness-guard-step-one-graph.json.gz"
PIECEWISE = FIXTURES / "h200-harness-guard-step-piecewise.json.gz"


def _noise(**update: object) -> NoiseFloor:
    return NoiseFloor(batch_size=1, gpu_ms_per_step=1.0, gpu_ms_spread_pct=0.1, tok_per_s_spread_pct=1.0,
                      gpu_ms_aa_ci_pct=(0.0, 0.0), tok_per_s_aa_ci_pct=(0.0, 0.0)).model_copy(update=update)


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
