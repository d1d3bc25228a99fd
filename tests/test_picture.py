"""The picture of every process's step time: as Mermaid in the comment's fold (rendered with
cmark-gfm, GitHub's parser), as an SVG beside report.json (parsed back as XML), and in the job
summary, from committed H200 reports and reports made from them."""

from __future__ import annotations

import json
import math
import os
import statistics
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from guard.measure import spread
from guard.report._chart import MAX_PROCESSES_PER_ARM
from guard.report import CHART_FILE, Report, metric, render_comment, strip_chart, strip_svg, write_report
from tests.report_fixtures import remeasured, committed, current_file

REPO_ROOT = Path(__file__).resolve().parents[1]
# 2 batch sizes, an ablation arm
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")
SVG = "{http://www.w3.org/2000/svg}"


def _rich() -> Report:
    return committed(RICH)


def _values(report: Report, batch_size: int, arm: str) -> list[float]:
    batch = next(b for b in report.batch_sizes if b.batch_size == batch_size)
    return next(a for a in batch.arms if a.arm == arm).gpu_ms_per_step.values


def _with_head(report: Report, batch_size: int, values: list[float]) -> Report:
    """`report` with head's per-process step times at `batch_size` replaced (not decided again:
    the picture draws what the numbers are)."""
    batches = []
    for batch in report.batch_sizes:
        if batch.batch_size == batch_size:
            arms = [a.model_copy(update={"gpu_ms_per_step": spread(values)}) if a.arm == report.head else a
                    for a in batch.arms]
            batch = batch.model_copy(update={"arms": arms})
        batches.append(batch)
    return report.model_copy(update={"batch_sizes": batches})


class _Blocks(HTMLParser):
    """The code blocks of rendered HTML, with their language, and whether a <details> holds them."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[tuple[str, str, bool]] = []
        self._open: list[str] = []
        self._code: tuple[str, list[str]] | None = None
        self._language = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._open.append(tag)
        if tag == "pre":  # GitHub's own option puts the language on <pre lang=...>
            self._language = dict(attrs).get("lang") or ""
        if tag == "code" and "pre" in self._open:
            language = self._language or (dict(attrs).get("class") or "").removeprefix("language-")
            self._code = (language, [])

    def handle_endtag(self, tag: str) -> None:
        if tag == "code" and self._code is not None:
            language, text = self._code
            self.blocks.append((language, "".join(text), "details" in self._open))
            self._code = None
        if tag in self._open:
            del self._open[len(self._open) - 1 - self._open[::-1].index(tag):]

    def handle_data(self, data: str) -> None:
        if self._code is not None:
            self._code[1].append(data)


def _mermaid_blocks(markdown: str) -> list[tuple[str, bool]]:
    """Mermaid code blocks as GitHub's parser finds them (GitHub draws each as a chart)."""
    html = cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)
    parser = _Blocks()
    parser.feed(html)
    return [(text, in_details) for language, text, in_details in parser.blocks if language == "mermaid"]


def _parse_xychart(text: str) -> dict[str, object]:
    """The parts of an xychart-beta block the picture uses, read as Mermaid's grammar has them."""
    lines = text.strip().splitlines()
    assert lines[0] == "xychart-beta"
    found: dict[str, object] = {}
    for line in lines[1:]:
        keyword, _, rest = line.strip().partition(" ")
        if keyword == "title":
            found["title"] = json.loads(rest)
        elif keyword == "x-axis":
            found["labels"] = json.loads(rest)
        elif keyword == "y-axis":
            match = re.fullmatch(r'"([^"]*)" ([0-9.]+) --> ([0-9.]+)', rest)
            assert match, rest
            found["axis"] = (match[1], float(match[2]), float(match[3]))
        elif keyword == "bar":
            numbers = re.fullmatch(r"\[([0-9., ]+)\]", rest)
            assert numbers, rest
            found["bars"] = numbers[1].split(", ")
        else:
            raise AssertionError(f"unexpected line {line!r}")
    return found


# --- Mermaid in the comment ----------------------------------------------------------------


def _gm_change(after: list[float], before: list[float]) -> float:
    """A change as the report states it: a ratio of geometric means, in percent."""
    return (statistics.geometric_mean(after) / statistics.geometric_mean(before) - 1) * 100


