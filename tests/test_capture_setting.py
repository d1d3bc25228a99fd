"""A setting the diff changes is called a capture setting only where what was captured
changed: where every profiled step replayed the same kernels and graph launches on both sides,
the Cause section says the setting is read where graphs are captured, and that the captured
work did not change."""

from __future__ import annotations

from guard.report import SCHEMA_VERSION, render_comment
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
    assert ("read where CUDA graphs are captured; the profiled steps replayed the same kernels and graph launches "
            "on both sides, so what was captured did not change.") in comment
    # without a profiled pass nothing is known, and nothing is said either way
    assert explained(demo.model_copy(update={"traces": []})).explanation.capture_unchanged is None
