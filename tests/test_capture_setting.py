"""A setting the diff changes is called a capture setting only where what was captured
changed: where every profiled step replayed the same kernels and graph launches on both sides,
the Cause section says the setting is read where graphs are captured, and that the captured
work did not change."""

from __future__ import annotations

from guard.report import SCHEMA_VERSION, render_comment
from guard.trace import BeforeAfter
from tests.report_fixtures import committed, explained
from tests.test_comment_shape import H200_DEMO


def test_a_setting_is_a_capture_setting_only_where_the_captured_work_changed() -> None:
    demo = committed(H200_DEMO / "report.json").model_copy(update={"schema_version": SCHEMA_VERSION})
    assert demo.capture is not None and len(demo.capture.files) == 1 and demo.traces
    changed = explained(demo)
    assert changed.explanation.capture_unchanged is False  # the piecewise head captures other graphs
    assert "change settings that CUDA graph capture reads" in render_comment(changed)
    same = [t.model_copy(update={"diff": t.diff.model_copy(update={"kernel_counts_identical": True,
                                                                   "api_calls_identical": True})})
            for t in demo.traces if t.diff is not None]
    flag = explained(demo.model_copy(update={"traces": same}))
    assert flag.explanation.capture_unchanged is True
    comment = render_comment(flag)
    assert "settings that CUDA graph capture reads" not in comment
    assert "read at graph capture, but the graphs replayed the same kernels on both sides." in comment
    # without a profiled pass nothing is known, and nothing is said either way
    assert explained(demo.model_copy(update={"traces": []})).explanation.capture_unchanged is None


def test_a_size_run_eagerly_on_both_sides_does_not_make_a_setting_a_capture_setting() -> None:
    """Kernels added at a size that replays no graph on either side are not capture's: a flag
    whose only effect is there is not called a capture setting."""
    demo = committed(H200_DEMO / "report.json").model_copy(update={"schema_version": SCHEMA_VERSION})
    diffs = [t for t in demo.traces if t.diff is not None and t.diff.launches is not None]
    assert len(diffs) >= 2
    eager, graphs = diffs[0], diffs[1:]

    def eager_both(diff):  # no graph launched on either side
        launches = diff.launches.model_copy(update={"graph_launches_per_step": BeforeAfter(before=0.0, after=0.0,
                                                                                            delta=0.0)})
        return diff.model_copy(update={"launches": launches, "kernel_counts_identical": False})

    same = [t.model_copy(update={"diff": t.diff.model_copy(update={"kernel_counts_identical": True,
                                                                   "api_calls_identical": True})})
            for t in graphs]
    flag = explained(demo.model_copy(update={"traces": [eager.model_copy(update={"diff": eager_both(eager.diff)}),
                                                        *same]}))
    assert flag.explanation.capture_unchanged is True
    assert "settings that CUDA graph capture reads" not in render_comment(flag)
    # the same change at a size that replays a graph is capture's
    replayed = eager.diff.model_copy(update={"kernel_counts_identical": False})
    assert explained(demo.model_copy(update={"traces": [eager.model_copy(update={"diff": replayed}), *same]})
                     ).explanation.capture_unchanged is False
