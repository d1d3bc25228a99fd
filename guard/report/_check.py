"""A report read back holds up, or is refused: its verdicts are made again from its own
numbers (compare's `recheck`), and what the comment, the status and the summary look up in
it (arm names, commit shas) is there and of the right form."""

from __future__ import annotations

import math
import re
from pathlib import Path

from guard._errors import GuardError
from guard._types import is_commit_sha
from guard.compare import Discrepancy, recheck, same_facts
from guard.config import MetricKey
from guard.measure import SlowMetric, SlowProcesses, find_slow_processes, processes_of
from guard.report import _words as words
from guard.report._explained import explain_report
from guard.report._schema import Report
from guard.trace import RankDiff, rank_section_diff

MAX_NAMED = 3  # discrepancies the message names; the rest are counted


class UnfoundedReport(GuardError):
    """A report whose stated verdicts its own numbers do not give, or whose parts do not fit
    together: nothing is posted or summarized from it."""


def check_report(report: Report, path: Path, *, check_explanation: bool = True) -> None:
    """Raises UnfoundedReport, naming what does not hold, unless the report holds up.
    `check_explanation=False` leaves the stated explanation aside, for a reader that replaces it."""
    found = _shape(report) or recheck(
        report.decided(), report.base, report.head, report.rule,
        verdict=report.verdict, hash_match=report.hash_match,
        failed_arms=[a.name for a in report.arms if a.status != "ok"],
    ) or _slow_processes(report) or _rank_traces(report) or (_explanation(report) if check_explanation else [])
    if not found:
        return
    named = "; ".join(describe_discrepancy(d) for d in found[:MAX_NAMED])
    more = f"; and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
    what = "verdicts its own numbers do not give" if any(d.kind == "verdict" for d in found) else (
        "figures its own values do not give" if any(d.kind != "shape" for d in found) else "parts that do not fit")
    raise UnfoundedReport(
        f"{path} states {what}: {named}{more}; nothing is posted from it. A report is decided again from its "
        "numbers before it is posted: pass the report.json that `guard run` wrote, unedited"
    )


def _shape(report: Report) -> list[Discrepancy]:
    """The arms the rendering looks up: base and head among the arms, each arm once, every
    batch size's arms among them, and every sha a full hex object name."""
    found = []
    names = [a.name for a in report.arms]

    def wrong(field: str, stated: str, expected: str) -> None:
        found.append(Discrepancy(kind="shape", batch_size=None, field=field, stated=stated, recomputed=expected))

    if len(set(names)) != len(names):
        wrong("arms", f"{len(names)} arms, {len(set(names))} names", "each arm once")
    for role, name in (("base", report.base), ("head", report.head)):
        if name not in names:
            wrong(role, "an arm not among the arms", "one of the arms")
    for number, arm in enumerate(report.arms):
        if not is_commit_sha(arm.sha):
            wrong(f"arms[{number}].sha", "not a full hex commit sha", "40 or 64 hex digits")
    for batch in report.decided():
        if any(a.arm not in names for a in batch.arms):
            wrong(f"batch size {batch.batch_size} arms", "an arm not among the report's arms", "the report's arms")
    found += _mix_holds(report)
    found += _overrides_hold(report)
    found += _sources_hold(report)
    return found


def _mix_holds(report: Report) -> list[Discrepancy]:
    """The mix's verdict and its figures were made from the same processes: each arm's values
    are the ones `mix` keeps per process, and a report with a mix decided it."""
    decided = report.mix_comparison
    if bool(report.mix is not None and report.mix.arms) != (decided is not None):
        return [Discrepancy(kind="shape", batch_size=None, field="mix_comparison",
                            stated="present" if decided is not None else "absent",
                            recomputed="present with a mix, absent without one")]
    if decided is None or report.mix is None:
        return []
    kept = {a.arm: a.process_ms_per_step for a in report.mix.arms}
    return [Discrepancy(kind="count", batch_size=decided.batch_size, field=f"mix_comparison.arms[{a.arm}]",
                        stated=f"{len(a.gpu_ms_per_step.values)} values", recomputed="mix's per-process values")
            for a in decided.arms if a.gpu_ms_per_step.values != kept.get(a.arm)]


def _overrides_hold(report: Report) -> list[Discrepancy]:
    """The comment says which values the command line set: each must be the one the run used."""
    given = report.overrides.given() if report.overrides else {}
    used = {
        "repeats": report.workload.repeats,
        "batch_sizes": report.workload.batch_sizes,
        "steps": report.workload.steps,
        "threshold_pct": report.rule.gpu_ms.pct,
    }
    found = [
        Discrepancy(kind="shape", batch_size=None, field=f"overrides.{name}", stated=str(value),
                    recomputed=str(used[name]))
        for name, value in given.items() if name in used and value != used[name]  # allow_few_repeats sets no figure
    ]
    if "threshold_pct" in given and report.rule.tok_per_s.pct != given["threshold_pct"]:
        found.append(Discrepancy(kind="shape", batch_size=None, field="rule.tok_per_s.pct",
                                 stated=str(report.rule.tok_per_s.pct), recomputed=str(given["threshold_pct"])))
    return found


