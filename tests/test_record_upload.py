"""A record read back as data (checked, its figures made again from its values), and `guard
upload`, which sends it to the service: over real HTTP on loopback to a stand-in that answers
as a busy or refusing service would, retried where the service asks, refused where it says no."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from guard.cli import main
from guard.publish import UploadError, upload_record
from guard.publish._upload import records_url
from guard.record import RecordError, parse_record
from tests.service_history import demo_record

TOKEN = "ingest-token-for-the-tests-0123456789"


def _record_json(**edits: Any) -> dict[str, Any]:
    data = json.loads(demo_record().model_dump_json())
    for path, value in edits.items():
        *parents, last = path.split("/")
        target = data
        for part in parents:
            target = target[int(part)] if part.isdigit() else target[part]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value
    return data


_DELETE = object()
_ONE = _record_json()
_STEP = _ONE["batch_sizes"][0]["stats"]["gpu_ms_per_step"]


@pytest.mark.parametrize(("edits", "said"), [
    # a derived figure that its values do not give: the median of the processes' step times
    ({"batch_sizes/0/stats/gpu_ms_per_step/median": _STEP["median"] * 0.5},
     "batch size 1: arms[head].gpu_ms_per_step.median"),
    # a process's figure dropped from the values, the count of processes left as it was
    ({"batch_sizes/0/stats/gpu_ms_per_step/values": _STEP["values"][1:]},
     f"arms[head].gpu_ms_per_step.values is {len(_STEP['values']) - 1} values"),
    ({"arm/sha": "abc123"}, "arm.sha is not a full hex commit sha"),
    ({"arm/status": "build_failed"}, "batch_sizes is 2 measured, where none (arm.status is build_failed) is due"),
    ({"batch_sizes/1/batch_size": 1}, "batch_sizes is 1, 1, where the workload's, each once (1, 2) is due"),
    ({"batch_sizes/0/stats/arm": "base"}, "stats.arm is another arm's name"),
    ({"schema_version": 2}, "is a record of schema_version 2; this guard reads schema_version 1 only"),
    ({"environment": _DELETE}, "is not a valid record: environment: Field required"),
])
def test_a_record_that_its_own_values_do_not_give_is_refused_naming_what(edits: dict[str, Any], said: str) -> None:
    with pytest.raises(RecordError) as refused:
        parse_record(json.dumps(_record_json(**edits)).encode(), "the upload")
    assert said in refused.value.message and refused.value.message.startswith("the upload ")


def test_a_record_as_written_holds_up() -> None:
    record = parse_record(json.dumps(_ONE).encode(), "the upload")
    assert record == demo_record() and record.measured


@pytest.mark.parametrize(("given", "url"), [
    ("https://guard.example.org", "https://guard.example.org/api/v1/records"),
    ("https://guard.example.org/under/", "https://guard.example.org/under/api/v1/records"),
    ("http://127.0.0.1:8080", "http://127.0.0.1:8080/api/v1/records"),
    ("http://localhost:8080/", "http://localhost:8080/api/v1/records"),
])
def test_the_records_route_of_a_service_url(given: str, url: str) -> None:
    assert str(records_url(given)) == url


@pytest.mark.parametrize(("given", "said"), [
    ("http://guard.example.org", "plain HTTP to another host, which would send the token in the clear"),
    ("ftp://guard.example.org", "is not an http(s) URL"),
    ("guard.example.org", "is not an http(s) URL"),
    ("https://guard.example.org/?repo=x", "has a query or fragment"),
])
def test_a_service_url_that_would_leak_the_token_or_is_no_url_is_refused(given: str, said: str) -> None:
    with pytest.raises(UploadError, match=said.replace("(", r"\(").replace(")", r"\)")):
        records_url(given)


class _StandIn(BaseHTTPRequestHandler):
    """Answers each POST with the next of `answers`: (status, body), or None to hang up unanswered."""

    answers: list[tuple[int, dict[str, Any]] | None] = []
    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers["content-length"]))
        type(self).seen.append({"path": self.path, "authorization": self.headers["authorization"], "body": body})
        answer = type(self).answers.pop(0)
        if answer is None:
            self.close_connection = True
            self.connection.close()  # sent, and no answer: the upload may or may not have landed
            return
        status, payload = answer
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def stand_in() -> Iterator[tuple[str, type[_StandIn]]]:
    handler = type("Handler", (_StandIn,), {"answers": [], "seen": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def _written(tmp_path: Path) -> Path:
    path = tmp_path / "record.json"
    path.write_text(demo_record().model_dump_json(indent=2) + "\n")
    return path


def test_an_upload_is_sent_again_after_a_busy_answer_and_after_no_answer(tmp_path: Path, stand_in) -> None:
    url, service = stand_in
    service.answers += [(503, {"message": "starting"}), None, (200, {"run": 7, "outcome": "unchanged"})]
    path, waits = _written(tmp_path), []
    uploaded = upload_record(path, url, "octo/engine", TOKEN, sleep=waits.append)
    assert (uploaded.run, uploaded.outcome) == (7, "unchanged")
    # three tries of the same request, two waits between them, growing
    assert [s["path"] for s in service.seen] == ["/api/v1/records?repo=octo%2Fengine"] * 3
    assert {s["authorization"] for s in service.seen} == {f"Bearer {TOKEN}"}
    assert {s["body"] for s in service.seen} == {path.read_bytes()}
    assert len(waits) == 2 and 2.0 <= waits[0] <= 3.0 < 4.0 <= waits[1] <= 5.0  # 2 s, then 4 s, each + up to 1 s


def test_a_refusal_is_not_sent_again_and_says_the_services_reason(tmp_path: Path, stand_in) -> None:
    url, service = stand_in
    service.answers += [(422, {"error": "unfounded-record", "message": "the upload states figures ..."})]
    with pytest.raises(UploadError, match=r"refused the record \(HTTP 422\): the upload states figures"):
        upload_record(_written(tmp_path), url, "octo/engine", TOKEN, sleep=lambda _: None)
    assert len(service.seen) == 1


def test_a_service_busy_on_every_try_ends_in_one_message(tmp_path: Path, stand_in) -> None:
    url, service = stand_in
    service.answers += [(502, {})] * 3
    with pytest.raises(UploadError, match="answered HTTP 502 to each of 3 tries"):
        upload_record(_written(tmp_path), url, "octo/engine", TOKEN, tries=3, sleep=lambda _: None)
    assert len(service.seen) == 3


def test_guard_upload_checks_the_record_before_sending_it(tmp_path: Path, stand_in, monkeypatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    url, service = stand_in
    path = tmp_path / "record.json"
    path.write_text(json.dumps(_record_json(**{"batch_sizes/0/stats/gpu_ms_per_step/median": 1e9})))
    monkeypatch.setenv("GUARD_SERVICE_TOKEN", TOKEN)
    assert main(["upload", "--record", str(path), "--service-url", url, "--repo", "octo/engine"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"guard: error: {path} states figures") and err.count("\n") == 1
    assert service.seen == []


def test_guard_upload_without_a_token_says_where_it_comes_from(tmp_path: Path, monkeypatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("GUARD_SERVICE_TOKEN", raising=False)
    assert main(["upload", "--record", str(_written(tmp_path)), "--service-url", "https://guard.example.org",
                 "--repo", "octo/engine"]) == 2
    assert "no ingest token: set GUARD_SERVICE_TOKEN" in capsys.readouterr().err
