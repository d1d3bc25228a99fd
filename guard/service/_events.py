"""What a verified delivery asks for: a job to queue, or nothing, with the reason as a kind.
The payload is GitHub's, but every field is still checked for its type before it is used.

The trust rules are the Action's: a public repository's pull request is measured only when a
maintainer adds the trust label (at the commit labelled); a private one on every push to it. A
push to (or a reopen of) a public repository's pull request that still carries the label asks
for the label to come off: it vouched for the commits before, not for these.
A `/guard run` comment queues a job whose sender's write access the worker checks through the
API before anything runs; `/guard run [SHA] [--repeats N]` names the commit reviewed and the
processes per arm (N within measure.repeats' bounds, as an undecided run's comment asks)."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel

from guard._types import CommitSha, RepoName, is_commit_sha, is_repo_name
from guard.config import MAX_REPEATS, MIN_REPEATS

_NO_COMMIT = re.compile(r"^0+$")
COMMAND = "/guard run"
WORKFLOWS = PurePosixPath(".github/workflows")
# workflow_run events whose workflow file is the repository's own copy, whoever opened the pull request
BASE_DEFINED = ("pull_request_target", "workflow_dispatch", "push", "schedule")
_NAMED_SHA = re.compile(r"^[0-9a-fA-F]{7,64}$")  # a commit, as GitHub shows it: 7 hex digits or more, up to a full sha
_DISPATCHED = re.compile(r"\bguard-job (\d{1,12})\b")
REPEATS_OPTION = "--repeats"

JobKind = Literal["pull_request", "command", "push", "rerun", "workflow_run"]


class JobRequest(BaseModel):
    kind: JobKind
    repo: RepoName
    pr: int | None = None
    base_sha: CommitSha | None = None
    head_sha: CommitSha | None = None
    clone_url: str | None = None
    sender: str | None = None
    installation_id: int | None = None
    detail: dict[str, Any] = {}


class Ignored(BaseModel):
    # ping, unhandled-event, unhandled-action, malformed, needs-trust-label, not-a-command, bad-repeats,
    # not-default-branch, not-a-report-workflow, other-repository-run, fork-defined-run, other-app
    reason: str


class StaleTrustLabel(Ignored):
    """Nothing to queue, and the trust label to take off the pull request (guard.service._trust)."""

    reason: str = "trust-label-stale"
    repo: RepoName
    pr: int
    label: str
    installation_id: int | None = None


Decision = JobRequest | Ignored


def decide(event: str, payload: dict[str, Any], trust_label: str, report_workflows: list[str],
           app_id: str | None = None) -> Decision:
    handler = _HANDLERS.get(event)
    if handler is None:
        return Ignored(reason="ping" if event == "ping" else "unhandled-event")
    repo = _repo(payload)
    if repo is None:
        return Ignored(reason="malformed")
    return handler(payload, repo, trust_label=trust_label, report_workflows=report_workflows, app_id=app_id)


def _pull_request(payload: dict[str, Any], repo: dict[str, Any], *, trust_label: str, **_: Any) -> Decision:
    action = payload.get("action")
    pr = _dict(payload.get("pull_request"))
    number, head, base = pr.get("number"), _dict(pr.get("head")).get("sha"), _dict(pr.get("base")).get("sha")
    if not (_int(number) and is_commit_sha(head) and is_commit_sha(base)):
        return Ignored(reason="malformed")
    if action == "labeled":
        if _dict(payload.get("label")).get("name") != trust_label:
            return Ignored(reason="unhandled-action")
    elif action in ("opened", "synchronize", "reopened"):
        if repo.get("private") is not True:  # public: the code is a stranger's until a maintainer labels it
            if action != "opened" and trust_label in _label_names(pr):
                installation = _dict(payload.get("installation")).get("id")
                return StaleTrustLabel(repo=repo["full_name"], pr=number, label=trust_label,
                                       installation_id=installation if _int(installation) else None)
            return Ignored(reason="needs-trust-label")
    else:
        return Ignored(reason="unhandled-action")
    return _job("pull_request", payload, repo, pr=number, base_sha=base, head_sha=head)


def _issue_comment(payload: dict[str, Any], repo: dict[str, Any], **_: Any) -> Decision:
    issue, comment = _dict(payload.get("issue")), _dict(payload.get("comment"))
    if payload.get("action") != "created":
        return Ignored(reason="unhandled-action")
    body = comment.get("body")
    user = _dict(comment.get("user"))
    if not isinstance(body, str) or not body.strip().startswith(COMMAND) or "pull_request" not in issue:
        return Ignored(reason="not-a-command")
    if not _int(issue.get("number")) or not isinstance(user.get("login"), str):
        return Ignored(reason="malformed")
    if user.get("type") == "Bot":
        return Ignored(reason="not-a-command")
    # `/guard run SHA`: the head the commenter reviewed, which the job measures or refuses; the
    # shas are read when the job runs, and write access is checked then, through the API
    words = body.strip()[len(COMMAND):].split()
    named = words[0].lower() if words and _NAMED_SHA.match(words[0]) else None
    repeats = _repeats(words)
    if repeats == 0:  # asked for, and not a count a run may have: nothing runs with another count instead
        return Ignored(reason="bad-repeats")
    detail: dict[str, Any] = {"named_sha": named} if named else {}
    if repeats is not None:
        detail["repeats"] = repeats
    return _job("command", payload, repo, pr=issue["number"], sender=user["login"], detail=detail)


def _repeats(words: list[str]) -> int | None:
    """`--repeats N` (or `--repeats=N`) of a command: N from MIN_REPEATS to MAX_REPEATS, as
    measure.repeats is bounded; None where it is not asked for, 0 where N is not such a count."""
    at = next((i for i, word in enumerate(words) if word == REPEATS_OPTION or word.startswith(f"{REPEATS_OPTION}=")),
              None)
    if at is None:
        return None
    value = words[at].partition("=")[2] or (words[at + 1] if at + 1 < len(words) else "")
    if not re.fullmatch(r"[0-9]{1,4}", value) or not MIN_REPEATS <= int(value) <= MAX_REPEATS:
        return 0
    return int(value)


def _push(payload: dict[str, Any], repo: dict[str, Any], **_: Any) -> Decision:
    before, after, ref = payload.get("before"), payload.get("after"), payload.get("ref")
    if not (is_commit_sha(before) and is_commit_sha(after)) or not isinstance(ref, str):
        return Ignored(reason="malformed")
    if ref != f"refs/heads/{repo.get('default_branch')}":
        return Ignored(reason="not-default-branch")
    if _NO_COMMIT.match(before) or _NO_COMMIT.match(after) or payload.get("deleted") is True:
        return Ignored(reason="no-parent")  # a branch made or deleted: no pair to measure
    return _job("push", payload, repo, base_sha=before, head_sha=after)


def _workflow_run(payload: dict[str, Any], repo: dict[str, Any], *, report_workflows: list[str], **_: Any) -> Decision:
    run = _dict(payload.get("workflow_run"))
    if payload.get("action") != "completed":
        return Ignored(reason="unhandled-action")
    path = PurePosixPath(run.get("path") if isinstance(run.get("path"), str) else "")
    # by its file, never its name, which any workflow may take
    if path.parent != WORKFLOWS or path.suffix not in (".yml", ".yaml") or path.stem not in report_workflows:
        return Ignored(reason="not-a-report-workflow")
    # A report is taken only from a run whose steps the repository itself defined: a pull
    # request's own workflow file runs on `pull_request`, so from a fork such a run (same path,
    # same name) could upload any report it liked; `pull_request_target`, a dispatch or a push
    # run the file as the repository holds it.
    event, name = run.get("event"), repo["full_name"]
    if _dict(run.get("repository")).get("full_name") not in (None, name):
        return Ignored(reason="other-repository-run")
    if event not in BASE_DEFINED and not (event == "pull_request"
                                          and _dict(run.get("head_repository")).get("full_name") == name):
        return Ignored(reason="fork-defined-run")
    if not _int(run.get("id")) or not is_commit_sha(run.get("head_sha")):
        return Ignored(reason="malformed")
    prs = [p.get("number") for p in run.get("pull_requests") or [] if isinstance(p, dict) and _int(p.get("number"))]
    detail: dict[str, Any] = {"workflow_run_id": run["id"]}
    # a run this service dispatched names its job in its title (the workflow's run-name): its pull
    # request is that job's, as a dispatched run lists none
    title = run.get("display_title")
    dispatched = _DISPATCHED.search(title) if isinstance(title, str) else None
    if dispatched:
        detail["dispatched_job"] = int(dispatched[1])
    return _job("workflow_run", payload, repo, pr=prs[0] if prs else None, head_sha=run["head_sha"], detail=detail)


def _check_run(payload: dict[str, Any], repo: dict[str, Any], *, app_id: str | None, **_: Any) -> Decision:
    check = _dict(payload.get("check_run"))
    if payload.get("action") != "rerequested":
        return Ignored(reason="unhandled-action")
    owner_app = _dict(check.get("app")).get("id")
    if app_id is not None and owner_app is not None and str(owner_app) != app_id:
        return Ignored(reason="other-app")
    external = check.get("external_id")
    if not is_commit_sha(check.get("head_sha")) or not isinstance(external, str):
        return Ignored(reason="malformed")
    # the job to run again is found by the check run's external id when the delivery is stored
    return _job("rerun", payload, repo, head_sha=check["head_sha"], detail={"external_id": external})


_HANDLERS = {
    "pull_request": _pull_request,
    "issue_comment": _issue_comment,
    "push": _push,
    "workflow_run": _workflow_run,
    "check_run": _check_run,
}


def _job(kind: JobKind, payload: dict[str, Any], repo: dict[str, Any], **fields: Any) -> JobRequest:
    installation = _dict(payload.get("installation")).get("id")
    clone_url = repo.get("clone_url")
    return JobRequest(
        kind=kind, repo=repo["full_name"], clone_url=clone_url if isinstance(clone_url, str) else None,
        installation_id=installation if _int(installation) else None, **fields,
    )


def _repo(payload: dict[str, Any]) -> dict[str, Any] | None:
    repo = _dict(payload.get("repository"))
    name = repo.get("full_name")
    return repo if is_repo_name(name) else None


def repo_name(payload: dict[str, Any]) -> str | None:
    """The delivery's OWNER/NAME, where it is one (the pattern GitHub allows); else None."""
    repo = _repo(payload)
    return repo["full_name"] if repo is not None else None


def _label_names(pr: dict[str, Any]) -> list[str]:
    labels = pr.get("labels")
    return [label["name"] for label in labels if isinstance(label, dict) and isinstance(label.get("name"), str)] \
        if isinstance(labels, list) else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any) -> bool:
    return type(value) is int and value > 0

