"""The comment's figures: the table shows the geometric means each change is a ratio of, with
enough digits to read the change from them; every interval a reader meets is at the level the
verdict was decided at, said once; the metrics have plain names, and each row says whether it
decides. On committed H200 reports and reports made from them."""

from __future__ import annotations

import re
import statistics
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from guard.compare import decide_again
from guard.measure import Spread, spread
from guard.report import Report, read_report, render_comment
from guard.report.fold import above_the_fold
from tests.report_fixtures import committed, current_file, explained
from tests.test_comment_shape import REPORTS

REPO_ROOT = Path(__file__).resolve().parents[1]
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")
# a regression decided over a batch-size mix, the host timed, slow processes set aside in neither
FALLBACK = REPO_ROOT / "docs" / "examples" / "h200-fallback-821e099" / "report.json"


def _row(comment: str, metric: str, batch_size: int | None = None) -> list[str]:
    """The table's row of `metric` (at `batch_size`, where the table has a column of them)."""
    table = [line for line in above_the_fold(comment).splitlines() if line.startswith("| ")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table[1:]]
    found = [r for r in rows if r[0] == metric and (batch_size is None or r[1] == str(batch_size))]
    assert len(found) == 1, (metric, batch_size, table)
    return found[0]


def _skewed(report: Report) -> Report:
    """Head's GPU ms per step at batch size 1 as base's, two of five processes twice as long:
    the medians' ratio is 1, the geometric means' 2^(2/5); decided again."""
    batch = report.batch_sizes[0]
    base = next(a for a in batch.arms if a.arm == report.base).gpu_ms_per_step.values
    head = [v * (2 if i in (1, 3) else 1) for i, v in enumerate(base)]
    arms = [a.model_copy(update={"gpu_ms_per_step": spread(head)}) if a.arm == report.head else a
            for a in batch.arms]
    rule = report.rule.model_copy(update={"decided_sizes": len(report.batch_sizes)})
    again = decide_again(batch.model_copy(update={"arms": arms}), report.base, report.head, rule)
    assert again.set_aside == []  # too many to be slow processes: all of them decide
    return explained(report.model_copy(update={"batch_sizes": [again, *report.batch_sizes[1:]]}))


def test_the_table_shows_the_geometric_means_the_change_is_a_ratio_of() -> None:
    report = _skewed(committed(RICH))
    batch = report.batch_sizes[0]
    base, head = (next(a for a in batch.arms if a.arm == arm).gpu_ms_per_step.values
                  for arm in (report.base, report.head))
    assert statistics.median(head) == pytest.approx(statistics.median(base), rel=0.02)  # the medians barely move
    comment = render_comment(report)
    row = _row(comment, "GPU ms per step", 1)
    shown = [float(row[2]), float(row[3])]
    assert shown == [round(statistics.geometric_mean(base), 3), round(statistics.geometric_mean(head), 3)]
    change = float(row[4].split("%")[0])
    assert change == pytest.approx((shown[1] / shown[0] - 1) * 100, abs=0.1)  # read from the two figures
    assert change == pytest.approx((2 ** 0.4 - 1) * 100, abs=0.01)
    assert "| geometric means | batch size |" in comment


def test_a_fast_step_shows_the_digits_its_change_needs() -> None:
    """Steps of about 0.09 ms: three decimals would write 0.094 -> 0.098 beside +3.60%; four
    significant digits give the change to within a hundredth of a percent."""
    report = committed(RICH)
    scaled = []
    for batch in report.batch_sizes:
        arms = [a.model_copy(update={"gpu_ms_per_step": spread([v * 0.058 for v in a.gpu_ms_per_step.values])})
                for a in batch.arms]
        scaled.append(batch.model_copy(update={"arms": arms}))  # a ratio of times: every change the same
    comment = render_comment(report.model_copy(update={"batch_sizes": scaled}))
    for batch in report.batch_sizes:
        row = _row(comment, "GPU ms per step", batch.batch_size)
        before, after = float(row[2]), float(row[3])
        assert before < 0.2 and all(len(cell.replace(".", "").lstrip("0")) == 4 for cell in row[2:4])  # 0.09412
        # each figure within half its last digit: their ratio within the sum of those shares
        room = sum(0.5 * 10 ** -len(cell.partition(".")[2]) / value for cell, value in zip(row[2:4], (before, after)))
        assert room < 1e-3
        change = float(row[4].split("%")[0])
        assert (after / before - 1) * 100 == pytest.approx(change, abs=room * 100 * after / before + 0.005)


