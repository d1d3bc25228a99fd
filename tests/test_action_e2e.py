"""The action's steps, run with bash, driving the real guard end to end: a real git
repository with a slower head, the real `guard run`, `guard summary` and `guard comment`,
posting to the GitHub stand-in on loopback."""

from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path

import pytest
import yaml

from tests.composite_runner import ArtifactStore, clean_env, run_action
from tests.conftest import commit_all, git
from tests.github_standin import GitHubStandIn
from tests.test_pipeline import make_repo, write_workload

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "ghs_thetokenofthisjob"

# The runner's Python, as the action's install step uses it: `-m venv DIR` gives a venv
# whose guard is this checkout's (already installed in the test environment).
RUNNER_PYTHON = '''#!/usr/bin/env bash
set -euo pipefail
if [[ "$1" == "-m" && "$2" == "venv" ]]; then
  venv="${{@: -1}}"
  mkdir -p "$venv/bin"
  printf '#!/bin/sh\\nexec "{python}" -m guard "$@"\\n' > "$venv/bin/guard"
  # pip has nothing to do: the guard is installed already
  printf '#!/bin/sh\\n[ "$1" = -m ] && [ "$2" = pip ] && exit 0\\nexec "{python}" "$@"\\n' > "$venv/bin/python"
  chmod +x "$venv/bin/guard" "$venv/bin/python"
  exit 0
fi
exec "{python}" "$@"
'''


@pytest.mark.slow
def test_action_measures_posts_once_and_fails_the_job_on_a_real_regression(tmp_path: Path) -> None:
    repo = make_repo(tmp_path, repeats=2)
    base_sha = git(repo, "rev-parse", "main")
    write_workload(repo, work=30000)  # ten times the work per step
    head_sha = commit_all(repo, "make decode ten times slower")
    runner_python = tmp_path / "python3"
    runner_python.write_text(RUNNER_PYTHON.format(python=sys.executable))
    runner_python.chmod(runner_python.stat().st_mode | stat.S_IEXEC)
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    github = {
        "token": TOKEN, "action_path": str(ROOT), "repository": "octo/engine", "server_url": "https://github.com",
        "run_id": 41, "sha": head_sha, "event_name": "pull_request",
        "event": {"pull_request": {"number": 12, "base": {"sha": base_sha}, "head": {"sha": head_sha}}},
    }
    artifacts = ArtifactStore(tmp_path / "artifacts")
    with GitHubStandIn({TOKEN: None}) as api:
        job_env = clean_env() | {"GITHUB_API_URL": api.url, "GITHUB_TOKEN": TOKEN}
        inputs = {"python": str(runner_python)}
        first = run_action(action, inputs, github, repo, job_env, uses={"actions/upload-artifact": artifacts})
        # a second job of the run, with the artifact's name its own
        inputs |= {"artifact": "regression-guard-2"}
        second = run_action(action, inputs, github, repo, job_env, uses={"actions/upload-artifact": artifacts})
        comments = api.comments("octo/engine", 12)
        statuses = api.statuses("octo/engine", head_sha)

    run_step = first.step("Run regression-guard")
    # the guard's exit code (regression: 1) is the step's; the step goes on, the last one decides
    assert (run_step.exit_code, run_step.conclusion) == (1, "success"), run_step.stdout
    assert "verdict: regression" in run_step.stdout
    assert first.outputs["verdict"] == "regression"
    assert float(first.outputs["tok-per-s-change"]) < -50  # ten times the work: tok/s far below half
    assert float(first.outputs["gpu-ms-change"]) > 100  # and each step more than twice as long
    # report.json, the comment and the picture, one click from the comment (a CPU run has no traces)
    assert artifacts.files("regression-guard") == ["comment.md", "report.json", "step-times.svg"]
    assert json.loads((artifacts.root / "regression-guard" / "report.json").read_text())["verdict"] == "regression"
    assert first.outputs["report-path"] == "guard-out/report.json"
    assert re.search(r"\d(%|x) slower at batch size ", first.summary)
    assert "::error title=Decode regression::" in first.step("Summarize").stdout
    assert first.step("Check the verdict").exit_code == 1 and not first.succeeded
    # the per-job cache's builds went with the job, and git forgot their worktrees
    cleaned = first.step("Remove the builds no later job needs")
    assert cleaned.exit_code == 0 and "removed 2 build(s)" in cleaned.stdout, cleaned.stdout
    assert not (repo / "runner-temp" / "regression-guard-cache").exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1

    # One comment, by the Actions token's login, found and left as it was by the second run.
    assert len(comments) == 1 and comments[0]["user"]["login"] == "github-actions[bot]"
    assert first.outputs["comment-url"] == second.outputs["comment-url"] == comments[0]["html_url"]
    assert "make decode ten times slower" in comments[0]["body"]
    run_url = "https://github.com/octo/engine/actions/runs/41"
    assert f"[the artifact]({run_url}/artifacts/2) of [the run that measured]({run_url})" in comments[0]["body"]
    assert f"[the artifact]({run_url}/artifacts/1)" in first.summary
    assert "```mermaid\nxychart-beta" in comments[0]["body"]
    assert [s["state"] for s in statuses] == ["failure", "failure"]
    assert {s["context"] for s in statuses} == {"regression-guard"}
    assert statuses[0]["target_url"] == comments[0]["html_url"]
