"""The pull request's code tried as an attacker would: its build and its workload read their
own environment and every ancestor's /proc/PID/environ for the job's secrets, and try to
write the guard's cache and output. Real `guard run` processes on real git repositories;
the second-user cases run where the tests run as root (skipped otherwise)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from guard.checkout._cache import CACHE_MARK_NAME
from guard.sandbox import MARKER, guard_environment, is_allowed, pr_environment
from guard.sandbox._env import check_pass_env
from tests.composite_runner import ArtifactStore, clean_env, run_action
from tests.conftest import commit_all, git, marked, sleep_mark, writable_by_all

ROOT = Path(__file__).resolve().parent.parent
AS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not AS_ROOT, reason="the second user is made and used only by a guard run as root")

# Reads what an attacker's code would, and tries what it would write; one JSON per process
# into PROBE_DUMP. Run by the build (`python probe.py build`) and by the workload.
PROBE = r'''
import json, os, sys, uuid
from pathlib import Path


def _parent(pid):
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def ancestors():
    """(pid, argv, environ or the error reading it) for every process above this one."""
    found, pid = [], os.getppid()
    while pid > 1:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        except OSError as exc:
            environ = {"error": type(exc).__name__}
        found.append({"pid": pid, "argv": argv, "environ": environ})
        pid = _parent(pid)
    return found


def try_write(path):
    try:
        with open(path, "a") as f:
            f.write("# written by the pull request\n")
        return "written"
    except OSError as exc:
        return type(exc).__name__


def attempts():
    out, cache = Path(os.environ["PROBE_OUT"]), Path(os.environ["PROBE_CACHE"])
    targets = [out / "planted.txt", out / "runs" / "planted.txt", out / "runs" / "reference-tokens.json",
               cache / "planted.txt"]
    for folder in sorted(p for p in cache.iterdir() if p.is_dir()):
        targets += [folder / name for name in ("marker.json", "build.log", "lock", "planted.txt")]
        targets += [folder / "tree" / "wl.py", folder / "tree" / "planted.txt", folder / "venv" / "planted.txt"]
    return {str(p): try_write(p) for p in targets}


def record(stage):
    facts = {"stage": stage, "pid": os.getpid(), "uid": os.getuid(), "cwd": os.getcwd(),
             "own_env": dict(os.environ), "ancestors": ancestors(), "writes": attempts()}
    dump = Path(os.environ["PROBE_DUMP"]) / f"{stage}-{uuid.uuid4().hex}.json"
    dump.write_text(json.dumps(facts))


if __name__ == "__main__":
    record(sys.argv[1])
'''

WORKLOAD = '''
import probe

class Workload:
    def setup(self, batch_size):
        probe.record("workload")
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
steps = 3
warmup_steps = 1
# one pass per process: the probe records every setup(), so each process once
tok_per_s_min_s = 0
warmup_max_s = 0
[build]
method = "venv"
install = "python probe.py build"
pass_env = ["PROBE_DUMP", "PROBE_OUT", "PROBE_CACHE"]
{user}
[measure]
repeats = 2
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
"""

# Secrets as a job holds them: in its environment, some in names no denylist guessed.
SECRETS = {
    "GITHUB_TOKEN": "ghs_sentinelgithubtoken",
    "GH_TOKEN": "sentinel-gh-token",
    "ACTIONS_RUNTIME_TOKEN": "sentinel-runtime-token",
    "ACTIONS_ID_TOKEN_REQUEST_URL": "https://sentinel-oidc.invalid/token",
    "DEPLOY_KEY": "sentinel-deploy-key",
    "SSH_KEY": "sentinel-ssh-key",
    "SIGNING_KEY": "sentinel-signing-key",
    "PYPI_PASS": "sentinel-pypi-pass",
    "PASSPHRASE": "sentinel-passphrase",
    "DATABASE_URL": "postgres://admin:sentinel-db-password@db.invalid/prod",
    "SLACK_WEBHOOK_URL": "https://hooks.slack.invalid/services/sentinel-slack",
    "SENTRY_DSN": "https://sentinel-sentry@o1.ingest.invalid/2",
    "NVIDIA_API_KEY": "sentinel-nvidia-api-key",  # an allowlisted family, a secret's name
    "PIP_INDEX_URL": "https://__token__:sentinel-pip-index@pypi.invalid/simple",  # allowlisted, credentials
    "HTTPS_PROXY": "http://proxyuser:sentinel-proxy-password@proxy.invalid:3128",
}