def test_the_comment_holds_one_mermaid_chart_per_batch_size_in_a_fold() -> None:
    report = _rich()
    blocks = _mermaid_blocks(render_comment(report))
    assert len(blocks) == len(report.batch_sizes) == 2
    for (text, in_details), batch in zip(blocks, report.batch_sizes):
        assert in_details  # the picture sits in a fold, below the table
        chart = _parse_xychart(text)
        base, head, ablated = (_values(report, batch.batch_size, arm)
                               for arm in (report.base, report.head, "head-unpadded"))
        # each arm's change against base is written on it, as the table and the ablation fold state it
        changes = f"head {_gm_change(head, base):+.2f}%, ablation {_gm_change(ablated, base):+.2f}%"
        assert chart["title"] == (f"Batch size {batch.batch_size}: GPU ms per step of each process; {changes} "
                                  "against base")
        assert chart["labels"] == ([f"base {i}" for i in range(1, 6)] + [f"head {i}" for i in range(1, 6)]
                                   + [f"ablation {i}" for i in range(1, 6)])
        bars = chart["bars"]
        assert isinstance(bars, list) and len(bars) == 15  # the ablation arm is drawn beside base and head
        for shown, value in zip(bars, base + head + ablated):
            digits = len(shown.partition(".")[2])
            assert abs(float(shown) - value) <= 0.5 * 10 ** -digits + 1e-12
        _, low, high = chart["axis"]  # type: ignore[misc]
        assert low < min(base + head + ablated) and max(base + head + ablated) < high
        _assert_round(low, high)


def test_a_report_whose_numbers_cannot_be_drawn_gets_no_chart_for_that_batch_size() -> None:
    report = _rich()
    too_many = [2.2] * (MAX_PROCESSES_PER_ARM + 1)  # more processes than a run of the most rounds holds
    for values in ([math.nan] * 5, [math.inf, 1.0, 1.0, 1.0, 1.0], [-1.0] * 5, [0.0] * 5, too_many):
        broken = _with_head(report, 1, values)
        chart = strip_chart(broken)
        assert chart is not None and [p.batch_size for p in chart.panels] == [2], values
        assert len(_mermaid_blocks(render_comment(broken))) == 1
    nothing = _with_head(_with_head(report, 1, [math.nan] * 5), 2, [math.nan] * 5)
    assert strip_chart(nothing) is None
    comment = render_comment(nothing)
    assert _mermaid_blocks(comment) == [] and "of every process, base beside head" not in comment


def _assert_round(*values: float) -> None:
    """Each value is a whole multiple of 1, 2 or 5 times a power of ten, the same for all."""
    span = max(values) - min(values)
    steps = [m * 10.0 ** e for e in range(-6, 4) for m in (1, 2, 5) if m * 10.0 ** e <= span]
    assert any(all(abs(v / step - round(v / step)) < 1e-6 for v in values) for step in steps), values


def test_cpu_step_times_are_named_as_such() -> None:
    report = _rich()
    on_cpu = report.model_copy(update={"batch_sizes": [
        b.model_copy(update={"arms": [a.model_copy(update={"timer": "perf_counter"}) for a in b.arms]})
        for b in report.batch_sizes
    ]})
    (text, _), _ = _mermaid_blocks(render_comment(on_cpu))
    assert str(_parse_xychart(text)["title"]).startswith("Batch size 1: CPU ms per step of each process; head ")
    assert "GPU" not in strip_svg(strip_chart(on_cpu), "CPU ms per step")  # type: ignore[arg-type]


# --- the SVG -----------------------------------------------------------------------------


def _marks(svg_text: str) -> list[dict[str, str]]:
    root = ET.fromstring(svg_text)
    assert root.tag == f"{SVG}svg"
    return [dict(circle.attrib) for circle in root.iter(f"{SVG}circle") if circle.get("class") == "mark"]


