"""The comment's first lines: one sentence per slower batch size (or what the run rules out),
and the interval rule's level and account, with this run's figures."""

from __future__ import annotations

from guard.compare import UNDECIDED, BatchComparison, MetricKey, RoundsStop, spent
from guard.config import Rule
from guard.explain import DeviceRise, Headline
from guard.measure import MOST_REPEATS, PASS_RATE, Change
from guard.report import _words as words
from guard.report._roles import the_threshold, threshold_text
from guard.report._schema import Report


def bounds_level(report: Report) -> str:
    """The level of the intervals the verdicts were decided on: '99.75%', or '99.38% to 99.62%'
    where batch sizes were decided at looks that spent different shares of alpha; from rule 5,
    where the host family's metrics split their share, each family's: '99.75% for GPU ms per
    step, 99.87% for end-to-end ms per step and tokens per second'."""
    by_metric: dict[MetricKey, set[float]] = {}
    for batch in report.decided():
        for metric, alpha in batch.alpha_per_bound.items():
            by_metric.setdefault(metric, set()).add(alpha)
    if len({a for alphas in by_metric.values() for a in alphas}) > 1:
        grouped: dict[str, list[str]] = {}
        for metric, alphas in by_metric.items():
            named = words.metric(metric, report.gpu_timed())
            grouped.setdefault(_levels(sorted(alphas, reverse=True)), []).append(named)
        return ", ".join(f"{level} for {words.listed(names)}" for level, names in grouped.items())
    used = sorted({b.alpha_per_look for b in report.decided() if b.alpha_per_look is not None}, reverse=True)
    return _levels(used or [_alpha_per_look(report.rule)])


def _levels(alphas: list[float]) -> str:
    """The levels of bounds each wrong `alpha` (largest first): one, or their range."""
    levels = list(dict.fromkeys(words.level(1 - 2 * a) for a in alphas))
    return levels[0] if len(levels) == 1 else f"{levels[0]} to {levels[-1]}"


def _alpha_per_look(rule: Rule) -> float:
    """Each bound's error at the first look (later looks' are in their batch sizes' rows): a
    report without a batch size counts one, as a run decides one at least."""
    return rule.model_copy(update={"decided_sizes": max(1, rule.decided_sizes)}).alpha_per_look


def shown(batch: BatchComparison, metric: MetricKey) -> Change | None:
    """The change between the bounds it was decided on."""
    return batch.bounds(metric)


def felt_sentence(report: Report) -> str | None:
    """What the user feels, first, where it is a larger slowdown than the deciding metric's:
    'At batch size 1, decode is 3.7x slower end to end: end-to-end ms per step rose 270.00%
    (+180.00% to +390.00%), its whole interval past the 1% threshold.'"""
    h = report.explanation.headline
    if h.felt is None or h.felt_change is None or h.batch_size is None:
        return None
    change, metric = h.felt_change, h.felt
    how = "end to end" if metric == "end_to_end_ms" else f"in {words.TOK}"
    return (f"{words.at_size(h.batch_size).capitalize()}, decode is {words.slower(change, metric)} slower {how}: "
            f"{words.metric(metric, report.gpu_timed())} {_moved(change, metric)} ({words.interval(change)}), its "
            f"whole interval past {the_threshold(report.rule, metric, report.gpu_timed())}.")


def _moved(change: Change, metric: MetricKey) -> str:
    """'rose 3.21%' (a time), 'fell 3.11%' (tok/s)."""
    return f"{'fell' if metric == 'tok_per_s' else 'rose'} {words.pct(abs(change.pct)).lstrip('+')}"


def batch_sentence(report: Report, batch: BatchComparison, then: str = "") -> str | None:
    """'At batch size 2, GPU ms per step rose 3.21%, its whole interval past the 1% threshold.'
    The interval itself is in the table below the sentences; `then`, a clause to end it with."""
    end = f"; {then}." if then else "."
    metric: MetricKey = batch.decided_by or "gpu_ms"
    change = shown(batch, metric)
    if change is None:
        return None
    name = words.metric(metric, report.gpu_timed())
    slowdown = -change.pct if metric == "tok_per_s" else change.pct
    moved = _moved(change, metric) if slowdown > 0 else f"changed {words.pct(change.pct)}"
    cap, size = the_threshold(report.rule, metric, report.gpu_timed()), words.threshold(report.rule.pct(metric))
    after = {1: "", 2: " after its confirmation round"}.get(batch.look, f" after {batch.look - 1} confirmation rounds")
    needed = f"more than {MOST_REPEATS}" if batch.repeats_to_decide is None else f"about {batch.repeats_to_decide}"
    decide = f"; {needed} processes per arm would decide it (this run: {_processes(batch, report.base, report.head)})"
    if report.verdict in UNDECIDED:  # said once, under the title (report/_todo.py)
        decide = ""
    at = f"{words.at_size(batch.batch_size).capitalize()}, {name} {moved}"
    if batch.verdict in ("regression", "improvement"):
        device = _device_differs(batch, report.explanation.headline, report.gpu_timed())
        if batch.verdict == "regression":
            return f"{at}, its whole interval past {cap}{device}{_host_work(report, batch)}{end}"
        return f"{at}, its whole interval faster than {cap}{device}{end}"
    if batch.verdict == "at_threshold":
        return f"{at}: slower, but too close to {cap} to call{after}{decide}{end}"
    if batch.verdict == "inconclusive":
        return f"{at}: too noisy to tell a {size} slowdown from none{after}{decide}{end}"
    return None