def _job_files(tmp_path: Path) -> dict[str, str]:
    """The runner's step files, whose paths are what a PR's code must not learn."""
    files = {}
    for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY"):
        path = tmp_path / "runner-files" / f"sentinel-{name.lower()}"
        path.parent.mkdir(exist_ok=True)
        path.touch()
        files[name] = str(path)
    return files


def _repo(tmp_path: Path, user_line: str, committed: str | None = None) -> Path:
    """The engine; its base commit's guard.toml is the probing config, or `committed`."""
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "probe.py").write_text(PROBE)
    (repo / "wl.py").write_text(WORKLOAD)
    (repo / "guard.toml").write_text(CONFIG.format(user=user_line) if committed is None else committed)
    commit_all(repo, "a workload and a build that look for secrets")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "note.txt").write_text("the pull request\n")
    commit_all(repo, "the pull request")
    return repo


def _probe_env(tmp_path: Path) -> dict[str, str]:
    out, cache = tmp_path / "out", tmp_path / "cache"
    cache.mkdir()
    return {"PROBE_DUMP": str(writable_by_all(tmp_path / "dumps")), "PROBE_OUT": str(out), "PROBE_CACHE": str(cache)}


def _records(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((tmp_path / "dumps").iterdir())]


def _leaks(record: dict, planted: dict[str, str]) -> set[str]:
    """Names of planted values found in the process's own environment or any ancestor's it could read."""
    readable = [a["environ"] for a in record["ancestors"] if isinstance(a["environ"], str)]
    texts = [json.dumps(record["own_env"]), *readable]
    return {name for name, value in planted.items() for text in texts if value in text}


def _guard_run(repo: Path, env: dict[str, str], *extra: str) -> dict:
    """The report of a `guard run` whose arms both built and ran (steps of microseconds: any verdict)."""
    out, cache = env["PROBE_OUT"], env["PROBE_CACHE"]
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out", out,
         "--cache-dir", cache, *extra],
        capture_output=True, text=True, timeout=600, env=env,
    )
    assert proc.returncode in (0, 1, 4), proc.stderr  # a verdict, any
    report = json.loads((Path(out) / "report.json").read_text())
    assert [a["status"] for a in report["arms"]] == ["ok", "ok"], proc.stderr
    return report


def _is_guard(argv: list[str]) -> bool:
    return "guard" in argv and "run" in argv


# The defence behind the kernel's box, tried without it: in PID namespaces of its own (the
# default where the guard runs as root) the code sees no process above it to read at all.
UNBOXED = 'isolation = "none"'


@pytest.mark.slow
def test_code_run_as_the_guards_own_user_finds_no_secret_in_any_process_above_it(tmp_path: Path) -> None:
    """The PR's code runs as the guard's user, so the guard's /proc/PID/environ is readable:
    it holds no secret because the guard restarted itself with an allowlisted environment."""
    repo = _repo(tmp_path, f'user = ""\n{UNBOXED}' if AS_ROOT else "")
    # as actions/checkout leaves it with persist-credentials on: within reach, so warned of
    git(repo, "config", "--local", "http.https://github.com/.extraheader", "AUTHORIZATION: basic c2VudGluZWw=")
    planted = SECRETS | _job_files(tmp_path)
    env = os.environ | planted | _probe_env(tmp_path)
    report = _guard_run(repo, env)
    assert any(w["kind"] == "credential_kept" for w in report["warnings"])

    records = _records(tmp_path)
    assert sorted(r["stage"] for r in records) == ["build", "build", "workload", "workload", "workload", "workload"]
    for record in records:
        assert _leaks(record, planted) == set(), record["stage"]
        assert record["own_env"]["PROBE_DUMP"] == env["PROBE_DUMP"]  # named in build.pass_env: passed
        guards = [a for a in record["ancestors"] if _is_guard(a["argv"])]
        assert len(guards) == 1, [a["argv"] for a in record["ancestors"]]
        # read, and it is the restarted guard's: the planted values were in what it was started with
        assert f"{MARKER}=1" in guards[0]["environ"]
        assert "PROBE_DUMP=" in guards[0]["environ"]


