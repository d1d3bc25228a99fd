"""The trust label of a public repository's pull request, with a real `guard serve` over
loopback: a push after the label was given takes it off through the API, queues nothing and
stores why; a replayed delivery takes nothing off twice; a private repository keeps its label
and measures every push."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest

from guard.service._events import Ignored, StaleTrustLabel, decide
from tests.service_app import JOB_COMMAND, REPO, app_host, origin
from tests.service_server import Service, delivery, pull_request

pytestmark = pytest.mark.slow

LABEL = "safe-to-test"


def _labelled(number: int, base: str, head: str, clone_url: str, *, action: str, private: bool,
              labels: list[str]) -> dict:
    payload = pull_request(REPO, number, base, head, clone_url, action=action, private=private)
    payload["pull_request"]["labels"] = [{"name": name} for name in labels]
    return payload


def _reason(work_dir: Path, delivery_id: str, settled: tuple[str, ...] = ("trust-label-stale",)) -> str:
    """The delivery's stored reason, once it is no longer one of `settled` (the removal runs after the answer)."""
    deadline = time.monotonic() + 20
    while True:
        db = sqlite3.connect(work_dir / "guard.db")
        (reason,) = db.execute("SELECT reason FROM deliveries WHERE id = ?", (delivery_id,)).fetchone()
        db.close()
        if reason not in settled or time.monotonic() > deadline:
            return reason
        time.sleep(0.1)


def test_a_push_after_the_trust_label_takes_it_off_and_queues_nothing(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    host.api.state.labels[(REPO, 3)] = ["bug", LABEL]
    with host.api, Service(tmp_path / "service", *host.args(), "--workers", "0") as service:
        body, headers = delivery("pull_request", _labelled(3, base, head, str(repo), action="synchronize",
                                                           private=False, labels=["bug", LABEL]))
        started = time.monotonic()
        answer = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
        assert time.monotonic() - started < 10  # GitHub's limit for an answer; the label goes after it
        assert answer.status_code == 202
        assert answer.json() == {"delivery": headers["x-github-delivery"], "duplicate": False, "job": None,
                                 "ignored": "trust-label-stale"}
        assert _reason(service.work_dir, headers["x-github-delivery"]) == "trust-label-removed"
        assert host.api.labels(REPO, 3) == ["bug"]
        (removal,) = host.api.requests("DELETE")
        assert removal.path == f"/repos/{REPO}/issues/3/labels/{LABEL}"

        # GitHub's redelivery of it: the stored answer, and nothing taken off again
        again = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
        assert again.json()["duplicate"] is True and again.json()["job"] is None
        # a push while the label is off: nothing to take off
        plain_body, plain = delivery("pull_request", _labelled(3, base, head, str(repo), action="synchronize",
                                                               private=False, labels=["bug"]))
        unlabelled = httpx.post(service.url + "/github/webhook", content=plain_body, headers=plain, timeout=30)
        assert unlabelled.json()["ignored"] == "needs-trust-label"
        time.sleep(0.5)  # what a second removal would take, were there one
        assert service.jobs() == []
    assert len(host.api.requests("DELETE")) == 1


def test_a_label_gone_already_or_refused_is_stored_as_such(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    host.api.state.labels[(REPO, 4)] = ["bug"]  # a maintainer took it off before the delivery came
    host.api.plan("DELETE", rf"/repos/{REPO}/issues/5/labels/.*", "5xx", status=403)  # the App may not
    host.api.state.labels[(REPO, 5)] = [LABEL]
    sent = {}
    with host.api, Service(tmp_path / "service", *host.args(), "--workers", "0") as service:
        for number, action in ((4, "reopened"), (5, "synchronize")):
            body, headers = delivery("pull_request", _labelled(number, base, head, str(repo), action=action,
                                                               private=False, labels=[LABEL]))
            httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30)
            sent[number] = headers["x-github-delivery"]
        assert _reason(service.work_dir, sent[4]) == "trust-label-gone"
        assert _reason(service.work_dir, sent[5]) == "trust-label-not-removed"
        assert host.api.labels(REPO, 5) == [LABEL] and service.jobs() == []


def test_a_private_repository_keeps_its_label_and_measures_the_push(tmp_path: Path) -> None:
    repo, base, head = origin(tmp_path / "origin")
    host = app_host(tmp_path / "app")
    host.api.state.labels[(REPO, 6)] = [LABEL]
    with host.api, Service(tmp_path / "service", *host.args(), "--workers", "1", "--job-command",
                           JOB_COMMAND) as service:
        body, headers = delivery("pull_request", _labelled(6, base, head, str(repo), action="synchronize",
                                                           private=True, labels=[LABEL]))
        queued = httpx.post(service.url + "/github/webhook", content=body, headers=headers, timeout=30).json()
        (job,) = service.wait_jobs(1)
    assert queued["job"] == job["id"] and job["state"] == "done"
    assert host.api.labels(REPO, 6) == [LABEL] and host.api.requests("DELETE") == []


def test_which_pull_request_events_ask_for_the_label_to_come_off() -> None:
    def decided(action: str, private: bool, labels: list[str]):
        payload = _labelled(3, "b" * 40, "a" * 40, "unused", action=action, private=private, labels=labels)
        payload["installation"] = {"id": 77}
        return decide("pull_request", payload, LABEL, ["regression-guard"])

    for action in ("synchronize", "reopened"):
        stale = decided(action, False, ["bug", LABEL])
        assert stale == StaleTrustLabel(repo=REPO, pr=3, label=LABEL, installation_id=77)
        assert stale.reason == "trust-label-stale"
        assert decided(action, False, ["bug"]) == Ignored(reason="needs-trust-label")
    # opened with the label on (a maintainer's, labelled as it was made): no commit came after the label
    assert decided("opened", False, [LABEL]) == Ignored(reason="needs-trust-label")
    assert decided("synchronize", True, [LABEL]).kind == "pull_request"
    assert decide("pull_request", _labelled(3, "b" * 40, "a" * 40, "unused", action="synchronize", private=False,
                                            labels=[LABEL]), "other-label", []) == Ignored(reason="needs-trust-label")
