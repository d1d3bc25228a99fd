"""What each delivery asks the service for, decided from its payload alone: the trust rules
for public repositories, `/guard run`, pushes to the default branch only, the report
workflows' runs and check runs to run again."""

from __future__ import annotations

from guard.service._events import Ignored, JobRequest, decide

BASE, HEAD = "b" * 40, "a" * 40
WORKFLOWS = ["regression-guard"]


def _repo(private: bool) -> dict:
    return {"full_name": "octo/engine", "private": private, "clone_url": "https://github.com/octo/engine.git",
            "default_branch": "main"}


def _pr(action: str, private: bool, label: str | None = None) -> dict:
    payload = {"action": action, "repository": _repo(private), "installation": {"id": 5},
               "pull_request": {"number": 4, "head": {"sha": HEAD}, "base": {"sha": BASE}}}
    if label:
        payload["label"] = {"name": label}
    return payload


def _decide(event: str, payload: dict) -> JobRequest | Ignored:
    return decide(event, payload, "safe-to-test", WORKFLOWS, app_id="99")


def test_a_public_repositorys_pull_request_runs_only_on_the_trust_label_at_the_labelled_commit() -> None:
    for action in ("opened", "synchronize", "reopened"):
        assert _decide("pull_request", _pr(action, private=False)) == Ignored(reason="needs-trust-label")
    assert _decide("pull_request", _pr("labeled", False, label="bug")) == Ignored(reason="unhandled-action")
    job = _decide("pull_request", _pr("labeled", False, label="safe-to-test"))
    assert isinstance(job, JobRequest)
    assert (job.kind, job.pr, job.base_sha, job.head_sha, job.installation_id) == ("pull_request", 4, BASE, HEAD, 5)


def test_a_private_repositorys_pull_request_runs_on_every_push() -> None:
    for action in ("opened", "synchronize", "reopened"):
        assert isinstance(_decide("pull_request", _pr(action, private=True)), JobRequest)
    assert _decide("pull_request", _pr("closed", private=True)) == Ignored(reason="unhandled-action")


def test_a_payload_of_the_wrong_shape_is_malformed_not_a_crash() -> None:
    broken = _pr("opened", True)
    broken["pull_request"]["head"] = {"sha": "not-a-sha"}
    assert _decide("pull_request", broken) == Ignored(reason="malformed")
    assert _decide("pull_request", {"repository": "octo/engine"}) == Ignored(reason="malformed")
    assert _decide("pull_request", _pr("opened", True) | {"pull_request": []}) == Ignored(reason="malformed")
    assert _decide("ping", {}) == Ignored(reason="ping")
    assert _decide("star", {"repository": _repo(True)}) == Ignored(reason="unhandled-event")


def test_guard_run_is_a_command_from_a_person_on_a_pull_request() -> None:
    def comment(body: str, kind: str = "User", pr: bool = True) -> dict:
        issue = {"number": 8} | ({"pull_request": {"url": "x"}} if pr else {})
        return {"action": "created", "repository": _repo(False), "issue": issue,
                "comment": {"body": body, "user": {"login": "ann", "type": kind}}}

    job = _decide("issue_comment", comment("  /guard run\nplease"))
    assert isinstance(job, JobRequest) and (job.kind, job.pr, job.sender, job.head_sha) == ("command", 8, "ann", None)
    assert _decide("issue_comment", comment("lgtm /guard run")) == Ignored(reason="not-a-command")
    assert _decide("issue_comment", comment("/guard run", pr=False)) == Ignored(reason="not-a-command")
    assert _decide("issue_comment", comment("/guard run", kind="Bot")) == Ignored(reason="not-a-command")
    # the commit the commenter reviewed, which the job then measures or refuses
    assert _decide("issue_comment", comment("/guard run 1A2b3c4D please")).detail == {"named_sha": "1a2b3c4d"}
    assert _decide("issue_comment", comment("/guard run please 1a2b3c4d")).detail == {}
    assert _decide("issue_comment", comment("/guard run 1a2b3c")).detail == {}  # too short to name a commit