@pytest.mark.slow
def test_the_restarted_guard_keeps_the_config_it_was_given_from_outside_the_checkout(tmp_path: Path) -> None:
    """`guard run --config FILE` restarts clean with its argv: the base commit's own config,
    whose entry does not exist, would fail both arms; the runner's file makes them probe."""
    user_line = f'user = ""\n{UNBOXED}' if AS_ROOT else ""  # the guard's environment is then the probe's to read
    repo = _repo(tmp_path, user_line, committed='[workload]\nentry = "missing.py:make"\n')
    runner_config = tmp_path / "runner" / "guard.toml"
    runner_config.parent.mkdir()
    runner_config.write_text(CONFIG.format(user=user_line))
    env = os.environ | SECRETS | _probe_env(tmp_path)
    _guard_run(repo, env, "--config", str(runner_config))

    records = _records(tmp_path)
    assert sorted(r["stage"] for r in records) == ["build", "build", "workload", "workload", "workload", "workload"]
    for record in records:
        assert _leaks(record, SECRETS) == set(), record["stage"]
        (guard,) = [a for a in record["ancestors"] if _is_guard(a["argv"])]
        assert f"{MARKER}=1" in guard["environ"]  # the restarted one
        assert [arg for arg in guard["argv"] if arg][-2:] == ["--config", str(runner_config)]


@needs_root
@pytest.mark.slow
def test_code_run_as_the_second_user_reads_no_environment_above_it_and_writes_no_cache_or_output(
    tmp_path: Path,
) -> None:
    repo = _repo(tmp_path, "")  # build.user: the default, guard-pr
    planted = SECRETS | _job_files(tmp_path)
    env = os.environ | planted | _probe_env(tmp_path)
    _guard_run(repo, env)

    records = _records(tmp_path)
    assert sorted(r["stage"] for r in records) == ["build", "build", "workload", "workload", "workload", "workload"]
    for record in records:
        assert record["uid"] != 0
        assert _leaks(record, planted) == set()
        # in a PID namespace of its own: nothing above it but its own step's shell (the build's
        # install command), none of the guard's or the runner's processes to read
        above = [a["argv"] for a in record["ancestors"]]
        assert above in ([], [["/bin/sh", "-c", "python probe.py build", ""]]), above

    cache = Path(env["PROBE_CACHE"])
    for record in records:
        own_folder = Path(record["cwd"]).resolve().parent  # the build folder: its tree/ is the cwd
        for target, result in record["writes"].items():
            path = Path(target)
            if record["stage"] == "build" and path.parent.parent == own_folder and path.parent.name in ("tree", "venv"):
                assert result == "written", (target, result)  # its own build may write its tree and venv
            elif record["stage"] == "build":  # out/runs and the head's folder may not be made yet
                assert result in ("PermissionError", "FileNotFoundError"), (target, result)
            else:
                assert result == "PermissionError", (record["stage"], target, result)
    # the cache and the output hold nothing the pull request's code wrote
    out = Path(env["PROBE_OUT"])
    assert not (out / "planted.txt").exists() and not (out / "runs" / "planted.txt").exists()
    assert not list(cache.glob("*/planted.txt")) and not (cache / "planted.txt").exists()
    assert "written by the pull request" not in (cache / CACHE_MARK_NAME).read_text()
    for folder in (entry for entry in cache.iterdir() if entry.name != CACHE_MARK_NAME):
        assert "written by the pull request" not in (folder / "marker.json").read_text()
        assert "written by the pull request" not in (folder / "build.log").read_text()
        # its own build's line only: none of the workload's four processes got through
        assert (folder / "tree" / "wl.py").read_text().count("# written by the pull request") == 1
        assert (folder / "venv" / "planted.txt").read_text().count("# written by the pull request") == 1
    # after its build, nothing in an arm's folder is the second user's to change
    second_user = records[0]["uid"]
    owned = [p for p in cache.rglob("*") if p.lstat().st_uid == second_user]
    assert owned == []