# what GPU ms's own verdict says where what the user feels decided otherwise
_DEVICE_SAYS = {"pass": "within the threshold", "inconclusive": "too noisy to say",
                "at_threshold": "not told from the threshold", "improvement": "faster past the threshold",
                "regression": "slower past the threshold"}


def _device_differs(batch: BatchComparison, headline: Headline, gpu: bool) -> str:
    """Where end-to-end time or tok/s decided a batch size and GPU ms said otherwise, why the
    device figure differs: '; GPU ms per step, timed with the host's launch held out, changed
    -2.10% (too noisy to say): the difference is the host's part of each step'. An improvement
    whose GPU ms rose (explain's `device_rise`) says so, and why where the run recorded it:
    '; GPU ms per step rose 1.06% (slower past the threshold): each step computes 4 rows where
    base computed 3 (padding), and still takes less time than base's'."""
    device = batch.gpu_ms_bounds
    if (not gpu or batch.decided_by not in ("end_to_end_ms", "tok_per_s") or device is None
            or batch.gpu_ms_verdict in (None, batch.verdict)):
        return ""
    rise = headline.device_rise
    if rise is not None and headline.batch_size == batch.batch_size:
        return (f"; {words.metric('gpu_ms', True)} rose {words.pct(rise.gpu_ms.pct).lstrip('+')} "
                f"({_DEVICE_SAYS[batch.gpu_ms_verdict]}): {_more_work(rise)}, and the step still takes less time "
                "than base's")
    return (f"; {words.metric('gpu_ms', True)}, timed with the host's launch held out, changed "
            f"{words.pct(device.pct)} ({_DEVICE_SAYS[batch.gpu_ms_verdict]}): the difference is the host's part "
            "of each step")


def _more_work(rise: DeviceRise) -> str:
    """Why the device does more per step: the padding the run recorded, or that alone."""
    if rise.rows is not None:
        return f"each step computes {rise.rows[1]} rows where base computed {rise.rows[0]} (padding)"
    if rise.padding_waste is not None:
        before, after = rise.padding_waste
        return (f"{words.share(after)} of the rows each step computes are padding no request asked for, against "
                f"{words.share(before)} on base")
    return "the GPU does more work per step"


def _host_work(report: Report, batch: BatchComparison) -> str:
    """Where host instructions decided a regression and end-to-end time did not: '; end-to-end ms
    per step changed +0.80% (too noisy to say): the host does more work per step, felt where the
    host bounds the step'."""
    felt = batch.end_to_end_bounds
    if batch.decided_by != "instructions" or felt is None or batch.end_to_end_verdict in (None, "regression"):
        return ""
    # a pass of a figure that does not gate may still hold the threshold: then it could not say
    noisy = batch.end_to_end_verdict == "pass" and felt.ci_high_pct >= report.rule.pct("end_to_end_ms")
    says = _DEVICE_SAYS["inconclusive" if noisy else batch.end_to_end_verdict]
    return (f"; {words.END_TO_END} changed {words.pct(felt.pct)} ({says}): the host does more work per step, felt "
            "where the host bounds the step")


def _processes(batch: BatchComparison, base: str, head: str) -> int:
    return min((a.repeats for a in batch.arms if a.arm in (base, head)), default=0)


