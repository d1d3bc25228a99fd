"""summary.md: the figures of summary.json as tables a reader can check by eye."""

from __future__ import annotations

from guard.calibrate import suggested_text
from guard.report import slow_processes_sentence

from guard.report._words import CAUSE

from ._models import SPLIT_ONLY, Decision, PairFacts, Sizing, Summary
from ._summary import VERDICTS

NOT_RUN = "not run"


def render_markdown(summary: Summary, invocations: list[str]) -> str:
    lines = ["# Validation: injected regressions of known size", ""]
    lines += _status(summary) + _environment(summary) + _settings(summary)
    if summary.sizing is not None:
        lines += _sizing(summary.sizing)
    lines += _calibration(summary)
    for decision in summary.decisions:
        lines += _decision(decision)
    lines += _pairs(summary)
    if invocations:
        lines += ["## Commands that made these figures", "", "```sh", *invocations, "```", ""]
    return "\n".join(lines)


def _status(summary: Summary) -> list[str]:
    planned = sum(summary.planned.values())
    state = "complete" if summary.complete else "incomplete: continue with `--resume`"
    kinds = ", ".join(f"{kind} {count}" for kind, count in summary.planned.items())
    return [f"{len(summary.pairs)} pairs in this folder. The last invocation planned {planned} ({kinds}): "
            f"{summary.done} done ({state}).", ""]


def _environment(summary: Summary) -> list[str]:
    env = summary.environment
    if not env:
        return []
    parts = [f"{key} {env[key]}" for key in ("gpu", "driver", "torch", "cuda", "python", "hostname") if env.get(key)]
    lines = ["## Environment", "", ", ".join(parts) or "not recorded"]
    if env.get("gpu_uuids_of_pairs"):
        lines.append(f"GPU(s) the pairs ran on: {', '.join(env['gpu_uuids_of_pairs'])}")
    return lines + [""]


def _settings(summary: Summary) -> list[str]:
    s = summary.settings
    if s is None:
        return []
    return [
        "## Settings", "",
        f"Batch size {s.batch_size}; {s.warmup_steps} warmup + {s.steps} timed decode steps per process, "
        f"{s.profile_steps} profiled steps"
        + (f" in the first {s.profile_repeats} process(es) of each arm" if s.profile_repeats else "")
        + f"; {s.repeats} processes per arm per round, "
        + (f"confirmation rounds on (up to {s.max_rounds} rounds in all)" if s.confirm else "confirmation round off")
        + f"; alpha {s.alpha:g}; build `{s.build}`; workload options "
        f"`{{ {s.options_toml} }}`.",
        "",
    ]


def _sizing(sizing: Sizing) -> list[str]:
    timers = {p.timer for p in sizing.points if p.timer}
    clock = " Timed by the host clock: no CUDA here." if timers == {"perf_counter"} else ""
    lines = [
        "## Sizing", "",
        f"GPU ms per step of each setting (median of {sizing.repeats} fresh processes, no profiler) against "
        f"the unsplit base ({sizing.base_ms_per_step:.4f} ms). `long-kv-N`: the first N layers attend over "
        f"a KV cache of {sizing.long_kv_len} positions.{clock}",
        "",
        "| setting | GPU ms per step (each process) | change vs base | tokens match base |",
        "|---|---|---|---|",
    ]
    for p in sizing.points:
        values = ", ".join(f"{v:.4f}" for v in p.gpu_ms_per_step) or "-"
        change = f"{p.change_pct:+.2f}%" if p.change_pct is not None else "-"
        tokens = "-" if p.tokens_match_base is None else ("yes" if p.tokens_match_base else "**no**")
        lines.append(f"| {p.label} | {values} | {change} | {tokens}{' (' + p.error + ')' if p.error else ''} |")
    lines += ["", "| kind | setting | predicted change | how | note |", "|---|---|---|---|---|"]
    for i in sizing.injections:
        setting = setting_label(i.injection, i.setting) if i.setting is not None else NOT_RUN
        predicted = f"{i.predicted_pct:+.2f}%" if i.predicted_pct is not None else "-"
        checks = "; ".join(
            f"long_kv_layers {c.long_kv_layers}: tokens {'match' if c.tokens_match_base else 'differ'}"
            for c in i.token_checks
        )
        note = "; ".join(n for n in (i.note, checks) if n)
        lines.append(f"| {i.kind} | {setting} | {predicted} | {i.how} | {note} |")
    if sizing.split_pct is not None:
        lines += ["", f"The split alone (two graphs, no wait) changes GPU ms per step {sizing.split_pct:+.2f}%."]
    return lines + [""]


