"""Render comment.md from the report with templates/comment.md.j2."""

from __future__ import annotations

from pathlib import Path

import jinja2

from guard.compare import BatchComparison
from guard.measure import Change
from guard.cause import capture_summary, location
from guard.report._attribution import attribution, cause_tag
from guard.report._schema import ArmInfo, Report
from guard.report._trace_text import profile_scale, trace_bullets
from guard.report._traces import TraceSection

COMMENT_TEMPLATE = "comment.md.j2"
# Hidden marker by which a later run finds its own earlier comment.
COMMENT_MARKER = "<!-- regression-guard:comment -->"


def _template_dir() -> Path:
    source_tree = Path(__file__).resolve().parents[2] / "templates"
    if (source_tree / COMMENT_TEMPLATE).is_file():
        return source_tree
    return Path(__file__).resolve().parents[1] / "_templates"  # installed copy (pyproject maps it)


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_template_dir()),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = _pct
    env.filters["ci"] = _ci
    env.filters["ms"] = lambda v: f"{v:.3f}"
    env.filters["rate"] = lambda v: f"{v:.1f}" if v >= 100 else f"{v:.2f}"
    env.filters["short"] = lambda sha: sha[:8]
    return env


def _pct(value: float) -> str:
    return f"{value:+.2f}%"


def _ci(change: Change) -> str:
    return f"{change.ci_low_pct:+.2f}% to {change.ci_high_pct:+.2f}%"


def render_comment(report: Report) -> str:
    template = _environment().get_template(COMMENT_TEMPLATE)
    gpu_timed = report.gpu_timed()
    return template.render(
        r=report,
        marker=COMMENT_MARKER,
        title=title(report),
        base=report.arm(report.base),
        head=report.arm(report.head),
        label=lambda arm: _label(report, arm),
        ref_text=_ref_text,
        slower=[b for b in report.batch_sizes if b.verdict == "regression"],
        environment_line=_environment_line(report),
        failed=[a for a in report.arms if a.status != "ok"],
        trace_sections=_sections_to_show(report),
        trace_bullets=trace_bullets,
        noisy_sentence=noisy_sentence(report) if report.verdict == "inconclusive" else "",
        profile_scale=lambda section: profile_scale(
            next((b for b in report.batch_sizes if b.batch_size == section.batch_size), None),
            section, report.base, report.head,
        ),
        capture_sentence=_capture_sentence(report),
        capture_places=_capture_places(report),
        attribution=lambda b: attribution(b, next((t for t in report.traces if t.batch_size == b.batch_size), None)),
        step_metric="GPU ms per decode step" if gpu_timed else "ms per decode step (CPU)",
        launch_notes=launch_notes(report),
        timer_note=(
            "GPU time per step from CUDA events around each step, queued ahead of its start so the host's "
            "launch time is left out; tok/s from the wall clock of a separate pass as the decode loop runs."
            if gpu_timed
            else "No GPU: step times and tok/s are CPU wall clock."
        ),
    )


def launch_notes(report: Report) -> list[str]:
    """A sentence per batch size whose GPU time got slower only with the host's launch time in
    it: the GPU-timed figures leave that out, by design, so the comment says it here."""
    notes = []
    for b in report.batch_sizes:
        e2e, held = b.end_to_end_gpu_ms_change, b.gpu_ms_change
        if e2e is None or held is None or b.verdict in ("regression", "invalid"):
            continue
        if e2e.p_value < report.alpha and e2e.pct >= report.threshold_pct:
            notes.append(
                f"At batch size {b.batch_size}, timed as the decode loop runs it (the host's launch time "
                f"included), GPU ms per step changed {e2e.pct:+.2f}% ({_ci(e2e)}), against "
                f"{held.pct:+.2f}% without it: the extra time may be in launching the step's work "
                "(more graphs or launches), which only tok/s weighs in the verdict."
            )
    return notes


def _capture_sentence(report: Report) -> str | None:
    if report.capture is None or not report.capture.files:
        return None
    return capture_summary(
        report.capture, github_repo=report.github_repo, sha=report.arm(report.head).sha, server_url=report.server_url
    )


def _capture_places(report: Report) -> list[str]:
    """One line per changed hunk of capture code: where, in which function, what changed."""
    if report.capture is None:
        return []
    head_sha = report.arm(report.head).sha
    lines = []
    for change in report.capture.files:
        for hunk in change.hunks:
            where = location(
                change, hunk.range, github_repo=report.github_repo, sha=head_sha, server_url=report.server_url
            )
            scope = f" in `{hunk.function}`" if hunk.function else ""
            diff = "; ".join(f"`{line}`" for line in hunk.excerpt[:2])
            lines.append(f"{where}{scope}: {diff}" if diff else f"{where}{scope}")
    return lines


