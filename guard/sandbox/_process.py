"""Starting the guard's child processes: each in a session (process group) of its own, as
the pull-request user where there is one, never outliving the guard.

Each launch runs in a cgroup v2 of its own (guard/sandbox/_cgroup.py), killed whole when its
first process ends: whatever it started, in any session, however deep, ends with it, and is
counted. What follows (the group kill, the subreaper's sweep) is what remains where no cgroup
can be made, and reaps what the cgroup's kill left as the guard's children.

Each group is recorded while its first process runs. When that process ends, the whole
group is killed, so what it left running in the background goes with it; when the guard
gets SIGTERM, SIGINT or SIGHUP, or exits, it kills every recorded group first. The group
is killed before its first process is reaped, so its id cannot have passed to another
process by then.

A process that makes a session of its own (setsid) escapes the group kill. For the
pull-request user's processes the guard closes that too: it is the child subreaper of its
descendants (prctl PR_SET_CHILD_SUBREAPER), so such a process, once its parent is gone,
becomes the guard's child rather than init's; and when a launch ends, every child of the
guard that runs as that user and that no running launch started is killed and reaped, so
nothing of one process outlives it to disturb the next (the other arm's among them). Run
as the guard's own user (no build.user), nothing is swept: the guard cannot tell its own
helpers from what the pull request left; a PID namespace (Docker mode) covers that case.

Files go the same way. What the pull-request user owns in the folders every user may write
(/tmp, /var/tmp, /dev/shm, /run/lock, the guard's temp folder, and the world-writable
folders directly in them) is removed when a launch ends, but the homes of launches still
running, and before a launch starts (what a killed guard's run left), uncounted: a head
process cannot leave a file there for a base process to find. Only a guard alone on the
host with that user does it: each holds a shared lock on /run/regression-guard-user-UID.lock
while a process of its runs as the user, and cleans only when it can turn that lock
exclusive, so a guard per GPU of one host never removes what another's running processes
use (a home, NCCL's /dev/shm). A mount namespace with a private /tmp would hide the guard's
own work folders too, which are under /tmp as often as not."""

from __future__ import annotations

import atexit
import ctypes
import errno
import fcntl
import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import IO, Any, NamedTuple

from guard._errors import GuardError
from guard.sandbox import _cgroup as cgroup
from guard.sandbox import _namespace as namespace
from guard.sandbox._container import stat_fields
from guard.sandbox._user import PrUser, handed_now

_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_CHECK_READABLE = 'for p do if [ ! -r "$p" ] || { [ -d "$p" ] && [ ! -x "$p" ]; }; then printf "%s\\n" "$p"; fi; done'

_live: dict[int, subprocess.Popen[bytes]] = {}  # process group id -> its first process
_spawning = threading.Lock()  # a launch is in _live before a sweep can see it as the guard's child
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
_SWEEP_ROUNDS = 64  # a killed orphan's children come to the guard in turn: one round each generation
_subreaper: bool | None = None
_previous: dict[int, Any] = {}
_installed = False
_reachable: set[tuple[int, str]] = set()
_homes: set[str] = set()  # the fresh homes of the launches that run: theirs until they end
_SHARED_TEMP = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")  # where every user may write on Debian
_USER_LOCK = "/run/regression-guard-user-{uid}.lock"  # in a folder only root writes
_lock_files: dict[int, int | None] = {}  # uid -> the guard's descriptor of that user's lock file
_held: dict[int, int] = {}  # uid -> that descriptor, while a launch of this guard runs as the user


class LaunchError(GuardError):
    """A process could not be started as the pull-request user: a path it needs is out of its reach."""