def test_the_svg_has_a_mark_per_process_placed_by_its_value() -> None:
    report = _rich()
    marks = _marks(strip_svg(strip_chart(report), "GPU ms per step"))  # type: ignore[arg-type]
    for batch in report.batch_sizes:
        panel = [m for m in marks if m["data-batch-size"] == str(batch.batch_size)]
        for arm in ("base", "head"):
            own = [m for m in panel if m["data-arm"] == arm]
            values = _values(report, batch.batch_size, arm)
            assert [float(m["data-ms"]) for m in own] == values  # one per process, in the order they ran
            assert [m["data-process"] for m in own] == [str(i) for i in range(1, len(values) + 1)]
            xs = [float(m["cx"]) for m in own]
            assert xs == sorted(xs) and len(set(xs)) == len(xs)
        # a longer step is drawn higher (y grows downwards in SVG); apart by a pixel's worth or more,
        # strictly higher
        values = [float(m["data-ms"]) for m in panel]
        pixel = (max(values) - min(values)) / 200
        for a in panel:
            for b in panel:
                if float(a["data-ms"]) > float(b["data-ms"]):
                    assert float(a["cy"]) <= float(b["cy"]), (a, b)
                if float(a["data-ms"]) > float(b["data-ms"]) + pixel:
                    assert float(a["cy"]) < float(b["cy"]), (a, b)
        base_x = max(float(m["cx"]) for m in panel if m["data-arm"] == "base")
        assert base_x < min(float(m["cx"]) for m in panel if m["data-arm"] == "head")
    # the panels stand side by side
    first = max(float(m["cx"]) for m in marks if m["data-batch-size"] == "1")
    assert first < min(float(m["cx"]) for m in marks if m["data-batch-size"] == "2")


def test_an_outlier_process_stands_out() -> None:
    """Head like base but for one process 0.7% slower (as one of 20 processes was at 30 layers
    on the H200): that mark is far from the rest of its arm, which lie close together. The axis
    also spans the ablation arm, 1.4% above base."""
    report = remeasured(_rich(), 1.0, jitter=0.0002)
    head = list(_values(report, 1, report.head))
    head[2] *= 1.007
    report = _with_head(report, 1, head)
    root = ET.fromstring(strip_svg(strip_chart(report), "GPU ms per step"))  # type: ignore[arg-type]
    panel = next(g for g in root.iter(f"{SVG}g") if g.get("data-batch-size") == "1")
    ys = {int(m.get("data-process")): float(m.get("cy"))  # type: ignore[arg-type]
          for m in panel.iter(f"{SVG}circle") if m.get("data-arm") == "head"}
    others = [y for k, y in ys.items() if k != 3]
    away = abs(ys[3] - statistics.mean(others))
    assert away > 40  # pixels, of a 220-pixel plot
    assert away > 5 * (max(others) - min(others))  # the others jitter by 0.04% of each other


def test_the_svg_axis_is_marked_at_a_round_step_from_its_bottom_to_its_top() -> None:
    report = _rich()
    root = ET.fromstring(strip_svg(strip_chart(report), "GPU ms per step"))  # type: ignore[arg-type]
    for panel in root.iter(f"{SVG}g"):
        labels = [t for t in panel.iter(f"{SVG}text") if t.get("class") == "tick"]
        values = [float(t.text or "") for t in labels]
        assert 3 <= len(values) <= 6, values
        steps = {round(b - a, 9) for a, b in zip(values, values[1:])}
        assert len(steps) == 1  # evenly spaced
        (step,) = steps
        mantissa = step / 10 ** math.floor(math.log10(step))
        assert round(mantissa, 6) in (1.0, 2.0, 5.0), step
        _assert_round(*values)
        # each label written with the digits its step needs, no more
        assert all(len((t.text or "").partition(".")[2]) == max(0, -math.floor(math.log10(step))) for t in labels)
        # the lowest tick at the plot's bottom edge, the highest at its top: the axis ends on round values
        (frame,) = [r for r in panel.iter(f"{SVG}rect")]
        top, height = float(frame.get("y") or 0), float(frame.get("height") or 0)
        ys = [float(t.get("y") or 0) - 4 for t in labels]
        assert ys[0] == pytest.approx(top + height) and ys[-1] == pytest.approx(top)
        # every process lies inside the axis
        cys = [float(c.get("cy") or 0) for c in panel.iter(f"{SVG}circle")]
        assert all(top < cy < top + height for cy in cys)


