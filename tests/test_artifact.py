"""`guard artifact`, as a real process: what the action uploads is a copy of the guard's own
regular files, never what a link or a pipe left in the traces folder would make it read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard.sandbox import pr_user

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="another user's file needs root to make")


def _gather(out: Path, into: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guard", "artifact", "--out", str(out), "--into", str(into)],
                          capture_output=True, text=True, timeout=60)


def _run_folder(tmp_path: Path) -> tuple[Path, Path]:
    out = tmp_path / "guard-out"
    traces = out / "runs" / "traces"
    traces.mkdir(parents=True)
    (out / "report.json").write_text('{"verdict": "pass"}')
    (out / "comment.md").write_text("the comment")
    (out / "step-times.svg").write_text("<svg/>")
    (out / "runs" / "base-0.log").write_text("a process's log")
    (traces / "base-0-bs1.trace.json.gz").write_bytes(b"\x1f\x8b trace of base")
    secret = tmp_path / "runner-credentials"
    secret.write_text("a credential of the runner's")
    return out, secret


def test_the_artifact_holds_the_report_the_picture_and_the_traces(tmp_path: Path) -> None:
    out, _ = _run_folder(tmp_path)
    into = tmp_path / "temp" / "artifact"
    proc = _gather(out, into)
    assert proc.returncode == 0, proc.stderr
    found = sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file())
    assert found == ["comment.md", "report.json", "runs/traces/base-0-bs1.trace.json.gz", "step-times.svg"]
    assert (into / "runs" / "traces" / "base-0-bs1.trace.json.gz").read_bytes() == b"\x1f\x8b trace of base"
    assert oct(into.stat().st_mode & 0o777) == "0o700"
    assert "gathered 4 file(s)" in proc.stderr and "left out" not in proc.stderr


def test_links_pipes_and_folders_in_the_traces_folder_are_left_out(tmp_path: Path) -> None:
    out, secret = _run_folder(tmp_path)
    traces = out / "runs" / "traces"
    (traces / "head-0-bs1.trace.json.gz").symlink_to(secret)
    os.mkfifo(traces / "head-1-bs1.trace.json.gz")  # a reader that opened it would wait for ever
    (traces / "sub.json.gz").mkdir()
    (traces / "sub.json.gz" / "x.json.gz").symlink_to(secret)
    (out / "comment.md").unlink()
    (out / "comment.md").symlink_to(secret)
    into = tmp_path / "artifact"
    proc = _gather(out, into)
    assert proc.returncode == 0, proc.stderr
    found = sorted(str(p.relative_to(into)) for p in into.rglob("*"))
    assert found == ["report.json", "runs", "runs/traces", "runs/traces/base-0-bs1.trace.json.gz", "step-times.svg"]
    assert not any(p.is_symlink() for p in into.rglob("*"))
    assert all("credential" not in p.read_text(errors="replace") for p in into.rglob("*") if p.is_file())
    assert "left out 4 that were not this user's own regular files" in proc.stderr


@needs_root
def test_a_file_another_user_left_is_left_out(tmp_path: Path) -> None:
    """A process of the pull request's user that outlived the guard can add files to the traces
    folder; the guard's own (written, or sealed when each process ended) are root's."""
    out, _ = _run_folder(tmp_path)
    user = pr_user("guard-pr")
    assert user is not None
    late = out / "runs" / "traces" / "head-0-bs1.trace.json.gz"
    late.write_bytes(b"written after the guard sealed the folder")
    os.chown(late, user.uid, user.gid)
    into = tmp_path / "artifact"
    assert _gather(out, into).returncode == 0
    assert not (into / "runs" / "traces" / "head-0-bs1.trace.json.gz").exists()
    assert (into / "runs" / "traces" / "base-0-bs1.trace.json.gz").exists()


def test_a_folder_that_exists_is_refused_and_nothing_is_copied(tmp_path: Path) -> None:
    out, _ = _run_folder(tmp_path)
    into = tmp_path / "artifact"
    into.mkdir()
    (into / "planted.txt").write_text("from an earlier step")
    proc = _gather(out, into)
    assert proc.returncode == 2 and "exists already" in proc.stderr and "Traceback" not in proc.stderr
    assert sorted(p.name for p in into.iterdir()) == ["planted.txt"]


def test_a_run_that_wrote_nothing_gathers_nothing(tmp_path: Path) -> None:
    into = tmp_path / "artifact"
    proc = _gather(tmp_path / "no-such-out", into)
    assert proc.returncode == 0 and "gathered 0 file(s)" in proc.stderr
    assert list(into.iterdir()) == []
