"""A report the Action measured, fetched from its workflow run's artifact: the artifact named
like the Action's (regression-guard-report, or one starting so), its zip bounded in size and
only report.json taken from it, then checked like any report read back."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import httpx

from guard.publish import GitHub, PublishError
from guard.report import MAX_REPORT_BYTES, Report, read_report

ARTIFACT_PREFIX = "regression-guard"
MAX_ZIP_BYTES = 256 << 20


def report_of_workflow_run(rest: GitHub, repo: str, run_id: int, out_dir: Path) -> Report:
    listed = rest.get(f"/repos/{repo}/actions/runs/{run_id}/artifacts", per_page=100)
    artifacts = listed.get("artifacts") if isinstance(listed, dict) else None
    found = [a for a in artifacts or [] if isinstance(a, dict) and isinstance(a.get("name"), str)
             and a["name"].startswith(ARTIFACT_PREFIX) and type(a.get("id")) is int and not a.get("expired")]
    if not found:
        raise PublishError(f"workflow run {run_id} of {repo} has no artifact named {ARTIFACT_PREFIX}*: "
                           "give the Action an `artifact` input")
    path = f"/repos/{repo}/actions/artifacts/{found[0]['id']}/zip"
    answer = rest.request("GET", path, ok=(302,))
    data = _download(answer.headers["location"]) if answer.status_code == 302 else answer.content
    out = out_dir / "report.json"
    out.write_bytes(_report_member(data, run_id))
    return read_report(out)


def _download(url: str) -> bytes:
    """The zip from where GitHub redirects: a signed URL of another host, so no token is sent."""
    body = bytearray()
    with httpx.stream("GET", url, timeout=120.0, follow_redirects=False) as answer:
        if answer.status_code != 200:
            raise PublishError(f"downloading the artifact: HTTP {answer.status_code}")
        for chunk in answer.iter_bytes():
            body += chunk
            if len(body) > MAX_ZIP_BYTES:
                raise PublishError(f"the artifact is over {MAX_ZIP_BYTES >> 20} MiB; it cannot be the guard's")
    return bytes(body)


def _report_member(data: bytes, run_id: int) -> bytes:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        info = archive.getinfo("report.json")
    except (zipfile.BadZipFile, KeyError) as exc:
        raise PublishError(f"the artifact of workflow run {run_id} is not a zip with report.json at its top") from exc
    if info.file_size > MAX_REPORT_BYTES:
        raise PublishError(f"report.json in workflow run {run_id}'s artifact is over {MAX_REPORT_BYTES:,} bytes")
    with archive.open(info) as member:
        return member.read(MAX_REPORT_BYTES + 1)