def _calibration(summary: Summary) -> list[str]:
    cal = summary.calibration
    repeats = cal.repeats if cal is not None and cal.repeats is not None else "?"
    if cal is not None and cal.refused:
        return ["## Calibration", "", f"`guard calibrate` on base, {repeats} processes per side, "
                f"refused to suggest thresholds: {cal.refused}.", ""]
    if summary.thresholds is None:
        return []
    lines = [
        "## Calibration", "",
        f"`guard calibrate` on base, {repeats} processes per side: suggested thresholds "
        f"{suggested_text(summary.thresholds)}.",
    ]
    for n in cal.noise if cal is not None else []:
        low, high = n.gpu_ms_aa_ci_pct
        gpu = n.gpu_ms
        lines.append(
            f"Batch size {n.batch_size}: {n.gpu_ms_per_step:.4f} ms per step, spread "
            f"{n.gpu_ms_spread_pct:.2f}%, A/A interval {low:+.2f}% to {high:+.2f}%."
            + (f" Within-side sd {gpu.sd_pct:.3f}% (upper limit {gpu.sd_limit_pct:.3f}%), smallest threshold "
               f"{gpu.supported_pct:.2f}%." if gpu else "")
            + "".join(f" Far from the rest: side {f.side} repeat {f.repeat}, {f.gpu_ms_per_step:.4f} ms "
                      f"({f.off_pct:+.2f}%)." for f in n.gpu_ms_far_repeats)
        )
    if cal is not None and cal.slow is not None:
        lines.append(slow_processes_sentence(cal.slow, lambda s: f"side {s}", "side"))
    return lines + [""]


def _decision(decision: Decision) -> list[str]:
    thresholds = (
        f" (GPU ms per step {decision.gpu_ms_pct:g}%, tok/s {decision.tok_per_s_pct:g}%)"
        if decision.gpu_ms_pct is not None and decision.tok_per_s_pct is not None else ""
    )
    lines = [
        f"## Verdicts {decision.label}{thresholds}", "",
        "| kind | pairs | pass | regression | at threshold | inconclusive | improvement | invalid | right cause "
        "| detection | median GPU ms change | median tok/s change | traced |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for k in decision.kinds:
        counts = " | ".join(str(k.verdicts.get(v, 0)) for v in VERDICTS)
        right = f"{k.right_cause}" if k.expected_cause else "-"
        rate = f"{k.detection_rate:.0%}" if k.detection_rate is not None else "-"
        lines.append(
            f"| {k.kind} | {k.pairs} | {counts} | {right} | {rate} | {_pct(k.median_gpu_ms_change_pct)} "
            f"| {_pct(k.median_tok_per_s_change_pct)} | {k.traced} of {k.pairs} |"
        )
    lines.append("")
    for c in decision.criteria:
        lines.append(f"- **{c.status}**: {c.name}: {c.detail}")
    for note in decision.notes:
        lines.append(f"- Note: {note}")
    return lines + [""]


def _pairs(summary: Summary) -> list[str]:
    if not summary.pairs:
        return []
    redecided = [(d.role, d.verdicts) for d in summary.decisions if d.role != "as run"]
    header = "".join(f" at {role} threshold |" for role, _ in redecided)
    lines = [
        "## Pairs", "",
        f"| pair | setting | verdict |{header} GPU ms change (interval, p) | tok/s change | cause "
        "| capture change named | rounds | seconds |",
        "|---|---|---|" + "---|" * len(redecided) + "---|---|---|---|---|---|",
    ]
    for r in summary.pairs:
        capture = "-" if r.capture_changed is None else ("yes" if r.capture_changed else "no")
        others = "".join(f" {verdicts.get(r.pair_id, '-')} |" for _, verdicts in redecided)
        lines.append(
            f"| {r.pair_id} | {_setting(r)} | {r.verdict} |{others} {_change(r)} "
            f"| {_pct(r.tok_per_s_change.pct if r.tok_per_s_change else None)} | {cause_text(r)} "
            f"| {capture} | {r.rounds} | {r.duration_s:.0f} |"
        )
    return lines + [""]


def cause_text(record: PairFacts) -> str:
    """The cause tag of a regression; where there is none, whether a trace was there to give
    one. Other verdicts carry no cause in the comment's title, so none is shown."""
    if not record.traced:
        return "no trace"
    if record.verdict != "regression":
        return "-"
    return CAUSE[record.cause] if record.cause else "none dominant"


def setting_label(injection: str, setting: float | None) -> str:
    """How a head commit's setting reads: idle_us (0: the split alone) or long_kv_layers."""
    if setting is None:
        return "A/A"
    if injection == "idle":
        return "split alone" if setting == SPLIT_ONLY else f"idle_us {setting:g}"
    return f"long_kv_layers {setting:g}"


def _setting(record: PairFacts) -> str:
    return setting_label(record.injection, record.setting)


def _change(record: PairFacts) -> str:
    c = record.gpu_ms_change
    if c is None:
        return "-"
    return f"{c.pct:+.2f}% ({c.ci_low_pct:+.2f}% to {c.ci_high_pct:+.2f}%, p = {c.p_value:.2g})"


def _pct(value: float | None) -> str:
    return f"{value:+.2f}%" if value is not None else "-"
