"""Reports that hold up, for any verdict: a committed H200 report's base measurements, with
head's made from them, every verdict decided again from those values by the compare stage,
by the interval rule, as if in one round of a run that may take `looks` rounds, and its facts
explained again. A test that wants a report saying `pass` gets one whose numbers pass.
`committed` reads a committed report of an older schema as data (validation/_older.py)."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guard.compare import MIX_BATCH, Agreement, ArmStats, BatchComparison, decide_again, most_severe
from guard.config import METRICS, RULE_VERSION, CalibratedSpread, Rule, Threshold
from guard.measure import MixReport, spread

from validation._older import read_any as committed
from guard.report import SCHEMA_VERSION, Report, explain_report

__all__ = ["committed", "current_file", "explained", "mix_decision", "remeasured", "ruled", "sourced", "with_mix"]

_CURRENT = Path(tempfile.mkdtemp(prefix="guard-current-reports-"))
atexit.register(shutil.rmtree, _CURRENT, ignore_errors=True)


def current_file(path: Path) -> Path:
    """A committed report of an older schema, written as the current schema, for a command to read."""
    out = _CURRENT / f"{path.parent.name}-{path.name.removesuffix('.gz')}"
    if not out.exists():
        out.write_text(committed(path).model_dump_json(indent=2))
    return out


def explained(report: Report) -> Report:
    """`report` with its facts explained again, after a test changed its figures."""
    return report.model_copy(update={"explanation": explain_report(report)})


def ruled(report: Report, **update: Any) -> Report:
    """`report` stating its rule with `update`'s fields; a number for a metric is its threshold in
    percent, from where the report's came. Unchecked, as a report edited by hand would be."""
    rule = report.rule
    for metric in METRICS:
        if isinstance(pct := update.get(metric), (int, float)):
            kept = getattr(rule, metric)
            update[metric] = Threshold.model_construct(pct=pct, source=kept.source if kept is not None else None)
    return report.model_copy(update={"rule": rule.model_copy(update=update)})


def sourced(report: Report, sources: dict[str, str] | None) -> Report:
    """`report` saying each threshold it decides came from `sources` (None: not said, as older reports)."""
    rule = report.rule
    update = {metric: threshold.model_copy(update={"source": (sources or {}).get(metric)})
              for metric, threshold in rule.thresholds().items()}
    return report.model_copy(update={"rule": rule.model_copy(update=update)})


def remeasured(report: Report, factor: float, jitter: float = 0.0, looks: int = 1,
               spreads: Sequence[CalibratedSpread] = ()) -> Report:
    """`report` as if head's GPU ms per step were base's times `factor`, each repeat moved by
    +`jitter` and -`jitter` in turn (a share), and each arm's tok/s were its batch size over
    its step time; every batch size and the whole decided again, at the first of `looks`,
    borrowing the calibrated `spreads` where the run's own agrees with them."""
    # the rule the report says, as the current rule, at `looks` with `spreads`: the figures are
    # made up as a current run's would be, whatever the committed report's schema
    schema = SCHEMA_VERSION
    rule = report.rule.model_copy(update={"version": RULE_VERSION, "looks": looks, "spreads": tuple(spreads),
                                          "decided_sizes": len(report.decided())})
    batches = []
    for batch in report.batch_sizes:
        base = next(a for a in batch.arms if a.arm == report.base)
        base_ms = base.gpu_ms_per_step.values
        head_ms = [v * factor * (1 + jitter * (-1) ** i) for i, v in enumerate(base_ms)]
        arms = []
        for arm in batch.arms:
            ms = {report.head: head_ms, report.base: base_ms}.get(arm.arm, arm.gpu_ms_per_step.values)
            arms.append(arm.model_copy(update={
                "gpu_ms_per_step": spread(ms), "tok_per_s": spread([batch.batch_size * 1000 / v for v in ms]),
                "end_to_end_gpu_ms_per_step": None, "host_ms_per_step": None,
            }))
        stored = batch.model_copy(update={"arms": arms, "look": 1})
        batches.append(decide_again(stored, report.base, report.head, rule))
    again = report.model_copy(update={
        "schema_version": schema, "rule": rule, "rounds": 1, "batch_sizes": batches,
        "verdict": most_severe([b.verdict for b in batches]),
        "reasons": [r for b in batches for r in b.reasons],
    })
    return again.model_copy(update={"explanation": explain_report(again)})


def mix_decision(mix: MixReport, base: str, head: str, rule: Rule | None = None,
                 agreement: Agreement | None = None) -> BatchComparison:
    """The mix decided by `rule` from the per-process values `mix` keeps, as if its tokens
    matched, or forced with `agreement`; each process's tok/s its mean batch over its step time.
    `rule` default: GPU ms and tok/s at 1%, alpha 0.01 at one look, the mix alone decided."""
    sizes = [s for arm in mix.arms for s in arm.sizes if arm.arm == base]
    mean_batch = sum(s.share * s.batch_size for s in sizes)
    arms = [ArmStats(arm=a.arm, repeats=len(a.process_ms_per_step), gpu_ms_per_step=spread(a.process_ms_per_step),
                     tok_per_s=spread([mean_batch * 1000 / ms for ms in a.process_ms_per_step]), timer=a.timer,
                     sha256="0" * 64, deterministic=True, steps=mix.steps)
            for a in mix.arms]
    at_one = Threshold(pct=1.0)
    rule = rule or Rule(gpu_ms=at_one, tok_per_s=at_one, end_to_end_ms=None, alpha=0.01, confidence=0.99)
    stored = BatchComparison(batch_size=MIX_BATCH, verdict="invalid", arms=arms,
                             hash_match=True if agreement is None else None, agreement=agreement)
    return decide_again(stored, base, head, rule)


def with_mix(report: Report, mix: MixReport, agreement: Agreement | None = None) -> Report:
    """`report` with the batch-size mix `mix`, decided beside its batch sizes (alpha split over
    them and the mix; forced with `agreement`, where given), its sizes decided again at that
    split, and its facts explained again."""
    # the rule the report says, as the current rule, alpha split over the mix too
    schema = SCHEMA_VERSION
    rule = report.rule.model_copy(update={"version": RULE_VERSION, "decided_sizes": len(report.batch_sizes) + 1})
    batches = [b if b.verdict == "invalid" else decide_again(b, report.base, report.head, rule)
               for b in report.batch_sizes]
    decided = mix_decision(mix, report.base, report.head, rule, agreement=agreement)
    again = report.model_copy(update={
        "schema_version": schema, "rule": rule, "mix": mix, "mix_comparison": decided, "batch_sizes": batches,
        "verdict": report.verdict if report.verdict == "invalid" else most_severe(
            [b.verdict for b in [*batches, decided]]),
    })
    return again.model_copy(update={"explanation": explain_report(again)})
