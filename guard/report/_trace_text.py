"""Sentences about a trace diff, in the manner of a performance engineer's issue."""

from __future__ import annotations

from guard._markdown import code, text
from guard.compare import BatchComparison
from guard.trace import TraceSection
from guard.trace import BeforeAfter, TraceDiff

API_NAMES_SHOWN = 4
# Where extra idle time sits is worth a sentence only when idle time is a real part of the change.
MATERIAL_IDLE_SHARE = 0.25
# A profiled change this many times the timed one (or less than its inverse) is said to be out of scale.
PROFILE_SCALE_FACTOR = 2.0


def _signed(value: float) -> str:
    text = f"{value:+.3f}"
    return "0.000" if text in ("+0.000", "-0.000") else text


def _ms(change: BeforeAfter) -> str:
    if change.before is None or change.after is None or change.delta is None:
        return "n/a"
    return f"{change.before:.3f} -> {change.after:.3f} ms per step ({_signed(change.delta)})"


def _count(value: float) -> str:
    return f"{value:.0f}" if abs(value - round(value)) < 0.05 else f"{value:.1f}"


def trace_bullets(section: TraceSection) -> list[str]:
    """The bullet points under 'Profiler over N decode steps'."""
    change = section.diff
    if change is None:
        missing = [a.arm for a in section.arms if a.figures is None]
        errors = [text(f"{a.arm}: {a.error}") for a in section.arms if a.error]
        return [f"No trace to compare ({text(', '.join(missing)) or 'an arm'} has none). " + "; ".join(errors)]
    gaps = text(change.gap_statement) if change.gap_statement else _steady_median(change)
    return [_counts(change), _busy(change), _idle(change)] + ([gaps] if gaps else [])


def profile_scale(batch: BatchComparison | None, section: TraceSection, base: str, head: str) -> str | None:
    """When the profiled pass's change per step is far from the timed pass's, say so: the
    profile then tells where the time went, not how much of it there is."""
    if batch is None or section.diff is None or section.diff.span_ms_per_step.delta is None:
        return None
    medians = {a.arm: a.gpu_ms_per_step.median for a in batch.arms}
    if base not in medians or head not in medians:
        return None
    timed, profiled = medians[head] - medians[base], section.diff.span_ms_per_step.delta
    if timed <= 0 or profiled <= 0 or 1 / PROFILE_SCALE_FACTOR < profiled / timed < PROFILE_SCALE_FACTOR:
        return None
    ratio = profiled / timed
    times = f"{ratio:.0f} times" if ratio >= 10 else f"{ratio:.1f} times"
    return (
        f"The profiled step grew by {profiled:.3f} ms, {times} the {timed:.3f} ms the timed pass measured: "
        "under the profiler, launches and host waits take longer. Read the profile for the shares of the "
        "change, and the table above for its size."
    )


def gap_arithmetic(section: TraceSection) -> str | None:
    """The diff's sum of the gaps' change over the kernels of a step, where idle time is a
    real part of the change; on a kernel slowdown, gaps that moved by a fraction of a
    nanosecond make no story."""
    change = section.diff
    if change is None or change.gap_arithmetic is None or not _idle_is_material(change):
        return None
    return text(change.gap_arithmetic)


def _idle_is_material(change: TraceDiff) -> bool:
    """Idle time grew, and by at least MATERIAL_IDLE_SHARE of all that grew."""
    idle = change.idle_ms_per_step.delta
    if not idle or idle <= 0:
        return False
    grown = idle + max(change.busy_ms_per_step_from_counts, 0) + max(change.busy_ms_per_step_from_durations, 0)
    return idle >= MATERIAL_IDLE_SHARE * grown


def _steady_median(change: TraceDiff) -> str | None:
    """When idle grew but the median gap did not, the time is in the tail of the gaps."""
    median, idle = change.gaps.median_gap_us, change.idle_ms_per_step
    tail = change.gaps.largest_1pct_gaps_ms_per_step
    if median.before is None or median.delta != 0 or tail.delta is None or not _idle_is_material(change):
        return None  # e.g. kernels got slower and idle moved by a few ns: no story to tell about gaps
    return (
        f"The median gap between consecutive kernels stays at {median.before:.3f} us; "
        f"the largest 1% of gaps carry {tail.delta:.3f} of the {idle.delta:.3f} ms of extra idle time per step."
    )


def _counts(change: TraceDiff) -> str:
    if change.kernel_counts_identical and change.api_calls_identical:
        return "Kernel counts and API calls are identical."
    parts = []
    k = change.kernels_per_step
    if not change.kernel_counts_identical and k.before is not None and k.after is not None:
        if _count(k.before) == _count(k.after):
            renamed = len(change.kernels_added) + len(change.kernels_removed)
            swapped = len(change.kernels_replaced)
            what = [f"{renamed} kernel names come or go"] if renamed else []
            what += [f"{swapped} kernel(s) run as another variant of the same function"] if swapped else []
            parts.append(f"Kernels per step: {_count(k.after)} in both, but {' and '.join(what)}")
        else:
            parts.append(f"Kernels per step: {_count(k.before)} -> {_count(k.after)}")
    else:
        parts.append("Kernel counts are identical")
    if change.api_calls_changed:
        items = sorted(change.api_calls_changed.items(), key=lambda kv: -abs(kv[1].delta or 0.0))
        shown = ", ".join(
            f"{code(name)} {_count(c.before or 0.0)} -> {_count(c.after or 0.0)}" for name, c in items[:API_NAMES_SHOWN]
        )
        more = f" and {len(items) - API_NAMES_SHOWN} more" if len(items) > API_NAMES_SHOWN else ""
        parts.append(f"API calls per step: {shown}{more}")
    else:
        parts.append("API calls are identical")
    return "; ".join(parts) + "."


def _busy(change: TraceDiff) -> str:
    busy = change.busy_ms_per_step
    sentence = f"Kernel busy time: {_ms(busy)}"
    if busy.delta is not None and abs(busy.delta) > 1e-9:
        sentence += (
            f"; {_signed(change.busy_ms_per_step_from_counts)} ms from kernels added or removed, "
            f"{_signed(change.busy_ms_per_step_from_durations)} ms from kernel durations"
        )
    return sentence + "."


def _idle(change: TraceDiff) -> str:
    tail = change.gaps.largest_1pct_gaps_ms_per_step
    sentence = f"Idle time between kernels: {_ms(change.idle_ms_per_step)}"
    if tail.before is not None and tail.after is not None:
        sentence += f"; the largest 1% of gaps add up to {tail.before:.3f} -> {tail.after:.3f} ms per step"
    return sentence + "."
