"""The profiler fold's words on a trace diff, in the manner of a performance engineer's issue."""

from __future__ import annotations

from guard._markdown import code, text
from guard.report import _words as words
from guard.trace import TraceSection
from guard.trace import BeforeAfter, TraceDiff

API_NAMES_SHOWN = 4
# Where extra idle time sits is worth a sentence only when idle time is a real part of the change.
MATERIAL_IDLE_SHARE = 0.25


def _ms(change: BeforeAfter) -> str:
    if change.before is None or change.after is None or change.delta is None:
        return "n/a"
    return f"{words.ms(change.before)} -> {words.ms(change.after)} ms per step ({words.ms_delta(change.delta)})"


def trace_bullets(section: TraceSection) -> list[str]:
    """The bullet points of the profiler fold of one batch size."""
    change = section.diff
    if change is None:
        missing = [a.arm for a in section.arms if a.figures is None]
        errors = [text(f"{a.arm}: {a.error}") for a in section.arms if a.error]
        return [f"No trace to compare ({text(', '.join(missing)) or 'an arm'} has none). " + "; ".join(errors)]
    gaps = _gap_statement(change) or _steady_median(change)
    return [_counts(change), _busy(change), _idle(change)] + ([gaps] if gaps else [])


def gap_arithmetic(change: TraceDiff) -> str | None:
    """Issue 775's sum, where idle time is a real part of the change; on a kernel slowdown, gaps
    that moved by a fraction of a nanosecond make no story."""
    by_median, by_mean = change.gap_ms_per_step_by_median, change.gap_ms_per_step_by_mean
    if by_median is None or by_mean is None or not _idle_is_material(change):
        return None
    n = round(change.kernels_per_step.after or 0)
    if by_median == 0:  # all of it in a few gaps: a median-times-count sum would say none
        return (f"At about {n} kernels per step, the mean gap's change adds {_digits(by_mean)} ms per step; "
                "the median gap did not move, so the extra idle time sits in a few gaps.")
    return (f"At about {n} kernels per step, that adds {_digits(by_median)} ms per step by the median gap's change "
            f"and {_digits(by_mean)} ms by the mean gap's.")


def span_sentence(change: TraceDiff) -> str:
    span = change.span_ms_per_step
    parts = {"idle time between kernels": change.idle_ms_per_step.delta or 0.0,
             "kernel durations": change.busy_ms_per_step_from_durations,
             "kernels added or removed": change.busy_ms_per_step_from_counts}
    head = f"Span per step: {_ms(span)}"
    if all(abs(v) < 1e-9 for v in parts.values()):
        return f"{head}; idle time, kernel durations and kernel counts are unchanged."
    return head + "; " + ", ".join(f"{name} {words.ms_delta(v)} ms" for name, v in parts.items()) + "."


def _digits(value: float) -> str:
    """Two significant digits, never in exponent form."""
    return f"{float(f'{value:.2g}'):f}".rstrip("0").rstrip(".") if value else "0"


def _idle_is_material(change: TraceDiff) -> bool:
    idle = change.idle_ms_per_step.delta
    if not idle or idle <= 0:
        return False
    grown = idle + max(change.busy_ms_per_step_from_counts, 0) + max(change.busy_ms_per_step_from_durations, 0)
    return idle >= MATERIAL_IDLE_SHARE * grown


def _gap_statement(change: TraceDiff) -> str | None:
    median = change.gaps.median_gap_us
    if median.delta is None or median.delta == 0 or median.before is None or median.after is None:
        return None
    total, same = change.streams_with_gaps, change.streams_gaps_same_way
    where = f"on {same} of the {total} streams with gaps in both"
    if total == 1 and same:
        where = "on the one stream with gaps in both"
    elif total and same == total:
        where = f"on all {total} streams with gaps in both"
    return (f"The median gap between consecutive kernels of a stream goes from {words.us(median.before)} us to "
            f"{words.us(median.after)} us, the same way {where}.")


