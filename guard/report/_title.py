"""The comment's headline: its title, and for an inconclusive result the sentence that says
which metric could not be decided."""

from __future__ import annotations

from guard.compare import BatchComparison
from guard.report._attribution import cause_tag
from guard.report._schema import Report


def _sizes(batches: list[BatchComparison]) -> str:
    sizes = [str(b.batch_size) for b in batches]
    return f"batch size {sizes[0]}" if len(sizes) == 1 else f"batch sizes {', '.join(sizes)}"


def _why_invalid(report: Report) -> str:
    """The first cause, in a few words; the Why section has the whole message."""
    for arm in report.arms:
        if arm.status == "build_failed":
            return f"the {arm.name} arm failed to build"
        if arm.status == "run_failed":
            return f"the workload failed on the {arm.name} arm"
    for batch in report.batch_sizes:
        if batch.hash_match is False:
            where = f", first at step {batch.mismatch.step}" if batch.mismatch else ""
            return f"output tokens differ between base and head at batch size {batch.batch_size}{where}"
    for batch in report.batch_sizes:
        for arm in batch.arms:
            if not arm.deterministic:
                return f"the workload is not deterministic on the {arm.arm} arm (batch size {batch.batch_size})"
    return "see the reasons below"


def title(report: Report) -> str:
    """One line: which change, what got slower, where, and by how much."""
    head = report.arm(report.head)
    change = f"{head.subject} ({head.sha[:8]})" if head.subject else head.sha[:8]
    measured = [b for b in report.batch_sizes if b.gpu_ms_change is not None]
    if report.verdict == "invalid":
        return f"Decode comparison not valid for {change}: {_why_invalid(report)}"
    step = "GPU time per step" if report.gpu_timed() else "time per step (CPU)"
    if report.verdict == "regression":
        slow = sorted(
            (b for b in measured if b.verdict == "regression"),
            key=lambda b: -b.gpu_ms_change.pct,  # type: ignore[union-attr]
        )
        sections = {t.batch_size: t for t in report.traces}
        parts, named = [], set()
        for b in slow:
            metric, pct = _deciding(b, "regression", step)
            tag = cause_tag(b, sections.get(b.batch_size))
            parts.append(f"{pct:+.1f}%{'' if metric in named else ' ' + metric} at batch size {b.batch_size}"
                         + (f" ({tag})" if tag else ""))
            named.add(metric)
        if report.capture and report.capture.files:
            return f"{change} changes CUDA graph capture and makes decode slower: " + ", ".join(parts)
        return f"{change} makes decode slower: " + ", ".join(parts)
    if report.verdict == "improvement":
        fast = [b for b in measured if b.verdict == "improvement"]
        best = min(fast, key=lambda b: b.gpu_ms_change.pct)  # type: ignore[union-attr]
        metric, pct = _deciding(best, "improvement", step)
        return f"{change} makes decode faster: {pct:+.1f}% {metric} at batch size {best.batch_size}"
    if report.verdict == "inconclusive":
        noisy = [b for b in measured if b.verdict == "inconclusive"]
        what = " and ".join(_undecided(noisy, step)) or "the measurement was"
        return f"Decode speed with {change}: inconclusive at {_sizes(noisy)}, {what} too noisy to decide"
    return f"No decode slowdown with {change} (threshold {report.threshold_pct:g}% per step)"


def _deciding(batch: BatchComparison, verdict: str, step: str) -> tuple[str, float]:
    """The metric that gave a batch size its verdict, and its change: the step time, unless
    only tok/s did (older reports lack the per-metric verdicts: the step time)."""
    if batch.tok_per_s_verdict == verdict and batch.gpu_ms_verdict != verdict and batch.tok_per_s_change:
        return "tok/s", batch.tok_per_s_change.pct
    return step, batch.gpu_ms_change.pct  # type: ignore[union-attr]


def _undecided(batches: list[BatchComparison], step: str) -> list[str]:
    """The metrics that could not be decided: the step time, tok/s, or both (none in older reports)."""
    return [m for m, field in ((step, "gpu_ms_verdict"), ("tok/s", "tok_per_s_verdict"))
            if any(getattr(b, field) == "inconclusive" for b in batches)]


def step_metric(report: Report) -> str:
    """How the comment names the step time: GPU time where CUDA events timed it."""
    return "GPU ms per decode step" if report.gpu_timed() else "ms per decode step (CPU)"


def noisy_sentence(report: Report) -> str:
    """What an inconclusive result could not tell apart, metric by metric, and what it could."""
    noisy = [b for b in report.batch_sizes if b.verdict == "inconclusive"]
    step = step_metric(report)
    limits = {step: report.threshold_pct, "tok/s": report.tok_threshold_pct or report.threshold_pct}
    metrics = _undecided(noisy, step)
    if not metrics:  # an older report: no per-metric verdicts
        return f"was too noisy to tell a {report.threshold_pct:g}% slowdown from none"
    text = "was too noisy to tell " + " or ".join(f"a {limits[m]:g}% slowdown in {m}" for m in metrics) + " from none"
    ruled_out = [m for m in limits if m not in metrics]
    if ruled_out:
        text += f"; a {limits[ruled_out[0]]:g}% slowdown in {ruled_out[0]} is ruled out"
    return text
