"""The comment leads with the answer: a title under 120 characters, at most about 280 words
above the first fold (the answer, one table, the cause and what to do), one table, and the
rest in folds that GitHub's renderer (cmark-gfm) opens and closes; report.json's published JSON
Schema is the model's own; a report of this schema renders again byte for byte."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import cmarkgfm
import jsonschema
import pytest
from cmarkgfm.cmark import Options

from guard.compare import Reason
from guard.report import TITLE_LIMIT, Report, build_view, read_report, render_comment
from guard.report._view import EVERY_ARM
from guard.report._migrate import current_shape
from guard.report._json_schema import SCHEMA_FILE, report_json_schema
from guard.report.fold import above_the_fold, words
from tests.report_fixtures import committed, current_file, explained, remeasured, with_mix

REPO_ROOT = Path(__file__).resolve().parents[1]
CPU_DEMO = REPO_ROOT / "docs" / "examples" / "cpu-demo"
H200_DEMO = REPO_ROOT / "docs" / "examples" / "h200-demo-545b03b"  # a fresh run of this schema on the H200
# the fallback scenarios on the H200, the mix decided beside the fixed sizes (schema 6)
H200_FALLBACK = REPO_ROOT / "docs" / "examples" / "h200-fallback-821e099"
H200_FALLBACK_WIN = REPO_ROOT / "docs" / "examples" / "h200-fallback-win-821e099"
H200_FALLBACK_BF16 = REPO_ROOT / "docs" / "examples" / "h200-fallback-bf16-821e099"
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")
OUTPUT_CHANGED = current_file(REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-output-change"
                              / "report.json")
FELL_OUT = current_file(REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-mode-default"
                        / "report.json")
# 250 until the comment said what to do: its line and its command take 10-20 words
WORDS_ABOVE_THE_FOLD = 280


def _failed_arm() -> Report:
    report = committed(RICH)
    arms = [a.model_copy(update={"status": "run_failed", "error": "exit 1", "log_tail": "Traceback\nError: boom"})
            if a.name == report.head else a for a in report.arms]
    reasons = [Reason(kind="arm_failed", arm=report.head, repeats_done=2, error="exit 1")]
    return explained(report.model_copy(update={"arms": arms, "verdict": "invalid", "reasons": reasons}))


def _reports() -> dict[str, Report]:
    """Every verdict, from H200 figures, and the CPU demo."""
    rich = committed(RICH)
    return {
        "pass": remeasured(rich, 1.0),
        "regression": remeasured(rich, 1.05),
        "improvement": remeasured(rich, 0.95),
        "at_threshold": remeasured(rich, 1.01, looks=2),
        "inconclusive": remeasured(rich, 1.0, 0.05),
        "invalid: output changed": committed(OUTPUT_CHANGED),
        "invalid: an arm failed": _failed_arm(),
        "regression, as committed (an ablation arm, 2 batch sizes)": rich,
        "regression out of CUDA graphs": committed(FELL_OUT),
        "CPU demo": read_report(CPU_DEMO / "report.json"),
        "H200 demo, fresh": read_report(H200_DEMO / "report.json"),
        "H200 removed fallback: regression, padding named": read_report(H200_FALLBACK / "report.json"),
        "H200 removed fallback where traffic is captured: improvement": read_report(H200_FALLBACK_WIN / "report.json"),
        "H200 removed fallback in bf16: improvement": read_report(H200_FALLBACK_BF16 / "report.json"),
        "regression over a batch-size mix whose padding is the cause": _with_mix(rich),
    }


def _with_mix(report: Report) -> Report:
    """The captured sizes as fast as before, the mix slower: the note's case."""
    from tests.test_explain_mix import FALLBACK, NO_FALLBACK, _arm, _mix

    return with_mix(remeasured(report, 1.0), _mix(_arm(report.base, FALLBACK), _arm(report.head, NO_FALLBACK)))


REPORTS = _reports()




@pytest.mark.parametrize("name", REPORTS)
def test_the_answer_comes_first_in_few_words(name: str) -> None:
    report = REPORTS[name]
    if name.split(":")[0].split(",")[0].split(" ")[0] in ("pass", "regression", "improvement", "at_threshold",
                                                              "inconclusive", "invalid"):
        assert report.verdict == name.split(":")[0].split(",")[0].split(" ")[0]
    view = build_view(report)
    assert 0 < len(view.title) < TITLE_LIMIT, view.title
    comment = render_comment(report)
    assert comment.splitlines()[1] == f"**{view.title_md}**"
    above = above_the_fold(comment)
    assert words(above) <= WORDS_ABOVE_THE_FOLD, (name, words(above), above)
    assert above.count("\n|---") <= 1  # one small table, or none for an invalid run
    # the detail is folded: profiler, per-process figures, environment, method
    summaries = [f.summary for f in view.folds]
    assert {"Environment", "Method", EVERY_ARM} <= set(summaries) or \
        report.verdict == "invalid"
    assert "Welch" not in above and "Python" not in above and "Profiler:" not in above


def test_a_cpu_run_names_no_gpu_time() -> None:
    comment = render_comment(REPORTS["CPU demo"])
    assert "CPU ms per step" in comment
    assert not re.search(r"GPU (ms|time)", comment)


