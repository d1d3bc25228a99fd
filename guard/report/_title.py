"""The comment's headline: its title, and for an undecided result the sentence that says
which metric could not be decided (for schema-1 reports; the interval rule's in `_decision.py`)."""

from __future__ import annotations

from guard.compare import BatchComparison
from guard.measure import Change
from guard.report import _like_for_like as like_for_like
from guard.report import _decision as decision
from guard.report._attribution import cause_tag
from guard.report._launches import fallout_title, fell_out
from guard.report._roles import informational
from guard.report._schema import Report


# A significant rise in step time under the threshold is named in a passing comment when it
# is at least this share of the threshold.
NOTABLE_SHARE = 0.5


def _sizes(batches: list[BatchComparison]) -> str:
    sizes = [str(b.batch_size) for b in batches]
    return f"batch size {sizes[0]}" if len(sizes) == 1 else f"batch sizes {', '.join(sizes)}"


def _why_invalid(report: Report) -> str:
    """The first cause, in a few words; the Why section has the whole message."""
    forced = like_for_like.why_invalid(report)
    for arm in report.arms:
        if arm.status == "build_failed":
            return f"the {arm.name} arm failed to build"
        if arm.status == "run_failed":
            return f"the workload failed on the {arm.name} arm"
    if forced:
        return forced
    for batch in report.batch_sizes:
        if batch.hash_match is False:
            where = f", first at step {batch.mismatch.step}" if batch.mismatch else ""
            return f"output tokens differ between base and head at batch size {batch.batch_size}{where}"
    for batch in report.batch_sizes:
        for arm in batch.arms:
            if arm.deterministic is False:
                return f"the workload is not deterministic on the {arm.arm} arm (batch size {batch.batch_size})"
    return "see the reasons below"


def title(report: Report) -> str:
    """One line: which change, what got slower, where, and by how much; and whether decode
    fell out of its CUDA graphs, which is said even when GPU time moved little."""
    headline = _headline(report)
    fallout = fallout_title(report) if report.verdict != "invalid" else ""
    return f"{headline}; {fallout}" if fallout else headline


def _headline(report: Report) -> str:
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
        fell = {size for size, _ in fell_out(report)}
        for b in slow:
            metric, pct = _deciding(b, "regression", step)
            tag = cause_tag(b, sections.get(b.batch_size))
            if tag == "no CUDA graph" and b.batch_size in fell:
                tag = None  # the title's last part says it, with the counts
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
    if report.verdict in ("at_threshold", "inconclusive") and decision.interval_rule(report):
        return f"Decode speed with {change}: " + _undecided_headline(report, measured, step)
    if report.verdict == "inconclusive":
        undecided = [b for b in measured if b.verdict == "inconclusive"]
        parts = []
        close = _at_threshold(undecided, step)
        if close:
            limits = _limits(report, step)
            changes = " and ".join(f"{c.pct:+.2f}% {m}" for m, _, c in close)
            where = f"at the {limits[close[0][0]]:g}% threshold" if len(close) == 1 else "each at its threshold"
            parts.append(f"{changes}, {where}")
        noisy = _undecided(undecided, step)
        if noisy or not close:
            parts.append(f"{' and '.join(noisy) or 'the measurement was'} too noisy to decide")
        return f"Decode speed with {change}: inconclusive at {_sizes(undecided)}, " + "; ".join(parts)
    under = _significant_but_under(report)
    if under is not None and under.gpu_ms_change is not None:
        return (f"No decode slowdown past the {report.threshold_pct:g}% threshold with {change}; "
                f"{under.gpu_ms_change.pct:+.2f}% {step} at batch size {under.batch_size} is significant but under it")
    return f"No decode slowdown with {change} (threshold {report.threshold_pct:g}% per step)"


def _undecided_headline(report: Report, measured: list[BatchComparison], step: str) -> str:
    """'at threshold at batch size 2, +0.98% GPU time per step against 1%', or too noisy."""
    verdict = report.verdict
    undecided = [b for b in measured if b.verdict == verdict]
    metrics = {b.decided_by or "gpu_ms" for b in undecided}
    names = [step if m == "gpu_ms" else "tok/s" for m in ("gpu_ms", "tok_per_s") if m in metrics]
    if verdict == "inconclusive":
        return f"inconclusive at {_sizes(undecided)}, {' and '.join(names)} too noisy to decide"
    b = undecided[0]
    metric = b.decided_by or "gpu_ms"
    change = decision.shown_change(report, b, metric)
    limits = _limits(report, step)
    name = step if metric == "gpu_ms" else "tok/s"
    pct = change.pct if change else 0.0
    others = len(undecided) - 1
    more = f" (and {others} more batch size{'s' if others > 1 else ''})" if others else ""
    return f"at threshold at batch size {b.batch_size}{more}, {pct:+.2f}% {name} against {limits[name]:g}%"


