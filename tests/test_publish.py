"""Publishing against a stateful GitHub stand-in over real HTTP on loopback: the sticky
comment, the commit status, retries that never post twice, rate limits, long bodies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard._errors import GuardError
from guard.publish import (
    MAX_BODY_CHARS,
    GitHub,
    Marker,
    PublishError,
    PublishRequest,
    compose,
    headline,
    publish,
    publish_comment,
)
from guard.report import Report
from tests.github_standin import GitHubStandIn
from tests.report_fixtures import remeasured, committed, current_file

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = current_file(REPO_ROOT / "docs" / "examples" / "h200-demo" / "report.json")
REPO = "octo/engine"
PR = 7
USER_TOKEN, ACTIONS_TOKEN = "user-token", "actions-token"


class Sleeps(list):
    """Records the waits the client asks for instead of waiting."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def api():
    with GitHubStandIn({USER_TOKEN: "guard-bot", ACTIONS_TOKEN: None, "other-token": "someone"}) as server:
        yield server


# head's step time as a share of base's, and the spread of its repeats, that give each verdict
HEAD_FOR = {"pass": (1.0, 0.0), "inconclusive": (1.0, 0.2), "improvement": (0.9, 0.0)}


def _report(tmp_path: Path, verdict: str = "regression", name: str = "report.json") -> tuple[Path, Report]:
    """The committed H200 demo report, or one whose head measured so that its numbers give
    another verdict (a report is decided again from its numbers before it is posted)."""
    report = committed(EXAMPLE)
    if verdict != "regression":
        report = remeasured(report, *HEAD_FOR[verdict])
        assert report.verdict == verdict
    path = tmp_path / name
    path.write_text(report.model_dump_json())
    return path, report


def _publish(api: GitHubStandIn, path: Path, token: str = USER_TOKEN, **fields) -> object:
    request = PublishRequest(report=path, repo=REPO, pr=PR, api_url=api.url, **fields)
    return publish(request, token, sleep=Sleeps())


def _ours(api: GitHubStandIn) -> list[dict]:
    return [c for c in api.comments(REPO, PR) if c["body"].startswith("<!-- regression-guard:comment")]


