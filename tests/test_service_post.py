"""The Check Run a job's report concludes, posted as the service posts it to the GitHub
stand-in over loopback: an undecided verdict (inconclusive, at_threshold) concludes
`action_required`, or `failure` where the service is set so, never `neutral` (which a required
check takes as passing); every Check Run links its details, as GitHub asks of an
`action_required` one (the stand-in refuses one without), and the default comment mode posts
the undecided run's comment."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from guard.publish import DEFAULT_COMMENT_MODE, GitHub
from guard.report import Report
from guard.service._post import post
from tests.github_standin import GitHubStandIn
from tests.report_fixtures import committed, current_file, remeasured

EXAMPLE = current_file(Path(__file__).resolve().parents[1] / "docs" / "examples" / "h200-demo" / "report.json")
REPO, PR, TOKEN = "octo/engine", 7, "installation-token"


@pytest.fixture
def api():
    with GitHubStandIn({TOKEN: "regression-guard[bot]"}) as server:
        yield server


def _report(verdict: str) -> Report:
    """The committed H200 demo (a regression), or its head measured again to give `verdict`."""
    report = committed(EXAMPLE)
    report = {"regression": report, "pass": remeasured(report, 1.0),
              "inconclusive": remeasured(report, 1.0, 0.2)}[verdict]
    assert report.verdict == verdict
    return report


def _post(api: GitHubStandIn, report: Report, pr: int | None = PR, **settings) -> dict:
    with GitHub(TOKEN, api.url) as rest:
        posted = post(rest, report, repo=REPO, pr=pr, job_id=3, login="regression-guard[bot]",
                      mode=DEFAULT_COMMENT_MODE, server_url="https://github.com", **settings)
    (check,) = [c for c in api.check_runs(REPO) if c["id"] == posted.check_run_id]
    return check | {"posted": posted}


def test_an_undecided_run_concludes_action_required_with_its_comment_as_the_details(api: GitHubStandIn) -> None:
    report = _report("inconclusive")
    check = _post(api, report)
    assert (check["conclusion"], check["status"]) == ("action_required", "completed")
    (comment,) = api.comments(REPO, PR)  # the default mode posts an undecided run's comment
    assert check["posted"].comment_action == "created" and check["details_url"] == comment["html_url"]
    # what would decide it, right under the title, in the comment and in the check's summary
    assert comment["body"].splitlines()[3].startswith("**Needs ")
    assert check["output"]["summary"].splitlines()[3] == comment["body"].splitlines()[3]


def test_the_undecided_conclusion_is_failure_where_the_service_says_so_and_never_neutral(
        api: GitHubStandIn) -> None:
    check = _post(api, _report("inconclusive"), undecided="failure")
    assert check["conclusion"] == "failure"
    assert {c["conclusion"] for c in api.check_runs(REPO)} == {"failure"}


def test_decided_verdicts_keep_their_conclusions_and_link_the_pull_request_or_the_commit(api: GitHubStandIn) -> None:
    passed = _post(api, _report("pass"))
    assert passed["conclusion"] == "success" and passed["posted"].comment_action == "none"
    assert passed["details_url"] == f"https://github.com/{REPO}/pull/{PR}"  # no comment to link: the pull request
    regression = _report("regression")
    check = _post(api, regression, pr=None)
    assert check["conclusion"] == "failure"
    assert check["details_url"] == f"https://github.com/{REPO}/commit/{regression.arm(regression.head).sha}"


def test_the_standin_refuses_an_action_required_check_run_without_details_as_github_asks(
        api: GitHubStandIn) -> None:
    """The stand-in holds the service to GitHub's REST docs, read strictly: without this refusal
    the test above could not fail on a check run that links nothing."""
    body = {"name": "regression-guard", "head_sha": "a" * 40, "status": "completed", "conclusion": "action_required"}
    answer = httpx.post(f"{api.url}/repos/{REPO}/check-runs", json=body, headers={"authorization": f"token {TOKEN}"})
    assert answer.status_code == 422 and answer.json()["errors"][0]["field"] == "details_url"
    empty = httpx.post(f"{api.url}/repos/{REPO}/check-runs", json=body | {"details_url": ""},
                       headers={"authorization": f"token {TOKEN}"})
    assert empty.status_code == 422
    ok = httpx.post(f"{api.url}/repos/{REPO}/check-runs", json=body | {"details_url": "https://github.com/x"},
                    headers={"authorization": f"token {TOKEN}"})
    assert ok.status_code == 201