def _significant_but_under(report: Report) -> BatchComparison | None:
    """The batch size of a passing report whose step time rose significantly and by at least
    NOTABLE_SHARE of the threshold, if any (the largest rise): under the threshold, yet a
    slowdown a reviewer should hear of; a significant +0.02% is not worth the headline.
    Shown, under the interval rule: the lower bound it was decided on is above zero."""
    notable = NOTABLE_SHARE * report.threshold_pct

    def shown(b: BatchComparison) -> bool:
        if decision.interval_rule(report):
            return b.gpu_ms_bounds is not None and b.gpu_ms_bounds.ci_low_pct > 0
        return b.gpu_ms_change is not None and b.gpu_ms_change.p_value < report.alpha

    risen = [b for b in report.batch_sizes if b.gpu_ms_change is not None
             and b.gpu_ms_change.pct >= notable and shown(b)]
    return max(risen, key=lambda b: b.gpu_ms_change.pct) if risen else None  # type: ignore[union-attr]


def under_threshold_sentence(report: Report) -> str:
    """For a pass: the significant rise in step time that stayed under the threshold, if any."""
    under = _significant_but_under(report)
    if under is None or under.gpu_ms_change is None:
        return ""
    metric = step_metric(report)
    c = decision.shown_change(report, under, "gpu_ms") or under.gpu_ms_change
    shown = (f"{decision.level(report)} interval {c.interval()}" if decision.interval_rule(report)
             else f"{report.confidence:.0%} interval {c.interval()}, p = {c.p_value:.2g}")
    return (f"{metric[0].upper()}{metric[1:]} did rise at batch size {under.batch_size}: {c.pct:+.2f}% "
            f"({shown}), under the {report.threshold_pct:g}% threshold.")


def _deciding(batch: BatchComparison, verdict: str, step: str) -> tuple[str, float]:
    """The metric that gave a batch size its verdict, and its change: the one it names, or
    in a schema-1 report the step time, unless only tok/s did (older reports lack the
    per-metric verdicts: the step time)."""
    if batch.decided_by == "tok_per_s" and batch.tok_per_s_change:
        return "tok/s", batch.tok_per_s_change.pct
    if batch.decided_by is None and batch.tok_per_s_verdict == verdict and batch.gpu_ms_verdict != verdict \
            and batch.tok_per_s_change:
        return "tok/s", batch.tok_per_s_change.pct
    return step, batch.gpu_ms_change.pct  # type: ignore[union-attr]


# (how the comment names the metric, given the step metric's name; its verdict; its key in at_threshold)
def _metrics(step: str) -> tuple[tuple[str, str, str], ...]:
    return ((step, "gpu_ms_verdict", "gpu_ms"), ("tok/s", "tok_per_s_verdict", "tok_per_s"))


def _undecided(batches: list[BatchComparison], step: str) -> list[str]:
    """The metrics too noisy to decide: the step time, tok/s, or both (none in older reports).
    A significant slowdown left undecided at its threshold is not noise (`_at_threshold`)."""
    return [m for m, field, key in _metrics(step)
            if any(getattr(b, field) == "inconclusive" and key not in b.at_threshold for b in batches)]


def _at_threshold(batches: list[BatchComparison], step: str) -> list[tuple[str, BatchComparison, Change]]:
    """Per metric, the batch size whose significant slowdown sits at the threshold (the largest such)."""
    found = []
    for metric, _, key in _metrics(step):
        sign = 1 if key == "gpu_ms" else -1  # tok/s falls when decode slows
        hits = [(b, c) for b in batches if key in b.at_threshold
                and (c := b.gpu_ms_change if key == "gpu_ms" else b.tok_per_s_change) is not None]
        if hits:
            b, c = max(hits, key=lambda hit: sign * hit[1].pct)
            found.append((metric, b, c))
    return found


def _limits(report: Report, step: str) -> dict[str, float]:
    return {step: report.threshold_pct, "tok/s": report.tok_threshold_pct or report.threshold_pct}


def step_metric(report: Report) -> str:
    """How the comment names the step time: GPU time where CUDA events timed it."""
    return "GPU ms per decode step" if report.gpu_timed() else "ms per decode step (CPU)"


def undecided_sentence(report: Report) -> str:
    """What an undecided result could not decide, metric by metric, and what it could:
    a metric lost in the noise, or a significant slowdown too close to its threshold to call."""
    if decision.interval_rule(report):
        return decision.undecided_sentence(report)
    undecided = [b for b in report.batch_sizes if b.verdict == "inconclusive"]
    step = step_metric(report)
    limits = _limits(report, step)
    close = _at_threshold(undecided, step)
    noisy = _undecided(undecided, step)
    if not close and not noisy:  # an older report: no per-metric verdicts
        return f"was too noisy to tell a {report.threshold_pct:g}% slowdown from none"
    level = f"{report.confidence:.0%}"
    clauses = [
        f"shows a significant slowdown, {m} {c.pct:+.2f}% "
        f"({level} interval {c.interval()}) at batch size {b.batch_size}, "
        f"too close to the {limits[m]:g}% threshold to say whether it reaches it"
        for m, b, c in close
    ]
    if noisy:
        clauses.append("was too noisy to tell " + " or ".join(f"a {limits[m]:g}% slowdown in {m}" for m in noisy)
                       + " from none")
    text = ", and ".join(clauses)
    informs = {"tok/s"} if informational(report) else set()
    decided = [m for m in limits if m not in noisy and m not in {m for m, _, _ in close} and m not in informs]
    if decided:
        text += f"; a {limits[decided[0]]:g}% slowdown in {decided[0]} is ruled out"
    return text