def _welch(before: list[float], after: list[float], level: float) -> tuple[float, float]:
    """Welch's interval of after / before - 1 on log values, in percent, made here with scipy.stats."""
    a, b = np.log(after), np.log(before)
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = stats.t.ppf(0.5 + level / 2, df) * np.sqrt(va + vb)
    return float(np.expm1(a.mean() - b.mean() - half) * 100), float(np.expm1(a.mean() - b.mean() + half) * 100)


def test_the_host_time_is_shown_at_the_verdicts_level_not_the_95_percent_it_is_kept_at() -> None:
    report = read_report(FALLBACK)
    comment = render_comment(report)
    for batch in report.batch_sizes:
        assert batch.host_ms_change is not None and batch.host_ms_change.confidence == 0.95
        host = [next(a for a in batch.arms if a.arm == arm).host_ms_per_step for arm in (report.base, report.head)]
        assert all(isinstance(h, Spread) for h in host)
        low, high = _welch(host[0].values, host[1].values, 1 - 2 * batch.alpha_per_look)  # type: ignore[union-attr]
        assert f"({low:+.2f}% to {high:+.2f}%) at batch size {batch.batch_size}" in comment
        assert batch.host_ms_change.interval() not in comment


@pytest.mark.parametrize("name", REPORTS)
def test_one_interval_level_is_said_once_and_no_other(name: str) -> None:
    """Every interval in the comment is the verdict's (99.x%); the table's note says that level
    once, and no fold names another: a 95% figure is a power ('95% of the time'), never a level."""
    report = REPORTS[name]
    comment = render_comment(report)
    levels = sorted({round(1 - 2 * b.alpha_per_look, 6) for b in report.decided() if b.alpha_per_look is not None})
    said = re.findall(r"Intervals are ([\d.]+%(?: to [\d.]+%)?), the verdict's level", comment)
    if report.verdict == "invalid":
        assert said == []
        return
    assert len(said) == 1 and all(0.99 <= level < 1 for level in levels)
    assert said[0].split(" to ")[0] == f"{levels[-1] * 100:.4g}%"
    # no other level: '95% interval', '(99.75% interval)' or 'at 95%' as the folds had them
    assert re.findall(r"\d% interval", comment) == [] and "at 95%" not in comment


@pytest.mark.parametrize("name", REPORTS)
def test_metrics_have_plain_names_and_each_row_says_whether_it_decides(name: str) -> None:
    report = REPORTS[name]
    comment = render_comment(report)
    assert "(informs)" not in comment and "informs" not in above_the_fold(comment)
    if report.verdict == "invalid":
        return
    table = [line for line in above_the_fold(comment).splitlines() if line.startswith("| ")]
    assert table[0].endswith("| change (interval) | decides |")
    many = len(report.decided()) > 1
    for line in table[2:]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert "tok/s" not in cells[0]
        size = cells[1] if many else None
        batch = next(b for b in report.decided() if size is None or size == ("mix" if b.mix else str(b.batch_size)))
        decides = {"GPU ms per step": "yes", "CPU ms per step": "yes", "host instructions per step": "no",
                   "tokens per second": "yes" if batch.tok_per_s_gates else f"if past {report.rule.tok_per_s.pct:g}%",
                   }.get(cells[0], "yes" if batch.end_to_end_gates else "if past")
        assert cells[-1].startswith(decides), (cells, decides)


def test_a_bound_past_what_a_percent_can_say_is_written_as_over_it() -> None:
    """At 2 processes per arm a bound can run to the arithmetic's cap (e^700): the comment says
    'over +100,000%' (and what a run could see 'over 1,000x'), never a figure of 300 digits."""
    from guard.measure._stats import pct_of_log
    from guard.report import _words as words
    from guard.report._lead import _caught

    capped = pct_of_log(1e9)
    assert words.pct(capped) == "over +100,000%" and words.pct(-capped) == "over -100,000%"
    assert _caught(capped) == "over 1,000x"
    assert words.pct(99_999.0) == "+99999.00%" and _caught(150.0) == "2.5x"
