"""Short plain-text tables of trace figures and trace diffs, for a terminal."""

from __future__ import annotations

from guard.trace._diff import BeforeAfter, TraceDiff
from guard.trace._figures import TraceFigures, TraceWarning

NAME_WIDTH = 70  # kernel names run to hundreds of characters of template arguments
LABEL_WIDTH = 32


def figures_text(figures: TraceFigures) -> str:
    launches = figures.launches_per_step
    per_launch = f", {launches} graph launch{'es' if launches != 1 else ''} per step" if launches else ""
    lines = [
        f"{figures.source} ({figures.format}): {figures.steps} steps by rule '{figures.steps_rule}'{per_launch}",
        f"kernels per step {_count(figures.kernels_per_step)}, memcpys {_count(figures.memcpys_per_step)}, "
        f"memsets {_count(figures.memsets_per_step)}",
        "",
        f"{'ms per step':<12}{'median':>10}{'p90':>10}",
    ]
    for label, median, p90 in (
        ("busy", figures.busy_ms_per_step, figures.p90.busy_ms_per_step),
        ("union", figures.union_ms_per_step, figures.p90.union_ms_per_step),
        ("span", figures.span_ms_per_step, figures.p90.span_ms_per_step),
        ("idle", figures.idle_ms_per_step, figures.p90.idle_ms_per_step),
    ):
        lines.append(f"{label:<12}{median:>10.4f}{p90:>10.4f}")
    gaps = figures.gaps
    lines += [
        "",
        f"gaps, all streams: median {_us(gaps.median_gap_us)}, p90 {_us(gaps.p90_gap_us)}, "
        f"mean {_us(gaps.mean_gap_us)}, max {_us(gaps.max_gap_us)}; per step: sum {gaps.gap_ms_per_step:.4f} ms, "
        f"largest 1% {gaps.largest_1pct_gaps_ms_per_step:.4f} ms",
        "",
        f"{'device':>6}{'stream':>8}{'kernels/step':>14}{'median gap us':>15}{'p90 gap us':>12}"
        f"{'mean gap us':>13}{'overlaps/step':>15}",
    ]
    for s in figures.streams:
        lines.append(
            f"{s.device:>6}{s.stream:>8}{_count(s.kernels_per_step):>14}{_num(s.median_gap_us):>15}"
            f"{_num(s.p90_gap_us):>12}{_num(s.mean_gap_us):>13}{_count(s.overlaps_per_step):>15}"
        )
    lines += ["", "API calls per step:"]
    lines += [f"  {count:>8g}  {name}" for name, count in figures.api_calls_per_step.items()] or ["  none"]
    lines += _warnings(figures.warnings)
    return "\n".join(lines) + "\n"


def diff_text(result: TraceDiff) -> str:
    lines = [
        f"base {result.base_source}",
        f"head {result.head_source}",
        f"kernel counts per step identical: {_yes(result.kernel_counts_identical)}; "
        f"API calls per step identical: {_yes(result.api_calls_identical)}",
        "",
        f"{'per step':<{LABEL_WIDTH}}{'base':>12}{'head':>12}{'change':>12}",
        _count_row("kernels", result.kernels_per_step),
        *(_count_row(label, change) for label, change in (("memcpys", result.memcpys_per_step),
                                                          ("memsets", result.memsets_per_step)) if change is not None),
    ]
    for label, change in (
        ("busy ms", result.busy_ms_per_step),
        ("union ms", result.union_ms_per_step),
        ("span ms", result.span_ms_per_step),
        ("idle ms", result.idle_ms_per_step),
        ("median gap us", result.gaps.median_gap_us),
        ("mean gap us", result.gaps.mean_gap_us),
        ("p90 gap us", result.gaps.p90_gap_us),
        ("largest 1% gaps ms", result.gaps.largest_1pct_gaps_ms_per_step),
    ):
        lines.append(f"{label:<{LABEL_WIDTH}}{_num(change.before):>12}{_num(change.after):>12}{_signed(change):>12}")
    lines += [_count_row(f"calls {name}", change) for name, change in result.api_calls_changed.items()]
    lines += [
        f"{'busy ms from counts':<{LABEL_WIDTH}}{'':>24}{result.busy_ms_per_step_from_counts:>+12.4f}",
        f"{'busy ms from durations':<{LABEL_WIDTH}}{'':>24}{result.busy_ms_per_step_from_durations:>+12.4f}",
    ]
    if result.gap_ms_per_step_by_median is not None and result.gap_ms_per_step_by_mean is not None:
        lines.append(f"{'gap change x kernels, ms':<{LABEL_WIDTH}}median {result.gap_ms_per_step_by_median:.4f}, "
                     f"mean {result.gap_ms_per_step_by_mean:.4f}")
    lines += ["", f"streams, paired by rank (kernels per step, then first appearance): base {result.base_streams}, "
              f"head {result.head_streams}; median gap moved as the pooled one on {result.streams_gaps_same_way} "
              f"of {result.streams_with_gaps} with gaps in both",
              f"{'rank':>4}{'streams':>14}{'kernels/step':>16}{'median gap us':>20}"]
    for s in result.streams:
        lines.append(
            f"{s.rank:>4}{_id(s.base_stream) + ' -> ' + _id(s.head_stream):>14}"
            f"{_count(s.kernels_per_step.before) + ' -> ' + _count(s.kernels_per_step.after):>16}"
            f"{_num(s.median_gap_us.before) + ' -> ' + _num(s.median_gap_us.after):>20}"
        )
    for title, kernels in (
        ("kernels added (per step)", result.kernels_added),
        ("kernels removed (per step)", result.kernels_removed),
    ):
        if kernels:
            lines += ["", f"{title}:"]
            lines += [f"  {_signed_count(k.kernels_per_step):>8}  {k.name[:NAME_WIDTH]}" for k in kernels]
    if result.kernels_replaced:
        lines += ["", "kernels replaced by another variant of the same function (per step, mean us):"]
        lines += [
            f"  {_count(k.kernels_per_step.after)}  {_num(k.mean_duration_us.before)} -> "
            f"{_num(k.mean_duration_us.after)}  {k.name[:NAME_WIDTH]}"
            for k in result.kernels_replaced
        ]
    for title, kernels in (("kernels slower (mean us)", result.kernels_slower),
                           ("kernels faster (mean us)", result.kernels_faster)):
        if kernels:
            lines += ["", f"{title}:"]
            lines += [
                f"  {_num(k.mean_duration_us.before)} -> {_num(k.mean_duration_us.after)}  {k.name[:NAME_WIDTH]}"
                for k in kernels
            ]
    lines += _warnings(result.warnings)
    return "\n".join(lines) + "\n"