@pytest.mark.slow
def test_through_the_action_no_step_shell_or_guard_above_the_pr_code_holds_a_secret(tmp_path: Path) -> None:
    """The action's run step, run with bash as a runner does, with secrets in the job's
    environment: its shell execs the guard, which restarts clean, so neither is there to read."""
    repo = _repo(tmp_path, f'user = ""\n{UNBOXED}' if AS_ROOT else "")
    probe = _probe_env(tmp_path)
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    runner_python = tmp_path / "python3"
    runner_python.write_text(RUNNER_PYTHON.format(python=sys.executable))
    runner_python.chmod(0o755)
    head = git(repo, "rev-parse", "feature")
    github = {
        "token": "ghs_sentinelgithubtoken", "action_path": str(ROOT), "repository": "octo/engine",
        "server_url": "https://github.com", "run_id": 7, "sha": head, "event_name": "push", "event": {},
    }
    job_env = clean_env() | SECRETS | probe
    inputs = {"python": str(runner_python), "out": probe["PROBE_OUT"], "cache-dir": probe["PROBE_CACHE"],
              "base": "main", "head": "feature"}
    result = run_action(action, inputs, github, repo, job_env,
                        uses={"actions/upload-artifact": ArtifactStore(tmp_path / "artifacts")})
    assert result.step("Run regression-guard").exit_code in (0, 1, 4), result.step("Run regression-guard").stdout

    runner_temp = repo / "runner-temp"  # where the composite runner keeps the step files
    planted = SECRETS | {"GITHUB_OUTPUT": str(runner_temp / "output-1"),
                         "GITHUB_STEP_SUMMARY": str(runner_temp / "step-summary.md")}
    records = _records(tmp_path)
    assert len(records) == 6
    for record in records:
        assert _leaks(record, planted) == set()
        pids = [a["pid"] for a in record["ancestors"]]
        assert os.getpid() in pids  # walked up to the runner
        below = record["ancestors"][:pids.index(os.getpid())]  # what ran this test is not the action's
        shells = [a for a in below if any(arg.endswith(".sh") for arg in a["argv"])]
        assert shells == [], [a["argv"] for a in shells]  # the step's shell became the guard


from tests.test_action_e2e import RUNNER_PYTHON  # noqa: E402  the runner's Python, one copy


# --- killing the guard ends what it started ---------------------------------------------

SLEEPER_CONFIG = """
[workload]
entry = "wl.py:make"
batch_sizes = [1]
steps = 3
warmup_steps = 1
# one timed pass, no timed warmup: these tests are about processes, not figures
tok_per_s_min_s = 0
warmup_max_s = 0
[build]
method = "{method}"
install = "{install}"
pass_env = ["PROBE_DUMP"]
[measure]
repeats = 2
allow_few_repeats = true  # the CPU tests' few processes
max_rounds = 2  # the CPU tests' time: one confirmation round at most
confirm = false
"""

# The workload's setup, in the head when `sleep`, starts `sleep MARK`, says so and waits for it.
SLEEPING_WORKLOAD = '''
import os, subprocess
from pathlib import Path

class Workload:
    def setup(self, batch_size):
        if {sleep}:
            sleeper = subprocess.Popen(["sleep", "{mark}"])
            (Path(os.environ["PROBE_DUMP"]) / "sleeper.pid").write_text(str(sleeper.pid))
            sleeper.wait()
        self.batch_size, self.t = batch_size, 0

    def step(self):
        self.t += 1
        return [self.t % 11 + row for row in range(self.batch_size)]

def make(**options):
    return Workload()
'''

# A build step that starts `sleep MARK` in the background, notes its pid, and waits for it.
# (Pids noted in a PID namespace mean nothing to the test: it finds the sleeps by MARK.)
SLEEPING_INSTALL = 'sleep {mark} & echo $! > \\"$PROBE_DUMP/sleeper.pid\\"; wait'


def _sleeper_repo(tmp_path: Path, method: str, install: str, sleep_in_workload: bool, mark: str) -> Path:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "wl.py").write_text(SLEEPING_WORKLOAD.format(sleep=False, mark=mark))
    (repo / "guard.toml").write_text(SLEEPER_CONFIG.format(method=method, install=install.format(mark=mark)))
    commit_all(repo, "base")
    git(repo, "checkout", "--quiet", "-b", "feature")
    (repo / "wl.py").write_text(SLEEPING_WORKLOAD.format(sleep=sleep_in_workload, mark=mark))
    (repo / "note.txt").write_text("the pull request\n")
    commit_all(repo, "the pull request")
    return repo