def _sources_hold(report: Report) -> list[Discrepancy]:
    """Where the report says each threshold came from fits the thresholds it states: all from the
    config, or none (a thresholds file gives GPU ms's, and the command line's threshold replaces
    that file); and a metric held to GPU ms's threshold, or tok/s from the config, has GPU ms's."""
    rule = report.rule
    sources = rule.sources()
    if sources is None:  # a report from before they were kept
        return []
    found = []

    def wrong(field: str, stated: str, expected: str) -> None:
        found.append(Discrepancy(kind="shape", batch_size=None, field=field, stated=stated, recomputed=expected))

    configured = sources["gpu_ms"] == "configured"
    if not configured and report.overrides is not None and "threshold_pct" in report.overrides.given():
        wrong("rule.gpu_ms.source", sources["gpu_ms"], "configured (the command line gave the threshold)")
    if rule.felt_gates:  # rule 5: what the user feels has its own threshold, never GPU ms's
        for metric in ("tok_per_s", "end_to_end_ms"):
            source = sources.get(metric)
            if source == "gpu_ms_fallback" or (configured and source != "configured"):
                wrong(f"rule.{metric}.source", str(source), "configured, like GPU ms's," if configured
                      else "configured or calibrated (rule 5 holds no metric to GPU ms's threshold)")
        if configured and rule.tok_per_s.pct != rule.gpu_ms.pct:  # measure.threshold_pct is both
            wrong("rule.tok_per_s.pct", repr(rule.tok_per_s.pct), f"{rule.gpu_ms.pct!r} (GPU ms's, from the config)")
    held_by: dict[MetricKey, tuple[str, ...]] = {} if rule.felt_gates else {
        "tok_per_s": ("configured", "gpu_ms_fallback"), "end_to_end_ms": ("gpu_ms_fallback",)}
    for metric, held in held_by.items():
        if (source := sources.get(metric)) is None:  # not decided
            continue
        if (source == "configured") != configured:
            wrong(f"rule.{metric}.source", source, "configured, like GPU ms's," if configured
                  else "calibrated or gpu_ms_fallback (GPU ms's came from a thresholds file)")
        elif source in held and rule.pct(metric) != rule.gpu_ms.pct:
            wrong(f"rule.{metric}.pct", f"{rule.pct(metric)!r} with rule.{metric}.source {source}",
                  f"{rule.gpu_ms.pct!r} (GPU ms's)")
    if rule.instructions is not None and sources.get("instructions") != "configured":
        wrong("rule.instructions.source", str(sources.get("instructions")),
              "configured (a thresholds file writes none for instructions)")
    return found


def _slow_processes(report: Report) -> list[Discrepancy]:
    """The slow processes a report names, found again from the figures its spreads keep."""
    stated = report.slow_processes
    if stated is None:  # older reports
        return []
    values: dict[tuple[int, SlowMetric], dict[str, list[float]]] = {}
    for batch in report.decided():
        values[(batch.batch_size, "gpu_ms")] = {a.arm: a.gpu_ms_per_step.values for a in batch.arms}
        values[(batch.batch_size, "tok_per_s")] = {a.arm: a.tok_per_s.values for a in batch.arms}
    found = find_slow_processes(values, processes_of(values))

    def named(slow: SlowProcesses) -> list[tuple[str, int, int, str, float]]:
        return [(s.arm, s.repeat, s.batch_size, s.metric, round(s.off_pct, 6)) for s in slow.slow]

    if named(found) != named(stated) or found.processes != stated.processes or not all(
        math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)
        for a, b in ((found.rate_low, stated.rate_low), (found.rate_high, stated.rate_high))
    ):
        return [Discrepancy(
            kind="count", batch_size=None, field="slow_processes",
            stated=f"{stated.count} of {stated.processes}", recomputed=f"{found.count} of {found.processes}",
        )]
    return []


def _rank_traces(report: Report) -> list[Discrepancy]:
    """Each batch size's diff across the ranks, made again from the passes its arms keep: the
    findings the explanation is made from are the figures', not the report's word."""
    found = []
    for section in report.rank_traces:
        again = rank_section_diff(section.arms, report.base, report.head)
        if again == section.diff:
            continue
        stated, recomputed = _findings(section.diff), _findings(again)
        if stated == recomputed:  # the same findings, other figures
            stated, recomputed = "as stated", "other figures"
        found.append(Discrepancy(kind="count", batch_size=section.batch_size, field="rank_traces.diff",
                                 stated=stated, recomputed=recomputed))
    return found


def _findings(change: RankDiff | None) -> str:
    if change is None:
        return "no diff"
    return f"findings [{', '.join(f.kind for f in change.findings)}]"


def _explanation(report: Report) -> list[Discrepancy]:
    """The facts the comment states, explained again from the report's figures."""
    again = explain_report(report)
    found = []
    made, stated = again.model_dump(), report.explanation.model_dump()
    for name in type(again).model_fields:
        if not same_facts(stated.get(name), made.get(name)):  # figures as written on the run's machine
            found.append(Discrepancy(kind="count", batch_size=None, field=f"explanation.{name}",
                                     stated="as stated", recomputed="other facts"))
    return found


def describe_discrepancy(d: Discrepancy) -> str:
    """'batch size 1: verdict pass, but its numbers give regression'. Only the report's field
    names and figures: its strings are left out, as this line goes to a workflow's log."""
    where = f"{words.size(d.batch_size)}: " if d.batch_size is not None else ""
    field = _plain(d.field)
    if d.kind == "shape":
        return f"{where}{field} is {_plain(d.stated)}, where {_plain(d.recomputed)} is due"
    return f"{where}{field} {_plain(d.stated)}, but its numbers give {_plain(d.recomputed)}"


def _plain(value: str, limit: int = 80) -> str:
    """A figure or field name for one line of a log: printable ASCII only, no workflow command."""
    clean = re.sub(r"[^ -~]", "?", value).replace("::", ": :")
    return clean if len(clean) <= limit else clean[: limit - 3] + "..."