def run_process(
    cmd: Sequence[str] | str,
    *,
    stdout: IO[Any] | int,
    timeout_s: float,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    user: PrUser | None = None,
    reads: Sequence[Path] = (),
    pass_fds: Sequence[int] = (),
) -> int | None:
    """Exit code of `cmd` (a string runs in the shell), with stdout and stderr to `stdout`;
    None when it ran past `timeout_s`. Its group is killed when it ends, however it ends.
    With `user`, it runs as that user, with no other group, a fresh home and temp folder,
    and `cwd` and `reads` are checked to be in its reach first. `pass_fds`: descriptors it
    inherits (a pipe the guard reads, say)."""
    _install_handlers()
    if timeout_s <= 0:
        return None
    if user is not None:
        check_reachable(user, [p for p in (cwd, *reads, Path(tempfile.gettempdir())) if p is not None])
    _adopt_orphans(user)
    argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
    with _holding([user]), _fresh_home(user) as home, _space([_Named(argv, cwd, reads, home)]) as space, \
            cgroup.leaf() as box:
        clear_shared_temp(user)  # what a run before this one left (killed, it could not): nobody's to count
        given = None if env is None and not home else dict(os.environ if env is None else env) | home
        with _spawning:
            proc = _spawn(argv, box, space, user, cwd=cwd, env=given, stdout=stdout, pass_fds=pass_fds)
            _live[proc.pid] = proc
        try:
            exited = _wait_exited(proc, timeout_s)
        finally:
            boxed = _end_box(box, proc)
            _kill_group(proc.pid)
            proc.wait()
            _live.pop(proc.pid, None)
            _sweep_after(stdout, user, boxed)
    return proc.returncode if exited else None


class _Named(NamedTuple):
    """What one launch names that its space's private /tmp must keep."""

    argv: Sequence[str]
    cwd: Path | None
    reads: Sequence[Path]
    home: Mapping[str, str]


def _space(launches: Sequence[_Named]) -> AbstractContextManager[namespace.Space | None]:
    """Namespaces of their own for launches started together, whose private /tmp keeps what
    they name there (their program, folder, reads and home) and what the guard has handed
    over now; none where the guard runs unboxed or cannot make them."""
    keep: list[Path | str | None] = [*handed_now()]
    for launch in launches:
        program = str(launch.argv[0])
        keep += [program if os.path.isabs(program) else None, launch.cwd or Path.cwd(), *launch.reads,
                 launch.home.get("HOME")]
    return namespace.space(keep)


def _spawn(
    argv: list[str], box: Path | None, space: namespace.Space | None, user: PrUser | None, *,
    stdout: IO[Any] | int, cwd: Path | None, env: Mapping[str, str] | None, pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """`argv` in a session of its own, as `user`; with `box`, in that cgroup from its first
    instruction on: it waits at the gate (a line on its stdin) until the guard has moved it
    there; with `space`, in those namespaces, where setpriv drops it to `user`."""
    kwargs: dict[str, Any] = {"cwd": cwd, "env": env}
    if space is None:
        kwargs |= _identity(user)
    elif user is not None:  # setpriv makes it the user in the space
        kwargs["umask"] = _identity(user)["umask"]
    common = {"stdout": stdout, "stderr": subprocess.STDOUT, "start_new_session": True,
              "pass_fds": tuple(pass_fds)} | kwargs
    if box is None and space is None:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, **common)
    # what Popen would say of a program that is not there, before the gate (which would exit 127)
    program = argv[0]
    if "/" in program:  # a path, from the process's own folder where relative
        path = program if os.path.isabs(program) or cwd is None else os.path.join(cwd, program)
        found = os.access(path, os.X_OK) and not os.path.isdir(path)
    else:
        found = shutil.which(program, path=(os.environ if env is None else env).get("PATH", os.defpath)) is not None
    if not found:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)
    if space is not None:
        argv = space.enter(argv, cwd, *((user.uid, user.gid) if user is not None else (None, None)))
    if box is None:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, **common)
    gate, go = os.pipe()
    try:
        proc = subprocess.Popen(["/bin/sh", "-c", cgroup.GATE, "guard-gate", *argv], stdin=gate, **common)
        try:
            cgroup.enter(box, proc.pid)
        except OSError as exc:
            _kill_group(proc.pid)
            proc.wait()
            raise LaunchError(f"could not put a process in its cgroup {box}: {exc.strerror}") from None
        os.write(go, b"go\n")
    finally:
        os.close(gate)
        os.close(go)
    return proc


def _end_box(box: Path | None, proc: subprocess.Popen[bytes]) -> int | None:
    """Kill everything in `box`; how many processes besides `proc` still ran there (None: no box)."""
    if box is None:
        return None
    own = {proc.pid, *_children_of_process(proc.pid)}  # in a space, nsenter's one child is the command itself
    left = [pid for pid in cgroup.members(box) if pid not in own]
    cgroup.kill(box)
    return len(left)