def _steady_median(change: TraceDiff) -> str | None:
    """When idle grew but the median gap did not, the time is in the tail of the gaps."""
    median, idle = change.gaps.median_gap_us, change.idle_ms_per_step
    tail = change.gaps.largest_1pct_gaps_ms_per_step
    if median.before is None or median.delta != 0 or tail.delta is None or not _idle_is_material(change):
        return None
    return (f"The median gap between consecutive kernels stays at {words.us(median.before)} us; the largest 1% of "
            f"gaps carry {words.ms(tail.delta)} of the {words.ms(idle.delta or 0)} ms of extra idle time per step.")


def _counts(change: TraceDiff) -> str:
    if change.kernel_counts_identical and change.api_calls_identical:
        return "Kernel counts and API calls are identical."
    parts = []
    k = change.kernels_per_step
    copies = [f"{noun} per step: {words.count(c.before)} -> {words.count(c.after)}"
              for noun, c in (("copies", change.memcpys_per_step), ("memsets", change.memsets_per_step))
              if c is not None and c.before is not None and c.after is not None
              and words.count(c.before) != words.count(c.after)]
    if not change.kernel_counts_identical and k.before is not None and k.after is not None:
        if words.count(k.before) == words.count(k.after):
            renamed = len([c for c in change.kernels_added + change.kernels_removed if c.kind == "kernel"])
            swapped = len([c for c in change.kernels_replaced if c.kind == "kernel"])
            # copies or memsets of other names, at the same counts (a pageable copy made pinned)
            others = 0 if copies else len([c for c in change.kernels_added + change.kernels_removed
                                           + change.kernels_replaced if c.kind != "kernel"])
            what = [f"{renamed} kernel names come or go"] if renamed else []
            what += [f"{swapped} kernel(s) run as another variant of the same function"] if swapped else []
            what += [f"{others} copy or memset names come or go"] if others else []
            parts.append(f"Kernels per step: {words.count(k.after)} in both" + (f", but {' and '.join(what)}"
                                                                                 if what else ""))
        else:
            parts.append(f"Kernels per step: {words.count(k.before)} -> {words.count(k.after)}")
    else:
        parts.append("Kernel counts are identical")
    parts += copies
    if change.api_calls_changed:
        items = sorted(change.api_calls_changed.items(), key=lambda kv: -abs(kv[1].delta or 0.0))
        shown = ", ".join(f"{code(name)} {words.count(c.before or 0.0)} -> {words.count(c.after or 0.0)}"
                          for name, c in items[:API_NAMES_SHOWN])
        more = f" and {len(items) - API_NAMES_SHOWN} more" if len(items) > API_NAMES_SHOWN else ""
        parts.append(f"API calls per step: {shown}{more}")
    else:
        parts.append("API calls are identical")
    return "; ".join(parts) + "."


def _busy(change: TraceDiff) -> str:
    busy = change.busy_ms_per_step
    # a diff that pairs copies was made from figures that time them with the kernels
    sentence = f"{'GPU' if change.memcpys_per_step is not None else 'Kernel'} busy time: {_ms(busy)}"
    if busy.delta is not None and abs(busy.delta) > 1e-9:
        sentence += (f"; {words.ms_delta(change.busy_ms_per_step_from_counts)} ms from kernels added or removed, "
                     f"{words.ms_delta(change.busy_ms_per_step_from_durations)} ms from kernel durations")
    return sentence + "."


def _idle(change: TraceDiff) -> str:
    tail = change.gaps.largest_1pct_gaps_ms_per_step
    sentence = f"Idle time between kernels: {_ms(change.idle_ms_per_step)}"
    if tail.before is not None and tail.after is not None:
        sentence += f"; the largest 1% of gaps add up to {words.ms(tail.before)} -> {words.ms(tail.after)} ms per step"
    return sentence + "."
