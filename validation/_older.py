"""The committed reports of older schemas, read as data: their numbers taken as they are, the
verdicts decided again by the interval rule at the rounds the run took, the trace diffs made
again from the figures each arm's trace kept, and the facts explained again. Their processes'
figures are medians, so they are read as schema 11, the last whose figures were (MEDIANS_SCHEMA),
and decided by its rule (rule 4), not by rule 5, whose figures are means. The guard itself
reads only the current schema (`guard comment` refuses the others); the validation suite and
the corpus tests read the evidence it already holds this way."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from guard.compare import Reason, Verdict, decide_again, most_severe
from guard.explain import Explanation, Headline
from guard.report import READ_VERSIONS, Report, explain_report
from guard.trace import diff


# the last schema whose processes' figures were medians over their steps (rule 4's)
MEDIANS_SCHEMA = 11


class Kept(NamedTuple):
    """A kept report as the current schema, with the verdict it stated as it ran."""

    report: Report
    stated_verdict: Verdict


def read_any(path: Path) -> Report:
    """A report.json or report.json.gz of any schema, as the current one."""
    return read_kept(path).report


def read_kept(path: Path) -> Kept:
    raw = path.read_bytes()
    data = json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)
    return Kept(current_report(data), TypeAdapter(Verdict).validate_python(data.get("verdict")))


def current_report(data: dict[str, Any]) -> Report:
    version = data.get("schema_version")
    if version in READ_VERSIONS and (version >= MEDIANS_SCHEMA or data.get("mix") is None):
        return Report.model_validate(data)
    data = json.loads(json.dumps(data))  # a copy to change
    rounds = int(data.get("rounds") or 1)
    looks = int(data.get("looks") or rounds)
    repeats = int(data["workload"]["repeats"])
    for batch in data["batch_sizes"]:
        batch["reasons"] = []  # sentences then; what is still wrong is found again below
        # the confirmation round measured the batch sizes it ran for: they have more processes
        batch["look"] = 2 if looks > 1 and any(a["repeats"] > repeats for a in batch["arms"]) else 1
    for section in data.get("traces", []):
        section["diff"] = None  # made again from the figures below
        for arm in section["arms"]:
            if arm.get("figures"):
                arm["figures"]["warnings"] = []  # sentences then; the figures they spoke of are kept
    # before schema 6 the mix decided nothing: without a verdict of its own its figures would
    # explain a slowdown no rule found, so an older report is read as its fixed sizes
    for name in ("mix", "mix_traces", "mix_comparison"):
        data.pop(name, None)
    data.update(schema_version=MEDIANS_SCHEMA, reasons=[],
                # schema 4 keeps it at the top already; older ones under `environment`
                gpu_fingerprint=data["environment"].pop("gpu_state", None) or data.get("gpu_fingerprint", {}),
                explanation=Explanation(headline=Headline(verdict=data["verdict"])).model_dump())
    report = Report.model_validate(data)
    # decided again on GPU ms and tok/s alone, on the run's own spreads, as these schemas were
    rule = report.rule.model_copy(update={"end_to_end_ms": None, "spreads": ()})
    batches = [decide_again(b, report.base, report.head, rule) for b in report.batch_sizes]
    reasons = [Reason(kind="arm_failed" if a.repeats else "arm_no_results", arm=a.name,
                      repeats_done=a.repeats or None, error=a.error)
               for a in report.arms if a.status != "ok"]
    reasons += [r for b in batches for r in b.reasons]
    verdict = "invalid" if reasons else most_severe([b.verdict for b in batches])
    traces = []
    for section in report.traces:
        figures = {a.arm: a.figures for a in section.arms}
        base, head = figures.get(report.base), figures.get(report.head)
        traces.append(section.model_copy(update={"diff": diff(base, head) if base and head else None}))
    report = report.model_copy(update={"batch_sizes": batches, "verdict": verdict, "reasons": reasons,
                                       "traces": traces})
    return report.model_copy(update={"explanation": explain_report(report)})
