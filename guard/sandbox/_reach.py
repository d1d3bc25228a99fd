"""Whether the pull-request user reaches what a launch needs, asked as that user before the
launch: a folder or file it must read, the interpreter the arms run on. A path out of its reach
is a LaunchError that says what to do, not a process that fails somewhere in a build."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guard._errors import GuardError
from guard.sandbox._user import PrUser

_CHECK_READABLE = 'for p do if [ ! -r "$p" ] || { [ -d "$p" ] && [ ! -x "$p" ]; }; then printf "%s\\n" "$p"; fi; done'
# Run by the interpreter as the user: every folder it imports from, and the paths it is given,
# each with whether the user may read (and search) it
_INTERPRETER_PATHS = (
    "import json, os, site, sys, sysconfig\n"
    "paths = [sysconfig.get_path(n) for n in ('stdlib', 'platstdlib', 'purelib', 'platlib')]\n"
    "paths += [*site.getsitepackages(), *sys.argv[1:]]\n"
    "print(json.dumps([[p, os.access(p, os.R_OK | (os.X_OK if os.path.isdir(p) else 0))]\n"
    "                  for p in dict.fromkeys(paths) if p]))\n"
)


class LaunchError(GuardError):
    """A process could not be started as the pull-request user: a path it needs is out of its reach."""


def identity(user: PrUser | None) -> dict[str, Any]:
    """Popen's arguments that start a process as `user`, with no other group."""
    if user is None:
        return {}
    return {"user": user.uid, "group": user.gid, "extra_groups": [], "umask": 0o022}


def check_reachable(user: PrUser, paths: Sequence[Path]) -> None:
    """Every path in `paths` is readable (folders: and searchable) by `user`, or a LaunchError.
    A path that does not exist is left to fail the launch with its own message. Called where
    no sweep runs meanwhile (`launch` holds its box's `spawning`): the check is the guard's own."""
    wanted = [str(p) for p in dict.fromkeys(paths) if p.exists()]
    if not wanted:
        return
    proc = subprocess.run(
        ["/bin/sh", "-c", _CHECK_READABLE, "sh", *wanted], capture_output=True, text=True, check=False,
        env={"PATH": "/usr/bin:/bin"}, cwd="/", **identity(user),
    )
    missing = proc.stdout.splitlines() if proc.returncode == 0 else wanted
    if missing:
        raise LaunchError(
            f"the user '{user.name}' that runs the pull request's code (build.user) cannot read {missing[0]}; "
            "let others read and search every folder above it (chmod o+rx), or put it (--out, --cache-dir, "
            "the guard's venv) under a folder that they can"
        )


def check_interpreter(user: PrUser, python: Path, reads: Sequence[Path] = ()) -> None:
    """`python` starts as `user` and can read its standard library, its site-packages and
    `reads`; or a LaunchError that says what to do. One under /root (pyenv's, a runner's tool
    cache) is out of the user's reach: better said before anything is built (and before any
    launch, whose sweep could take the check for a leftover) than by a failed build."""
    where = f"the interpreter the arms run on, {python} (build.python, or the guard's own)"
    advice = ("install it where every user may read it (a system python3, or one under a folder that others "
              "may search and read: chmod o+rx every folder above it), or set build.python to one that is")
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", _INTERPRETER_PATHS, *map(str, reads)], capture_output=True, text=True,
            check=False, env={"PATH": "/usr/bin:/bin"}, cwd="/", timeout=120, **identity(user),
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