def pass_sentence(report: Report) -> str:
    """What a pass rules out, metric by metric, and a rise under the threshold worth naming."""
    gpu = report.gpu_timed()
    gates = all(b.tok_per_s_gates for b in report.decided())
    ruled = f"{words.threshold(report.rule.gpu_ms.pct)} in {words.metric('gpu_ms', gpu)}"
    if gates and report.rule.felt_gates and gpu and report.rule.end_to_end_ms is not None:
        ruled += (f", {words.threshold(report.rule.pct('end_to_end_ms'))} in {words.END_TO_END} and "
                  f"{words.threshold(report.rule.pct('tok_per_s'))} in {words.TOK}")
    elif gates:
        ruled += f" and {words.threshold(report.rule.pct('tok_per_s'))} in {words.TOK}"
    over = " or over the batch-size mix" if report.mix_comparison is not None else ""
    sentence = f"No slowdown of {ruled} at any batch size measured{over}: every upper bound is under it."
    h = report.explanation.headline
    if h.notable and h.change is not None and h.batch_size is not None:
        sentence += (f" {words.metric('gpu_ms', gpu)} did rise {words.at_size(h.batch_size)}: "
                     f"{words.with_interval(h.change)}, under the threshold.")
    return sentence


def ruled_out_sentence(batches: list[BatchComparison], mix: BatchComparison | None) -> str | None:
    """For an undecided run: the batch sizes (and the `mix`) that were decided."""
    passed = [b.batch_size for b in batches if b.verdict in ("pass", "improvement")]
    places = ([f"at {words.sizes(passed)}"] if passed else []) + (
        ["over the batch-size mix"] if mix is not None and mix.verdict in ("pass", "improvement") else [])
    return f"A slowdown of the threshold is ruled out {' and '.join(places)}." if places else None


def processes_text(report: Report) -> str:
    """'5 fresh processes per arm', and which batch sizes a confirmation round added to."""
    again = [b.batch_size for b in report.batch_sizes if b.look > 1]
    places = ([words.sizes(again)] if again else []) + (
        ["the mix"] if report.mix_comparison is not None and report.mix_comparison.look > 1 else [])
    text = f"{report.workload.repeats} fresh processes per arm"
    stopped = report.rounds_stopped
    if stopped is None:  # a report from before rounds adapted: one confirmation round at most
        if places:
            text += f", and {report.workload.repeats} more in a confirmation round for {' and '.join(places)}"
        return text
    if places:
        each = "a confirmation round" if report.rounds == 2 else f"each of {report.rounds - 1} confirmation rounds"
        text += f", and {report.workload.repeats} more in {each} for {' and '.join(places)}"
    if report.rounds > 1 or stopped != "decided":
        text += f" ({words.ROUNDS_STOPPED[stopped]})"
    return text


def rule_note(report: Report) -> str:
    """The method fold's account of the rule, with this run's figures."""
    each = f"{_alpha_per_look(report.rule) * 100:.3g}%"
    alpha, looks, n = report.rule.alpha, report.rule.looks, len(report.batch_sizes)
    mixed = " and the batch-size mix" if report.mix_comparison is not None else ""
    gpu = words.metric("gpu_ms", report.gpu_timed())
    if report.rule.version >= 2:
        first = spent(alpha, looks, 1)
        split = (f"Each bound of the first look is wrong at most {each} of the time: alpha {alpha:g} is "
                 f"spent over the {words.plural(looks, 'look')} the time budget holds"
                 + (f" ({words.pct(100 * first / alpha, 0).lstrip('+')} of it at the first, by a "
                    "Pocock-type spending function)" if looks > 1 else "")
                 + f" and split over 2 families ({gpu}; "
                 + (f"end-to-end ms per step and {words.TOK}, one pass's figures" if report.gpu_timed() else words.TOK)
                 + f") x {words.plural(n, 'batch size')}{mixed}"
                 + ("; a family's share is split again over the metrics it decides" if report.rule.felt_gates else "")
                 + ". ")
    else:
        split = (f"Each bound is wrong at most {each} of the time (alpha {alpha:g} split over "
                 f"{words.plural(looks, 'round')} x {report.rule.metrics_per_look} metrics x "
                 f"{words.plural(n, 'batch size')}{mixed}). ")
    return (
        f"A batch size is a regression when the lower bound of its slowdown is above the threshold "
        f"({words.threshold(report.rule.gpu_ms.pct)} in {gpu}, "
        f"{threshold_text(report.rule, 'tok_per_s', report.gpu_timed())} in "
        f"{words.TOK}), a pass when the upper bound is under it, an improvement when the upper bound is under minus "
        f"the threshold. {split}So a regression that is not there is called at most {words.level(alpha)} of "
        f"the time, as is an improvement; all the bounds hold together at least {words.level(1 - 2 * alpha)} "
        f"of the time. " + _felt_note(report) + " "
        + _rounds_note(report.rule.looks, report.rounds_stopped, report.confirm_budget_s)
        + "is at threshold (a slowdown is shown, its size against the threshold is not) or inconclusive (no change "
        "and the threshold both fit). Intervals from Welch's t on log times"
        + (", or Student's t where the calibrated spread was pooled in (below)"
           if any(c.borrowed for b in report.decided() for c in b.borrowed) else "")
        + "; p-values are in report.json and decide nothing."
    )