def _sections_to_show(report: Report) -> list[TraceSection]:
    """The trace paragraph is for the batch sizes that got slower."""
    slower = {b.batch_size for b in report.batch_sizes if b.verdict == "regression"}
    return [s for s in report.traces if s.batch_size in slower]


def _ref_text(arm: ArmInfo) -> str:
    """'piecewise-capture 86115432', or the sha alone when the ref was a sha."""
    short = arm.sha[:8]
    return short if arm.sha.startswith(arm.ref) else f"{arm.ref} {short}"


def _label(report: Report, arm: ArmInfo) -> str:
    if arm.source is not None:  # an ablation arm
        return f"{arm.label or arm.name} ({arm.source} build {arm.sha[:8]})"
    role = {report.head: "head", report.base: "base"}.get(arm.name, arm.name)
    return f"{role} ({_ref_text(arm)})"


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
        what = _undecided(noisy, step) or "the measurement was"
        return f"Decode speed with {change}: inconclusive at {_sizes(noisy)}, {what} too noisy to decide"
    return f"No decode slowdown with {change} (threshold {report.threshold_pct:g}% per step)"


def _deciding(batch: BatchComparison, verdict: str, step: str) -> tuple[str, float]:
    """The metric that gave a batch size its verdict, and its change: the step time, unless
    only tok/s did (older reports lack the per-metric verdicts: the step time)."""
    if batch.tok_per_s_verdict == verdict and batch.gpu_ms_verdict != verdict and batch.tok_per_s_change:
        return "tok/s", batch.tok_per_s_change.pct
    return step, batch.gpu_ms_change.pct  # type: ignore[union-attr]


def _undecided(batches: list[BatchComparison], step: str) -> str | None:
    """'tok/s', 'GPU time per step' or both: the metrics that could not be decided."""
    metrics = [m for m, field in ((step, "gpu_ms_verdict"), ("tok/s", "tok_per_s_verdict"))
               if any(getattr(b, field) == "inconclusive" for b in batches)]
    return " and ".join(metrics) or None


def noisy_sentence(report: Report) -> str:
    """What an inconclusive result could not tell apart, metric by metric, and what it could."""
    noisy = [b for b in report.batch_sizes if b.verdict == "inconclusive"]
    step = "GPU ms per decode step" if report.gpu_timed() else "ms per decode step (CPU)"
    limits = {step: report.threshold_pct, "tok/s": report.tok_threshold_pct or report.threshold_pct}
    undecided = _undecided(noisy, step)
    if undecided is None:  # an older report: no per-metric verdicts
        return f"was too noisy to tell a {report.threshold_pct:g}% slowdown from none"
    metrics = undecided.split(" and ")
    text = "was too noisy to tell " + " or ".join(f"a {limits[m]:g}% slowdown in {m}" for m in metrics) + " from none"
    ruled_out = [m for m in limits if m not in metrics]
    if ruled_out:
        text += f"; a {limits[ruled_out[0]]:g}% slowdown in {ruled_out[0]} is ruled out"
    return text


def _environment_line(report: Report) -> str:
    env = report.environment
    parts = []
    if env.gpu:
        extras = ", ".join(x for x in (env.gpu_capability, f"driver {env.driver}" if env.driver else None) if x)
        parts.append(f"{env.gpu} ({extras})" if extras else env.gpu)
    else:
        parts.append(f"CPU only ({env.cpu or 'unknown'}; times are wall clock, not GPU time)")
    state = env.gpu_state
    if state.get("available"):
        clocks = [
            f"power limit {state['power_limit_w']:g} W" if state.get("power_limit_w") else None,
            f"max SM clock {state['max_sm_clock_mhz']} MHz" if state.get("max_sm_clock_mhz") else None,
            "MIG enabled" if state.get("mig_mode_current") is True else None,
            "persistence mode on" if state.get("persistence_mode") is True else None,
        ]
        parts.append("; ".join(c for c in clocks if c) or "GPU state recorded")
    if env.torch:
        parts.append(f"torch {env.torch}" + (f", CUDA {env.cuda}" if env.cuda else ""))
    if env.python:
        parts.append(f"Python {env.python}")
    if env.hostname:
        parts.append(f"host {env.hostname}")
    return ", ".join(parts)