def _group_members(group: int) -> list[int]:
    """Live (not zombie) processes in process group `group`."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == group and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def _wait_for(path: Path, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.1)
    raise AssertionError(f"{path} did not appear in {timeout_s} s")


def _default_signals() -> None:
    """In the child, before exec: the signals the test sends, back to their default handling."""
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("where", "signum", "exit_code"),
    [
        ("build", signal.SIGTERM, 128 + signal.SIGTERM),
        ("build", signal.SIGHUP, 128 + signal.SIGHUP),
        ("workload", signal.SIGTERM, 128 + signal.SIGTERM),
        ("workload", signal.SIGINT, 130),
    ],
)
def test_killing_the_guard_ends_its_build_or_workload(tmp_path: Path, where: str, signum: int, exit_code: int) -> None:
    mark = sleep_mark()
    if where == "build":  # the base's install sleeps, so the guard is killed while it builds
        repo = _sleeper_repo(tmp_path, "venv", SLEEPING_INSTALL, sleep_in_workload=False, mark=mark)
    else:
        repo = _sleeper_repo(tmp_path, "none", "", sleep_in_workload=True, mark=mark)
    dumps = writable_by_all(tmp_path / "dumps")
    guard = subprocess.Popen(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out",
         str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
        env=os.environ | {"PROBE_DUMP": str(dumps)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a guard started under nohup rightly keeps ignoring SIGHUP; this one starts as a shell would
        preexec_fn=_default_signals,
    )
    try:
        _wait_for(dumps / "sleeper.pid", 300)
        (sleeper,) = marked(mark)
        group = os.getpgid(sleeper)
        assert group != os.getpgid(0) and group != guard.pid  # a group of its own, not the guard's
        guard.send_signal(signum)
        _, stderr = guard.communicate(timeout=60)
    finally:
        guard.kill()
    assert guard.returncode == exit_code, stderr
    deadline = time.monotonic() + 10
    while (_group_members(group) or marked(mark)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _group_members(group) == [] and marked(mark) == []


def _builds_leave_sleepers(tmp_path: Path, install: str, mark: str) -> None:
    """A whole `guard run` whose arms' builds run `install`, which starts `sleep MARK` and notes it."""
    repo = _sleeper_repo(tmp_path, "venv", install, sleep_in_workload=False, mark=mark)
    dumps = writable_by_all(tmp_path / "dumps")
    proc = subprocess.run(
        [sys.executable, "-m", "guard", "run", "--repo", str(repo), "--head", "feature", "--out",
         str(tmp_path / "out"), "--cache-dir", str(tmp_path / "cache")],
        env=os.environ | {"PROBE_DUMP": str(dumps)}, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode in (0, 1, 4), proc.stderr  # any verdict: the builds ran
    assert len((dumps / "sleeper.pid").read_text().split()) == 2  # one per arm's build


@pytest.mark.slow
def test_what_a_build_leaves_running_ends_when_the_build_step_does(tmp_path: Path) -> None:
    mark = sleep_mark()
    install = 'sleep {mark} > /dev/null 2>&1 & echo $! >> \\"$PROBE_DUMP/sleeper.pid\\"'
    _builds_leave_sleepers(tmp_path, install, mark)
    running = [pid for pid in marked(mark) if not Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")]
    assert running == []


@needs_root
@pytest.mark.slow
def test_what_a_build_leaves_running_in_a_session_of_its_own_ends_with_the_step_too(tmp_path: Path) -> None:
    # setsid: out of the step's process group, which the group kill alone would miss
    # and a file where every user may write, for the other arm's processes (the same user) to find
    planted = f"/dev/shm/guard-planted-{os.getpid()}-{tmp_path.name}"
    mark = sleep_mark()
    _builds_leave_sleepers(
        tmp_path, 'setsid sleep {mark} < /dev/null > /dev/null 2>&1 & echo $! >> \\"$PROBE_DUMP/sleeper.pid\\"; '
                  f'mkdir -p {planted} && touch {planted}/\\"$$\\"', mark)
    try:
        assert marked(mark) == []  # killed with the step's cgroup, and reaped
        logs = "".join(log.read_text() for log in (tmp_path / "cache").glob("*/build.log"))
        assert logs.count("guard: killed 1 process(es) this process left running (its cgroup held them)") == 2
        # and the report holds it as each arm's fact, which the comment says
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert {a["name"]: a.get("swept", 0) for a in report["arms"]} == {"base": 1, "head": 1}
        assert "killed by the guard as the step that started them ended: base 1 process, head 1 process" in (
            tmp_path / "out" / "comment.md").read_text()
        # the planted folder was in the step's own /dev/shm: gone with its mount namespace, never
        # where the second build (or anything else on the host) could find it, so nothing to remove
        assert not os.path.lexists(planted)
        assert report["isolation"] == {"requested": "kernel", "container": False, "cgroup": True, "namespaces": True,
                                       "as_root": True}
        assert all(a.get("temp_removed", 0) == 0 for a in report["arms"]), report["arms"]
    finally:
        shutil.rmtree(planted, ignore_errors=True)
        for sleeper in marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(sleeper, signal.SIGKILL)


# --- the allowlist itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "passed"),
    [
        ("PATH", "/usr/bin", True), ("HOME", "/home/runner", True), ("LC_ALL", "C.UTF-8", True),
        ("CUDA_VISIBLE_DEVICES", "0", True), ("TORCHINDUCTOR_COMPILE_THREADS", "1", True),
        ("TORCHINDUCTOR_CACHE_DIR", "/tmp/i", False), ("TRITON_CACHE_DIR", "/tmp/t", False),
        ("NCCL_DEBUG", "WARN", True), ("OMP_NUM_THREADS", "4", True), ("PIP_FIND_LINKS", "/opt/wheels", True),
        ("https_proxy", "http://proxy.invalid:3128", True), ("PYTHONPATH", "/src", True),
        ("PIP_INDEX_URL", "https://user:pw@pypi.invalid/simple", False),
        ("https_proxy", "http://user:pw@proxy.invalid:3128", False),
        ("NVIDIA_API_KEY", "nvapi-x", False), ("PIP_CLIENT_CERT", "/etc/key.pem", False),
        ("GITHUB_ENV", "/runner/_temp/set_env", False), ("GITHUB_TOKEN", "ghs_x", False),
        ("DEPLOY_KEY", "x", False), ("DATABASE_URL", "postgres://db/x", False), ("SENTRY_DSN", "x", False),
        ("RUNNER_TEMP", "/runner/_temp", False), ("GITHUB_SHA", "abc", False), ("CI", "true", False),
        ("LD_PRELOAD", "/x.so", False), ("BASH_ENV", "/x.sh", False),
    ],
)
def test_the_allowlist(name: str, value: str, passed: bool) -> None:
    assert is_allowed(name, value) is passed


def test_pass_env_passes_a_name_as_it_is_but_never_a_step_file_or_a_job_token() -> None:
    source = {"HF_TOKEN": "hf_x", "PATH": "/bin", "DEPLOY_KEY": "k", "GITHUB_REPOSITORY": "o/r"}
    assert pr_environment(["HF_TOKEN"], source) == {"HF_TOKEN": "hf_x", "PATH": "/bin"}
    assert guard_environment(["HF_TOKEN"], source) == {"HF_TOKEN": "hf_x", "PATH": "/bin", "GITHUB_REPOSITORY": "o/r"}
    for name in ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
                 "GITHUB_TOKEN", "ACTIONS_RUNTIME_TOKEN", "RUNNER_TOKEN"):
        with pytest.raises(Exception, match=rf"build.pass_env names {name}, which the guard never passes"):
            check_pass_env(["HF_TOKEN", name])


def test_a_pass_env_naming_a_step_file_is_one_message_and_exit_2(tmp_path: Path) -> None:
    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "--quiet", "--initial-branch=main")
    (repo / "guard.toml").write_text('[build]\nmethod = "none"\npass_env = ["GITHUB_ENV"]\n')
    commit_all(repo, "config")
    proc = subprocess.run([sys.executable, "-m", "guard", "run", "--repo", str(repo), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "guard: error: build.pass_env names GITHUB_ENV, which the guard never passes to pull-request code (the "
        "runner's step files and the job's tokens); remove them from build.pass_env"
    ]