def test_the_title_says_what_got_slower_by_how_much_and_the_cause() -> None:
    rich = REPORTS["regression, as committed (an ablation arm, 2 batch sizes)"]
    h = rich.explanation.headline
    assert h.verdict == "regression" and h.change is not None and h.capture is not None
    title = build_view(rich).title
    assert title.startswith(f"Decode {abs(h.change.pct):.1f}% slower at batch size {h.batch_size} with ")
    out = REPORTS["regression out of CUDA graphs"]
    fell = build_view(out).title
    assert fell.endswith("; decode fell out of CUDA graphs at batch size 1")
    # GPU ms decided it (+18.8%), but tok/s fell far more, its whole interval past 1%: the title leads with it
    (batch,) = out.batch_sizes
    tok = batch.tok_per_s_bounds
    assert batch.decided_by == "gpu_ms" and tok is not None and tok.ci_high_pct < -out.rule.pct("tok_per_s")
    assert fell.startswith(f"Decode {1 / (1 + tok.pct / 100):.1f}x slower at batch size 1 with ")


class _Page(HTMLParser):
    """Where each fold starts and ends, and what the top level shows."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.tags, self.top_tables, self.summaries = 0, [], 0, []
        self._in_summary = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "details":
            self.depth += 1
        if tag == "table" and self.depth == 0:
            self.top_tables += 1
        if tag == "summary":
            self._in_summary = True
            self.summaries.append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "details":
            self.depth -= 1
        if tag == "summary":
            self._in_summary = False

    def handle_data(self, data: str) -> None:
        if self._in_summary:
            self.summaries[-1] += data


@pytest.mark.parametrize("name", REPORTS)
def test_github_renders_the_folds_closed_and_balanced(name: str) -> None:
    report = REPORTS[name]
    html = cmarkgfm.github_flavored_markdown_to_html(render_comment(report), options=Options.CMARK_OPT_UNSAFE)
    page = _Page()
    page.feed(html)
    assert page.depth == 0  # every fold closes
    view = build_view(report)
    assert page.summaries == [re.sub(r"&#(\d+);", lambda m: chr(int(m[1])), f.summary) for f in view.folds]
    assert page.top_tables == (0 if report.verdict == "invalid" else 1)
    assert page.tags[0] == "p" and "strong" in page.tags[:3]  # the title, in bold, first


@pytest.mark.parametrize("example", [CPU_DEMO, H200_DEMO, H200_FALLBACK, H200_FALLBACK_WIN, H200_FALLBACK_BF16],
                         ids=["cpu", "h200", "h200-fallback", "h200-fallback-win", "h200-fallback-bf16"])
def test_a_current_report_renders_again_byte_for_byte(example: Path) -> None:
    report = read_report(example / "report.json")
    assert (example / "comment.md").read_text(encoding="utf-8") == render_comment(report)
    # every key as it was written, and the rule its schema kept flat as one record (report/_migrate.py)
    written = current_shape(json.loads((example / "report.json").read_text(encoding="utf-8")))
    assert json.loads(report.model_dump_json()) == written | {"rule": report.rule.model_dump(mode="json")}


def test_the_published_json_schema_is_the_models_own() -> None:
    committed_schema = (REPO_ROOT / SCHEMA_FILE).read_text(encoding="utf-8")
    assert committed_schema == report_json_schema(), "run `make schema` and commit docs/report.schema.json"
    schema = json.loads(committed_schema)
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for name, report in REPORTS.items():
        errors = list(validator.iter_errors(json.loads(report.model_dump_json())))
        assert errors == [], (name, errors[:1])
    forged = json.loads(REPORTS["pass"].model_dump_json()) | {"schema_version": 2}
    assert not validator.is_valid(forged)
    no_facts = {k: v for k, v in json.loads(REPORTS["pass"].model_dump_json()).items() if k != "explanation"}
    assert not validator.is_valid(no_facts)


def test_the_words_above_the_fold_are_counted_by_a_command_and_the_docs_state_its_figure() -> None:
    """`python -m guard.report.fold` counts what a reader meets first: the marker, the table's
    pipes and dashes and everything from the first fold on are not words. The figure that
    docs/reading-the-comment.md gives for the CPU demo is the command's output on the committed
    comment, which is the comment its report renders."""
    sample = "<!-- marker -->\n**Title here**\n\n| a | b |\n|---|---|\n| 1.5% | x |\n<details>\nhidden words\n"
    assert words(above_the_fold(sample)) == 6  # Title, here, a, b, 1.5%, x
    comment = CPU_DEMO / "comment.md"
    assert comment.read_text() == render_comment(read_report(CPU_DEMO / "report.json"))
    proc = subprocess.run([sys.executable, "-m", "guard.report.fold", str(comment)], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    count = int(proc.stdout)
    assert count == words(above_the_fold(comment.read_text())) <= WORDS_ABOVE_THE_FOLD
    page = (REPO_ROOT / "docs" / "reading-the-comment.md").read_text()
    stated = re.search(r"its top, (\d+) words above the first fold", page)
    assert stated is not None and int(stated[1]) == count
    missing = subprocess.run([sys.executable, "-m", "guard.report.fold", str(CPU_DEMO / "nothing.md")],
                             capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr
