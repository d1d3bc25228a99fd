"""guard.sandbox on its own, in real processes: the restart with a clean environment, the
process groups, the second user's folders."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from guard._errors import GuardError
from tests.conftest import marked, sleep_mark
from guard.sandbox import (
    MARKER, Box, Launch, choose_box, launch, pr_user, seal_children, shared_folder,
)

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the second user is used only by a guard run as root")


def run_one(cmd: list[str] | str, log: Any, *, timeout_s: float, box: Box | None = None, **where: Any) -> int | None:
    """One process, launched as the guard launches each: in `box` (by default, what this host gives)."""
    return launch(box or choose_box(), [Launch(cmd, log, **where)], timeout_s=timeout_s).codes[0]

# Says it started, restarts clean, then shows what it has; exits 3, as a verdict would.
RESTARTING = '''
import json, os, sys
print("started", flush=True)
from guard.sandbox import restart_clean
try:
    restart_clean(["KEEP_ME"])
except Exception as exc:
    print("refused:", exc, flush=True)
    sys.exit(2)
print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "env": dict(os.environ), "utf8": sys.flags.utf8_mode}),
      flush=True)
sys.exit(3)
'''


def _restart(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "restarting.py"
    script.write_text(RESTARTING)
    workdir = tmp_path / "work"
    workdir.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-X", "utf8", str(script), "--head", "feature"], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_restart_happens_once_and_keeps_argv_cwd_and_exit_code(tmp_path: Path) -> None:
    import json

    env = os.environ | {"DEPLOY_KEY": "sentinel", "KEEP_ME": "kept", "GITHUB_ENV": "/runner/set_env",
                        "GITHUB_REPOSITORY": "octo/engine"}
    env.pop(MARKER, None)
    proc = _restart(tmp_path, env)
    assert proc.returncode == 3, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[:2] == ["started", "started"] and len(lines) == 3  # once restarted, then on: no loop
    seen = json.loads(lines[2])
    assert seen["argv"] == [str(tmp_path / "restarting.py"), "--head", "feature"]
    assert seen["cwd"] == str(tmp_path / "work")
    assert seen["env"][MARKER] == "1" and seen["env"]["KEEP_ME"] == "kept"
    assert seen["env"]["GITHUB_REPOSITORY"] == "octo/engine"  # the guard's own, for links
    assert "DEPLOY_KEY" not in seen["env"] and "GITHUB_ENV" not in seen["env"]
    assert seen["utf8"] == 1 and "PYTHONUTF8" not in seen["env"]  # the interpreter's options came along too


def test_a_marker_with_an_unclean_environment_is_refused_not_restarted_again(tmp_path: Path) -> None:
    proc = _restart(tmp_path, {"PATH": os.environ["PATH"], MARKER: "1", "DEPLOY_KEY": "sentinel"})
    assert proc.stdout.splitlines()[0] == "started" and proc.returncode == 2
    assert f"refused: {MARKER} says this guard was restarted with a clean environment, yet it holds DEPLOY_KEY; " in (
        proc.stdout
    )


def test_a_process_past_its_time_is_killed_with_its_group(tmp_path: Path) -> None:
    mark = sleep_mark()  # found by its command line
    started = time.monotonic()
    with (tmp_path / "log").open("w") as log:
        code = run_one(f"sleep {mark} & wait", log, timeout_s=1.0, env=os.environ)
    assert code is None and time.monotonic() - started < 20
    # SIGKILL is sent to the group; the kernel may take a moment to finish the exit
    deadline = time.monotonic() + 10
    while [pid for pid in marked(mark) if not _gone(Path(f"/proc/{pid}/stat"))] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in marked(mark) if not _gone(Path(f"/proc/{pid}/stat"))] == []


def _gone(stat: Path) -> bool:
    """Exited (a zombie, or no longer there), as /proc/PID/stat tells it."""
    try:
        return stat.read_text().split(") ")[1].startswith(("Z", "X"))
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return True


def test_exit_codes_come_back_as_they_were(tmp_path: Path) -> None:
    with (tmp_path / "log").open("w") as log:
        assert run_one([sys.executable, "-c", "raise SystemExit(7)"], log, timeout_s=30) == 7
        assert run_one("echo hello", log, timeout_s=30) == 0
    assert (tmp_path / "log").read_text() == "hello\n"


# A guard of its own (the subreaper is a process-wide setting): one process that starts a
# daemon in a session of its own, waits until it runs, and exits; then whether it still runs.
LEAVES_A_DAEMON = '''
import json, os, sys
from pathlib import Path
from guard.sandbox import Launch, choose_box, launch, pr_user
folder, as_user, mark = Path(sys.argv[1]), sys.argv[2] == "user", sys.argv[3]
flag = folder / "daemon.runs"
# found by its command line, `sleep MARK`: in a PID namespace its own pid means nothing here
cmd = (f"setsid sh -c 'touch {flag} && exec sleep {mark}' "
       f"</dev/null >/dev/null 2>&1 & while [ ! -e {flag} ]; do sleep 0.01; done")
box = choose_box()
with (folder / "log").open("w") as log:
    one = Launch(cmd, log, cwd=folder, env=os.environ, user=pr_user("guard-pr") if as_user else None, owner="head")
    code = launch(box, [one], timeout_s=30).codes[0]
state = "gone"
for entry in Path("/proc").iterdir():
    try:
        if entry.name.isdigit() and (entry / "cmdline").read_bytes() == f"sleep\\0{mark}\\0".encode():
            state = (entry / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        continue
print(json.dumps({"code": code, "state": state, "log": (folder / "log").read_text(),
                  "tally": dict(box.left.processes)}))
'''


def _leave_a_daemon(tmp_path: Path, who: str) -> dict:
    folder = tmp_path / who
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # the second user writes the pid there
    script = tmp_path / "leaves_a_daemon.py"
    script.write_text(LEAVES_A_DAEMON)
    mark = sleep_mark()  # this test's sleep alone
    done = subprocess.run([sys.executable, str(script), str(folder), who, mark], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_root
def test_a_daemon_in_a_session_of_its_own_does_not_outlive_its_process(tmp_path: Path) -> None:
    swept = _leave_a_daemon(tmp_path, "user")
    assert swept["code"] == 0
    assert swept["state"] == "gone"  # killed and reaped by the guard it had come to
    assert "guard: killed 1 process(es) this process left running (its cgroup held them)" in swept["log"]
    assert swept["tally"] == {"head": 1}  # counted for the arm the process ran for: the report's fact
    # as the guard's own user too: the cgroup, not the user, says what the process started
    kept = _leave_a_daemon(tmp_path, "guard")
    # (dead: with no second user the guard is not its subreaper, and init reaps it when it will)
    assert kept["code"] == 0 and kept["state"] in ("gone", "Z") and kept["tally"] == {"head": 1}


# A chain of forks, each link starting the next and then becoming `sleep MARK`, in a session
# of its own: killing one generation hands the next to the guard, so a sweep that follows
# parents needs a round for each. The last link says when the chain is whole.
CHAIN_LINK = """
n=$1
if [ "$n" -gt 0 ]; then sh "$0" $((n - 1)) "$2" "$3" & else touch "$3"; fi
exec sleep "$2"
"""
BUILDS_A_CHAIN = """
import json, os, sys
from pathlib import Path
from guard.sandbox import Launch, choose_box, launch, pr_user
folder, depth, mark = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cmd = (f"setsid sh {folder}/link.sh {depth} {mark} {folder}/whole </dev/null >/dev/null 2>&1 & "
       f"while [ ! -e {folder}/whole ]; do sleep 0.05; done")