def _count_row(label: str, change: BeforeAfter) -> str:
    return f"{label:<{LABEL_WIDTH}}{_count(change.before):>12}{_count(change.after):>12}{_signed_count(change):>12}"


def _signed_count(change: BeforeAfter) -> str:
    delta = change.delta or 0.0
    return f"{delta:+g}" if delta == int(delta) else f"{delta:+.2f}"


def _warnings(warnings: list[TraceWarning]) -> list[str]:
    return ["", "warnings:", *(f"  - {warning_text(w)}" for w in warnings)] if warnings else []


_TABLE = {"gpu": "GPU", "api": "CUDA API", "range": "range"}


def warning_text(w: TraceWarning) -> str:
    """One warning as a sentence, prefixed with its arm in a diff."""
    n = w.count or 0
    s = "s" if n != 1 else ""
    match w.kind:
        case "untimed_events":
            said = f"{n} complete events without 'ts' or 'dur' skipped"
        case "untimed_gpu_records":
            said = f"{n} GPU record{s} without timestamps skipped (CUPTI could not time them)"
        case "no_runtime_table":
            said = "no CUPTI_ACTIVITY_KIND_RUNTIME table: kernels cannot be linked to the API calls that launched them"
        case "corrupt_records":
            why = "end before start" + (f" or longer than {w.limit_s} s" if w.why == "end_before_start_or_too_long"
                                        else "")
            said = f"{n} {_TABLE[w.table or 'gpu']} record{s} dropped as corrupt: {why}"
        case "steps_ignored":
            said = f"--steps {w.steps} ignored: the trace marks {n} steps with host ranges"
        case "unlinked_activities":
            said = f"{n} GPU activities have no matching API call (correlation id), so no step; they are left out"
        case "uneven_split":
            said = f"{n} kernels do not split evenly into {w.steps} steps; group sizes differ by one"
        case "no_api_links":
            said = "no GPU activity links to an API call, so API calls per step are not counted"
        case "empty_steps":
            said = f"{n} of {w.steps} steps hold no kernel and are left out"
        case "outside_steps":
            said = f"{n} GPU activities fall in no step and are left out"
        case "uneven_graph_steps":
            said = (f"one step per cudaGraphLaunch gives steps of {w.kernels_min} to {w.kernels_max} kernels: "
                    "if a decode step launches several graphs, pass --steps N")
        case "several_devices":
            said = "kernels of several devices: union, span and idle are taken across all of them"
        case "different_step_rules":
            said = f"steps were found by different rules: base {w.base_rule}, head {w.head_rule}"
    return f"{w.arm}: {said}" if w.arm else said


def _count(value: float) -> str:
    return f"{value:g}" if value == int(value) else f"{value:.2f}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}" if abs(value) < 100 else f"{value:.1f}"


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} us"


def _signed(change: BeforeAfter) -> str:
    if change.delta is None:
        return "-"
    return f"{change.delta:+.4f}" if abs(change.delta) < 100 else f"{change.delta:+.1f}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _id(stream: int | None) -> str:
    return "-" if stream is None else str(stream)
