"""One plain sentence per slower batch size: where the extra time went.

Magnitudes come from the timed pass; the profiled pass only says how the change splits
between idle time, kernel durations and kernels added or removed (the profiler inflates
time at graph-launch boundaries, so its absolute figures are not the regression's size).
"""

from __future__ import annotations

from guard._markdown import code
from guard.compare import BatchComparison
from guard.report._trace_text import _count
from guard.trace import TraceSection
from guard.trace import TraceDiff

# A cause is named as dominant when it carries at least this share of the change.
DOMINANT_SHARE = 0.6


def gap_dominated(section: TraceSection | None) -> bool:
    """The profiled change is mostly idle time between kernels."""
    if section is None or section.diff is None:
        return False
    change = section.diff
    idle = max(change.idle_ms_per_step.delta or 0.0, 0.0)
    total = idle + max(change.busy_ms_per_step_from_counts, 0.0) + max(change.busy_ms_per_step_from_durations, 0.0)
    return total > 0 and idle / total >= DOMINANT_SHARE


def cause_tag(batch: BatchComparison, section: TraceSection | None) -> str | None:
    """A few words for the title: the dominant cause, or None when none dominates."""
    return _explain(batch, section)[0]


def attribution(batch: BatchComparison, section: TraceSection | None) -> str | None:
    """The sentence for the comment's 'What happened' list."""
    return _explain(batch, section)[1]


def _explain(batch: BatchComparison, section: TraceSection | None) -> tuple[str | None, str | None]:
    """(title tag, sentence); the tag is None when no cause dominates or none is known."""
    gpu, tok = batch.gpu_ms_change, batch.tok_per_s_change
    if gpu is None or tok is None:
        return None, None
    host = _host_bound(batch)
    # GPU time that rose past the threshold is explained by the trace, where the trace has a
    # cause for it (a graph break idles the GPU between graphs, and the host's work between
    # them slows the loop further); host time alone explains a slowdown the GPU did not see
    if host is not None and (batch.gpu_ms_verdict != "regression" or section is None or section.diff is None):
        return "host time", host
    tag, sentence = _from_trace(batch, section)
    if host is not None:
        return (tag or "host time"), " ".join(part for part in (sentence, host) if part)
    return tag, sentence


def _from_trace(batch: BatchComparison, section: TraceSection | None) -> tuple[str | None, str | None]:
    if section is None or section.diff is None:
        return None, None
    change = section.diff
    if graphs_gone(change):
        return "no CUDA graph", (
            f"At batch size {batch.batch_size} the head no longer replays a CUDA graph: decode runs eagerly, "
            "kernel by kernel."
        )
    idle = change.idle_ms_per_step.delta or 0.0
    counts = change.busy_ms_per_step_from_counts
    durations = change.busy_ms_per_step_from_durations
    total = sum(max(part, 0.0) for part in (idle, counts, durations))
    if total <= 0:
        return None, None
    parts = {"idle": idle, "counts": counts, "durations": durations}
    shares = {name: max(value, 0.0) / total for name, value in parts.items()}
    split = (
        f"Of the extra time in the profiled pass, {shares['idle']:.0%} is idle time between kernels, "
        f"{shares['counts']:.0%} kernels added or removed and {shares['durations']:.0%} longer kernels."
    )
    if shares["idle"] >= DOMINANT_SHARE and change.kernel_counts_identical and not change.kernels_slower:
        return "idle time between kernels", (
            "The extra time is idle time between kernels; the kernels themselves are not slower. " + split
        )
    if shares["idle"] >= DOMINANT_SHARE:
        return "idle time between kernels", "Most of the extra time is idle time between kernels. " + split
    if shares["counts"] >= DOMINANT_SHARE:
        k = change.kernels_per_step
        return "kernels added", (
            f"Most of the extra time is in kernels added: {k.before:.0f} -> {k.after:.0f} kernels per step. " + split
        )
    if shares["durations"] >= DOMINANT_SHARE:
        swapped = [
            f"{code(_short(c.name))} ({_count(c.kernels_per_step.after or 0.0)} per step, now as another variant: "
            f"{c.mean_duration_us.before:.2f} -> {c.mean_duration_us.after:.2f} us)"
            for c in change.kernels_replaced if (c.busy_ms_per_step.delta or 0.0) > 0
        ]
        variants = {c.name for c in change.kernels_replaced}
        names = ", ".join([*swapped, *(code(_short(c.name)) for c in change.kernels_slower
                                       if c.name not in variants)][:3])
        return "slower kernels", f"The kernels themselves are slower{': ' + names if names else ''}. " + split
    return None, "No single cause dominates. " + split


def _host_bound(batch: BatchComparison) -> str | None:
    """tok/s fell far more than GPU time per step rose: the time is on the host."""
    gpu, tok = batch.gpu_ms_change, batch.tok_per_s_change
    assert gpu is not None and tok is not None
    slowdown_from_tok = -tok.pct
    if slowdown_from_tok > 2 * max(gpu.pct, 0.0) + 1.0 and gpu.ci_high_pct < slowdown_from_tok / 2:
        return (
            f"GPU time per step changed {gpu.pct:+.2f}% but tok/s fell {slowdown_from_tok:.2f}%: "
            "the extra time is on the host, between or around the GPU work of each step."
        )
    return None


def _short(name: str, limit: int = 60) -> str:
    return name if len(name) <= limit else name[: limit - 3] + "..."


def graphs_gone(change: TraceDiff) -> bool:
    """Base replayed CUDA graphs and head replays none: decode runs eagerly. From the launch
    counts; reports written before they were counted have only the API calls."""
    if change.launches is not None:
        graphs = change.launches.graph_launches_per_step
        return change.launches.fell_out_of_graphs and (graphs.after or 0) == 0
    launches = change.api_calls_changed.get("cudaGraphLaunch")
    return launches is not None and (launches.before or 0) > 0 and (launches.after or 0) == 0
