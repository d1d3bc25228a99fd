"""The comment as a view: every line of it, made in one pass from the report, in the order it is
shown. The template only lays it out; the job summary, the commit status and the annotations
read the same view."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from guard._markdown import block, code, html, text
from guard._marker import COMMENT_MARKER
from guard.cause import CaptureChanges, location
from guard.compare import METRICS, BatchComparison, MetricKey, Reason, Verdict
from guard.config import Rule
from guard.explain import Headline
from guard.report import _figures as figures
from guard.report import _words as words
from guard.report import _like_for_like as like_for_like
from guard.report._capture_text import capture_summary
from guard.report._cause_text import (
    ablation_lead, ablation_lines, cause_sentence, fallout_line, host_sentence, launch_sentence, scale_sentence,
    slower_kernel_lines, unheld_notes,
)
from guard.report._chart import strip_chart
from guard.report._compiled_text import compiled_line
from guard.report._config_change import config_note
from guard.report._lead import (
    batch_sentence, bounds_level, caught_sentence, felt_sentence, pass_sentence, processes_text,
    ruled_out_sentence, rule_note, shown,
)
from guard.report._links import RunLinks
from guard.report._mermaid import mermaid_charts
from guard.report._mix_text import (
    coverage_rows, evidence_line, mix_arms, mix_lead, mix_sentence, part_lines, record_lines, size_header, size_rows,
)
from guard.report._override_note import override_note
from guard.report._rank_text import rank_sentences, rank_table, ranks_method
from guard.report._rank_trace_text import rank_bullets, rank_cause_sentence, rank_table as rank_trace_table
from guard.report._reason_text import reason_sentence, reason_short
from guard.report._borrow_text import borrowed_note
from guard.report._compiled_text import compile_cache_note
from guard.report._roles import held_note, instructions_note, tok_role_note, tok_unmeasured_note
from guard.report._schema import ArmInfo, Report
from guard.report._slow import slow_processes_sentence
from guard.report._todo import what_decides, what_to_do
from guard.report._title import title
from guard.report._environment_text import environment_line
from guard.report._trace_text import gap_arithmetic, span_sentence, trace_bullets
from guard.report._warning_text import warning_text

MAX_FILES_NAMED = 12
EVERY_ARM = "Every arm: geometric means of its processes, with their range"


class Block(BaseModel):
    """Markdown, made safe where it was made: a paragraph, a list, a table or lines as they are."""

    kind: Literal["paragraph", "bullets", "table", "lines"]
    lines: list[str] = []  # paragraph: one; bullets: one per item; lines: as they are
    header: list[str] = []  # table
    rows: list[list[str]] = []


class Section(BaseModel):
    heading: str | None = None
    blocks: list[Block] = []


class Fold(BaseModel):
    summary: str  # HTML text: the guard's own words, a report's strings through html()
    blocks: list[Block] = []


class Annotation(BaseModel):
    level: Literal["error", "warning"]
    heading: str
    message: str  # plain text: the workflow command escapes it


class CommentView(BaseModel):
    marker: str = COMMENT_MARKER
    title: str  # plain text
    title_md: str
    decides: str | None = None  # Markdown, right under the title of an undecided run: what would decide it
    sections: list[Section]  # above the first fold
    folds: list[Fold]
    footer: list[str]
    status: str  # the commit status's description, plain text
    annotation: Annotation | None


def _p(line: str) -> Block:
    return Block(kind="paragraph", lines=[line])


def build_view(report: Report, links: RunLinks | None = None) -> CommentView:
    """`links`: the run that measured and its artifact, from the job that posts (never the report)."""
    headline = title(report)
    sections = [Section(heading="What happened", blocks=_what_happened(report))]
    cause = _cause_section(report)
    if cause is not None:
        sections.append(cause)
    return CommentView(
        title=headline, title_md=text(headline), decides=what_decides(report), sections=sections, folds=_folds(report),
        footer=_footer(report.tool_version, links),
        status=_status(report.verdict, report.reasons, report.explanation.headline, report.gpu_timed()),
        annotation=_annotation(report.verdict, report.reasons, headline),
    )


def _what_happened(report: Report) -> list[Block]:
    blocks: list[Block] = []
    if report.verdict == "invalid":
        reasons = [reason_sentence(r) for r in report.reasons] + like_for_like.agreement_reasons(report)
        blocks.append(_p("The comparison is not valid, so no timing verdict is given:"))
        blocks.append(Block(kind="bullets", lines=reasons or ["see report.json"]))
        hint = like_for_like.forcing_hint(report.workload.reference is not None, report.decided())
        if hint:
            blocks.append(_p(hint))
    elif report.verdict == "pass":
        blocks.append(_p(pass_sentence(report)))
    else:
        found = report.explanation.mix
        then = mix_lead(found) if found is not None and found.cause is not None else ""  # what carries it
        lines = [s for s in [felt_sentence(report)] if s]  # what the user feels, first
        lines += [s for b in report.decided() if (s := batch_sentence(report, b, then if b.mix else ""))]
        ruled = ruled_out_sentence(report.batch_sizes, report.mix_comparison)
        if report.verdict in ("at_threshold", "inconclusive") and ruled:
            lines.append(ruled)
        blocks.append(_p(" ".join(lines)))
    if report.verdict != "invalid" and (table := _table(report)) is not None:
        blocks += [table, _p(_table_note(report))]
        # what the run could see answers "can I trust this" for a run that found nothing past T;
        # a decided slowdown or gain says it in the method fold
        if report.verdict in ("pass", "inconclusive") and (caught := caught_sentence(report)) is not None:
            blocks.append(_p(caught))
    fell = report.explanation.headline.fell_out
    # a batch size out of its CUDA graphs has its own line, with the launch counts
    causes = [c for c in report.explanation.causes if not (c.kind == "no_cuda_graph" and c.batch_size in fell)]
    said = [cause_sentence(c, report.gpu_timed(), sized=len(report.explanation.causes) > 1) for c in causes]
    if said:
        blocks.append(_p(" ".join(said)))
    for size in report.explanation.headline.fell_out:
        section = next((t for t in report.traces if t.batch_size == size), None)
        batch = next((b for b in report.batch_sizes if b.batch_size == size), None)
        if (line := fallout_line(size, section, batch, report.base, report.head)) is not None:
            blocks.append(_p(line))
    for note in report.explanation.launch_notes:
        blocks.append(_p(launch_sentence(note, report.gpu_timed())))
    for note in unheld_notes(report.batch_sizes, report.base, report.head):
        blocks.append(_p(note))
    if report.explanation.ranks:  # what the ranks' profiled pass found, before what their timed steps say
        sized = len(report.decided()) > 1
        blocks.append(_p(" ".join(rank_cause_sentence(c, sized) for c in report.explanation.ranks)))
    if ranked := rank_sentences(report.batch_sizes, report.base, report.head):
        blocks.append(_p(" ".join(ranked)))
    if (override := override_note(report)) is not None:
        blocks.append(_p(override))
    if (config := config_note(report.config_change)) is not None:
        blocks.append(_p(config.sentence))
    if report.verdict != "invalid" and (ablated := ablation_lead(report.explanation.ablations)) is not None:
        blocks.append(_p(ablated))
    if (todo := what_to_do(report)) is not None:
        blocks.append(_p(todo))
    return blocks


def _table(report: Report) -> Block | None:
    """Per batch size and metric: base's and head's geometric means (what the change is
    computed from), the change between the bounds it was decided on, and whether it decides."""
    base, head = report.arm(report.base), report.arm(report.head)
    rows = []
    many = len(report.decided()) > 1
    for b in report.decided():
        arms = {a.arm for a in b.arms}
        if report.base not in arms or report.head not in arms:
            continue
        at = ["mix" if b.mix else str(b.batch_size)] if many else []
        for metric in METRICS:
            if metric == "instructions":
                continue  # a row of its own below, with its counts
            change = shown(b, metric)
            if metric == "end_to_end_ms" and change is None:
                continue  # not decided here: a CPU's step time is already end to end
            if metric == "tok_per_s" and not b.tok_per_s_measurable:
                continue  # its interval is wider than any effect asked about: a sentence says so
            before, after = (figures.decided_mean(b, name, metric) for name in (report.base, report.head))
            form = words.rate if metric == "tok_per_s" else words.mean_ms
            rows.append([words.metric(metric, report.gpu_timed()), *at, form(before) if before else "-",
                         form(after) if after else "-", words.with_interval(change) if change else "-",
                         _decides(b, metric, report.rule)])
        counted = [figures.instructions_mean(b, name) for name in (report.base, report.head)]
        if b.instructions_change is not None and counted[0] and counted[1]:
            rows.append([words.INSTRUCTIONS, *at, words.instructions(counted[0]), words.instructions(counted[1]),
                         words.with_interval(b.instructions_change),
                         f"if up past {words.threshold(report.rule.pct('instructions'))}"
                         if report.rule.decides_instructions else "no"])
    if not rows:
        return None
    header = ["geometric means", *(["batch size"] if many else []), f"base {words.short_sha(base.sha)}",
              f"head {words.short_sha(head.sha)}", "change (interval)", "decides"]
    return Block(kind="table", header=header, rows=rows)


def _decides(batch: BatchComparison, metric: MetricKey, rule: Rule) -> str:
    """'yes' where the metric gates; where its noise cannot rule its threshold out, it decides
    only a change whose whole interval is past the threshold: 'if past 1%'."""
    gates = {"gpu_ms": True, "tok_per_s": batch.tok_per_s_gates, "end_to_end_ms": batch.end_to_end_gates}[metric]
    return "yes" if gates else f"if past {words.threshold(rule.pct(metric))}"


def _table_note(report: Report) -> str:
    """How the table was measured, whether the work was like for like, and the one level of
    every interval in the comment, in a line."""
    same = ""
    if report.hash_match:
        same = "; the output tokens are identical in every process"
    elif any(b.agreement for b in report.decided()) and report.workload.reference is not None:
        same = f", inputs forced from {text(report.workload.reference)}: like for like"
    aside = sum(len(b.set_aside) for b in report.decided())
    kept = f", less {words.plural(aside, 'slow one')} set aside" if aside else ""
    notes = " ".join(note for note in (tok_unmeasured_note(report),
                                      instructions_note(report, counted_somewhere=True)) if note)
    return (f"Means of {processes_text(report)}{kept}{same}. Intervals are {bounds_level(report)}, the "
            "verdict's level." + (f" {notes}" if notes else ""))


def _cause_section(report: Report) -> Section | None:
    """What the diff changes in capture, and what dynamo compiled in each arm where it differs."""
    if report.verdict not in ("regression", "at_threshold", "inconclusive"):
        return None
    compiled = compiled_line(report.compiled, report.explanation.compiled)
    capture = report.capture if report.capture is not None and report.capture.files else None
    if capture is None and compiled is None:
        return None
    head = report.arm(report.head)
    blocks: list[Block] = []
    if capture is not None:
        sentence = capture_summary(capture, github_repo=report.github_repo, sha=head.sha,
                                   server_url=report.server_url,
                                   captured_same=report.explanation.capture_unchanged is True)
        # an ablation arm's share of the slowdown, said above, tests the inference itself
        ablated = any(a.source for a in report.arms)
        caveat = ("" if ablation_lead(report.explanation.ablations) is not None else " Inferred from the timing; "
                  + ("the ablation arms below test it." if ablated else
                     "an ablation arm undoing it (`[[arms]]` in guard.toml) would settle it."))
        blocks.append(_p(f"{sentence or ''}{caveat}"))
    if compiled is not None:
        blocks.append(_p(compiled))
    return Section(heading=f"Cause ({text(_ref_text(head))})", blocks=blocks)


def _capture_lines(capture: CaptureChanges | None, github_repo: str | None, head_sha: str, server_url: str
                   ) -> list[str]:
    """Each changed hunk of capture code: where (linked at the head's commit), in which
    function, its first lines."""
    if capture is None:
        return []
    places = []
    for change in capture.files:
        for hunk in change.hunks:
            where = location(change, hunk.range, github_repo=github_repo, sha=head_sha, server_url=server_url)
            scope = f" in {code(hunk.function)}" if hunk.function else ""
            diff = "; ".join(code(line) for line in hunk.excerpt[:2])
            places.append(f"{where}{scope}: {diff}" if diff else f"{where}{scope}")
    return places


def _folds(report: Report) -> list[Fold]:
    folds = []
    if (mix := _mix_fold(report)) is not None:
        folds.append(mix)
    slower = {c.batch_size for c in report.explanation.causes} | {
        b.batch_size for b in report.batch_sizes if b.verdict in ("regression", "at_threshold")}
    scales = {s.batch_size: s for s in report.explanation.profile_scales}
    for section in report.traces:
        if section.batch_size not in slower:
            continue
        blocks = [_p(f"Over {section.profile_steps} decode steps, in a separate pass: the profiler inflates "
                     "times, so the sizes above come from the timed pass and this says where the time went."),
                  Block(kind="bullets", lines=trace_bullets(section))]
        if section.diff is not None:
            extra = [s for s in (gap_arithmetic(section.diff), span_sentence(section.diff)) if s]
            if section.batch_size in scales:
                extra.append(scale_sentence(scales[section.batch_size]))
            blocks.append(_p(" ".join(extra)))
        cause = next((c for c in report.explanation.causes if c.batch_size == section.batch_size), None)
        if cause is not None and cause.slower_kernels:
            blocks.append(Block(kind="bullets", lines=slower_kernel_lines(cause)))
        folds.append(Fold(summary=f"Profiler: where the time went at batch size {section.batch_size}", blocks=blocks))
    if (ranks_fold := _ranks_fold(report)) is not None:
        folds.append(ranks_fold)
    if _cause_section(report) is not None and (places := _capture_lines(
            report.capture, report.github_repo, report.arm(report.head).sha, report.server_url)):
        folds.append(Fold(summary="The changed lines of graph capture", blocks=[Block(kind="bullets", lines=places)]))
    lines = ablation_lines(report)
    if lines:
        folds.append(Fold(summary=f"Ablation arms: {words.metric('gpu_ms', report.gpu_timed())} against base",
                          blocks=[Block(kind="bullets", lines=lines)]))
    chart = strip_chart(report)
    metric = words.metric("gpu_ms", report.gpu_timed())
    if chart is not None:
        folds.append(Fold(summary=f"{metric} of every process, base beside head"
                                  + (" and the ablation arms" if any(a.source for a in report.arms) else ""), blocks=[
            Block(kind="lines", lines=mermaid_charts(chart, metric)),
            _p("A bar per process, in the order each arm ran them; each axis spans the values shown, not from zero; "
               "each change is of the geometric means, as in the table."),
        ]))
    if (every := _every_arm(report)) is not None:
        host = host_sentence(report.batch_sizes, report.base, report.head)
        folds.append(Fold(summary=EVERY_ARM,
                          blocks=[every] + ([_p(host)] if host else [])))
    if (ranks := rank_table(report)) is not None:
        folds.append(Fold(summary=f"Every rank, on {report.workload.world_size} ranks",
                          blocks=[Block(kind="table", header=ranks[0], rows=ranks[1])]))
    for arm in report.arms:
        if arm.status != "ok":
            folds.append(Fold(summary=f"{html(arm.name)} ({html(words.short_sha(arm.sha))}): "
                                      f"{html(arm.status.replace('_', ' '))}",
                              blocks=[Block(kind="lines", lines=[block(arm.log_tail)])]))
    if (config := config_note(report.config_change)) is not None:
        folds.append(Fold(summary=config.summary, blocks=[Block(kind="lines", lines=[config.block])]))
    if report.record is not None:
        folds.append(Fold(summary=words.RECORD, blocks=[Block(kind="bullets", lines=record_lines(report))]))
    folds.append(Fold(summary="Environment", blocks=_environment_blocks(report)))
    folds.append(Fold(summary="Method", blocks=_method_blocks(report)))
    return folds


def _ranks_fold(report: Report) -> Fold | None:
    """Per batch size of several ranks: overlap, exposed communication and the wait for the
    slowest rank base -> head, each finding, and each rank when the ranks differ."""
    blocks = []
    for section in report.rank_traces:
        arms = {a.arm: a for a in section.arms}
        passes = [len(arms[name].passes) if name in arms else 0 for name in (report.base, report.head)]
        blocks.append(_p(f"At batch size {section.batch_size}, over {section.profile_steps} steps of a separate "
                         f"profiled pass on every rank, in {passes[0]} of base's processes and {passes[1]} of "
                         "head's; the profiler inflates times."))
        if section.diff is not None:
            blocks.append(Block(kind="bullets", lines=rank_bullets(section.diff)))
            if (table := rank_trace_table(section.diff)) is not None:
                blocks.append(Block(kind="table", header=table[0], rows=table[1]))
        failed = [f"{text(a.arm)}: {text(a.error)}" for a in section.arms if a.error]
        if failed:
            blocks.append(Block(kind="bullets", lines=[f"Not analysed: {line}" for line in failed]))
        first = [code(t) for a in section.arms if a.arm in (report.base, report.head) and a.traces
                 for t in a.traces[0]]
        if first:
            blocks.append(_p("Each rank's trace of the first profiled process (open in Perfetto): "
                             + ", ".join(first) + ", and the other processes' beside them."))
    return Fold(summary="Communication and ranks", blocks=blocks) if blocks else None


def _mix_fold(report: Report) -> Fold | None:
    """Capture coverage against useful work base -> head, and the mix's change split into its parts."""
    if (pair := mix_arms(report.mix, report.base, report.head)) is None:
        return None
    gpu = report.gpu_timed()
    base, head = report.arm(report.base), report.arm(report.head)
    blocks = [Block(kind="table", header=["", f"base {words.short_sha(base.sha)}", f"head {words.short_sha(head.sha)}"],
                    rows=coverage_rows(pair, gpu))]
    found = report.explanation.mix
    if found is not None:
        decision = report.mix_comparison
        means = [figures.decided_mean(decision, name, "gpu_ms") for name in (report.base, report.head)] \
            if decision is not None else []
        decided = (means[0], means[1]) if len(means) == 2 and means[0] and means[1] else None
        parts = part_lines(found, gpu, means=report.schema_version >= 12)
        blocks += [_p(mix_sentence(found, gpu, decided)), Block(kind="bullets", lines=parts),
                   Block(kind="table", header=size_header(gpu), rows=size_rows(found, gpu))]
        if (evidence := evidence_line(found, report.base, report.head, gpu)):
            blocks.append(_p(evidence))
    return Fold(summary=words.MIX_SECTION, blocks=blocks)


def _every_arm(report: Report) -> Block | None:
    """Every arm's geometric mean over every process, with the range of its processes."""
    host = any(a.host_ms_per_step is not None for b in report.batch_sizes for a in b.arms)
    metric = words.metric("gpu_ms", report.gpu_timed())
    header = ["arm", "batch size", f"{metric} (range)", words.metric("tok_per_s", report.gpu_timed())] + (
        [words.HOST] if host else [])
    rows = []
    for b in report.decided():
        ordered = sorted(b.arms, key=lambda a: (a.arm != report.base, a.arm != report.head))
        for a in ordered:
            g, mean, tok = a.gpu_ms_per_step, *(figures.every_process_mean(a, m) for m in ("gpu_ms", "tok_per_s"))
            row = [text(_label(report.arm(a.arm), report.base, report.head)), "mix" if b.mix else str(b.batch_size),
                   f"{words.mean_ms(mean) if mean else '-'} ({words.mean_ms(g.min)}-{words.mean_ms(g.max)})",
                   words.rate(tok) if tok else "-"]
            if host:
                host_mean = figures.geometric(a.host_ms_per_step)
                row.append(words.ms(host_mean) if host_mean is not None else "-")
            rows.append(row)
    return Block(kind="table", header=header, rows=rows) if rows else None


def _environment_blocks(report: Report) -> list[Block]:
    base, head = report.arm(report.base), report.arm(report.head)
    subject = f" ({text(head.subject)})" if head.subject else ""
    on = environment_line(report.environment, report.gpu_fingerprint)
    blocks = [_p(f"{text(on)}; base {text(_ref_text(base))}, head {text(_ref_text(head))}{subject}.")]
    if report.slow_processes is not None:
        decided = report.batch_sizes + ([report.mix_comparison] if report.mix_comparison is not None else [])
        aside = sum(len(b.set_aside) for b in decided)
        blocks.append(_p(text(slow_processes_sentence(report.slow_processes, gpu=report.gpu_timed(),
                                                      rate_interval=False,
                                                      set_aside=aside if report.rule.sets_aside else None))))
    if swept := [a for a in report.arms if a.swept]:
        blocks.append(_p(text(words.swept_sentence([(a.name, a.swept) for a in swept]))))
    if left := [a for a in report.arms if a.temp_removed]:
        blocks.append(_p(text(words.temp_removed_sentence([(a.name, a.temp_removed) for a in left]))))
    unboxed = words.unboxed_sentence(report.isolation) if report.isolation is not None else None
    if report.warnings or unboxed:
        lines = [*([unboxed] if unboxed else []), *(text(warning_text(w)) for w in report.warnings)]
        blocks.append(Block(kind="bullets", lines=lines))
    files = report.changed_files
    if files:
        named = ", ".join(code(f) for f in files[:MAX_FILES_NAMED])
        more = f", and {len(files) - MAX_FILES_NAMED} more" if len(files) > MAX_FILES_NAMED else ""
        blocks.append(_p(f"Changed between base and head: {words.plural(len(files), 'file')}: {named}{more}."))
    shown_traces = [a.shown_trace for s in report.traces for a in s.arms if a.shown_trace]
    if shown_traces:
        blocks.append(_p("Profiler traces (open in Perfetto): " + ", ".join(code(t) for t in shown_traces)
                         + ", and the other repeats beside them."))
    return blocks


# The last schema whose per-process figures were medians (over steps; tok/s over windows); from
# the next on they are means, tok/s tokens over decode time (guard/measure/_figures.py)
LAST_MEDIAN_SCHEMA = 11


def _method_blocks(report: Report) -> list[Block]:
    w = report.workload
    options = f" with {code(w.options)}" if w.options else ""
    tok = ""
    if report.schema_version > LAST_MEDIAN_SCHEMA:
        tok = (" Each process's time per step is its mean over its timed steps, a stall included"
               + (f", and its {words.TOK} is its tokens over its decode time, at least {w.tok_per_s_min_s:g} s of it "
                  "per batch size." if w.tok_per_s_min_s else "."))
    elif w.tok_per_s_min_s and w.tok_per_s_window_s:
        tok = (f" {words.TOK.capitalize()} is each process's median over windows of "
               f"{round(w.tok_per_s_window_s * 1000)} ms or more, from at least {w.tok_per_s_min_s:g} s of decode "
               "per batch size.")
    lines = [f"A like-for-like greedy decode workload, {code(w.entry)}{options}: {w.warmup_steps} warmup and "
             f"{w.steps} timed steps per batch size, {processes_text(report)}, run interleaved.{tok}"]
    lines += [s for s in (like_for_like.agreement_sentence(report.decided(), report.base, report.head),
                          like_for_like.reference_note(report.workload.reference_error),
                          tok_role_note(report), ranks_method(report.workload.world_size)) if s]
    if compiled := compile_cache_note(report.compile_caches, report.compiled, report.compile_filled):
        lines.append(compiled)
    lines.append(rule_note(report))
    if report.verdict not in ("pass", "inconclusive") and (caught := caught_sentence(report)) is not None:
        lines.append(caught)
    if held := held_note(report.rule, report.gpu_timed()):
        lines.append(held)
    if uncounted := instructions_note(report, counted_somewhere=False):
        lines.append(uncounted)
    if borrowed := borrowed_note(report.decided(), report.gpu_timed()):
        lines.append(borrowed)
    lines.append(
        f"{words.metric('gpu_ms', True)} from CUDA events around each step, queued ahead of its start so the host's "
        f"launch time is left out; {words.TOK} from the wall clock of a separate pass as the decode loop runs."
        if report.gpu_timed() else f"No CUDA events: step times and {words.TOK} are the CPU's wall clock.")
    return [_p(line) for line in lines]


def _footer(tool_version: str, links: RunLinks | None) -> list[str]:
    lines = []
    if links is not None:
        lines.append(f"report.json, this comment, the picture as SVG and the profiler traces: [the artifact]"
                     f"({links.artifact_url}) of [the run that measured]({links.run_url})."
                     if links.artifact_url else f"[The run that measured]({links.run_url}).")
    lines.append(f"<sub>regression-guard {text(tool_version)}; every figure is in report.json.</sub>")
    return lines


def _status(verdict: Verdict, reasons: list[Reason], h: Headline, gpu: bool) -> str:
    """The commit status's description: the verdict and its deciding figure (the headline's), plain."""
    if verdict == "invalid":
        reason = reason_short(reasons[0]) if reasons else "see the comment"
        return f"invalid: {reason}"
    if h.batch_size is None or h.change is None or h.metric is None:
        return words.verdict(verdict)
    where = words.size(h.batch_size)
    return (f"{words.verdict(verdict)}: {where} {words.metric(h.metric, gpu)} "
            f"{words.with_interval(h.change)}")


def _annotation(verdict: Verdict, reasons: list[Reason], headline: str) -> Annotation | None:
    found = {
        "regression": ("error", "Decode regression"),
        "invalid": ("error", "Decode comparison not valid"),
        "at_threshold": ("warning", "Decode slowdown at the threshold"),
        "inconclusive": ("warning", "Decode speed inconclusive"),
    }.get(verdict)
    if found is None:
        return None
    message = headline
    if verdict == "invalid" and reasons:
        message = "; ".join(reason_short(r) for r in reasons)
    return Annotation(level=found[0], heading=found[1], message=message)  # type: ignore[arg-type]


def _ref_text(arm: ArmInfo) -> str:
    """'piecewise-capture 86115432', or the sha alone when the ref was a sha."""
    short = words.short_sha(arm.sha)
    return short if arm.sha.startswith(arm.ref) else f"{arm.ref} {short}"


def _label(arm: ArmInfo, base: str, head: str) -> str:
    if arm.source is not None:  # an ablation arm
        return f"{arm.label or arm.name} ({arm.source} build {words.short_sha(arm.sha)})"
    role = {head: "head", base: "base"}.get(arm.name, arm.name)
    return f"{role} ({_ref_text(arm)})"
