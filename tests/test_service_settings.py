"""`guard serve` refuses a bad setting with one message and exit 2, before it listens."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guard", "serve", "--work-dir", str(tmp_path / "w"), *args],
                          capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "GUARD_WEBHOOK_SECRET"} | (env or {}))


@pytest.mark.parametrize(("args", "said"), [
    (["--db", "mysql://x@y/z"], "keeps its data in a file"),
    (["--db", "sqlite:////nonexistent-folder/guard.db"], "does not exist"),
    (["--db", "not a url"], "is not a database URL"),
    (["--app-id-file", "/nonexistent"], "needs both --app-id-file and --app-key-file"),
    (["--webhook-secret-file", "/nonexistent"], "cannot read the webhook secret file"),
    (["--port", "0"], "is not a port number"),
    (["--job-command", "'unclosed"], "--job-command"),
    (["--cache-unused-days", "nan"], "--cache-unused-days nan: give a number of days"),
])
def test_a_bad_setting_is_one_message_and_exit_2(tmp_path: Path, args: list[str], said: str) -> None:
    done = _serve(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr
    assert done.stderr.startswith("guard: error: ") and "Traceback" not in done.stderr


def test_the_secret_is_not_taken_twice(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_text("from-a-file\n")
    done = _serve(tmp_path, "--webhook-secret-file", str(secret), env={"GUARD_WEBHOOK_SECRET": "from-env"})
    assert done.returncode == 2 and "set twice" in done.stderr


@pytest.mark.slow
def test_an_app_key_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    (tmp_path / "id").write_text("12\n")
    (tmp_path / "key").write_text("not a key\n")
    done = _serve(tmp_path, "--app-id-file", str(tmp_path / "id"), "--app-key-file", str(tmp_path / "key"))
    assert done.returncode == 2 and "is not a PEM private key" in done.stderr


def test_an_undecided_run_concludes_action_required_or_failure_and_never_neutral(tmp_path: Path) -> None:
    """`--undecided-conclusion`, for `guard serve` and `guard worker` alike; neutral is no choice:
    a required check takes it as passing. The comment is posted for every verdict but a pass and
    an improvement unless `--comment-mode` says otherwise."""
    import argparse

    from guard.service._serve import add_job_arguments, job_settings

    parser = argparse.ArgumentParser(prog="guard serve", exit_on_error=False)
    add_job_arguments(parser)
    given = job_settings(parser.parse_args(["--work-dir", str(tmp_path / "w")]))
    assert (given["undecided_conclusion"], given["comment_mode"]) == ("action_required", "unless-green")
    failing = job_settings(parser.parse_args(["--work-dir", str(tmp_path / "w"), "--undecided-conclusion", "failure"]))
    assert failing["undecided_conclusion"] == "failure"
    with pytest.raises(argparse.ArgumentError, match="invalid choice: 'neutral'"):
        parser.parse_args(["--undecided-conclusion", "neutral"])
