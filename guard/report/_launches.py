"""The comment's words on launch-bound time: decode that fell out of its CUDA graphs (from the
profiled pass's launch counts), and GPU-timed passes whose host outran its hold."""

from __future__ import annotations

from guard._markdown import text
from guard.report._schema import Report
from guard.report._trace_text import _count
from guard.trace import LaunchChange


def fell_out(report: Report) -> list[tuple[int, LaunchChange]]:
    """The batch sizes whose head launches fewer graphs and more kernels than base, per step."""
    found = []
    for section in report.traces:
        launches = section.diff.launches if section.diff else None
        if launches is not None and launches.fell_out_of_graphs:
            found.append((section.batch_size, launches))
    return found


def fallout_counts(launches: LaunchChange) -> str:
    """'0 of 1 graph launches per step left; 216 kernel launches per step instead of 2'."""
    graphs, kernels = launches.graph_launches_per_step, launches.kernel_launches_per_step
    return (f"{_count(graphs.after or 0)} of {_count(graphs.before or 0)} graph launches per step left; "
            f"{_count(kernels.after or 0)} kernel launches per step instead of {_count(kernels.before or 0)}")


def fallout_title(report: Report) -> str:
    """The title's part, '' when decode kept its graphs: it is said even when GPU time moved little."""
    found = fell_out(report)
    if not found:
        return ""
    sizes = ", ".join(str(size) for size, _ in found)
    plural = "s" if len(found) > 1 else ""
    return f"decode fell out of its CUDA graphs at batch size{plural} {sizes} ({fallout_counts(found[0][1])})"


def fallout_lines(report: Report) -> list[str]:
    lines = []
    by_size = {b.batch_size: b for b in report.batch_sizes}
    for size, launches in fell_out(report):
        batch = by_size.get(size)
        host = batch.host_ms_change if batch else None
        host_text = (f" The host's time to launch a step changed {host.pct:+.0f}% ({host.interval()}), which the "
                     "GPU-timed figures leave out; tok/s carries it." if host is not None else "")
        lines.append(f"**Decode fell out of its CUDA graphs at batch size {size}**: {fallout_counts(launches)}, "
                     f"in the profiled pass.{host_text}")
    return lines


def unheld_notes(report: Report) -> list[str]:
    """A GPU-timed pass whose host was still launching when the hold ran out times the host too."""
    notes = []
    for batch in report.batch_sizes:
        arms = {a.arm: a for a in batch.arms if a.arm in (report.base, report.head)}
        if len(arms) < 2 or not any(a.outran_hold for a in arms.values()):
            continue
        shares = ", ".join(f"{text(name)} {a.unheld_share:.0%}" for name, a in arms.items())
        if all(a.outran_hold for a in arms.values()):
            notes.append(f"At batch size {batch.batch_size} the host was still launching many steps when their "
                         f"hold on the GPU ran out ({shares} of the GPU-timed steps), so GPU time per step includes "
                         "launch time in both arms.")
        else:
            slow = text(next(name for name, a in arms.items() if a.outran_hold))
            notes.append(f"At batch size {batch.batch_size} only the {slow} arm's host was still launching steps when "
                         f"their hold ran out ({shares} of the GPU-timed steps): its GPU time per step includes launch "
                         "time the other arm's does not, so the arms were not timed alike.")
    return notes
