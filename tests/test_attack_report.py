"""Reports as an attacker would write them, fed to `guard comment` and `guard summary` as real
subprocesses against the GitHub stand-in on loopback.

A report whose stated verdicts its own numbers do not give is refused: exit 2, one message,
no request to GitHub, no output, summary or annotation. A report whose strings carry links,
images, HTML, headings, code-block breakouts, mentions, table breaks or workflow commands is
posted with all of them as text: the comment and the summary are rendered with cmark-gfm,
GitHub's own Markdown parser, and the HTML must hold no tag, link or heading that came from
them; every annotation stays one line."""

from __future__ import annotations

import math
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import cmarkgfm
import pytest
from cmarkgfm.cmark import Options

from guard._markdown import block, code, text
from guard.cli import main
from guard.report import Report, UnfoundedReport, build_view, read_report, render_comment
from tests.github_standin import GitHubStandIn
from tests.report_fixtures import committed, current_file, explained, remeasured, ruled

REPO_ROOT = Path(__file__).resolve().parents[1]
# The richest committed H200 report: per-metric verdicts, an ablation arm, traces, a capture change.
RICH = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo-b31932f" / "report.json")
# A forced pair whose head computes another function: invalid, by its disagreement counts.
OUTPUT_CHANGED = current_file(REPO_ROOT / "docs" / "validation" / "h200-engines" / "pairs" / "compiled-output-change"
                              / "report.json")
REPO, PR, TOKEN = "octo/engine", 7, "user-token"
SERVER = "https://github.example"


@pytest.fixture
def api():
    with GitHubStandIn({TOKEN: "guard-bot"}) as server:
        yield server


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=120,
                          env=os.environ | env, cwd=REPO_ROOT)


def _cli_here(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str,
              env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`guard ARGS` as `_cli` runs it, in this process (guard.cli.main): its exit code and what it printed."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(REPO_ROOT)
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["guard", *args], code, out, err)