def test_the_svg_draws_the_ablation_arm_and_writes_each_change_on_it() -> None:
    report = _rich()
    root = ET.fromstring(strip_svg(strip_chart(report), "GPU ms per step"))  # type: ignore[arg-type]
    for batch in report.batch_sizes:
        panel = next(g for g in root.iter(f"{SVG}g") if g.get("data-batch-size") == str(batch.batch_size))
        base, head, ablated = (_values(report, batch.batch_size, arm)
                               for arm in (report.base, report.head, "head-unpadded"))
        marks = [m for m in panel.iter(f"{SVG}circle") if m.get("data-arm") == "ablation"]
        assert [float(m.get("data-ms") or 0) for m in marks] == ablated
        head_x = max(float(m.get("cx") or 0) for m in panel.iter(f"{SVG}circle") if m.get("data-arm") == "head")
        assert head_x < min(float(m.get("cx") or 0) for m in marks)  # its own column, right of head's
        written = {t.get("data-arm"): t.text for t in panel.iter(f"{SVG}text") if t.get("class") == "change"}
        assert written == {"head": f"{_gm_change(head, base):+.2f}%", "ablation": f"{_gm_change(ablated, base):+.2f}%"}
    # no string of the report is drawn: the ablation arm is named by its role
    assert "head-unpadded" not in strip_svg(strip_chart(report), "GPU ms per step")  # type: ignore[arg-type]


def test_the_svg_is_written_beside_the_report_and_goes_with_it(tmp_path: Path) -> None:
    report = _rich()
    write_report(report, tmp_path)
    svg = tmp_path / CHART_FILE
    assert CHART_FILE == "step-times.svg"
    assert len(_marks(svg.read_text())) == sum(  # base's, head's and the ablation arm's processes
        len(a.gpu_ms_per_step.values) for b in report.batch_sizes for a in b.arms)
    unmeasured = report.model_copy(update={"batch_sizes": [b.model_copy(update={"arms": []})
                                                           for b in report.batch_sizes]})
    write_report(unmeasured, tmp_path)
    assert not svg.exists()  # no picture of an earlier run beside this report
    assert (tmp_path / "report.json").exists()



def test_each_committed_picture_is_what_the_guard_draws_from_its_report_today() -> None:
    # the examples' step-times.svg were written by earlier runs: the same report must draw the same bytes
    drawn = 0
    for svg in sorted((REPO_ROOT / "docs" / "examples").glob(f"*/{CHART_FILE}")):
        report = Report.model_validate_json((svg.parent / "report.json").read_text())
        chart = strip_chart(report)
        assert chart is not None, svg
        drawn_now = strip_svg(chart, metric("gpu_ms", report.gpu_timed()))
        assert drawn_now == svg.read_text(), f"{svg} is not what its report draws"
        drawn += 1
    assert drawn >= 3

# --- the job summary and the links ----------------------------------------------------------


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")} | env,
                          cwd=REPO_ROOT)


def test_the_job_summary_shows_the_chart_and_links_the_artifact_of_its_run(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    run_url = "https://github.example/octo/engine/actions/runs/123"
    proc = _cli("summary", "--report", str(RICH), "--run-url", run_url, "--artifact-id", "77",
                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 0, proc.stderr
    markdown = summary.read_text()
    assert len(_mermaid_blocks(markdown)) == 2
    html = cmarkgfm.github_flavored_markdown_to_html(markdown)
    assert f'<a href="{run_url}/artifacts/77">the artifact</a>' in html
    assert f'<a href="{run_url}">the run that measured</a>' in html


@pytest.mark.parametrize(("args", "message"), [
    (["--run-url", "https://github.com/o/n/actions/runs/1)](https://e.vil"], "is not the URL of a workflow run"),
    (["--run-url", "javascript:alert(1)"], "is not the URL of a workflow run"),
    (["--artifact-id", "0"], "expected a whole number of 1 or more"),
    (["--artifact-id", "12a"], "expected a whole number of 1 or more"),
])
def test_bad_links_are_one_message(tmp_path: Path, args: list[str], message: str) -> None:
    summary = tmp_path / "summary.md"
    proc = _cli("summary", "--report", str(RICH), *args, env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if "error" in line]) == 1
    assert not summary.exists()