box = choose_box()
with (folder / "log").open("w") as log:
    one = Launch(cmd, log, cwd=folder, env=os.environ, user=pr_user("guard-pr"), owner="head")
    code = launch(box, [one], timeout_s=120).codes[0]
print(json.dumps({"code": code, "tally": dict(box.left.processes), "log": (folder / "log").read_text()}))
"""


@needs_root
def test_a_chain_of_forks_deeper_than_any_sweep_does_not_outlive_its_process(tmp_path: Path) -> None:
    folder = tmp_path / "chain"
    folder.mkdir(mode=0o777)
    folder.chmod(0o777)  # the second user marks the chain whole there
    (folder / "link.sh").write_text(CHAIN_LINK)
    (tmp_path / "builds_a_chain.py").write_text(BUILDS_A_CHAIN)
    mark = sleep_mark()  # this test's sleeps alone
    try:
        done = subprocess.run([sys.executable, str(tmp_path / "builds_a_chain.py"), str(folder), "150", mark],
                              capture_output=True, text=True, timeout=300, cwd=Path(__file__).resolve().parents[1])
        assert done.returncode == 0, done.stderr
        ran = json.loads(done.stdout)
        assert ran["code"] == 0 and (folder / "whole").exists()
        assert marked(mark) == []  # all 151 links ended with the process that started them
        assert ran["tally"] == {"head": 151}  # and counted for its arm, each
    finally:
        for pid in marked(mark):
            os.kill(pid, signal.SIGKILL)


# Run as the second user in its space: what it can see of /tmp and the host's processes, then
# what it leaves: a file in each temp folder and a SysV shared memory segment (1 MiB).
LOOKS_AROUND = """
import ctypes, json, os, sys
tag, other, guard_pid, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
seen = {"other": os.path.exists(other), "tmp": sorted(os.listdir("/tmp")),
        "guard": os.path.exists(f"/proc/{guard_pid}"),
        "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}
for folder in ("/tmp", "/var/tmp", "/dev/shm"):
    with open(f"{folder}/{tag}-left", "w") as f:
        f.write("left")
libc = ctypes.CDLL(None, use_errno=True)
seen["shm"] = libc.shmget(0, 1 << 20, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
with open(out, "w") as f:
    json.dump(seen, f)
"""


def _user_segments(uid: int) -> int:
    """The SysV shared memory segments of `uid` this process's IPC namespace holds."""
    rows = Path("/proc/sysvipc/shm").read_text().splitlines()[1:]
    return sum(1 for row in rows if row.split()[7] == str(uid))


@needs_root
def test_a_process_has_its_own_temp_folders_pids_and_ipc_and_leaves_nothing_in_them(tmp_path: Path) -> None:
    from guard.sandbox import _namespace

    if why := _namespace.available():
        pytest.skip(f"no namespaces here: {why}")
    user = pr_user("guard-pr")
    assert user is not None
    tag = f"guard-test-{os.getpid()}-{tmp_path.name}"
    other = Path("/tmp") / f"{tag}-another-job"  # what another job keeps in /tmp
    other.write_text("another job's\n")
    folder = tmp_path / "looks"
    folder.mkdir()
    folder.chmod(0o777)
    (folder / "looks.py").write_text(LOOKS_AROUND)
    segments = _user_segments(user.uid)
    try:
        box = choose_box()
        with (tmp_path / "log").open("w") as log:
            argv = [sys.executable, "looks.py", tag, str(other), str(os.getpid()), str(folder / "seen.json")]
            code = run_one(argv, log, timeout_s=60, cwd=folder, env={"PATH": os.defpath}, user=user, box=box)
        assert code == 0, (tmp_path / "log").read_text()
        seen = json.loads((folder / "seen.json").read_text())
        assert seen["other"] is False and not seen["guard"]  # another job's file and the host's processes: unseen
        assert max(seen["pids"]) < 100  # its own PID namespace (the host's run to thousands)
        # its /tmp holds what it was given: its folder (the test's temp tree), interpreter and home
        homes = [name for name in seen["tmp"] if name.startswith(f"{user.name}-home-")]
        assert len(homes) == 1, seen["tmp"]
        assert sorted(set(seen["tmp"]) - set(homes)) == sorted(_namespace.kept_names([folder, sys.executable]))
        assert seen["shm"] >= 0  # the segment was made
        assert [f for f in ("/tmp", "/var/tmp", "/dev/shm") if os.path.exists(f"{f}/{tag}-left")] == []
        assert _user_segments(user.uid) == segments  # gone with its IPC namespace
        assert dict(box.left.temp_entries) == {}  # nothing reached the shared folders to be removed
        assert other.read_text() == "another job's\n"
    finally:
        other.unlink(missing_ok=True)
        for f in ("/tmp", "/var/tmp", "/dev/shm"):
            Path(f"{f}/{tag}-left").unlink(missing_ok=True)


@needs_root
def test_processes_started_together_share_their_space(tmp_path: Path) -> None:
    """Ranks of one workload share /dev/shm (NCCL's shared memory goes there)."""
    user = pr_user("guard-pr")
    tag = f"guard-test-{os.getpid()}-{tmp_path.name}"
    folder = tmp_path / "ranks"
    folder.mkdir(mode=0o755)
    with (tmp_path / "log").open("w") as log:
        ended = launch(choose_box(), [
            Launch(["sh", "-c", f"echo 0 > /dev/shm/{tag} && sleep 0.5"], log, cwd=folder, env=os.environ, user=user),
            Launch(["sh", "-c", f"until [ -e /dev/shm/{tag} ]; do sleep 0.02; done"], log, cwd=folder,
                   env=os.environ, user=user),
        ], timeout_s=30)
    assert ended.codes == [0, 0] and not os.path.exists(f"/dev/shm/{tag}")


@needs_root
@pytest.mark.alone  # the shared temp folders are cleaned only where no other run's launch uses build.user
def test_what_a_process_leaves_in_the_shared_temp_folders_is_gone_when_it_ends(tmp_path: Path) -> None:
    """Where the guard can make no namespaces (not root, or a kernel that refuses): a head
    process that leaves a file where every user may write, for a base process (the same user)
    to find: removed as it ends, counted for its arm, said in its log."""
    def unspaced() -> Box:  # no namespaces, whatever the host gives
        return dataclasses.replace(choose_box(), spaces=False)

    box = unspaced()
    user = pr_user("guard-pr")
    tag = f"guard-test-{os.getpid()}-{tmp_path.name}"
    sticky = Path("/tmp") / f"{tag}-sticky"  # another's folder that all may write, as /tmp/.X11-unix
    sticky.mkdir()
    sticky.chmod(0o1777)
    guards = Path("/tmp") / f"{tag}-guards"  # the guard's own: not the user's to lose
    guards.write_text("kept\n")
    hostname = Path("/etc/hostname").read_bytes()
    leaves = (f"echo x > /tmp/{tag}-file && mkdir -p /dev/shm/{tag}-dir/deep && echo y > /dev/shm/{tag}-dir/deep/f && "
              f"ln -s /etc/hostname /var/tmp/{tag}-link && ln -s /etc /dev/shm/{tag}-dir/deep/etc && "
              f"echo z > {sticky}/inside && echo w > \"$TMPDIR/in-its-home\"")
    planted = [Path(f"/tmp/{tag}-file"), Path(f"/dev/shm/{tag}-dir"), Path(f"/var/tmp/{tag}-link"), sticky / "inside"]
    handed = Path("/tmp") / f"{tag}-handed"  # a folder the guard gives it, right in /tmp: the guard's to seal
    handed.mkdir()
    leaves += f" && echo h > {handed}/built"
    try:
        with (tmp_path / "log").open("w") as log, box.temp.handed_over(user, [handed]):
            assert run_one(leaves, log, timeout_s=30, cwd=Path("/"), env=os.environ, user=user, box=box,
                           owner="head") == 0
        assert [p for p in planted if os.path.lexists(p)] == []
        assert (handed / "built").read_text() == "h\n" and handed.stat().st_uid == 0  # kept, then sealed
        # its home went with it, as before, and is not counted: it was the guard's to give
        assert dict(box.left.temp_entries) == {"head": 4} and dict(box.left.processes) == {}
        assert "guard: removed 4 file(s) or folder(s) this process left in the shared temp folders" in (
            tmp_path / "log").read_text()
        assert sticky.is_dir() and guards.read_text() == "kept\n"
        assert Path("/etc/hostname").read_bytes() == hostname and Path("/etc").is_dir()  # links not followed
        # while another guard of this host runs as the same user (one per GPU), nothing is removed:
        # what its running processes keep there (a home, NCCL's /dev/shm) is not this guard's
        other = subprocess.Popen(
            [sys.executable, "-c", "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR); "
             "fcntl.lockf(fd, fcntl.LOCK_SH); print('held', flush=True); sys.stdin.read()",
             f"/run/regression-guard-user-{user.uid}.lock"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert other.stdout is not None and other.stdout.readline() == "held\n"
            shared = unspaced()
            with (tmp_path / "log").open("w") as log:
                assert run_one(f"echo x > /tmp/{tag}-file", log, timeout_s=30, cwd=Path("/"),
                               env=os.environ, user=user, box=shared) == 0
            assert planted[0].read_text() == "x\n" and dict(shared.left.temp_entries) == {}
            assert f"another guard on this host runs as '{user.name}' now" in (tmp_path / "log").read_text()
        finally:
            other.communicate(timeout=30)
        with (tmp_path / "log").open("w") as log:  # alone again: the next launch's clean-up takes it
            assert run_one("true", log, timeout_s=30, cwd=Path("/"), env=os.environ, user=user, box=box) == 0
        assert not planted[0].exists()
        # and between its launches this guard holds no lock: another guard alone may clean
        takes = subprocess.run(
            [sys.executable, "-c", "import fcntl, os, sys; fcntl.lockf(os.open(sys.argv[1], os.O_RDWR), "
             "fcntl.LOCK_EX | fcntl.LOCK_NB)", f"/run/regression-guard-user-{user.uid}.lock"],
            capture_output=True, text=True, timeout=30)
        assert takes.returncode == 0, takes.stderr
        # as the guard's own user nothing is removed: the guard's own files look the same
        own = Path(f"/tmp/{tag}-own")
        kept = unspaced()
        with (tmp_path / "log").open("w") as log:
            assert run_one(f"echo o > {own}", log, timeout_s=30, env=os.environ, box=kept) == 0
        assert own.read_text() == "o\n" and dict(kept.left.temp_entries) == {}
    finally:
        for path in (*planted, sticky, guards, handed, Path(f"/tmp/{tag}-own")):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                path.unlink()


@needs_root
def test_the_second_user_writes_what_it_is_handed_and_nothing_once_sealed(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    assert user is not None and user.uid != 0
    folder = tmp_path / "worktree"
    folder.mkdir()
    (folder / "code.py").write_text("x = 1\n")
    box = choose_box()
    with (tmp_path / "log").open("w") as log, box.temp.handed_over(user, [folder]):
        # it writes its folder, makes a file only it can read, a set-uid one, a link out
        script = ("echo y >> code.py && echo s > secret && chmod 600 secret && "
                  "cp /bin/true suid && chmod 4755 suid && ln -s /etc/passwd link")
        assert run_one(script, log, timeout_s=30, cwd=folder, env=os.environ, user=user, box=box) == 0
    for entry in folder.iterdir():
        info = entry.lstat()
        assert info.st_uid == 0, entry
        if not stat.S_ISLNK(info.st_mode):
            assert info.st_mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID) == 0, entry
    assert stat.S_IMODE((folder / "secret").stat().st_mode) == 0o644  # its own build can still read it
    with (tmp_path / "log").open("w") as log:
        code = run_one("echo z >> code.py", log, timeout_s=30, cwd=folder, env=os.environ, user=user)
    assert code != 0 and (folder / "code.py").read_text() == "x = 1\ny\n"
    assert "Permission denied" in (tmp_path / "log").read_text()


@needs_root
def test_a_shared_folder_keeps_what_was_sealed_and_drops_planted_links(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    assert user is not None
    traces = tmp_path / "traces"
    shared_folder(user, traces)
    with (tmp_path / "log").open("w") as log:
        assert run_one("echo one > a.json && ln -s /etc/shadow b.json", log, timeout_s=30, cwd=traces,
                       env=os.environ, user=user) == 0
    seal_children(user, traces)
    assert sorted(p.name for p in traces.iterdir()) == ["a.json"]
    with (tmp_path / "log").open("w") as log:  # a later process can neither change nor remove it
        code = run_one("echo two > a.json || rm -f a.json; echo two > a.json", log, timeout_s=30,
                       cwd=traces, env=os.environ, user=user)
    assert code != 0 and (traces / "a.json").read_text() == "one\n"


@needs_root
def test_a_folder_out_of_the_second_users_reach_is_named(tmp_path: Path) -> None:
    user = pr_user("guard-pr")
    assert user is not None
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    with (tmp_path / "log").open("w") as log, pytest.raises(GuardError) as caught:
        run_one(["true"], log, timeout_s=30, cwd=hidden, env=os.environ, user=user)
    assert caught.value.message.startswith(
        f"the user '{user.name}' that runs the pull request's code (build.user) cannot read {hidden}; "
    )


def test_no_second_user_when_the_name_is_empty_or_the_guard_is_not_root() -> None:
    assert pr_user("") is None
    if os.geteuid() != 0:
        assert pr_user("guard-pr") is None


@needs_root
def test_git_trusts_roots_checkout_for_the_user_even_without_git_variables(tmp_path: Path) -> None:
    """A build's git (a version from `git describe`, setuptools-scm's file finder) reads the
    checkout's git data, which is root's; setuptools-scm drops every GIT_* variable before it
    calls git, so the trust must also be in the user's home, not only in the environment."""
    user = pr_user("guard-pr")
    assert user is not None
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "root's"], check=True)
    tmp_path.chmod(0o755)
    git = shutil.which("git")
    assert git
    # as setuptools-scm runs it: the environment without any GIT_* variable
    cmd = f"env $(env | sed -n 's/^\\(GIT_[A-Z0-9_]*\\)=.*/-u \\1/p') {git} -C {repo} rev-parse HEAD"
    with (tmp_path / "log").open("w") as log:
        code = run_one(cmd, log, timeout_s=30, cwd=repo, env=os.environ, user=user)
    assert code == 0, (tmp_path / "log").read_text()
