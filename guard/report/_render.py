"""Render comment.md from the report with guard/_templates/comment.md.j2."""

from __future__ import annotations

from pathlib import Path

import jinja2

from guard._markdown import block, code, html, text
from guard._marker import COMMENT_MARKER
from guard.compare import UNDECIDED
from guard.measure import Change
from guard.cause import capture_summary, location
from guard.report import _decision as decision
from guard.report._ablation import ablation_lines
from guard.report import _like_for_like as like_for_like
from guard.report._attribution import attribution
from guard.report._chart import strip_chart
from guard.report._config_change import config_note
from guard.report._launches import fallout_lines, unheld_notes
from guard.report._links import RunLinks
from guard.report._mermaid import mermaid_charts
from guard.report._override_note import override_note
from guard.report._roles import informational, tok_role_note
from guard.report._schema import ArmInfo, Report
from guard.report._slow import slow_processes_sentence
from guard.report._title import step_metric, title, undecided_sentence, under_threshold_sentence
from guard.report._trace_text import gap_arithmetic, profile_scale, trace_bullets
from guard.trace import TraceSection

COMMENT_TEMPLATE = "comment.md.j2"
# Hidden marker by which a later run finds its own earlier comment.


def _template_dir() -> Path:
    return Path(__file__).resolve().parents[1] / "_templates"


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
    # a string from the report or from git is rendered through one of these, so it shows as text
    env.filters["text"] = text
    env.filters["code"] = code
    env.filters["block"] = block
    env.filters["html"] = html
    return env


def _pct(value: float) -> str:
    return f"{value:+.2f}%"


def _ci(change: Change) -> str:
    return change.interval()


def render_comment(report: Report, links: RunLinks | None = None) -> str:
    """`links`: the run that measured and its artifact, from the job that posts (never the report)."""
    template = _environment().get_template(COMMENT_TEMPLATE)
    gpu_timed = report.gpu_timed()
    chart = strip_chart(report)
    return template.render(
        r=report,
        marker=COMMENT_MARKER,
        title=title(report),
        base=report.arm(report.base),
        head=report.arm(report.head),
        label=lambda arm: text(_label(report, arm)),
        ref_text=lambda arm: text(_ref_text(arm)),
        slower=[b for b in report.batch_sizes if b.verdict == "regression"],
        environment_line=_environment_line(report),
        slow_note=slow_processes_sentence(report.slow_processes) if report.slow_processes else "",
        failed=[a for a in report.arms if a.status != "ok"],
        trace_sections=_sections_to_show(report),
        trace_bullets=trace_bullets,
        gap_arithmetic=gap_arithmetic,
        undecided_sentence=undecided_sentence(report) if report.verdict in UNDECIDED else "",
        under_threshold_sentence=under_threshold_sentence(report) if report.verdict == "pass" else "",
        profile_scale=lambda section: profile_scale(
            next((b for b in report.batch_sizes if b.batch_size == section.batch_size), None),
            section, report.base, report.head,
        ),
        capture_sentence=_capture_sentence(report),
        capture_places=_capture_places(report),
        attribution=lambda b: attribution(b, _section(report, b.batch_size)),
        # where the time of a significant slowdown at the threshold went, as for a regression
        undecided_causes=" ".join(
            sentence for b in report.batch_sizes if b.at_threshold
            if (sentence := attribution(b, _section(report, b.batch_size)))
        ) if report.verdict in UNDECIDED else "",
        step_metric=step_metric(report),
        verdict_label=decision.verdict_label,
        level=decision.level(report),
        shown=lambda b, metric: decision.shown_change(report, b, metric),
        row_label=lambda b: decision.row_label(report, b),
        by_tok=lambda b: decision.decided_by_tok(report, b),
        processes_text=decision.processes_text(report),
        rule_note=decision.rule_note(report) if decision.interval_rule(report) else "",
        tok_gates=not informational(report),
        tok_role_note=tok_role_note(report),
        launch_notes=launch_notes(report),
        agreement_sentence=like_for_like.agreement_sentence(report),
        reference_note=like_for_like.reference_note(report),
        reasons=like_for_like.agreement_reasons(report) + [text(reason) for reason in report.reasons],
        forcing_hint=like_for_like.forcing_hint(report),
        host_timed=any(a.host_ms_per_step is not None for b in report.batch_sizes for a in b.arms),
        fallout_lines=fallout_lines(report),
        unheld_notes=unheld_notes(report),
        ablations=ablation_lines(report),
        config_note=config_note(report.config_change),
        charts=mermaid_charts(chart, step_metric(report)) if chart else [],
        run_links=links,
        override_note=override_note(report),
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
            scope = f" in {code(hunk.function)}" if hunk.function else ""
            diff = "; ".join(code(line) for line in hunk.excerpt[:2])
            lines.append(f"{where}{scope}: {diff}" if diff else f"{where}{scope}")
    return lines


def _section(report: Report, batch_size: int) -> TraceSection | None:
    return next((t for t in report.traces if t.batch_size == batch_size), None)


def _sections_to_show(report: Report) -> list[TraceSection]:
    """The trace paragraph is for the batch sizes that got slower: regressions, and
    significant slowdowns left undecided at the threshold."""
    slower = {b.batch_size for b in report.batch_sizes if b.verdict == "regression" or b.at_threshold}
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
            f"power limit {state['power_limit_w']:g} W" if _number(state.get("power_limit_w")) else None,
            f"max SM clock {state['max_sm_clock_mhz']:g} MHz" if _number(state.get("max_sm_clock_mhz")) else None,
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


def _number(value: object) -> bool:
    """A figure to print: the fingerprint is a report's free-form dict, so a value may be anything."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