def _felt_note(report: Report) -> str:
    """How the rule note says what the user feels decides: from rule 5 first, at its own
    threshold; before, only where the run could detect its threshold."""
    end = report.rule.end_to_end_ms is not None and report.gpu_timed()
    # end-to-end ms's threshold only where the rule decides it (a report before schema 7 has none)
    end_threshold = threshold_text(report.rule, "end_to_end_ms", True) if end else ""
    tok_threshold = threshold_text(report.rule, "tok_per_s", report.gpu_timed())
    if report.rule.felt_gates:
        felt = (f"{words.END_TO_END} (unheld, the host's launch time included; "
                f"{end_threshold}{_source(report.rule, 'end_to_end_ms')}) and " if end else "")
        return (f"What the user feels decides first: {felt}{words.TOK} ({tok_threshold}"
                f"{_source(report.rule, 'tok_per_s')}) always decide; a slowdown they show is a regression whatever "
                f"{words.metric('gpu_ms', report.gpu_timed())} says, a speed-up they show an improvement, and one "
                "they cannot rule out keeps the batch size open; where they decide no direction, "
                f"{words.metric('gpu_ms', report.gpu_timed())} (and host instructions, where counted) decide.")
    return (f"{words.TOK.capitalize()} decides only where this run's processes could detect its threshold"
            + (f"; so does {words.END_TO_END} (unheld, the host's launch time included; "
               f"{end_threshold}), which otherwise decides a slowdown whose whole "
               "interval is past it" if end else "") + ".")


def _source(rule: Rule, metric: MetricKey) -> str:
    """', what the calibration says this runner resolves' where the metric's threshold is the calibration's."""
    decided = rule.thresholds().get(metric)
    return ", what the calibration says this runner resolves" if decided and decided.source == "calibrated" else ""


def _rounds_note(looks: int, stopped: RoundsStop | None, budget_s: float | None) -> str:
    """How the rule note says what a batch size left open gets, in a run of `looks` rounds at
    most (`stopped`: why it took no more; None before rounds adapted)."""
    if looks == 1:
        return "A batch size left open "
    if stopped is None and looks == 2:  # a report from before rounds adapted
        return "A batch size left open gets one confirmation round; one still open after it "
    budget = f" while each fits the {budget_s:g} s budget" if budget_s is not None else ""
    return (f"A batch size left open gets up to {words.plural(looks - 1, 'more round')} of processes{budget}; "
            "one still open after them ")


def caught_sentence(report: Report) -> str | None:
    """What the run could see, in one sentence: 'This run would have caught a slowdown in GPU ms
    per step of 1.4% or more at batch size 1 (12% end to end; 2.1% in host instructions, where
    they decide; the calibration expected 1.2%) and
    1.6% at batch size 2 (15% end to end), 95% of the time at its error rates.' None for a
    report without the figures."""
    decided = [b for b in report.decided() if "gpu_ms" in b.caught_pct]
    if not decided:
        return None
    parts = []
    for b in decided:
        felt: MetricKey = "end_to_end_ms" if "end_to_end_ms" in b.caught_pct else "tok_per_s"
        unit = "end to end" if felt == "end_to_end_ms" else f"in {words.TOK}"
        notes = [f"{_caught(b.caught_pct[felt])} {unit}"] if felt in b.caught_pct else []
        if "instructions" in b.caught_pct and report.rule.decides_instructions:  # rule 4: host work gates
            notes.append(f"{_caught(b.caught_pct['instructions'])} in host instructions")
        if "gpu_ms" in b.expected_caught_pct:  # the calibration's spread, against the run's own
            notes.append(f"the calibration expected {_caught(b.expected_caught_pct['gpu_ms'])}")
        also = f" ({'; '.join(notes)})" if notes else ""
        parts.append(f"{_caught(b.caught_pct['gpu_ms'])}{' or more' if not parts else ''} "
                     f"{words.at_size(b.batch_size)}{also}")
    return (f"This run would have caught a slowdown in {words.metric('gpu_ms', report.gpu_timed())} of "
            f"{words.listed(parts)}, {words.level(PASS_RATE)} of the time at its error rates.")


def _caught(pct: float) -> str:
    """'1.4%', '12%', '2.3x' (a step 2.3 times as long) past 100%, 'over 1,000x' past words.SHOWN_PCT_LIMIT."""
    if pct > words.SHOWN_PCT_LIMIT:
        return f"over {words.SHOWN_PCT_LIMIT / 100:,.0f}x"
    return f"{1 + pct / 100:.2g}x" if pct >= 100 else f"{pct:.2g}%"