def test_regression_creates_one_comment_and_a_failing_status(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    result = _publish(api, path)
    comments = api.comments(REPO, PR)
    assert len(comments) == 1 and result.comment.action == "created"
    assert result.comment.url == comments[0]["html_url"]
    body = comments[0]["body"]
    marker = Marker.parse(body)
    head = report.arm(report.head).sha
    assert marker == Marker(key="default", verdict="regression", head=head, regressed=head)
    assert "Decode 36.6% slower at batch size 1" in body and comments[0]["user"]["login"] == "guard-bot"
    (status,) = api.statuses(REPO, head)
    assert status["state"] == "failure" and status["context"] == "regression-guard"
    assert status["description"].startswith("regression: batch size 1 GPU ms per step +36.56% (")
    assert status["target_url"] == comments[0]["html_url"]


def test_second_run_edits_the_same_comment(api: GitHubStandIn, tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    first = _publish(api, path)
    again = _publish(api, path)
    assert again.comment.action == "unchanged" and again.comment.id == first.comment.id
    path2, _ = _report(tmp_path, "inconclusive", "r2.json")
    third = _publish(api, path2)
    assert third.comment.action == "updated" and third.comment.id == first.comment.id
    assert len(api.comments(REPO, PR)) == 1
    assert "could not decide (inconclusive)" in api.comments(REPO, PR)[0]["body"]


def test_pass_without_an_earlier_comment_writes_none(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path, "pass")
    result = _publish(api, path)
    assert result.comment.action == "none" and api.comments(REPO, PR) == []
    assert [s["state"] for s in api.statuses(REPO, report.arm(report.head).sha)] == ["success"]
    assert api.requests("POST", "/comments$") == []


def test_the_default_mode_comments_on_an_undecided_run_and_not_on_a_gain(api: GitHubStandIn, tmp_path: Path) -> None:
    """unless-green, the default: every verdict but pass and improvement gets a comment, an
    undecided one with what would decide it under its title; on-regression, a regression alone."""
    gain, _ = _report(tmp_path, "improvement", "gain.json")
    assert _publish(api, gain).comment.action == "none" and api.comments(REPO, PR) == []
    path, report = _report(tmp_path, "inconclusive")
    assert _publish(api, path, mode="on-regression").comment.action == "none" and api.comments(REPO, PR) == []
    assert _publish(api, path).comment.action == "created"
    (comment,) = api.comments(REPO, PR)
    assert Marker.parse(comment["body"]).verdict == "inconclusive"
    assert comment["body"].splitlines()[3].startswith("**Needs ")  # what would decide it, under the title
    # the gain's status, then the undecided run's: pending, which a required status holds the merge on
    assert [s["state"] for s in api.statuses(REPO, report.arm(report.head).sha)] == ["success", "pending", "pending"]


def test_mode_always_and_never(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path, "pass")
    assert _publish(api, path, mode="never").comment.action == "skipped"
    assert api.comments(REPO, PR) == [] and len(api.statuses(REPO, report.arm(report.head).sha)) == 1
    assert _publish(api, path, mode="always").comment.action == "created"
    assert "No decode slowdown" in api.comments(REPO, PR)[0]["body"]


def test_regression_gone_is_said_in_the_same_comment(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    first = _publish(api, path)
    fixed, _ = _report(tmp_path, "pass", "fixed.json")
    second = _publish(api, fixed)
    assert second.comment.id == first.comment.id and len(api.comments(REPO, PR)) == 1
    body = api.comments(REPO, PR)[0]["body"]
    sha = report.arm(report.head).sha[:8]
    assert f"The regression this comment reported at `{sha}` is gone" in body
    assert "No decode slowdown" in body
    # the note stays on later passes: the comment remembers what it once reported
    assert Marker.parse(body).regressed == report.arm(report.head).sha


def test_finds_its_comment_on_a_later_page_and_edits_only_its_own(api: GitHubStandIn, tmp_path: Path) -> None:
    for i in range(230):
        api.add_comment(REPO, PR, "someone", f"comment {i}")
    # Someone quoting the marker does not make the comment the guard's.
    impostor = api.add_comment(REPO, PR, "someone", "<!-- regression-guard:comment key=default -->\nnot mine")
    path, _ = _report(tmp_path)
    ours = api.add_comment(REPO, PR, "guard-bot", compose("old body", "regression", "a" * 40, "default", None))
    result = _publish(api, path)
    assert result.comment.action == "updated" and result.comment.id == ours["id"]
    pages = api.requests("GET", f"/repos/{REPO}/issues/{PR}/comments")
    assert [r.query.get("page", ["1"])[0] for r in pages] == ["1", "2", "3"]
    assert impostor in api.comments(REPO, PR) and impostor["body"].endswith("not mine")
    assert len(api.comments(REPO, PR)) == 232
    assert not api.requests("PATCH", f"/issues/comments/{impostor['id']}$")


def test_actions_token_writes_as_the_bot_login(api: GitHubStandIn, tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    first = _publish(api, path, token=ACTIONS_TOKEN)
    assert first.login == "github-actions[bot]"
    again = _publish(api, path, token=ACTIONS_TOKEN)
    assert again.comment.id == first.comment.id and len(api.comments(REPO, PR)) == 1


def test_keys_keep_separate_comments_and_statuses(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    a = _publish(api, path, key="h200")
    b = _publish(api, path, key="h100")
    assert a.comment.id != b.comment.id and len(api.comments(REPO, PR)) == 2
    contexts = {s["context"] for s in api.statuses(REPO, report.arm(report.head).sha)}
    assert contexts == {"regression-guard (h200)", "regression-guard (h100)"}


def test_duplicates_left_by_a_race_are_folded_into_the_oldest(api: GitHubStandIn, tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    older = api.add_comment(REPO, PR, "guard-bot", compose("one", "pass", "b" * 40, "default", None))
    api.add_comment(REPO, PR, "guard-bot", compose("two", "pass", "b" * 40, "default", None))
    result = _publish(api, path)
    assert result.comment.id == older["id"] and result.comment.deleted_duplicates == 1
    assert [c["id"] for c in _ours(api)] == [older["id"]]


@pytest.mark.parametrize("kind", ["5xx-after-write", "drop-after-write", "5xx"])
def test_a_failed_create_is_checked_before_it_is_retried(api: GitHubStandIn, tmp_path: Path, kind: str) -> None:
    path, _ = _report(tmp_path)
    api.plan("POST", rf"/repos/{REPO}/issues/{PR}/comments", kind)
    result = _publish(api, path)
    assert len(api.comments(REPO, PR)) == 1, kind
    assert result.comment.id == api.comments(REPO, PR)[0]["id"]
    posts = api.requests("POST", "/comments$")
    # written once and found, or refused once (nothing written) and then written
    assert len(posts) == (2 if kind == "5xx" else 1)


def test_reads_are_retried_with_backoff_then_give_up(api: GitHubStandIn) -> None:
    sleeps = Sleeps()
    api.plan("GET", "/user", "5xx", times=2, status=503)
    with GitHub(USER_TOKEN, api.url, sleep=sleeps) as gh:
        assert gh.get("/user")["login"] == "guard-bot"
    assert len(sleeps) == 2 and 0.8 <= sleeps[0] <= 1.2 and 1.6 <= sleeps[1] <= 2.4
    api.plan("GET", "/user", "5xx", times=10)
    with GitHub(USER_TOKEN, api.url, sleep=Sleeps(), max_tries=3) as gh, pytest.raises(PublishError) as err:
        gh.get("/user")
    assert "HTTP 502 after 3 tries" in err.value.message
    assert len(api.requests("GET", "/user")) == 2 + 1 + 3


def test_rate_limits_wait_as_the_headers_say(api: GitHubStandIn) -> None:
    sleeps = Sleeps()
    api.plan("GET", "/user", "retry-after", wait_s=7)
    api.plan("GET", "/user", "reset", wait_s=30)
    api.plan("GET", "/user", "secondary")
    with GitHub(USER_TOKEN, api.url, sleep=sleeps) as gh:
        assert gh.get("/user")["login"] == "guard-bot"
    assert sleeps[0] == 7 and 29 <= sleeps[1] <= 32 and sleeps[2] == 60
    api.plan("GET", "/user", "reset", wait_s=3600)
    with GitHub(USER_TOKEN, api.url, sleep=sleeps) as gh, pytest.raises(PublishError) as err:
        gh.get("/user")
    assert "rate limited for another" in err.value.message and "longer than the 300 s" in err.value.message


def test_a_rate_limited_create_is_retried_without_a_second_comment(api: GitHubStandIn, tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    api.plan("POST", rf"/repos/{REPO}/issues/{PR}/comments", "retry-after", wait_s=1)
    _publish(api, path)
    assert len(api.comments(REPO, PR)) == 1 and len(api.requests("POST", "/comments$")) == 2


def test_long_bodies_are_cut_with_a_note(api: GitHubStandIn) -> None:
    body = "<!-- regression-guard:comment -->\n" + "".join(f"line {i} " + "x" * 90 + "\n" for i in range(2000))
    text = compose(body, "regression", "c" * 40, "default", None)
    assert len(text) <= MAX_BODY_CHARS and "was cut at 65,536 characters" in text
    assert Marker.parse(text).verdict == "regression"
    with GitHub(USER_TOKEN, api.url, sleep=Sleeps()) as gh:
        result = publish_comment(gh, REPO, PR, body, verdict="regression", head="c" * 40, mode="always",
                                 login="guard-bot")
    assert result.action == "created" and api.comments(REPO, PR)[0]["body"] == text


def test_a_422_for_length_cuts_again(tmp_path: Path) -> None:
    # A server that counts length otherwise (bytes, say) can refuse what fits in characters.
    import tests.github_standin as standin

    body = "<!-- regression-guard:comment -->\n" + "é" * 30_000 + "\n" + "ü" * 30_000 + "\n"
    old = standin.MAX_BODY
    standin.MAX_BODY = 40_000
    try:
        with GitHubStandIn({USER_TOKEN: "guard-bot"}) as api, GitHub(USER_TOKEN, api.url, sleep=Sleeps()) as gh:
            result = publish_comment(gh, REPO, PR, body, verdict="regression", head="c" * 40, mode="always",
                                     login="guard-bot")
            (posted,) = api.comments(REPO, PR)
            statuses = [r for r in api.requests("POST", "/comments$")]
    finally:
        standin.MAX_BODY = old
    assert result.action == "created" and len(statuses) == 2
    assert 25_000 <= len(posted["body"]) <= 40_000 and "was cut at" in posted["body"]
    assert Marker.parse(posted["body"]).verdict == "regression"


def test_mentions_in_a_report_ping_no_one(api: GitHubStandIn) -> None:
    text = compose("<!-- regression-guard:comment -->\nfix by @octocat (mail a@b)", "pass", "d" * 40, "default", None)
    assert "@octocat" not in text and "@\u200boctocat" in text


def test_links_come_from_the_job_not_the_report(api: GitHubStandIn, tmp_path: Path) -> None:
    _, report = _report(tmp_path)
    forged = report.model_copy(update={"github_repo": "evil/repo", "server_url": "https://evil.example"})
    path = tmp_path / "forged.json"
    path.write_text(forged.model_dump_json())
    _publish(api, path, mode="always")
    body = api.comments(REPO, PR)[0]["body"]
    assert "evil" not in body


def test_the_comment_links_the_run_and_its_artifact_as_the_job_gives_them(api: GitHubStandIn, tmp_path: Path) -> None:
    path, _ = _report(tmp_path)
    run = "https://github.example/octo/engine/actions/runs/31"
    _publish(api, path, mode="always", run_url=run, artifact_id=9)
    body = api.comments(REPO, PR)[0]["body"]
    assert f"[the artifact]({run}/artifacts/9) of [the run that measured]({run})" in body
    _publish(api, path, mode="always", run_url=run)  # no artifact uploaded: the run alone
    body = api.comments(REPO, PR)[0]["body"]
    assert f"[The run that measured]({run})." in body and "/artifacts/" not in body
    with pytest.raises(GuardError, match="is not the URL of a workflow run"):
        _publish(api, path, mode="always", run_url=f"{run} [x](https://e.vil)")
    with pytest.raises(PublishError, match="--artifact-id 0 is not an artifact's id"):
        _publish(api, path, mode="always", run_url=run, artifact_id=0)
    assert len(api.comments(REPO, PR)) == 1 and "e.vil" not in api.comments(REPO, PR)[0]["body"]


def test_enterprise_server_api_root(tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    with GitHubStandIn({USER_TOKEN: "guard-bot"}, prefix="/api/v3") as api:
        result = _publish(api, path)
        assert result.comment.action == "created" and len(api.comments(REPO, PR)) == 1
        assert all(r.path.startswith("/") for r in api.requests())
        assert api.url.endswith("/api/v3")


def test_bad_input_is_one_clear_error(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    with pytest.raises(PublishError, match="no GitHub token"):
        publish(PublishRequest(report=path, repo=REPO, pr=PR, api_url=api.url), "")
    with pytest.raises(PublishError, match="token was rejected"):
        publish(PublishRequest(report=path, repo=REPO, pr=PR, api_url=api.url), "wrong", sleep=Sleeps())
    with pytest.raises(PublishError, match="is not OWNER/NAME"):
        publish(PublishRequest(report=path, repo="engine", pr=PR, api_url=api.url), USER_TOKEN)
    with pytest.raises(PublishError, match="refusing to post a report for another commit"):
        publish(PublishRequest(report=path, repo=REPO, pr=PR, sha="e" * 40, api_url=api.url), USER_TOKEN)
    with GitHub(USER_TOKEN, api.url) as gh, pytest.raises(PublishError, match="refusing to send the token"):
        gh.request("GET", "http://evil.example/repos")
    assert api.comments(REPO, PR) == []


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", *args], capture_output=True, text=True, timeout=120,
                          env=os.environ | env, cwd=REPO_ROOT)


@pytest.mark.slow
def test_cli_comment_and_summary(api: GitHubStandIn, tmp_path: Path) -> None:
    path, report = _report(tmp_path)
    outputs, summary = tmp_path / "out.txt", tmp_path / "summary.md"
    env = {"GITHUB_TOKEN": USER_TOKEN, "GITHUB_API_URL": api.url, "GITHUB_OUTPUT": str(outputs),
           "GITHUB_STEP_SUMMARY": str(summary), "GITHUB_REPOSITORY": REPO}
    proc = _cli("comment", "--report", str(path), "--pr", str(PR), env=env)
    assert proc.returncode == 0, proc.stderr
    url = api.comments(REPO, PR)[0]["html_url"]
    assert proc.stdout.strip() == url and f"comment-url={url}" in outputs.read_text()

    proc = _cli("summary", "--report", str(path), env=env)
    assert proc.returncode == 0, proc.stderr
    lines = outputs.read_text().splitlines()
    tok = min(b.tok_per_s_change.pct for b in report.batch_sizes)
    assert "verdict=regression" in lines and f"tok-per-s-change={tok:.2f}" in lines
    assert "Decode 36.6% slower at batch size 1" in summary.read_text()
    assert proc.stdout.startswith("::error title=Decode regression::")

    bad = _cli("comment", "--report", str(path), "--pr", str(PR), "--repo", "nope", env=env)
    assert bad.returncode == 2 and bad.stderr.strip() == "guard: error: --repo 'nope' is not OWNER/NAME"
    missing = _cli("comment", "--report", str(tmp_path / "none.json"), "--pr", "1", env=env)
    assert missing.returncode == 2 and "cannot read" in missing.stderr and "Traceback" not in missing.stderr


def test_an_invalid_reports_reasons_become_one_escaped_annotation(tmp_path: Path) -> None:
    from guard.compare import Reason
    from guard.publish import annotations

    _, report = _report(tmp_path)
    reasons = [Reason(kind="tokens_differ", batch_size=1, step=3), Reason(kind="arm_failed", arm="100% of\nx")]
    invalid = report.model_copy(update={"verdict": "invalid", "reasons": reasons})
    (line,) = annotations(invalid)
    assert line == ("::error title=Decode comparison not valid::output tokens differ between base and head at batch "
                    "size 1; the workload failed on the 100%25 of%0Ax arm")


def test_the_status_line_names_host_clock_step_times_as_such() -> None:
    report = committed(EXAMPLE)
    assert headline(report).startswith("regression: batch size 1 GPU ms per step +36.56% (")
    on_cpu = report.model_copy(update={"batch_sizes": [
        b.model_copy(update={"arms": [a.model_copy(update={"timer": "perf_counter"}) for a in b.arms]})
        for b in report.batch_sizes
    ]})
    assert headline(on_cpu).startswith("regression: batch size 1 CPU ms per step +36.56% (")
