"""`guard serve` as a real subprocess on loopback for the service's tests: started on a free
port, waited for through /healthz, stopped with SIGTERM or killed with SIGKILL; deliveries
signed as GitHub signs them."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
from githubkit.webhooks import sign

SECRET = "webhook-secret-for-tests"
READ_TOKEN = "read-token-for-the-tests-0123456789"  # what the dashboard's and the API's readers send
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServiceProcess:
    """A command of the service as a real subprocess: stopped, or killed as a host dies."""

    process: subprocess.Popen | None = None  # type: ignore[type-arg]

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def __exit__(self, *_: object) -> None:
        self.stop()


class Service(ServiceProcess):
    def __init__(self, work_dir: Path, *args: str, db: str | None = None, env: dict[str, str] | None = None) -> None:
        self.work_dir, self.args, self.db, self.env = work_dir, list(args), db, env or {}
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = work_dir / "serve.log"

    def start(self) -> Service:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "guard", "serve", "--work-dir", str(self.work_dir), "--port", str(self.port),
                   *(["--db", self.db] if self.db else []), *self.args]
        env = dict(os.environ, GUARD_WEBHOOK_SECRET=SECRET, GUARD_READ_TOKEN=READ_TOKEN) | self.env
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"guard serve exited {self.process.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"guard serve did not answer within {START_TIMEOUT_S:g} s: {self.log.read_text()[-3000:]}")

    def __enter__(self) -> Service:
        return self.start()

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        """GET `path` as a reader of the service: with its read token."""
        headers = {"authorization": f"Bearer {READ_TOKEN}"} | kwargs.pop("headers", {})
        return httpx.get(self.url + path, headers=headers, **({"timeout": 30} | kwargs))

    def jobs(self, **params: Any) -> list[dict[str, Any]]:
        return self.get("/api/v1/jobs", params={"limit": 1000} | params).json()["jobs"]

    def wait_jobs(self, count: int, states: tuple[str, ...] = ("done", "failed"), timeout_s: float = 90.0
                  ) -> list[dict[str, Any]]:
        """The jobs, once `count` of them are in `states`."""
        deadline = time.monotonic() + timeout_s
        while True:
            jobs = self.jobs()
            if sum(j["state"] in states for j in jobs) >= count:
                return jobs
            if time.monotonic() > deadline:
                raise AssertionError(f"jobs not {states} after {timeout_s:g} s: {jobs}; log: "
                                     f"{self.log.read_text()[-3000:]}")
            time.sleep(0.2)


def delivery(event: str, payload: dict[str, Any], secret: str = SECRET, delivery_id: str | None = None,
             ) -> tuple[bytes, dict[str, str]]:
    """A delivery's body and headers, signed with SHA-256 as GitHub signs them."""
    body = json.dumps(payload).encode()
    return body, {
        "content-type": "application/json", "x-github-event": event,
        "x-github-delivery": delivery_id or str(uuid.uuid4()), "x-hub-signature-256": sign(secret, body, "sha256"),
    }


def pull_request(repo: str, number: int, base: str, head: str, clone_url: str, *, action: str = "opened",
                 private: bool = True, label: str | None = None, installation: int = 77) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "action": action, "number": number, "installation": {"id": installation},
        "repository": {"full_name": repo, "private": private, "clone_url": clone_url, "default_branch": "main"},
        "pull_request": {"number": number, "head": {"sha": head}, "base": {"sha": base}},
    }
    if label is not None:
        payload["label"] = {"name": label}
    return payload