def _children_of_process(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


class Launch(NamedTuple):
    """One process of a group started together (`run_together`): its command and where it runs."""

    cmd: Sequence[str]
    stdout: IO[Any] | int
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    user: PrUser | None = None
    reads: Sequence[Path] = ()
    pass_fds: Sequence[int] = ()  # descriptors it inherits


class Together(NamedTuple):
    """How processes started together ended: an exit code each, None for one still running at
    the timeout or ended by the guard because `failed` (the first seen to exit non-zero) had."""

    codes: list[int | None]
    failed: int | None


POLL_S = 0.02


def run_together(launches: Sequence[Launch], *, timeout_s: float) -> Together:
    """Start every launch at once, as `run_process` starts one, and wait for them all; the first
    that exits non-zero ends the others at once (ranks of one workload wait for each other
    forever), and the timeout ends every one still running."""
    _install_handlers()
    if timeout_s <= 0:
        return Together([None] * len(launches), None)
    for launch in launches:
        if launch.user is not None:
            check_reachable(launch.user, [p for p in (launch.cwd, *launch.reads, Path(tempfile.gettempdir()))
                                          if p is not None])
    users = {launch.user for launch in launches if launch.user is not None}
    for user in users:
        _adopt_orphans(user)
    procs: list[subprocess.Popen[bytes]] = []
    codes: list[int | None] = [None] * len(launches)
    failed: int | None = None
    reaped: set[int] = set()

    boxes: list[Path | None] = []
    boxed: list[int | None] = []

    def reap(index: int) -> None:
        proc = procs[index]
        boxed.append(_end_box(boxes[index], proc))
        _kill_group(proc.pid)  # before the reap: the group's id is still this process's
        codes[index] = proc.wait()
        _live.pop(proc.pid, None)
        reaped.add(index)

    with ExitStack() as homes:
        homes.enter_context(_holding(users))
        for user in users:
            clear_shared_temp(user)  # what a run before this one left: nobody's to count
        try:
            given_homes = [homes.enter_context(_fresh_home(launch.user)) for launch in launches]
            # one space for all: ranks of one workload share their /dev/shm and IPC (NCCL's shared memory)
            space = homes.enter_context(_space([_Named(launch.cmd, launch.cwd, launch.reads, home)
                                                for launch, home in zip(launches, given_homes, strict=True)]))
            for launch, home in zip(launches, given_homes, strict=True):
                boxes.append(homes.enter_context(cgroup.leaf()))
                env = launch.env
                given = None if env is None and not home else dict(os.environ if env is None else env) | home
                with _spawning:
                    proc = _spawn(list(launch.cmd), boxes[-1], space, launch.user, cwd=launch.cwd, env=given,
                                  stdout=launch.stdout, pass_fds=launch.pass_fds)
                    _live[proc.pid] = proc
                procs.append(proc)
            deadline = time.monotonic() + timeout_s
            while len(reaped) < len(procs) and failed is None and time.monotonic() < deadline:
                for index in range(len(procs)):
                    if index not in reaped and _exited(procs[index]):
                        reap(index)
                        if codes[index] != 0:
                            failed = index
                            break
                else:
                    time.sleep(POLL_S)
            for index in range(len(procs)):  # a peer may have exited too, of the same cause: its code counts
                if index not in reaped and _exited(procs[index]):
                    reap(index)
        finally:
            for index, proc in enumerate(procs):  # what still runs is ended by the guard: no exit code
                if index not in reaped:
                    boxed.append(_end_box(boxes[index], proc))
                    _kill_group(proc.pid)
                    proc.wait()
                    _live.pop(proc.pid, None)
            counted = None if not boxed or None in boxed else sum(n for n in boxed if n is not None)
            for user in users:
                _sweep_after(launches[0].stdout, user, counted)
    return Together(codes, failed)


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether `proc` has exited; left unreaped, so that its group's id is not reused."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def end_all() -> None:
    """Kill every process group the guard started that still runs."""
    for group in list(_live):
        _kill_group(group)


def _adopt_orphans(user: PrUser | None) -> None:
    """Once, where the pull-request user runs the code: make the guard the child subreaper of
    its descendants. Where the kernel refuses, sweeps find nothing and the gap stays as it was."""
    global _subreaper
    if user is None or _subreaper is not None:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        _subreaper = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        _subreaper = False


class Leftovers(NamedTuple):
    """What the sweeps of one run ended and removed, by the arm whose process left it."""

    processes: Counter[str]  # left running in a session of their own, killed
    temp_entries: Counter[str]  # files and folders left in the shared temp folders, removed


# What the sweeps of one run ended, by the arm whose process left them (`counting_sweeps`,
# `sweeps_of`): the report's fact, besides the line in each process's log.
_tally: ContextVar[Leftovers | None] = ContextVar("guard_sweep_tally", default=None)
_owner: ContextVar[str] = ContextVar("guard_sweep_owner", default="")


@contextmanager
def counting_sweeps() -> Iterator[Leftovers]:
    """Counts, by owner (`sweeps_of`), what every sweep in this context ends and removes."""
    tally = Leftovers(Counter(), Counter())
    token = _tally.set(tally)
    try:
        yield tally
    finally:
        _tally.reset(token)


@contextmanager
def sweeps_of(owner: str) -> Iterator[None]:
    """What sweeps end in this context is counted for `owner` (an arm's name)."""
    token = _owner.set(owner)
    try:
        yield
    finally:
        _owner.reset(token)


def _sweep_after(log: IO[Any] | int, user: PrUser | None, boxed: int | None = None) -> None:
    """The sweep when a launch ends: what it ended and removed counted for the current owner
    and said in the log. `boxed`: the processes its cgroup still held when it ended, all
    killed by then; the sweep then only reaps them (the guard is their subreaper)."""
    swept, removed = sweep(user), clear_shared_temp(user)
    count = swept if boxed is None else boxed
    tally = _tally.get()
    if tally is not None:
        tally.processes.update({_owner.get(): count} if count else {})
        tally.temp_entries.update({_owner.get(): removed} if removed else {})
    _say_swept(log, count, removed, user, boxed is not None)


def clear_shared_temp(user: PrUser | None) -> int | None:
    """Remove what `user` owns in the shared temp folders, and in the world-writable folders
    directly in them, but the homes of running launches; how many files and folders (a
    folder with all it holds is one). Links are removed, never followed. None, and nothing
    removed, where a launch of another guard of this host runs as `user` (or no lock can be
    had). Called within `_holding`."""
    if user is None:
        return 0
    lock = _held.get(user.uid)
    if lock is None:
        return None
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # atomic: refused, the shared lock stays
    except OSError:
        return None
    try:
        keep = _homes | handed_now()  # a folder the guard gave it, in /tmp itself, is the guard's to seal
        folders = dict.fromkeys((tempfile.gettempdir(), *_SHARED_TEMP))
        return sum(_clear(folder, user.uid, 1, keep) for folder in folders)
    finally:
        fcntl.lockf(lock, fcntl.LOCK_SH)


@contextmanager
def _holding(users: Iterable[PrUser | None]) -> Iterator[None]:
    """A shared lock on each user's lock file for the block (a launch, its clean-ups included):
    while this guard's processes run as a user, no other guard of the host cleans that user's
    files, and this one cleans only when no other's run."""
    taken = []
    try:
        for user in users:
            lock = None if user is None or user.uid in _held else _lock_file(user)
            if lock is None:
                continue
            try:
                fcntl.lockf(lock, fcntl.LOCK_SH)  # waits only for another guard's clean-up, milliseconds
            except OSError:
                continue
            _held[user.uid] = lock
            taken.append(user.uid)
        yield
    finally:
        for uid in taken:
            lock = _held.pop(uid)
            with suppress(OSError):
                fcntl.lockf(lock, fcntl.LOCK_UN)


def _lock_file(user: PrUser) -> int | None:
    """The guard's descriptor of `user`'s lock file, opened once (not inherited); None where
    the file cannot be the guard's own."""
    if user.uid in _lock_files:
        return _lock_files[user.uid]
    lock: int | None = None
    try:
        lock = os.open(_USER_LOCK.format(uid=user.uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        found = os.fstat(lock)
        if found.st_uid != os.geteuid() or not stat.S_ISREG(found.st_mode):
            raise OSError("not the guard's own file")
    except OSError:
        if lock is not None:
            os.close(lock)
        lock = None
    _lock_files[user.uid] = lock
    return lock


def _clear(folder: str, uid: int, depth: int, keep: set[str] | frozenset[str]) -> int:
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    removed = 0
    for entry in entries:
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:
            continue
        if info.st_uid == uid:
            if os.path.abspath(entry.path) not in keep:
                removed += _remove_entry(entry.path, info)
        elif depth and stat.S_ISDIR(info.st_mode) and info.st_mode & stat.S_IWOTH:
            removed += _clear(entry.path, uid, depth - 1, keep)  # another's sticky folder (.X11-unix, say)
    return removed


def _remove_entry(path: str, info: os.stat_result) -> int:
    try:
        if stat.S_ISDIR(info.st_mode):
            shutil.rmtree(path)  # by file descriptor: a link inside is removed, not followed
        else:
            os.unlink(path)
    except FileNotFoundError:
        return 0
    except OSError:
        return 0 if os.path.lexists(path) else 1
    return 1


def sweep(user: PrUser | None) -> int:
    """Kill and reap every child of the guard that runs as `user` and that no running launch
    started: what a finished process left running in a session of its own. Returns how many."""
    if user is None or not _subreaper:
        return 0
    swept = 0
    for _ in range(_SWEEP_ROUNDS):
        with _spawning:
            orphans = [pid for pid in _children_of(os.getpid()) if pid not in _live and _uid_of(pid) == user.uid]
            for pid in orphans:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for pid in orphans:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        if not orphans:
            break
        swept += len(orphans)
    return swept


def _children_of(parent: int) -> list[int]:
    return [int(entry.name) for entry in os.scandir("/proc")
            if entry.name.isdigit() and (stat_fields(entry.name) or [None, None])[1] == str(parent)]


def _uid_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None


def _say_swept(log: IO[Any] | int, count: int, removed: int | None, user: PrUser | None, boxed: bool) -> None:
    """A line each in the process's log (a text file), so that what the code left behind is
    seen, not only ended."""
    if isinstance(log, int) or not (count or removed or (user is not None and removed is None)):
        return
    if count:
        how = "(its cgroup held them)" if boxed else "in a session of its own (they had become the guard's)"
        log.write(f"\nguard: killed {count} process(es) this process left running {how}\n")
    if removed:
        log.write(f"\nguard: removed {removed} file(s) or folder(s) this process left in the shared temp folders "
                  f"({', '.join(_SHARED_TEMP)})\n")
    if removed is None and user is not None:
        log.write(f"\nguard: what this process left in the shared temp folders ({', '.join(_SHARED_TEMP)}) is "
                  f"left there: another guard on this host runs as '{user.name}' now, or no lock in /run says "
                  "otherwise (Docker build mode gives each arm its own)\n")
    log.flush()


def check_reachable(user: PrUser, paths: Sequence[Path]) -> None:
    """Every path in `paths` is readable (folders: and searchable) by `user`, or a LaunchError.
    A path that does not exist is left to fail the launch with its own message."""
    wanted = [str(p) for p in dict.fromkeys(paths) if (user.uid, str(p)) not in _reachable and p.exists()]
    if not wanted:
        return
    with _spawning:  # run to its end before a sweep looks: it is the guard's own check
        proc = subprocess.run(
            ["/bin/sh", "-c", _CHECK_READABLE, "sh", *wanted], capture_output=True, text=True, check=False,
            env={"PATH": "/usr/bin:/bin"}, cwd="/", **_identity(user),
        )
    missing = proc.stdout.splitlines() if proc.returncode == 0 else wanted
    if missing:
        raise LaunchError(
            f"the user '{user.name}' that runs the pull request's code (build.user) cannot read {missing[0]}; "
            "let others read and search every folder above it (chmod o+rx), or put it (--out, --cache-dir, "
            "the guard's venv) under a folder that they can"
        )
    _reachable.update((user.uid, p) for p in wanted)


# Run by the interpreter as the user: every folder it imports from, and the paths it is given,
# each with whether the user may read (and search) it
_INTERPRETER_PATHS = (
    "import json, os, site, sys, sysconfig\n"
    "paths = [sysconfig.get_path(n) for n in ('stdlib', 'platstdlib', 'purelib', 'platlib')]\n"
    "paths += [*site.getsitepackages(), *sys.argv[1:]]\n"
    "print(json.dumps([[p, os.access(p, os.R_OK | (os.X_OK if os.path.isdir(p) else 0))]\n"
    "                  for p in dict.fromkeys(paths) if p]))\n"
)


def check_interpreter(user: PrUser, python: Path, reads: Sequence[Path] = ()) -> None:
    """`python` starts as `user` and can read its standard library, its site-packages and
    `reads`; or a LaunchError that says what to do. One under /root (pyenv's, a runner's tool
    cache) is out of the user's reach: better said before anything is built than by a failed build."""
    where = f"the interpreter the arms run on, {python} (build.python, or the guard's own)"
    advice = ("install it where every user may read it (a system python3, or one under a folder that others "
              "may search and read: chmod o+rx every folder above it), or set build.python to one that is")
    try:
        with _spawning:  # run to its end before a sweep looks: it is the guard's own check
            proc = subprocess.run(
                [str(python), "-I", "-c", _INTERPRETER_PATHS, *map(str, reads)], capture_output=True, text=True,
                check=False, env={"PATH": "/usr/bin:/bin"}, cwd="/", timeout=120, **_identity(user),
            )
    except OSError as exc:
        raise LaunchError(f"the user '{user.name}' that runs the pull request's code (build.user) cannot run "
                          f"{where}: {exc.strerror}; {advice}") from None
    except subprocess.TimeoutExpired:
        raise LaunchError(f"{where} did not start as the user '{user.name}' (build.user) within 120 s") from None
    try:
        found = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        found = None
    if not isinstance(found, list):
        said = next((line for line in (proc.stderr or proc.stdout).splitlines() if line.strip()), "no output")
        raise LaunchError(f"the user '{user.name}' that runs the pull request's code (build.user) cannot run "
                          f"{where}: it exited with code {proc.returncode} ({said.strip()}); {advice}")
    # a path that does not exist for the guard either is no one's to read (a lib64 that was never made)
    unread = [path for path, readable in found if not readable and Path(path).exists()]
    if unread:
        raise LaunchError(f"the user '{user.name}' that runs the pull request's code (build.user) cannot read "
                          f"{unread[0]}, which {where} needs; {advice}")


def _identity(user: PrUser | None) -> dict[str, Any]:
    if user is None:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": [], "umask": 0o022}


@contextmanager
def _fresh_home(user: PrUser | None) -> Iterator[dict[str, str]]:
    """For the pull-request user, a home and temp folder of its own for one process, so that
    nothing one process leaves there (a pip config, a user site-packages) reaches the next."""
    if user is None:
        yield {}
        return
    home = Path(tempfile.mkdtemp(prefix=f"{user.name}-home-"))
    _homes.add(str(home))
    try:
        # git in a build (a version from `git describe`, setuptools-scm's file finder) refuses the
        # checkout's git data, which is root's, unless told to trust it; the user runs the
        # checkout's code anyway. Said twice: in the environment, and in the home's own config
        # for tools that drop GIT_* variables before they call git (setuptools-scm does). The
        # file is written before the home is the user's, so no path of theirs is followed.
        _write_own(home, ".gitconfig", b"[safe]\n\tdirectory = *\n", user)
        os.chown(home, user.uid, user.gid)
        yield {"HOME": str(home), "TMPDIR": str(home), "XDG_CACHE_HOME": str(home / ".cache"),
               "USER": user.name, "LOGNAME": user.name,
               "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": "*"}
    finally:
        shutil.rmtree(home, ignore_errors=True)
        _homes.discard(str(home))


def _write_own(folder: Path, name: str, data: bytes, user: PrUser) -> None:
    """A new file `name` in `folder`, given to `user`: made by descriptor (no link followed, none
    there before), written and handed over through that descriptor."""
    dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            os.write(fd, data)
            os.fchown(fd, user.uid, user.gid)
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def _wait_exited(proc: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether `proc` exited within `timeout_s`; it is left unreaped, so that its pid, the
    group's id, is not reused before the group is killed."""
    deadline = time.monotonic() + timeout_s
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (before Linux 5.3): poll
        pidfd = None
    try:
        while True:
            try:
                if os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except ChildProcessError:  # reaped already (SIGCHLD ignored)
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if pidfd is not None:
                select.select([pidfd], [], [], left)
            else:
                time.sleep(min(left, 0.05))
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _kill_group(group: int) -> None:
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _install_handlers() -> None:
    """Once, from the main thread: on SIGTERM, SIGINT or SIGHUP, and at exit, end the groups."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    atexit.register(end_all)
    for signum in _SIGNALS:
        previous = signal.getsignal(signum)
        if previous == signal.SIG_IGN:  # under nohup, say: the guard goes on, and so do they
            continue
        _previous[signum] = previous
        signal.signal(signum, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    end_all()
    previous = _previous.get(signum)
    if callable(previous):  # SIGINT's KeyboardInterrupt
        previous(signum, frame)
        return
    print(f"guard: stopped by {signal.Signals(signum).name}; its build and workload processes were ended",
          file=sys.stderr, flush=True)
    raise SystemExit(128 + signum)
