"""The title and the first sentence lead with what the user feels (end-to-end time or tok/s)
where it is the larger slowdown past its threshold; the commit subject is cut between words."""

from __future__ import annotations

from guard.compare import decide_again, most_severe
from guard.config import Threshold
from guard.measure import spread
from guard.report import Report, build_view
from tests.report_fixtures import committed, explained
from tests.test_comment_shape import H200_DEMO


def _with_end_to_end(report: Report, factor: float, threshold_pct: float = 1.0) -> Report:
    """`report` with each arm's end-to-end ms per step its GPU ms x 1.1 (base) or x 1.1 x `factor`
    (head), decided again with an end-to-end threshold, and explained again."""
    rule = report.rule.model_copy(update={"end_to_end_ms": Threshold(pct=threshold_pct)})
    batches = []
    for batch in report.batch_sizes:
        arms = [a.model_copy(update={"end_to_end_gpu_ms_per_step": spread(
            [v * 1.1 * (factor if a.arm == report.head else 1.0) for v in a.gpu_ms_per_step.values])})
            for a in batch.arms]
        batches.append(decide_again(batch.model_copy(update={"arms": arms}), report.base, report.head, rule))
    again = report.model_copy(update={"batch_sizes": batches, "rule": rule,
                                      "verdict": most_severe([b.verdict for b in batches])})
    return explained(again)


def test_the_title_and_first_sentence_lead_with_end_to_end_time_when_it_is_the_larger_slowdown() -> None:
    demo = committed(H200_DEMO / "report.json")
    h = demo.explanation.headline
    assert h.verdict == "regression" and h.metric == "gpu_ms" and h.felt is None and h.change is not None
    felt = _with_end_to_end(demo, factor=3.0)
    h2 = felt.explanation.headline
    assert h2.batch_size == h.batch_size and h2.felt == "end_to_end_ms" and h2.felt_change is not None
    batch = next(b for b in felt.batch_sizes if b.batch_size == h.batch_size)
    assert h2.felt_change == batch.end_to_end_bounds and batch.end_to_end_bounds.ci_low_pct > 1.0
    # head's step 1.383 (GPU) x 3 against base's 1: its whole interval past GPU ms's
    assert batch.end_to_end_bounds.ci_low_pct > batch.gpu_ms_bounds.ci_high_pct
    ratio = 1 + h2.felt_change.pct / 100
    view = build_view(felt)
    assert view.title.startswith(f"Decode {ratio:.1f}x slower at batch size {h.batch_size} with ")
    first = view.sections[0].blocks[0].lines[0]
    assert first.startswith(f"At batch size {h.batch_size}, decode is {ratio:.1f}x slower end to end: "
                            f"end-to-end ms per step rose {h2.felt_change.pct:.2f}%")
    # under 2x: a percentage, and said to be end to end
    small = _with_end_to_end(demo, factor=1.15)  # 1.38 x 1.15: under 2x
    pct = small.explanation.headline.felt_change.pct  # type: ignore[union-attr]
    assert build_view(small).title.startswith(f"Decode {pct:.1f}% slower end to end at batch size {h.batch_size} ")


def test_end_to_end_time_that_moves_with_the_gpu_does_not_lead() -> None:
    """The same slowdown end to end as in GPU ms: the intervals overlap, GPU ms stays the headline."""
    demo = committed(H200_DEMO / "report.json")
    same = _with_end_to_end(demo, factor=1.0)
    assert same.explanation.headline.felt is None
    assert build_view(same).title == build_view(demo).title


def test_the_commit_subject_is_cut_between_words() -> None:
    demo = committed(H200_DEMO / "report.json")
    subject = "engine: capture decode piecewise, one graph per layer, at one padded size " * 2
    head = next(a for a in demo.arms if a.name == demo.head)
    long = demo.model_copy(update={"arms": [a.model_copy(update={"subject": subject}) if a is head else a
                                            for a in demo.arms]})
    title = build_view(long).title
    shown = title.split(" with ", 1)[1].split(" (")[0]
    assert shown.endswith("...") and len(title) < 120
    kept = shown.removesuffix("...")
    assert subject.startswith(kept) and subject[len(kept)] in " ,"  # the next character ends a word
    one_word = demo.model_copy(update={"arms": [a.model_copy(update={"subject": "x" * 200}) if a is head else a
                                                for a in demo.arms]})
    assert "x" not in build_view(one_word).title.split(" with ", 1)[1]  # a word too long is left out, not cut


def test_an_improvement_is_said_in_what_the_user_feels() -> None:
    """Decided by end-to-end time too, an improvement is titled end to end; a step that takes
    half the time or less, as a ratio."""
    from tests.report_fixtures import remeasured

    demo = committed(H200_DEMO / "report.json")
    gain = _with_end_to_end(remeasured(demo, 0.9, jitter=0.001), factor=0.9)  # steps 0.81 as long end to end
    h = gain.explanation.headline
    assert gain.verdict == "improvement" and h.metric == "end_to_end_ms" and h.change is not None
    assert build_view(gain).title.startswith(
        f"Decode {abs(h.change.pct):.1f}% faster end to end at batch size {h.batch_size} with ")
    halved = _with_end_to_end(remeasured(demo, 0.5, jitter=0.001), factor=0.8)  # 0.4 as long end to end
    h2 = halved.explanation.headline
    assert h2.metric == "end_to_end_ms" and h2.change is not None
    speedup = 1 / (1 + h2.change.pct / 100)
    assert speedup > 2.4 and build_view(halved).title.startswith(
        f"Decode {speedup:.1f}x faster at batch size {h2.batch_size} with ")


def test_where_the_user_felt_figure_decides_the_first_sentence_says_why_the_device_figure_differs() -> None:
    """End-to-end steps half as long, GPU ms unchanged: the improvement is end to end, and the
    sentence says GPU ms stayed within the threshold because it leaves the host's launch out."""
    from tests.report_fixtures import remeasured

    demo = committed(H200_DEMO / "report.json")
    host_only = _with_end_to_end(remeasured(demo, 1.0, jitter=0.002), factor=0.5)
    batch = host_only.batch_sizes[0]
    assert (host_only.verdict, batch.decided_by, batch.gpu_ms_verdict) == ("improvement", "end_to_end_ms", "pass")
    assert batch.gpu_ms_bounds is not None
    first = build_view(host_only).sections[0].blocks[0].lines[0]
    assert (f"faster than the 1% threshold; GPU ms per step, timed with the host's launch held out, changed "
            f"{batch.gpu_ms_bounds.pct:+.2f}% (within the threshold): the difference is the host's part of each "
            "step.") in first
    # where GPU ms decided the same, nothing is added
    both = remeasured(demo, 0.5, jitter=0.002)
    assert "the host's part" not in build_view(both).sections[0].blocks[0].lines[0]