def test_guard_run_repeats_asks_for_that_many_processes_per_arm_within_the_configs_bounds() -> None:
    """What an undecided run's comment asks for: `/guard run --repeats N`, N as measure.repeats
    is bounded (5 to 200); any other N queues nothing rather than a run of another count."""
    def comment(body: str) -> dict:
        return {"action": "created", "repository": _repo(False), "issue": {"number": 8, "pull_request": {"url": "x"}},
                "comment": {"body": body, "user": {"login": "ann", "type": "User"}}}

    assert _decide("issue_comment", comment("/guard run --repeats 14")).detail == {"repeats": 14}
    assert _decide("issue_comment", comment("/guard run --repeats=200")).detail == {"repeats": 200}
    assert _decide("issue_comment", comment("/guard run 1a2b3c4d --repeats 5")).detail == {
        "named_sha": "1a2b3c4d", "repeats": 5}
    for asked in ("--repeats 4", "--repeats 201", "--repeats", "--repeats fourteen", "--repeats -9", "--repeats 1e2",
                  "--repeats=", "--repeats \u00b2\u00b2"):
        assert _decide("issue_comment", comment(f"/guard run {asked}")) == Ignored(reason="bad-repeats"), asked


def test_only_a_push_to_the_default_branch_with_a_parent_is_measured() -> None:
    def push(ref: str, before: str = BASE) -> dict:
        return {"ref": ref, "before": before, "after": HEAD, "repository": _repo(True)}

    job = _decide("push", push("refs/heads/main"))
    assert isinstance(job, JobRequest) and (job.base_sha, job.head_sha, job.pr) == (BASE, HEAD, None)
    assert _decide("push", push("refs/heads/feature")) == Ignored(reason="not-default-branch")
    assert _decide("push", push("refs/heads/main", before="0" * 40)) == Ignored(reason="no-parent")


def test_workflow_runs_and_check_runs() -> None:
    name = _repo(False)["full_name"]
    run = {"action": "completed", "repository": _repo(False),
           "workflow_run": {"id": 31, "name": "CI", "path": ".github/workflows/regression-guard.yml",
                            "event": "pull_request_target", "repository": {"full_name": name},
                            "head_repository": {"full_name": "mallory/fork"},
                            "head_sha": HEAD, "pull_requests": [{"number": 6}]}}
    job = _decide("workflow_run", run)
    assert isinstance(job, JobRequest) and (job.pr, job.detail) == (6, {"workflow_run_id": 31})

    def with_(**fields: object) -> dict:
        return run | {"workflow_run": run["workflow_run"] | fields}

    assert _decide("workflow_run", with_(path=".github/workflows/lint.yml")) == Ignored(reason="not-a-report-workflow")
    # a name is no proof, nor a file of that name elsewhere
    for path in ("lint.yml", ".github/regression-guard.yml", ".github/workflows/regression-guard.sh"):
        named = with_(path=path, name="regression-guard")
        assert _decide("workflow_run", named) == Ignored(reason="not-a-report-workflow")
    # a fork's pull_request runs the fork's own copy of the file, which can upload any report
    assert _decide("workflow_run", with_(event="pull_request")) == Ignored(reason="fork-defined-run")
    assert _decide("workflow_run", with_(event="pull_request", head_repository=None)) == Ignored(
        reason="fork-defined-run")
    own = with_(event="pull_request", head_repository={"full_name": name})  # a branch of the repository itself
    assert isinstance(_decide("workflow_run", own), JobRequest)
    for event in ("workflow_dispatch", "push"):
        assert isinstance(_decide("workflow_run", with_(event=event)), JobRequest)
    assert _decide("workflow_run", with_(event="issue_comment")) == Ignored(reason="fork-defined-run")
    assert _decide("workflow_run", with_(repository={"full_name": "mallory/fork"})) == Ignored(
        reason="other-repository-run")
    check = {"action": "rerequested", "repository": _repo(True),
             "check_run": {"head_sha": HEAD, "external_id": "guard-job-3", "app": {"id": 99}}}
    assert isinstance(_decide("check_run", check), JobRequest)
    foreign = check | {"check_run": check["check_run"] | {"app": {"id": 1}}}
    assert _decide("check_run", foreign) == Ignored(reason="other-app")
