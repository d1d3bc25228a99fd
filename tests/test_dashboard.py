"""The dashboard's pages as HTML: what each shows, the regressions-only filter, escaping of
every string from git, GitHub and reports, and links that only the service's data makes."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser

import pytest
from pydantic import ValidationError

from guard.dashboard import PullRuns, RepoHistory, SeriesHistory, TraceLink, history_svg, pull_page, repo_page
from tests.dashboard_pages import (
    HOSTILE_SUBJECT, HOSTILE_TITLE, HOSTILE_WORKLOAD, REPO, STEP_AT, pull_runs, repo_history, sha,
)

SVG = "{http://www.w3.org/2000/svg}"


class _Elements(HTMLParser):
    """Every start tag and its attributes, and the text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):  # type: ignore[no-untyped-def]
        self.text.append(data)


def _parse(html: str) -> _Elements:
    parser = _Elements()
    parser.feed(html)
    return parser


def test_hostile_strings_are_text_never_markup():
    for html in (repo_page(repo_history()), pull_page(pull_runs())):
        page = _parse(html)
        tags = [t for t, _ in page.tags]
        assert "script" not in tags and "img" not in tags and "b" not in tags
        assert not any(k.startswith("on") for _, attrs in page.tags for k in attrs)
        text = "".join(page.text)
        assert HOSTILE_TITLE in text or HOSTILE_WORKLOAD in text  # shown, as the words they are
    assert HOSTILE_SUBJECT in "".join(_parse(pull_page(pull_runs())).text)


def test_the_repository_page_charts_each_series_with_its_change_points():
    history = repo_history()
    html = repo_page(history)
    charts = re.findall(r"<svg[^>]*class=\"history\".*?</svg>", html, re.S)
    assert len(charts) == len(history.series) == 3
    by_series = {ET.fromstring(c).get("data-series"): ET.fromstring(c) for c in charts}
    for series in history.series:
        svg = by_series[series.series.id]
        dots = svg.findall(f".//{SVG}circle")
        assert [d.get("data-sha") for d in dots] == [p.sha for p in series.points]
        links = [a.get("href") for a in svg.findall(f".//{SVG}a")]
        assert links == [f"https://github.com/{REPO}/commit/{p.sha}" for p in series.points]
        marks = svg.findall(f".//{SVG}g[@data-state]")
        assert [(g.get("data-state"), g.get("data-after-sha")) for g in marks] == [
            (c.state, c.after_sha) for c in series.change_points]
    slowed = by_series[history.series[0].series.id]
    (mark,) = slowed.findall(f".//{SVG}g[@data-state]")
    assert mark.get("data-state") == "confirmed" and mark.get("data-after-sha") == sha(STEP_AT)
    # the line stands between the last dot before the step and the first after it
    line_x = float(mark.find(f"{SVG}line").get("x1"))
    xs = [float(d.get("cx")) for d in slowed.findall(f".//{SVG}circle")]
    assert xs[STEP_AT - 1] < line_x < xs[STEP_AT]
    levels = [float(line.get("y1")) for line in slowed.findall(f"{SVG}line[@class='level']")]
    assert len(levels) == 2 and levels[1] < levels[0]  # slower after: higher on the chart


def test_regressions_only_keeps_slowdowns_and_regressed_pulls():
    history = repo_history()
    full, only = repo_page(history), repo_page(history, regressions_only=True)
    assert full.count('class="series"') == 3 and only.count('class="series"') == 1
    assert "batch size 1" in only and "batch size 2 ·" not in only  # the speed-up is no regression
    assert "#42" in only and "#43" not in only and "#43" in full
    pull = pull_runs()
    assert re.findall(r'data-run="(\w+)"', pull_page(pull)) == ["7", "6"]
    assert re.findall(r'data-run="(\w+)"', pull_page(pull, regressions_only=True)) == ["7"]
    assert "1 run(s) without a regression hidden" in pull_page(pull, regressions_only=True)


def test_the_pull_request_page_shows_verdicts_strip_plots_and_traces():
    pull = pull_runs()
    html = pull_page(pull)
    report = pull.runs[0].report
    strips = re.findall(r"<svg[^>]*>.*?</svg>", html, re.S)
    assert len(strips) == 2  # one per run with processes to draw
    marks = ET.fromstring(strips[0]).findall(f".//{SVG}circle[@class='mark']")
    drawn = sorted((int(m.get("data-batch-size")), m.get("data-arm"), float(m.get("data-ms"))) for m in marks)
    ablated = [a.name for a in report.arms if a.source is not None]
    assert len(ablated) == 1  # drawn beside base and head, named by its role
    roles = {report.base: "base", report.head: "head", ablated[0]: "ablation"}
    expected = sorted((b.batch_size, roles[a.arm], v) for b in report.batch_sizes for a in b.arms
                      for v in a.gpu_ms_per_step.values)
    assert drawn == expected
    first = html.split('data-run="6"')[0]
    for batch in report.batch_sizes:
        assert f"{batch.gpu_ms_change.pct:+.1f}%" in first
    figures = report.traces[0].arms[0].figures
    assert f"{figures.kernels_per_step:.1f}" in first and f"{figures.busy_ms_per_step:.3f}" in first
    hrefs = [attrs["href"] for tag, attrs in _parse(first).tags if tag == "a" and "trace" in (attrs.get("class") or "")]
    assert hrefs == [link.url for link in pull.runs[0].trace_links]
    assert 'href="/api/v1/runs/7"' in first


@pytest.mark.parametrize("url", ["javascript:alert(1)", "//evil.example/x", "data:text/html,x", " /x"])
def test_only_service_paths_and_http_links_are_taken(url):
    with pytest.raises(ValidationError, match="not a link the dashboard shows"):
        TraceLink(arm="base", batch_size=1, repeat=0, url=url)


def test_repository_names_are_owner_slash_name():
    pull = pull_runs().model_dump()
    with pytest.raises(ValidationError, match="not OWNER/NAME"):
        PullRuns.model_validate(pull | {"repo": "acme/engine/../x"})
    with pytest.raises(ValidationError, match="not OWNER/NAME"):
        RepoHistory(repo="<b>x</b>", series=[])


def test_an_empty_series_and_an_empty_repository_render():
    history = repo_history()
    empty = SeriesHistory(series=history.series[0].series, points=[])
    assert "no points yet" in history_svg(empty, "https://github.com", "GPU ms per step")
    assert "No series." in repo_page(RepoHistory(repo=REPO, series=[]))
