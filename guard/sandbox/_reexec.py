"""`guard run` starts again with a clean environment before it builds anything, so that no
process between the caller and the pull request's code holds a secret: the guard's own
/proc/PID/environ is what it was started with, whatever it removes from os.environ later.

The new process gets the guard's environment (the allowlist, build.pass_env and the two
names it reads for links) and a marker. Cleaning is idempotent, so the new process finds
its environment clean and goes on; the marker makes a second start impossible even if
something added a variable on the way. argv, the working folder, open standard streams and
the exit code (exec keeps the process) stay as they were."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable

from guard._errors import GuardError
from guard.sandbox._env import guard_environment

MARKER = "GUARD_CLEAN_ENV"


def restart_clean(pass_env: Iterable[str]) -> None:
    """Replace this process with the same command in the guard's environment, unless it
    already has exactly that environment. Returns only in the clean process."""
    names = list(pass_env)
    clean = guard_environment(names, extra=[MARKER])
    if dict(os.environ) == clean:
        return
    if MARKER in os.environ:
        extra = sorted(set(os.environ) - set(clean))
        raise GuardError(
            f"{MARKER} says this guard was restarted with a clean environment, yet it holds "
            f"{', '.join(extra) or 'other values'}; only the guard sets {MARKER}: unset it and run again"
        )
    executable = sys.executable
    if not executable:
        raise GuardError("the guard cannot restart itself: Python does not say which interpreter runs it")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(executable, [executable, *sys.orig_argv[1:]], clean | {MARKER: "1"})
