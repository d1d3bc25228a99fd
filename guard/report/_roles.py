"""What each metric did in the verdict: tok/s informs, and does not decide, where the run's
repeats at its spread could not detect a change of its threshold, and is left out of the table
where it was not measurable at all (compare's `tok_per_s_measurable`). A metric the calibration
wrote no threshold for is held to GPU ms's (its source in the report's rule), and said so."""

from __future__ import annotations

from guard._markdown import text
from guard.compare import BatchComparison, MetricKey
from guard.config import Rule
from guard.measure import MOST_REPEATS
from guard.report import _words as words
from guard.report._schema import Report


def held_to_gpu_ms(rule: Rule, metric: MetricKey) -> bool:
    """The thresholds file wrote the metric no threshold, so it took GPU ms's (older reports do not say)."""
    decided = rule.thresholds().get(metric)
    return decided is not None and decided.source == "gpu_ms_fallback"


def threshold_text(rule: Rule, metric: MetricKey, gpu: bool) -> str:
    """'1%', or for a metric held to GPU ms's threshold "GPU ms per step's 1%"."""
    value = words.threshold(rule.pct(metric))
    return f"{words.metric('gpu_ms', gpu)}'s {value}" if held_to_gpu_ms(rule, metric) else value


def the_threshold(rule: Rule, metric: MetricKey, gpu: bool, determiner: str = "the") -> str:
    """'the 1% threshold' (or 'its 1% threshold'), or "GPU ms per step's 1% threshold"."""
    named = threshold_text(rule, metric, gpu)
    return f"{named} threshold" if held_to_gpu_ms(rule, metric) else f"{determiner} {named} threshold"


# Why the thresholds file wrote a metric no threshold, where it wrote GPU ms's
_HELD_BECAUSE = {
    "tok_per_s": f"the calibration found {words.TOK} too noisy to gate on this runner and wrote it no threshold of "
                 "its own",
    "end_to_end_ms": "the thresholds file wrote it none of its own (too noisy or not measured where it was "
                     "calibrated, or calibrated before it was decided)",
}


def held_note(rule: Rule, gpu: bool) -> str:
    """A sentence for each metric held to GPU ms's threshold: why it has none of its own. Held,
    not "informs": such a metric still decides where the run's own spread lets it (end-to-end
    time titled the H200's compile-mode pair at GPU ms's threshold)."""
    shown: list[MetricKey] = ["tok_per_s"]
    if rule.end_to_end_ms is not None and gpu:  # decided: its threshold is named
        shown.append("end_to_end_ms")
    sentences = []
    for metric in shown:
        if held_to_gpu_ms(rule, metric):
            name = words.metric(metric, gpu).capitalize()
            sentences.append(f"{name} is held to {the_threshold(rule, metric, gpu)}: {_HELD_BECAUSE[metric]}.")
    return " ".join(sentences)


def informational(batches: list[BatchComparison]) -> list[BatchComparison]:
    """The batch sizes whose tok/s was shown for information, not gated on."""
    return [b for b in batches
            if not b.tok_per_s_gates and b.tok_per_s_detectable_pct is not None and b.tok_per_s_measurable]


def unmeasurable(decided: list[BatchComparison]) -> list[BatchComparison]:
    """Everything `decided` whose tok/s was not measurable: its row is left out of the table."""
    return [b for b in decided if not b.tok_per_s_measurable and b.tok_per_s_detectable_pct is not None]


def _detectable(batches: list[BatchComparison]) -> str:
    return ", ".join(f"{b.tok_per_s_detectable_pct:.1f}% at "
                     + ("the mix" if b.mix else f"batch size {b.batch_size}") for b in batches)


def _repeats(batch: BatchComparison, base: str, head: str) -> int:
    return min((a.repeats for a in batch.arms if a.arm in (base, head)), default=0)


def tok_role_note(report: Report) -> str:
    """One sentence, when tok/s did not gate somewhere: what it could detect, and the repeats
    that would let it decide at its threshold."""
    batches = informational(report.batch_sizes)
    if not batches:
        return ""
    repeats = _repeats(batches[0], report.base, report.head)
    detectable = _detectable(batches)
    needed = [b.tok_per_s_repeats_to_gate for b in batches]
    most = (f"more than {MOST_REPEATS}" if None in needed
            else f"about {max(n for n in needed if n is not None)}")
    return (f"{words.TOK.capitalize()} decides here only a change whose whole interval is past its threshold: at "
            f"its spread, {repeats} processes per arm detect only a change of {detectable}, not "
            f"{the_threshold(report.rule, 'tok_per_s', report.gpu_timed(), 'its')}; it would take {most} per arm for "
            "it to decide any change.")


def tok_unmeasured_note(report: Report) -> str:
    """One short sentence, where tok/s was left out of the table: why."""
    batches = unmeasurable(report.decided())
    if not batches:
        return ""
    return (f"{words.TOK.capitalize()} is not shown, as not measurable here: at its spread, "
            f"{_repeats(batches[0], report.base, report.head)} processes per arm detect only a change of "
            f"{_detectable(batches)}, "
            f"far past {the_threshold(report.rule, 'tok_per_s', report.gpu_timed(), 'its')}.")


def instructions_note(report: Report, *, counted_somewhere: bool) -> str:
    """One sentence where the rule decides host instructions and a process of base or head had no
    counter: they decided nothing there, and why (the first such process's own words). Said in
    the table's note where some arm counted in every process (`counted_somewhere`: a counter
    that came and went), and in the method fold where none did (a machine without one, every run
    alike); empty where the other place says it."""
    if not report.rule.decides_instructions:
        return ""
    pairs = [[a for a in b.arms if a.arm in (report.base, report.head)] for b in report.decided()
             if b.verdict != "invalid"]
    if any(a.instructions_per_step is not None for arms in pairs for a in arms) != counted_somewhere:
        return ""
    for arms in pairs:
        missing = [a for a in arms if a.instructions_per_step is None]
        if missing:
            why = missing[0].instructions_unavailable or "no count"
            return (f"{words.INSTRUCTIONS.capitalize()} decided nothing: not every process counted them "
                    f"({text(missing[0].arm)}: {text(why)}).")
    return ""
