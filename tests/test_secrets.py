"""The pull request's code (its build and its workload) never sees the job's credentials."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from guard._env import is_secret_name, untrusted_env
from tests.conftest import commit_all, git

# Writes the environment it was given to the file named by ENV_DUMP_DIR, one per process.
RECORD_ENV = '''
import json, os, sys, uuid
from pathlib import Path

def record(stage):
    out = Path(os.environ["ENV_DUMP_DIR"]) / f"{stage}-{uuid.uuid4().hex}.json"
    out.write_text(json.dumps(dict(os.environ)))

if __name__ == "__main__":
    record(sys.argv[1])
'''

WORKLOAD = '''
import record_env

class Workload:
    def setup(self, batch_size):
        record_env.record("workload")
        self.batch_size, self.t = batch_size, 0

    def step(self):
        self.t += 1
        return [self.t % 11 + row for row in range(self.batch_size)]

def make(**options):
    return Workload()
'''

CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 4
warmup_steps = 1
profile_steps = 0
[build]
method = "venv"
install = "python record_env.py build"
pass_env = ["HF_TOKEN"]
[measure]
repeats = 2
confirm = false
"""

SECRETS = {
    "GITHUB_TOKEN": "ghs_sentinel_github_token",
    "GH_TOKEN": "sentinel_gh",
    "ACTIONS_RUNTIME_TOKEN": "sentinel_runtime",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://sentinel.invalid/oidc",
    "AWS_SECRET_ACCESS_KEY": "sentinel_aws",
    "DEPLOY_PASSWORD": "sentinel_password",
    "INPUT_TOKEN": "sentinel_input",
}


@pytest.mark.slow
def test_build_and_workload_never_see_the_jobs_secrets(tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "record_env.py").write_text(RECORD_ENV)
    (repo / "wl.py").write_text(WORKLOAD)
    (repo / "guard.toml").write_text(CONFIG)
    commit_all(repo, "workload that records its environment")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "note.txt").write_text("unrelated\n")
    commit_all(repo, "unrelated change")
    # As actions/checkout leaves it with persist-credentials on.
    git(repo, "config", "--local", "http.https://github.com/.extraheader", "AUTHORIZATION: basic c2VudGluZWw=")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    env = os.environ | SECRETS | {"HF_TOKEN": "hf_passed_on_purpose", "ENV_DUMP_DIR": str(dumps)}
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode == 0, proc.stderr
    seen = [json.loads(p.read_text()) for p in sorted(dumps.iterdir())]
    stages = sorted(p.name.split("-")[0] for p in dumps.iterdir())
    assert stages == ["build", "build", "workload", "workload", "workload", "workload"]
    for recorded in seen:
        leaked = {name for name, value in SECRETS.items() if value in recorded.values()}
        assert leaked == set()
        assert recorded["HF_TOKEN"] == "hf_passed_on_purpose"  # named in build.pass_env
        assert recorded["PATH"] and recorded["ENV_DUMP_DIR"] == str(dumps)  # the rest is kept
    report = json.loads((out / "report.json").read_text())
    assert any("persist-credentials: false" in w for w in report["warnings"])
    assert "persist-credentials: false" in (out / "comment.md").read_text()


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("GITHUB_TOKEN", True), ("HF_TOKEN", True), ("OPENAI_API_KEY", True), ("AWS_ACCESS_KEY_ID", True),
        ("NPM_AUTH", True), ("ACTIONS_CACHE_URL", True), ("INPUT_CONFIG", True), ("DB_PASSWD", True),
        ("PATH", False), ("CUDA_VISIBLE_DEVICES", False), ("HOME", False), ("GITHUB_SHA", False),
        ("PYTHONPATH", False), ("TORCH_CUDA_ARCH_LIST", False), ("KEYBOARD", False),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


def test_untrusted_env_keeps_what_is_named() -> None:
    env = untrusted_env(["HF_TOKEN"], base={"HF_TOKEN": "a", "GITHUB_TOKEN": "b", "PATH": "/bin"})
    assert env == {"HF_TOKEN": "a", "PATH": "/bin"}