def _env(api: GitHubStandIn, tmp_path: Path) -> dict[str, str]:
    return {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": api.url, "GITHUB_SERVER_URL": SERVER,
            "GITHUB_REPOSITORY": REPO, "GITHUB_OUTPUT": str(tmp_path / "outputs.txt"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def _write(tmp_path: Path, data: dict[str, Any] | Report, name: str = "report.json") -> Path:
    path = tmp_path / name
    path.write_text(data.model_dump_json() if isinstance(data, Report) else json.dumps(data))
    return path


def _json(report: Report) -> dict[str, Any]:
    return json.loads(report.model_dump_json())


# --- forged verdicts ---------------------------------------------------------------------


def _far_slower() -> dict[str, Any]:
    """The rich report, with head 9.05 times slower than base: +805%, a regression."""
    report = remeasured(committed(RICH), 9.05)
    assert report.verdict == "regression"
    assert all(round(b.gpu_ms_change.pct) == 805 for b in report.batch_sizes if b.gpu_ms_change)
    return _json(report)


def _pass_over_regression() -> dict[str, Any]:
    data = _far_slower()
    data["verdict"] = "pass"
    return data


def _every_verdict_pass() -> dict[str, Any]:
    data = _far_slower()
    data["verdict"] = "pass"
    for batch in data["batch_sizes"]:
        batch.update(verdict="pass", gpu_ms_verdict="pass", tok_per_s_verdict="pass", reasons=[])
    return data


def _one_metric_pass() -> dict[str, Any]:
    data = _json(committed(RICH))
    data["batch_sizes"][0]["gpu_ms_verdict"] = "pass"  # the batch size still says regression
    return data


def _changes_to_fit_a_pass() -> dict[str, Any]:
    """The regression's numbers with every stated change and verdict made to read as a pass."""
    data = _every_verdict_pass()
    for batch in data["batch_sizes"]:
        for field in ("gpu_ms_change", "tok_per_s_change"):
            batch[field].update(pct=0.05, ci_low_pct=-0.2, ci_high_pct=0.3, p_value=0.6)
    return data


def _values_that_do_not_fit() -> dict[str, Any]:
    """An honest regression's stated changes, over head values made base's own: no change at all."""
    data = _json(committed(RICH))
    for batch in data["batch_sizes"]:
        base = next(a for a in batch["arms"] if a["arm"] == data["base"])
        head = next(a for a in batch["arms"] if a["arm"] == data["head"])
        head["gpu_ms_per_step"], head["tok_per_s"] = base["gpu_ms_per_step"], base["tok_per_s"]
    return data


def _median_not_of_its_values() -> dict[str, Any]:
    data = _json(committed(RICH))
    data["batch_sizes"][0]["arms"][1]["gpu_ms_per_step"]["median"] = 1.0
    return data


def _changed_output_hidden() -> dict[str, Any]:
    """A head whose forced outputs changed, its flags and verdicts cleared and timings made up."""
    data = _json(committed(OUTPUT_CHANGED))
    assert data["verdict"] == "invalid"
    batch = data["batch_sizes"][0]
    for arm in batch["agreement"]["arms"]:
        arm.update(output_changed=False, numerics_changed=False)
    honest = remeasured(committed(RICH), 1.0).batch_sizes[0]
    batch.update(verdict="pass", gpu_ms_verdict="pass", tok_per_s_verdict="pass",
                 gpu_ms_change=_json_of(honest.gpu_ms_change), tok_per_s_change=_json_of(honest.tok_per_s_change))
    data["verdict"] = "pass"
    return data


def _json_of(model: Any) -> Any:
    return json.loads(model.model_dump_json())


def _own_tok_threshold_said_to_be_gpu_ms() -> dict[str, Any]:
    """A tok/s threshold of its own, said to be GPU ms's, which the comment would word as held to it."""
    data = _json(remeasured(ruled(committed(RICH), tok_per_s=5.0), 1.0))
    said = {"gpu_ms": "calibrated", "tok_per_s": "gpu_ms_fallback", "end_to_end_ms": "calibrated",
            "instructions": "configured"}
    for metric, source in said.items():
        if data["rule"].get(metric) is not None:
            data["rule"][metric]["source"] = source
    return data


def _at_threshold() -> dict[str, Any]:
    """The rich report, head 1% slower with base's own spread: at the 1% threshold, by the
    interval rule, in the first of 2 rounds."""
    report = remeasured(committed(RICH), 1.01, looks=2)
    assert report.verdict == "at_threshold" and report.rule.looks == 2
    assert [b.decided_by for b in report.batch_sizes] == ["gpu_ms", "gpu_ms"]
    return _json(report)


def _at_threshold_as_pass() -> dict[str, Any]:
    data = _at_threshold()
    data["verdict"] = "pass"
    for batch in data["batch_sizes"]:
        batch.update(verdict="pass", gpu_ms_verdict="pass", tok_per_s_verdict="pass", decided_by=None,
                     at_threshold=[], undecided=False)
    return data


def _another_metric_decided() -> dict[str, Any]:
    data = _at_threshold()
    data["batch_sizes"][0]["decided_by"] = "tok_per_s"
    return data


def _alpha_not_split() -> dict[str, Any]:
    data = _at_threshold()
    for batch in data["batch_sizes"]:
        batch["alpha_per_look"] = data["rule"]["alpha"] / 2  # as if one look at one batch size
    return data


def _a_look_past_the_last() -> dict[str, Any]:
    data = _at_threshold()
    data["batch_sizes"][1]["look"] = 3
    return data


def _a_cause_not_of_its_figures() -> dict[str, Any]:
    """The facts the comment states, changed: a cause its trace diff does not give."""
    data = _json(committed(RICH))
    data["explanation"]["causes"][0]["kind"] = "slower_kernels"
    return data


FORGERIES = {
    "at threshold stated as a pass": (_at_threshold_as_pass,
                                      "batch size 1: verdict pass, but its numbers give at_threshold"),
    "another metric named as deciding": (_another_metric_decided,
                                         "batch size 1: decided_by tok_per_s, but its numbers give gpu_ms"),
    "alpha not split over the looks": (_alpha_not_split, "batch size 1: alpha_per_look 0.005, but its numbers give"),
    "a look past the last": (_a_look_past_the_last, "batch size 2: look is 3, where 1 to 2"),
    "a cause not of its figures": (_a_cause_not_of_its_figures,
                                   "explanation.causes as stated, but its numbers give other facts"),
    "pass over +805%": (_pass_over_regression, "verdict pass, but its numbers give regression"),
    "every verdict pass over +805%": (_every_verdict_pass,
                                      "batch size 1: verdict pass, but its numbers give regression"),
    "one metric's verdict": (_one_metric_pass, "batch size 1: gpu_ms_verdict pass, but its numbers give regression"),
    "changes rewritten to fit a pass": (_changes_to_fit_a_pass, "verdict pass, but its numbers give regression"),
    "values that do not give the changes": (_values_that_do_not_fit,
                                            "batch size 1: verdict regression, but its numbers give pass"),
    "a median not of its values": (_median_not_of_its_values, "gpu_ms_per_step.median 1.0, but its numbers give"),
    "a changed output hidden": (_changed_output_hidden, "verdict pass, but its numbers give invalid"),
    "a tok/s threshold said to be GPU ms's": (_own_tok_threshold_said_to_be_gpu_ms,
                                              "rule.tok_per_s.source is gpu_ms_fallback, where configured or "
                                              "calibrated (rule 5 holds no metric to GPU ms's threshold) is due"),
}


# In this process: what is checked is the guard's reading of the report and its one line, which
# main() gives as the program does (the program's own exit code and streams: the tests above).
@pytest.mark.parametrize("name", FORGERIES)
def test_a_forged_report_posts_nothing_and_exits_2(api: GitHubStandIn, tmp_path: Path, name: str,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    forge, expected = FORGERIES[name]
    path = _write(tmp_path, forge())
    env = _env(api, tmp_path)
    proc = _cli_here(monkeypatch, capsys, "comment", "--report", str(path), "--pr", str(PR), "--mode", "always",
                     env=env)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.splitlines()  # one message, no traceback, no progress
    assert line.startswith(f"guard: error: {path} states ") and "nothing is posted from it" in line
    assert expected in line, line
    assert proc.stdout == "" and api.requests() == []  # not even a read: no comment, no status
    assert not (tmp_path / "outputs.txt").exists()

    summary = _cli_here(monkeypatch, capsys, "summary", "--report", str(path), env=env)
    assert summary.returncode == 2 and summary.stderr.splitlines() == [line]
    assert summary.stdout == ""  # no annotation
    assert not (tmp_path / "outputs.txt").exists() and not (tmp_path / "summary.md").exists()


@pytest.mark.parametrize(("factor", "jitter", "verdict"), [
    (1.0, 0.0, "pass"), (1.01, 0.0, "at_threshold"), (1.05, 0.0, "regression"), (0.95, 0.0, "improvement"),
    (1.0, 0.05, "inconclusive"),
])
def test_an_honest_report_of_the_interval_rule_holds_up(tmp_path: Path, factor: float, jitter: float,
                                                        verdict: str) -> None:
    """Each verdict of the interval rule, written as `guard run` writes it and read back."""
    from guard.report import SCHEMA_VERSION, ReportError

    report = remeasured(committed(RICH), factor, jitter, looks=2)
    assert report.verdict == verdict
    again = read_report(_write(tmp_path, report))  # decided again from its numbers, and it holds
    assert again.verdict == verdict and again.schema_version == SCHEMA_VERSION and again.rule.looks == 2
    # the first of 2 looks: 62% of alpha (Pocock-type), over 2 families x 2 batch sizes
    first = again.rule.alpha * math.log(1 + (math.e - 1) / 2) / (2 * 2)
    assert [b.alpha_per_look for b in again.batch_sizes] == [pytest.approx(first)] * 2
    unstated = _json(report)
    unstated["rule"]["looks"] = None  # without the looks its alpha was split over
    with pytest.raises(ReportError, match="not a valid report: rule.looks"):
        read_report(_write(tmp_path, unstated, "unstated.json"))


def test_a_report_whose_rule_is_past_reason_is_not_read(tmp_path: Path) -> None:
    """The rule holds its own ranges: a tok/s threshold of 1000% (tok/s cannot fall by 100% or more)
    is refused as the report is read, before anything is decided again from it."""
    from guard.report import ReportError

    data = _json(committed(RICH))
    data["rule"]["tok_per_s"]["pct"] = 1000.0
    with pytest.raises(ReportError, match="not a valid report: rule: Value error, tok_per_s's threshold is under 100%"):
        read_report(_write(tmp_path, data))


def test_the_forged_pass_would_set_success_without_the_check(
    api: GitHubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the check stands between: the same report, taken at its word, sets a success."""
    from guard.publish import PublishRequest, publish
    from guard.report import _write as write_module

    path = _write(tmp_path, _every_verdict_pass())
    unchecked = Report.model_validate_json(path.read_bytes())
    with pytest.raises(UnfoundedReport):
        write_module.check_report(unchecked, path)
    monkeypatch.setattr(write_module, "check_report", lambda report, where, **_: None)
    publish(PublishRequest(report=path, repo=REPO, pr=PR, api_url=api.url, mode="always"), TOKEN)
    (status,) = api.statuses(REPO, unchecked.arm(unchecked.head).sha)
    assert status["state"] == "success"


def test_consistent_numbers_post_as_they_are(api: GitHubStandIn, tmp_path: Path) -> None:
    """The check's limit: numbers made up to agree with each other are decided again and
    agree. A pass remeasured from base's own values posts as a pass."""
    report = remeasured(committed(RICH), 1.0)
    assert report.verdict == "pass"
    proc = _cli("comment", "--report", str(_write(tmp_path, report)), "--pr", str(PR), "--mode", "always",
                env=_env(api, tmp_path))
    assert proc.returncode == 0, proc.stderr
    (status,) = api.statuses(REPO, report.arm(report.head).sha)
    assert status["state"] == "success" and "No decode slowdown" in api.comments(REPO, PR)[0]["body"]


def _committed_reports() -> list[Path]:
    docs = REPO_ROOT / "docs"
    return sorted([*docs.rglob("report.json"), *docs.rglob("report.json.gz")])


def test_every_committed_report_holds_up(tmp_path: Path) -> None:
    """The committed reports are of older schemas: the guard refuses each in one message that
    says to run it again; read as data by the validation code, each holds up as this guard's."""
    import gzip

    from guard.report import READ_VERSIONS, SCHEMA_VERSION, ReportError

    paths = _committed_reports()
    assert len(paths) >= 40
    verdicts = set()
    for number, path in enumerate(paths):
        raw = path.read_bytes()
        plain = tmp_path / f"{number}.json"
        plain.write_bytes(gzip.decompress(raw) if path.suffix == ".gz" else raw)
        data = json.loads(plain.read_bytes())
        version = data["schema_version"]
        # this guard's, schema 6, and schema 5 without a mix, which state nothing else
        if version == SCHEMA_VERSION or (version in READ_VERSIONS and (version >= 6 or data.get("mix") is None)):
            verdicts.add(read_report(plain).verdict)
            continue
        refused = (r"is a report of schema_version 5 with a batch-size mix, whose verdict it did not decide"
                   if version in READ_VERSIONS else r"is a report of schema_version [1234]; .*")
        with pytest.raises(ReportError, match=refused + r".* re-run the guard"):
            read_report(plain)
        verdicts.add(read_report(current_file(path)).verdict)  # raises UnfoundedReport where it would not hold
    assert {"pass", "regression", "invalid"} <= verdicts


def test_a_report_of_an_older_schema_is_refused_before_anything_is_posted(api: GitHubStandIn,
                                                                          tmp_path: Path) -> None:
    path = _write(tmp_path, _at_threshold() | {"schema_version": 2})
    env = _env(api, tmp_path)
    for command in (["comment", "--report", str(path), "--pr", str(PR)], ["summary", "--report", str(path)]):
        proc = _cli(*command, env=env)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.splitlines()
        assert line == (f"guard: error: {path} is a report of schema_version 2; this guard reads schema_version "
                        "5, 6, 7, 8, 9, 10, 11, 12 and 13 only: re-run the guard (`guard run`) to get a report it "
                        "reads")
    assert api.requests() == [] and not (tmp_path / "summary.md").exists()


# --- hostile strings ---------------------------------------------------------------------

# Every string of the report becomes one of these (each with its own number, so names that
# matched still match): what renders as markup if it is not escaped, and workflow commands.
PAYLOAD = (
    "[x](http://e.vil) ![](http://e.vil/p.png) <img src=x> <script>alert(1)</script> <a href=http://e.vil>a</a> "
    "**b** _e_ ~~s~~ `c` ` &lt;b&gt; <!-- hidden @org/team #12 www.e.vil a@e.vil | t | t |\n\n# heading\n"
    "```\n</details><img src=y>\n````\n::error::forged\n::set-output name=verdict::pass\n"
    "\u202eright to left\u202c \u2066isolate\u2069 \x1b[31mred\x1b[0m \x08\u2028"
)
# What hides or reorders a line (bidirectional controls, terminal escapes): shown as code points
UNSEEN = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
LEADS = ["", "# ", "- ", "1. ", "    ", "> ", "<div>", "=== ", "| ", "@org/team ", "```"]
# Fields whose values are a closed set, a pattern or a commit sha: the schema or the check
# refuses anything else, so they cannot carry markup. Keys of these dicts are rendered too.
CLOSED = {"verdict", "gpu_ms_verdict", "tok_per_s_verdict", "status", "sha", "timer", "matched_by", "at_threshold",
          "reference", "format", "steps_rule", "how", "base_sha", "head_sha", "merge_base", "schema_version",
          "decided_by", "metric", "kind", "build", "cause"}
RENDERED_KEYS = {"env", "options", "api_calls_changed"}


def _hostile(data: Any, names: dict[str, str], key: str = "") -> Any:
    if isinstance(data, dict):
        return {(_hostile(k, names) if key in RENDERED_KEYS else k): (v if k in CLOSED else _hostile(v, names, k))
                for k, v in data.items()}
    if isinstance(data, list):
        return [_hostile(v, names, key) for v in data]
    if isinstance(data, str):
        if data not in names:
            names[data] = f"{LEADS[len(names) % len(LEADS)]}{PAYLOAD} {len(names)}"
        return names[data]
    return data


def _hostile_report(tmp_path: Path, failed: bool = False) -> tuple[Path, Report]:
    data = _json(committed(RICH))
    if failed:  # the ablation arm failed to run: its log tail is shown, the comparison invalid
        data["arms"][2].update(status="run_failed", error="exit 1", log_tail="Traceback\n  ...\nError: boom")
        data["verdict"] = "invalid"
        data = _json(explained(Report.model_validate(data)))
    data["warnings"] = ["arm 'head' repeat 2: clocks held down"]
    data["reasons"] = data["reasons"] + [{"kind": "arm_failed", "arm": "x", "repeats_done": 3, "error": "exit 1",
                                          "field": "name", "seen": [{"value": "A100", "arm": "x"}]}]
    data["server_url"] = "https://e.vil"  # links come from the job, not the report
    hostile = _hostile(data, {})
    path = _write(tmp_path, hostile)
    report = read_report(path)  # the numbers are untouched: it holds up
    assert PAYLOAD in report.arm(report.head).subject
    return path, report


class _Html(HTMLParser):
    """Tags, comments and visible text of rendered HTML; text outside code and links apart."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.comments: list[str] = []
        self.open: list[str] = []
        self.text, self.prose, self.headings = [], [], []  # type: ignore[var-annotated]
        self.rows: list[list[int]] = []  # per table, the cells of each row

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag == "table":
            self.rows.append([])
        if tag == "tr":
            self.rows[-1].append(0)
        if tag in ("td", "th"):
            self.rows[-1][-1] += 1
        if tag not in ("img", "br", "hr", "input"):
            self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.open:
            del self.open[len(self.open) - 1 - self.open[::-1].index(tag):]

    def handle_comment(self, data: str) -> None:
        self.comments.append(data)

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if not {"code", "pre", "a"} & set(self.open):
            self.prose.append(data)
        if self.open and self.open[-1] == "h3":
            self.headings.append(data)


ALLOWED_TAGS = {"p", "strong", "code", "pre", "ul", "li", "table", "thead", "tbody", "tr", "th", "td", "h3",
                "details", "summary", "sub", "blockquote", "a"}
OUR_HEADINGS = ("What happened", "Why the verdict is ", "Cause (", "Changed between base and head", "Environment")


def _render(markdown: str) -> _Html:
    """cmark-gfm as GitHub runs it (tables, autolinks, strike-through, task lists), with raw
    HTML kept rather than filtered, so that any tag that got through is seen."""
    html = cmarkgfm.cmark.markdown_to_html_with_extensions(
        markdown, options=Options.CMARK_OPT_UNSAFE, extensions=["table", "autolink", "strikethrough", "tasklist"])
    parsed = _Html()
    parsed.feed(html)
    return parsed


def _assert_inert(markdown: str, folds: int) -> None:
    assert "was cut at" not in markdown  # the whole comment is checked
    page = _render(markdown)
    stray = sorted({tag for tag, _ in page.tags if tag not in ALLOWED_TAGS})
    assert stray == [], stray  # no img, script, div, h1, em, del, input...
    links = [attrs.get("href") or "" for tag, attrs in page.tags if tag == "a"]
    # file locations, and (where the job has a run id) the run that measured: the job's own links
    assert all(href.startswith((f"{SERVER}/{REPO}/blob/", f"{SERVER}/{REPO}/actions/runs/")) for href in links), links
    assert [c for c in page.comments if not c.startswith(" regression-guard:comment")] == []
    assert all(h.startswith(OUR_HEADINGS) for h in page.headings), page.headings
    # no row broke out of its table's columns
    assert page.rows and all(table and len(set(table)) == 1 for table in page.rows), page.rows
    # the guard's own folds (a failed arm's log among them), and no other
    assert sum(tag == "details" for tag, _ in page.tags) == folds
    assert not UNSEEN.search(markdown) and "<U+202E>right to left<U+202C>" in "".join(page.text)
    prose = "".join(page.prose)
    assert not re.search(r"@[A-Za-z0-9]|#\d|GH-\d", prose)  # no mention, no issue reference
    shown = "".join(page.text).replace("\u200b", "")
    # the strings are there, as text: markup and all
    assert shown.count("[x](http://e.vil) ![](http://e.vil/p.png) <img src=x> <script>alert(1)</script>") >= 10
    assert "**b** _e_ ~~s~~ `c` ` &lt;b&gt; <!-- hidden @org/team #12 www.e.vil a@e.vil | t | t |" in shown


def _post_and_summarize(api: GitHubStandIn, tmp_path: Path, path: Path) -> tuple[str, str, list[str]]:
    env = _env(api, tmp_path)
    proc = _cli("comment", "--report", str(path), "--pr", str(PR), "--mode", "always", env=env)
    assert proc.returncode == 0, proc.stderr
    summary = _cli("summary", "--report", str(path), env=env)
    assert summary.returncode == 0, summary.stderr
    (comment,) = api.comments(REPO, PR)
    return comment["body"], (tmp_path / "summary.md").read_text(), summary.stdout.splitlines()


@pytest.mark.slow
def test_hostile_strings_are_posted_as_text(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _hostile_report(tmp_path)
    assert report.verdict == "regression" and report.capture and report.traces
    body, summary, annotations = _post_and_summarize(api, tmp_path, path)
    folds = len(build_view(report).folds)
    _assert_inert(body, folds)
    _assert_inert(summary, folds)
    # the Cause section links the changed file, at the head commit, in this job's repository
    head = report.arm(report.head).sha
    assert any(attrs.get("href", "").startswith(f"{SERVER}/{REPO}/blob/{head}/") for tag, attrs in _render(body).tags
               if tag == "a")
    # a regression's annotation, and one per warning: each one line, every '::' command ours
    assert len(annotations) == 1 + len(report.warnings)
    assert annotations[0].startswith("::error title=Decode regression::")
    assert all(re.match(r"::(error|warning) title=[^:]*::", line) for line in annotations)
    assert "%0A::set-output name=verdict::pass" in annotations[1]  # a warning's line breaks, escaped
    assert not any(UNSEEN.search(line) for line in annotations) and "<U+202E>" in annotations[1]
    assert not UNSEEN.search(build_view(report).title)
    outputs = (tmp_path / "outputs.txt").read_text().splitlines()
    assert [line.split("=", 1)[0] for line in outputs] == [
        "comment-url", "comment-action", "verdict", "gate", "repeats-to-decide", "tok-per-s-change", "gpu-ms-change",
            "report-path"]
    assert "verdict=regression" in outputs and "gate=failure" in outputs


@pytest.mark.slow
def test_a_hostile_log_tail_stays_in_its_code_block(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _hostile_report(tmp_path, failed=True)
    failed = next(a for a in report.arms if a.status != "ok")
    assert "```" in failed.log_tail and "</details>" in failed.log_tail
    body, summary, annotations = _post_and_summarize(api, tmp_path, path)
    for markdown in (body, summary):
        _assert_inert(markdown, len(build_view(report).folds))
        assert any(f.summary.endswith("run failed") for f in build_view(report).folds)
        page = _render(markdown)
        pre = [i for i, (tag, _) in enumerate(page.tags)
               if tag == "pre" and page.tags[i + 1][1].get("class") != "language-mermaid"]
        assert len(pre) == 1
    assert annotations[0].startswith("::error title=Decode comparison not valid::")
    assert all("\n" not in line and "\r" not in line for line in annotations)


def test_a_subject_s_bidirectional_controls_are_shown_as_code_points_wherever_it_is_shown() -> None:
    """U+202E in a commit subject would show the title reversed from there ("exe.txt" as "txt.exe");
    the title, the comment, the job summary's annotations and the dashboard show its code point."""
    from guard.dashboard._render import _shown

    report = committed(RICH)
    head = report.arm(report.head)
    subject = "fix \u202etxt.exe\u202c and \u2067isolate\u2069"
    forged = report.model_copy(update={"arms": [a.model_copy(update={"subject": subject}) if a is head else a
                                                for a in report.arms]})
    view = build_view(forged)
    assert "fix <U+202E>txt.exe<U+202C>" in view.title
    assert "fix \\<U+202E\\>txt.exe" in render_comment(forged)
    assert _shown(subject) == "fix <U+202E>txt.exe<U+202C> and <U+2067>isolate<U+2069>"
    assert not UNSEEN.search(render_comment(forged) + view.title + view.status)


# --- the escaping functions, on GitHub's parser ---------------------------------------------


def _html(markdown: str) -> str:
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


@pytest.mark.parametrize("value", [
    "# heading", "- item", "+ item", "1. item", "7) item", "=== x", "---", "> quote", "    indented", "\tindented",
    "http://e.vil", "HTTPS://E.VIL/x", "ftp://e.vil", "www.e.vil", "WWW.E.VIL", "mail a@e.vil",
    "<http://e.vil>", "[r]: http://e.vil", "![a](b)", "a\\", "*a*", "__a__", "~~a~~", "`a`", "&amp;", "| a |",
    "line\n\n# heading\n", "crlf\r\n# heading", "cr\r# heading",
])
def test_text_renders_as_itself(value: str) -> None:
    html = _html(f"{text(value)}\n")
    page = _Html()
    page.feed(html)
    assert [tag for tag, _ in page.tags] == ["p"], html
    shown = "".join(page.text).replace("\u200b", "").strip()
    expected = re.sub(r"\r\n?|\n", " ", value).strip()
    assert re.sub(r"\s+", " ", shown) == re.sub(r"\s+", " ", expected)


@pytest.mark.parametrize("value", ["`", "``a``", "a ` b", " a ", "a `` b ``` c", "", "x\n\n# y", "<img src=x>"])
def test_code_is_one_span_of_the_value(value: str) -> None:
    html = _html(f"see {code(value)} here\n")
    page = _Html()
    page.feed(html)
    assert [tag for tag, _ in page.tags] == ["p", "code"], html
    inside = html[html.index("<code>") + 6: html.index("</code>")]
    expected = re.sub(r"\r\n?|\n", " ", value) or " "
    import html as html_module

    assert html_module.unescape(inside) == expected


@pytest.mark.parametrize("value", ["```\n# h\n```", "````\n<img src=x>", "a\n~~~\nb", "```` x\n`````"])
def test_block_holds_every_line(value: str) -> None:
    html = _html(f"{block(value)}\n\n# after\n")
    page = _Html()
    page.feed(html)
    assert [tag for tag, _ in page.tags] == ["pre", "code", "h1"], html
    assert "".join(page.text).startswith(value)
